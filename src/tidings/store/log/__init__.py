"""Queues as logs (issue #30): bodies appended once, each queue a sequence of references,
consumer state as an ack floor and a sparse set, in group commits over a small engine
interface. A leaf: it imports nothing of Tidings; the broker's embedded store keeps its
queues in it (`tidings.store.logqueues`).

`QueueLog` (queuelog.py) is the log; `LogEngine` (engine.py) what an engine does; the engines
are `SQLiteLog` (sqlite.py), `PostgresLog` (postgres.py), `FilesLog` (files.py: segment
files of its own) and `LMDBLog` (lmdb.py, needs the `lmdb` package: the optional extra
`log`), imported from their modules.
"""

from tidings.store.log.engine import LogEngine, Span, Stored, WriteBatch
from tidings.store.log.queuelog import LogMessage, QueueLog

__all__ = ["LogEngine", "LogMessage", "QueueLog", "Span", "Stored", "WriteBatch"]
