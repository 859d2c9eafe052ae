"""Bodies stored once: the sweep of orphans, where concurrent writers can leave them."""

from __future__ import annotations

from tests.store.conftest import sql_of
from tests.store.test_behaviour import bodies, lease, msg, subscriber

from tidings.store.base import Store
from tidings.store.bodies import BODY_PAGE


def test_a_sweep_deletes_every_orphaned_body_page_by_page_where_writers_are_concurrent(
    store: Store,
) -> None:
    subscriber(store)
    store.enqueue([msg("kept")], fresh=True)
    db = sql_of(store).db
    orphans = [(f"orphan{i:04d}", "1") for i in range(BODY_PAGE + 1)]  # more than a page
    with db.tx() as cur:  # as two last acknowledgements in concurrent transactions leave them
        cur.executemany(db.q("INSERT INTO bodies VALUES (?, ?)"), orphans)
    concurrent = db.dialect.concurrent_writers
    assert store.sweep_bodies() == (len(orphans) if concurrent else 0)
    assert bodies(store) == (1 if concurrent else 1 + len(orphans))
    assert [m.body for m in lease(store)] == [{"id": "kept"}]
