"""Hypothesis strategies shared by the matching tests.

Alphabets are small on purpose, so that random filters, topics, keys and values collide and
the interesting cases (a match, a near miss, a type mismatch) come up often.
"""

from __future__ import annotations

from hypothesis import strategies as st

from tidings.model import ORDERED_OPS, STRING_OPS, Op, Predicate, Scalar

SEGMENTS = ("a", "b", "c", "dd")
KEYS = ("k0", "k1", "k2")
WORDS = ("", "a", "ab", "b", "ba")

segments = st.sampled_from(SEGMENTS)


@st.composite
def topic_names(draw: st.DrawFn) -> str:
    """A valid publication topic: 1-4 literal segments."""
    return "/".join(draw(st.lists(segments, min_size=1, max_size=4)))


@st.composite
def topic_filters(draw: st.DrawFn) -> str:
    """A valid subscription filter: literal and `*` segments, maybe a trailing `#`."""
    parts = draw(st.lists(segments | st.just("*"), min_size=0, max_size=4))
    if not parts or draw(st.integers(0, 3)) == 0:
        parts.append("#")
    return "/".join(parts)


# Arbitrary strings over the separator and wildcards: the index must agree with the oracle
# even on input that validation would reject (empty segments, `#` in the middle, ...).
raw_topics = st.text(alphabet="ab/*#", min_size=0, max_size=8)

numbers: st.SearchStrategy[Scalar] = st.integers(-1, 2) | st.sampled_from([-0.0, 0.5, 1.0, 1e9])
strings: st.SearchStrategy[Scalar] = st.sampled_from(WORDS)
scalars: st.SearchStrategy[Scalar] = st.booleans() | numbers | strings


@st.composite
def predicates(draw: st.DrawFn) -> Predicate:
    """A predicate as the model accepts it: values fit the operator."""
    key = draw(st.sampled_from(KEYS))
    op = draw(st.sampled_from(list(Op)))
    value: Scalar | tuple[Scalar, ...]
    if op is Op.EXISTS:
        value = draw(st.booleans())
    elif op is Op.IN:
        value = tuple(draw(st.lists(scalars, min_size=1, max_size=4)))
    elif op in STRING_OPS:
        value = draw(strings)
    elif op in ORDERED_OPS:
        value = draw(numbers | strings)
    else:
        value = draw(scalars)
    return Predicate(key, op, value)


predicate_lists = st.lists(predicates(), min_size=1, max_size=3).map(tuple)
attribute_maps = st.dictionaries(st.sampled_from(KEYS), scalars, max_size=len(KEYS))

subscription_ids = st.sampled_from([f"s{i}" for i in range(5)])
subscriber_ids = st.sampled_from(["alice", "bob", "carol"])

# one change to the subscriptions: (kind, subscription id, subscriber id, filters or predicates)
subscription_changes = (
    st.tuples(
        st.just("topic"),
        subscription_ids,
        subscriber_ids,
        st.lists(topic_filters(), min_size=1, max_size=3).map(tuple),
    ),
    st.tuples(st.just("content"), subscription_ids, subscriber_ids, predicate_lists),
    st.tuples(st.just("remove"), subscription_ids, st.just(""), st.just(())),
)
