"""CURVE between operators: only a holder of the cluster's secret key reaches an inbox, and a
deployment that listens beyond loopback has no plain channels. The channel checks run in a
process of their own: a process's channels are all CURVE once secured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import zmq

from tidings.elastic.protocol.channels import Inbox, beyond_loopback, shared_context
from tidings.elastic.protocol.curve import cluster_key
from tidings.errors import ErrorCode, TidingsError

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    from pathlib import Path
    import zmq, zmq.asyncio
    from tidings.elastic.protocol import wire
    from tidings.elastic.protocol.channels import Inbox, Outboxes, Security, shared_context
    from tidings.elastic.protocol.curve import as_client, cluster_key

    async def arrives(inbox, send) -> bool:
        send()
        try:
            await asyncio.wait_for(inbox.receive(), 1.5)
            return True
        except TimeoutError:
            return False

    async def main() -> None:
        Security.secure(cluster_key(Path(sys.argv[1])))
        context = shared_context()
        inbox = Inbox(context, "tcp://127.0.0.1:*")
        member = Outboxes(context)
        member.know("op", inbox.address)
        said = {"member": await arrives(inbox, lambda: member.send("op", wire.Stop()))}
        plain = zmq.Context().socket(zmq.PUSH)
        plain.connect(inbox.address)
        said["plain"] = await arrives(inbox, lambda: plain.send(wire.encode(wire.Stop())))
        stranger = zmq.Context().socket(zmq.PUSH)
        public, secret = zmq.curve_keypair()
        stranger.curve_serverkey, stranger.curve_publickey = Security.key.public, public
        stranger.curve_secretkey = secret
        stranger.connect(inbox.address)
        said["stranger"] = await arrives(inbox, lambda: stranger.send(wire.encode(wire.Stop())))
        print(json.dumps(said))
        plain.close(0); stranger.close(0); member.close(0); inbox.close()

    asyncio.run(main())
    """
)


def test_only_a_holder_of_the_cluster_key_reaches_an_inbox(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "cluster.key")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {"member": True, "plain": False, "stranger": False}


def test_a_cluster_key_is_made_private_once_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "cluster.key"
    made = cluster_key(path)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert cluster_key(path) == made and len(made.public) == len(made.secret) == 40


@pytest.mark.parametrize(("content", "mode"), [(b"not a key\n", 0o600), (None, 0o644)])
def test_a_bad_or_readable_key_file_is_refused(
    tmp_path: Path, content: bytes | None, mode: int
) -> None:
    path = tmp_path / "cluster.key"
    if content is None:
        cluster_key(path)
    else:
        path.write_bytes(content)
    os.chmod(path, mode)
    with pytest.raises(TidingsError) as caught:
        cluster_key(path)
    assert (caught.value.code, caught.value.field) == (
        ErrorCode.CONFIG_INVALID,
        "elastic__key_file",
    )


@pytest.mark.parametrize(
    ("bind", "beyond"),
    [
        ("tcp://127.0.0.1:*", False),
        ("tcp://localhost:5555", False),
        ("tcp://[::1]:5555", False),
        ("ipc:///tmp/x", False),
        ("tcp://0.0.0.0:*", True),
        ("tcp://*:5555", True),
        ("tcp://10.1.2.3:5555", True),
        ("tcp://eth0:5555", True),
    ],
)
def test_what_is_beyond_loopback(bind: str, beyond: bool) -> None:
    assert beyond_loopback(bind) is beyond


def test_an_inbox_beyond_loopback_without_a_key_is_refused() -> None:
    with pytest.raises(TidingsError) as caught:
        Inbox(shared_context(), "tcp://0.0.0.0:*")
    assert caught.value.field == "elastic__host"
    assert zmq.zmq_version_info() >= (4, 0)
