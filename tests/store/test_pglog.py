"""The log layout on PostgreSQL (`store/pglog.py`): one owner, fenced by its session."""

from __future__ import annotations

import psycopg
import pytest
from tests.conftest import PG
from tests.store.test_behaviour import lease, msg, subscriber

from tidings.store.pglog import PostgresLogStore


@pytest.fixture
def url(schema: str) -> str:
    return f"{PG}?schema={schema}"


def test_an_owner_whose_session_was_lost_writes_nothing_and_another_broker_takes_over(
    url: str,
) -> None:
    first = PostgresLogStore(url)
    subscriber(first)
    first.enqueue([msg("p1")], fresh=True)
    with psycopg.connect(PG, autocommit=True) as admin:  # as a restarted server, a proxy
        admin.execute("SELECT pg_terminate_backend(%s)", (first._owner.info.backend_pid,))
    second = PostgresLogStore(url)  # the lock went with the session
    with pytest.raises(psycopg.OperationalError):
        first.enqueue([msg("p2")], fresh=True)  # fenced: its queue writes go nowhere
    assert [m.publication_id for m in lease(second)] == ["p1"]
    second.close()
    first.close()
