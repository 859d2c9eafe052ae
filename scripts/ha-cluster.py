#!/usr/bin/env python3
"""Several `tidings serve` processes on one PostgreSQL behind HAProxy, until Ctrl-C.

    .venv/bin/python scripts/ha-cluster.py --store postgresql://postgres@127.0.0.1:5432/test
    .venv/bin/python scripts/ha-cluster.py --store postgresql://... --partitions 3

prints the balancer's URL (use it as the broker's) and each broker's own; see
docs/operations.md. Needs HAProxy (apt-get install haproxy).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from tidings.balancer import haproxy, partitioned
from tidings.ids import new_token
from tidings.ports import free_port
from tidings.server import broker_processes
from tidings.store import MAX_PARTITIONS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="postgresql://... shared by the brokers")
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--port", type=int, default=8080, help="the balancer's port")
    parser.add_argument(
        "--partitions",
        type=int,
        default=0,
        help="cut the queues into this many partitions, each owned by one broker (layout=log)",
    )
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stop the brokers on the way out
    if not args.store.startswith(("postgresql://", "postgres://")):
        print("ha-cluster: --store must be a postgresql:// URL (brokers share it)", file=sys.stderr)
        return 2
    query = parse_qsl(urlsplit(args.store).query)
    if any(k in ("layout", "partitions", "own") for k, _ in query):
        print("ha-cluster: give the layout with --partitions N (the queues as a log, each "
              "partition owned by a broker), not in --store", file=sys.stderr)  # fmt: skip
        return 2
    if args.partitions < 0 or args.partitions > MAX_PARTITIONS:
        print(f"ha-cluster: --partitions is 0 to {MAX_PARTITIONS}", file=sys.stderr)
        return 2
    ports = [free_port() for _ in range(args.brokers)]
    each = [
        ["--store", partitioned(args.store, args.partitions, i, args.brokers)]
        for i in range(args.brokers if args.partitions else 0)
    ]
    # one admin token for every broker: admin calls through the balancer reach any of them
    token = os.environ.get("TIDINGS_ADMIN_TOKEN") or new_token()
    with tempfile.TemporaryDirectory(prefix="tidings-ha-") as root:
        dirs = [Path(root) / f"broker{i}" for i in range(args.brokers)]
        # one key for the webhook secrets the brokers seal in the shared store
        key = os.environ.get("TIDINGS_WEBHOOKS__SECRETS_KEY_FILE") or str(
            Path(root) / "secrets.key"
        )
        env = {"TIDINGS_ADMIN_TOKEN": token, "TIDINGS_WEBHOOKS__SECRETS_KEY_FILE": key}
        with (
            broker_processes(
                dirs, ports, *([] if each else ["--store", args.store]), env=env, each=each
            ) as brokers,
            haproxy(args.port, [f"127.0.0.1:{p}" for p in ports], args.partitions) as url,
        ):
            print(f"balancer {url}")
            print(f"admin token {token}")
            for (proc, broker_url), data_dir in zip(brokers, dirs, strict=True):
                print(f"broker   {broker_url} (pid {proc.pid}, log {data_dir / 'serve.log'})")
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
