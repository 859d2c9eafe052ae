"""Static elastic deployments (1-1-1, 1-3-1, 1-2-2) deliver exactly what the single-process
Matcher delivers, through any interleaving of subscription changes and publications."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.elastic.conftest import Recorder
from tests.elastic.harness import LoopThread
from tests.matching.strategies import (
    attribute_maps,
    subscription_changes,
    topic_names,
)

from tidings.elastic.hosting.deployment import Deployment
from tidings.matching.engine import Event, Matcher
from tidings.model import Publication, Subscription

SHAPES = {"1-1-1": (1, 1), "1-3-1": (3, 1), "1-2-2": (2, 2)}
_examples = itertools.count()

publication = st.tuples(
    st.lists(topic_names(), max_size=3, unique=True).map(tuple), st.none() | attribute_maps
)
steps = st.one_of(
    *subscription_changes,
    st.tuples(st.just("publish"), st.just(""), st.just(""), publication),
)


@pytest.fixture(scope="module")
def deployments(zookeeper: str) -> Iterator[dict[str, tuple[Deployment, Recorder]]]:
    loop = LoopThread()
    made: dict[str, tuple[Deployment, Recorder]] = {}
    try:
        for name, (matchers, exit_points) in SHAPES.items():
            recorder = Recorder()
            deployment = Deployment(
                zookeeper, recorder.sink, matchers=matchers, exit_points=exit_points
            )
            made[name] = (loop.run(deployment.start()), recorder)
        made["loop"] = loop  # type: ignore[assignment]
        yield made
    finally:
        for name in SHAPES:
            if name in made:
                loop.run(made[name][0].close())
        loop.close()


def run_script(
    deployment: Deployment, script: list[tuple[str, str, str, object]], prefix: str
) -> list[Publication]:
    """Apply the script through the access point; returns the publications made."""
    published: list[Publication] = []
    live: set[str] = set()
    for n, (action, sid, owner, args) in enumerate(script):
        sid, owner = f"{prefix}{sid}", f"{prefix}{owner}"
        if action == "topic":
            deployment.subscribe(Subscription(sid, owner, "topic", args))  # type: ignore[arg-type]
            live.add(sid)
        elif action == "content":
            deployment.subscribe(Subscription(sid, owner, "content", (), args))  # type: ignore[arg-type]
            live.add(sid)
        elif action == "remove":
            deployment.unsubscribe(sid)
            live.discard(sid)
        else:
            topics, attributes = args  # type: ignore[misc]
            pub = Publication(f"{prefix}p{n}", float(n), {"n": n}, topics, attributes or {})
            deployment.ap.publish_nowait(pub)
            published.append(pub)
    for sid in live:  # leave nothing for the next example
        deployment.unsubscribe(sid)
    return published


def expected(script: list[tuple[str, str, str, object]], prefix: str) -> Counter[tuple]:
    matcher, out = Matcher(), Counter[tuple]()
    for n, (action, sid, owner, args) in enumerate(script):
        sid, owner = f"{prefix}{sid}", f"{prefix}{owner}"
        if action == "topic":
            matcher.add_topic(sid, owner, args)  # type: ignore[arg-type]
        elif action == "content":
            matcher.add_content(sid, owner, args)  # type: ignore[arg-type]
        elif action == "remove":
            matcher.remove(sid)
        else:
            topics, attributes = args  # type: ignore[misc]
            for who, ids in matcher.match(Event(topics, attributes)).items():
                out[(who, f"{prefix}p{n}", tuple(sorted(ids)))] += 1
    return out


async def _settled(deployment: Deployment, pubs: list[Publication]) -> None:
    """Publish a marker after the script and wait for it: everything before is committed."""
    marker = Publication(f"marker-{len(pubs)}-{next(_examples)}", 0.0)
    await deployment.publish([marker])


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(script=st.lists(steps, min_size=1, max_size=25))
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_an_elastic_deployment_delivers_what_the_single_matcher_delivers(
    deployments: dict[str, tuple[Deployment, Recorder]],
    shape: str,
    script: list[tuple[str, str, str, object]],
) -> None:
    deployment, recorder = deployments[shape]
    loop: LoopThread = deployments["loop"]  # type: ignore[assignment]
    prefix = f"x{next(_examples)}-"
    recorder.messages.clear()

    async def scenario() -> list[Publication]:
        pubs = run_script(deployment, script, prefix)
        await _settled(deployment, pubs)
        return pubs

    loop.run(scenario())
    got = Counter(
        (m.subscriber_id, m.publication_id, m.subscription_ids)
        for m in recorder.messages
        if m.publication_id.startswith(prefix)
    )
    assert got == expected(script, prefix)
