"""A function instance's cold start without garbage collection.

A cold start imports some 700 modules and then loads the subscriptions into the index: tens
of thousands of new objects, all alive at the end, so each of the collector's passes on the
way finds nothing to free. On a platform (or under the local invocation loop) the collector
is held from the handler module's first line until the broker has loaded (`end`), and what
is alive then is frozen, as a long-running broker's index is settled (`tidings.heap`).

Only on a platform: a process that merely imports the handler (a test, a tool) keeps its
collector.
"""

from __future__ import annotations

import os

from tidings import heap

# set in a function instance's environment by AWS Lambda, by the Azure Functions host and by
# `tidings.serverless.invoke`, the platforms' loop on this machine
PLATFORM_VARIABLES = ("AWS_LAMBDA_FUNCTION_NAME", "FUNCTIONS_WORKER_RUNTIME")
_held = False


def begin() -> None:
    """At the top of a handler module, in a function instance: collections held."""
    global _held
    if not _held and any(os.environ.get(name) for name in PLATFORM_VARIABLES):
        _held = True
        heap.hold_collections()


def end() -> None:
    """The broker has loaded: what is alive frozen, collections resumed."""
    global _held
    if _held:
        _held = False
        heap.release_collections()
