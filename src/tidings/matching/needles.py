"""`contains` predicates of one attribute: every satisfied needle in one pass over the value.

Checking each needle with `in` costs O(len(value)) per needle: 32,000 needles against a 250 KB
value took 24 s. Here the needles are the words of an Aho-Corasick automaton, walked once
along the value, so a value costs O(len(value)) whatever the number of needles, plus one step
per distinct needle found: a needle's dictionary link (the longest needle that is a proper
suffix of it) is followed only to the first needle already found, since every needle below
that one was marked with it. (A library's iterator reports every occurrence of every needle:
`a`, `aa`, ... `a` x 1,024 against 250 KB of `a` is 256 million reports.)

The automaton is rebuilt lazily: needles new since the last build (at most `PENDING`) are
checked one by one meanwhile, so a build costs the needles' length once per `PENDING` new
ones, not once per change. A needle whose last predicate goes stays in the automaton (it finds
no slot) until the dead ones outnumber the live ones. The empty needle is in every string
(`semantics.predicate_holds`: `"" in value`).
"""

from __future__ import annotations

from collections import deque

PENDING = 64
# Up to this many needles, `in` for each is cheaper than the automaton's walk (a Python step
# per character of the value, ~0.1 us, against ~0.8 ns a character and ~50 ns a call for `in`)
DIRECT = 64


class _Automaton:
    """Aho-Corasick over a set of non-empty needles: the trie's transitions, failure links,
    the needle ending at each state (or None) and each state's dictionary link."""

    def __init__(self, needles: list[str]) -> None:
        self.goto: list[dict[str, int]] = [{}]
        self.word: list[str | None] = [None]
        for needle in needles:
            self._insert(needle)
        self.fail = [0] * len(self.goto)
        self.link = [-1] * len(self.goto)  # nearest proper suffix state holding a needle
        self._links()

    def _insert(self, needle: str) -> None:
        state = 0
        for char in needle:
            nxt = self.goto[state].get(char)
            if nxt is None:
                nxt = self.goto[state][char] = len(self.goto)
                self.goto.append({})
                self.word.append(None)
            state = nxt
        self.word[state] = needle

    def _links(self) -> None:
        queue = deque(self.goto[0].values())
        while queue:
            state = queue.popleft()
            for char, child in self.goto[state].items():
                queue.append(child)
                back = self.fail[state]
                while back and char not in self.goto[back]:
                    back = self.fail[back]
                fallback = self.fail[child] = self.goto[back].get(char, 0)
                self.link[child] = (
                    fallback if self.word[fallback] is not None else self.link[fallback]
                )

    def found_in(self, value: str) -> list[str]:
        """The distinct needles occurring in `value`."""
        goto, fail, word, link = self.goto, self.fail, self.word, self.link
        seen = bytearray(len(goto))
        found: list[str] = []
        state = 0
        for char in value:
            while state and char not in goto[state]:
                state = fail[state]
            state = goto[state].get(char, 0)
            hit = state if word[state] is not None else link[state]
            while hit > 0 and not seen[hit]:
                seen[hit] = 1
                found.append(word[hit])  # type: ignore[arg-type]
                hit = link[hit]
        return found


class NeedleIndex:
    """Slots by `contains` needle, for one attribute; `satisfied(value)` gives the slot of
    every satisfied predicate (a slot once per predicate it holds)."""

    def __init__(self, direct: int = DIRECT, pending: int = PENDING) -> None:
        self._direct, self._most_pending = direct, pending
        self._slots: dict[str, list[int]] = {}
        self._automaton: _Automaton | None = None
        self._built: set[str] = set()  # the needles of the automaton
        self._pending: set[str] = set()  # needles not in it yet

    def __len__(self) -> int:
        return len(self._slots)

    def add(self, needle: str, slot: int) -> None:
        slots = self._slots.setdefault(needle, [])
        slots.append(slot)
        if needle and needle not in self._built:
            self._pending.add(needle)
            if len(self._pending) > self._most_pending:
                self._automaton = None

    def remove(self, needle: str, slot: int) -> None:
        slots = self._slots[needle]
        slots.remove(slot)
        if slots:
            return
        del self._slots[needle]
        self._pending.discard(needle)
        if len(self._built) > 2 * len(self._slots) + self._most_pending:
            self._automaton = None  # mostly dead needles: rebuilt from the live ones

    def satisfied(self, value: str) -> list[int]:
        if len(self._slots) <= self._direct:
            return [s for needle, slots in self._slots.items() if needle in value for s in slots]
        hits = [*self._slots.get("", ())]
        for needle in self._ready().found_in(value):
            hits += self._slots.get(needle, ())
        for needle in self._pending:
            if needle in value:
                hits += self._slots[needle]
        return hits

    def _ready(self) -> _Automaton:
        if self._automaton is None:
            self._built = {n for n in self._slots if n}
            self._automaton = _Automaton(sorted(self._built))
            self._pending = set()
        return self._automaton
