"""Each engine's statements, as the dialect writes them, and its catalogue query at work."""

from __future__ import annotations

from tests.store.conftest import sql_of

from tidings.store.base import Store
from tidings.store.dialect import POSTGRES, SQLITE


def test_placeholders_are_the_engines_own() -> None:
    sql = "SELECT 1 FROM messages WHERE seq = ? AND receipt = ?"
    assert SQLITE.q(sql) == sql
    assert POSTGRES.q(sql) == "SELECT 1 FROM messages WHERE seq = %s AND receipt = %s"


def test_a_duplicate_row_is_ignored_in_each_engines_words() -> None:
    assert SQLITE.ignoring_duplicates("dedup", "VALUES (?, ?, ?)") == (
        "INSERT OR IGNORE INTO dedup VALUES (?, ?, ?) "
    )
    assert POSTGRES.ignoring_duplicates("dedup", "VALUES (?, ?, ?)") == (
        "INSERT INTO dedup VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"
    )


def test_only_postgresql_locks_and_skips_the_rows_it_leases() -> None:
    select = "SELECT m.seq FROM messages m WHERE m.subscriber_id = ? LIMIT ?"
    assert SQLITE.skipping_locked(select) == f"{select} "
    assert POSTGRES.skipping_locked(select) == (
        "SELECT m.seq FROM messages m WHERE m.subscriber_id = %s LIMIT %s "
        "FOR UPDATE OF m SKIP LOCKED"
    )


def test_key_types_and_table_options_fill_the_schema() -> None:
    script = "CREATE TABLE t (id {serial}) {clustered}"
    assert SQLITE.ddl(script) == (
        "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT) WITHOUT ROWID"
    )
    assert POSTGRES.ddl(script) == "CREATE TABLE t (id BIGSERIAL PRIMARY KEY) "


def test_only_postgresql_moves_a_sequence_past_copied_ids() -> None:
    assert SQLITE.reseed("messages", "seq") is None
    assert POSTGRES.reseed("messages", "seq") == (
        "SELECT setval(pg_get_serial_sequence('messages', 'seq'), "
        "COALESCE((SELECT MAX(seq) FROM messages), 0) + 1, false)"
    )


def test_only_postgresql_has_concurrent_writers_and_a_batch_enqueue() -> None:
    assert (SQLITE.concurrent_writers, SQLITE.batch_enqueue) == (False, None)
    assert POSTGRES.concurrent_writers and POSTGRES.batch_enqueue is not None
    assert (SQLITE.schema_lock, POSTGRES.schema_lock is not None) == (None, True)


def test_the_catalogue_names_a_tables_columns_and_none_of_a_missing_one(store: Store) -> None:
    db = sql_of(store).db
    with db.read() as cur:
        cur.execute(db.dialect.columns_of("endpoints"))
        columns = [str(r[0]) for r in cur.fetchall()]
        cur.execute(db.dialect.columns_of("no_such_table"))
        missing = cur.fetchall()
    assert sorted(columns) == sorted(
        [
            "subscriber_id",
            "url",
            "secret",
            "state",
            "reason",
            "failures",
            "updated_at",
            "retention_s",
        ]
    )
    assert missing == []
