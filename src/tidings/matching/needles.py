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
ones, not once per change. A build of `BACKGROUND_FROM` characters or more (~1.2-2.5 us each)
runs in a background thread from a frozen set of needles, the old automaton and the pending
needles serving meanwhile; a value waits for it only when the pending needles have grown so
many that checking them one by one would cost more (`WAIT_FROM`). A needle whose last
predicate goes stays in the automaton (it finds no slot) until the dead ones outnumber the
live ones. The empty needle is in every string (`semantics.predicate_holds`: `"" in value`).
Not safe for concurrent use: one thread calls it (the build's thread touches only its own).
"""

from __future__ import annotations

import threading
from collections import deque

PENDING = 64
# A build of this many needle characters or more (~20-40 ms) runs in a background thread,
# the event loop free meanwhile (the GIL is handed over every 5 ms)
BACKGROUND_FROM = 16_384
# While one runs, pending needles are checked one by one (`in`, ~1 ns a character compared)
# until that would compare more than this many characters for one value (~30 ms): then the
# value waits for the build
WAIT_FROM = 1 << 25
CALL = 64  # what one `in` costs beyond its characters, counted in characters (~50 ns)
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


class _Build:
    """An automaton built in a background thread from a fixed set of needles."""

    def __init__(self, needles: frozenset[str]) -> None:
        self.needles, self.automaton = needles, _Automaton([])
        self.thread = threading.Thread(target=self._run, daemon=True, name="tidings-needles")
        self.thread.start()

    def _run(self) -> None:
        self.automaton = _Automaton(sorted(self.needles))


class NeedleIndex:
    """Slots by `contains` needle, for one attribute; `satisfied(value)` gives the slot of
    every satisfied predicate (a slot once per predicate it holds)."""

    def __init__(
        self,
        direct: int = DIRECT,
        pending: int = PENDING,
        background_from: int = BACKGROUND_FROM,
    ) -> None:
        self._direct, self._most_pending = direct, pending
        self._background_from = background_from
        self._slots: dict[str, list[int]] = {}
        self._automaton: _Automaton | None = None
        self._built: frozenset[str] = frozenset()  # the needles of the automaton
        self._pending: set[str] = set()  # needles not in it yet
        self._due = False  # a build is wanted: too many pending, or dead, needles
        self._build: _Build | None = None

    def __len__(self) -> int:
        return len(self._slots)

    def add(self, needle: str, slot: int) -> None:
        slots = self._slots.setdefault(needle, [])
        slots.append(slot)
        if needle and needle not in self._built:
            self._pending.add(needle)
            self._due |= len(self._pending) > self._most_pending

    def remove(self, needle: str, slot: int) -> None:
        slots = self._slots[needle]
        slots.remove(slot)
        if slots:
            return
        del self._slots[needle]
        self._pending.discard(needle)
        # mostly dead needles: rebuilt from the live ones
        self._due |= len(self._built) > 2 * len(self._slots) + self._most_pending

    def satisfied(self, value: str) -> list[int]:
        if len(self._slots) <= self._direct:
            return [s for needle, slots in self._slots.items() if needle in value for s in slots]
        hits = [*self._slots.get("", ())]
        automaton = self._ready(len(value))
        if automaton is not None:
            for needle in automaton.found_in(value):
                hits += self._slots.get(needle, ())
        for needle in self._pending:
            if needle in value:
                hits += self._slots[needle]
        return hits

    def wait(self) -> None:
        """Finish the background build, if one runs, and serve from it."""
        if self._build is not None:
            self._build.thread.join()
            self._adopt()

    def _ready(self, length: int) -> _Automaton | None:
        """The automaton to scan with; starts the build that is due, and waits for the one
        running only when checking the pending needles one by one would cost more than
        `WAIT_FROM` characters compared."""
        if self._build is not None and not self._build.thread.is_alive():
            self._adopt()
        if self._due and self._build is None:
            self._start()
        if self._build is not None and len(self._pending) * (length + CALL) > WAIT_FROM:
            self.wait()
        return self._automaton

    def _start(self) -> None:
        needles = frozenset(n for n in self._slots if n)
        self._due = False
        if sum(map(len, needles)) < self._background_from:
            self._install(needles, _Automaton(sorted(needles)))
        else:
            self._build = _Build(needles)

    def _adopt(self) -> None:
        build, self._build = self._build, None
        if build is not None:
            self._install(build.needles, build.automaton)

    def _install(self, needles: frozenset[str], automaton: _Automaton) -> None:
        # needles added while it was built are still pending; needles removed meanwhile
        # stay in it, dead (they find no slot)
        self._automaton, self._built = automaton, needles
        self._pending = {n for n in self._slots if n and n not in needles}
        self._due = len(self._pending) > self._most_pending or (
            len(needles) > 2 * len(self._slots) + self._most_pending
        )
