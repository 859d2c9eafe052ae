"""Which exit point view delivers each publication around the cuts of exit point scales."""

from __future__ import annotations

from tidings.elastic.protocol.cuts import ANY, UNDECIDED, Cut, Cuts


def test_without_a_cut_any_single_view_delivers() -> None:
    assert Cuts().wanted("ap", 5) == ANY


def test_up_to_the_cut_the_old_view_delivers_and_after_it_none_until_the_decision() -> None:
    cuts = Cuts()
    cuts.add("ap", Cut(scale=4, seq=10, old_view=1, new_view=4))
    assert cuts.wanted("ap", 10) == 1
    assert cuts.wanted("ap", 11) is UNDECIDED
    assert cuts.wanted("other", 11) == ANY


def test_after_the_cut_the_new_view_delivers_once_released_and_the_old_one_once_aborted() -> None:
    released, aborted = Cuts(), Cuts()
    for cuts in (released, aborted):
        cuts.add("ap", Cut(scale=4, seq=10, old_view=1, new_view=4))
    released.decide(4, released=True)
    aborted.decide(4, released=False)
    assert (released.wanted("ap", 11), aborted.wanted("ap", 11)) == (4, 1)


def test_a_later_scale_decides_what_follows_its_own_cut() -> None:
    cuts = Cuts()
    cuts.add("ap", Cut(scale=4, seq=10, old_view=1, new_view=4))
    cuts.decide(4, released=False)
    cuts.add("ap", Cut(scale=6, seq=20, old_view=1, new_view=6))
    assert [cuts.wanted("ap", s) for s in (5, 15, 25)] == [1, 1, UNDECIDED]
    cuts.decide(6, released=True)
    assert cuts.wanted("ap", 25) == 6


def test_the_first_decision_of_a_scale_stands() -> None:
    cuts = Cuts()
    cuts.add("ap", Cut(scale=4, seq=10, old_view=1, new_view=4))
    cuts.decide(4, released=True)
    cuts.decide(4, released=False)
    assert cuts.outcome(4) is True
