"""CURVE between a deployment's operators: authenticated and encrypted ZeroMQ channels.

A deployment that listens beyond loopback has one cluster key pair (made at the first start
into a 0600 file, and copied by the operator to every machine of the deployment). Every
inbox is a CURVE server with the cluster's secret key; every sender is a CURVE client with
the same pair; a ZAP handler lets in only clients that present the cluster's public key, so
only a holder of the secret key can send an operator anything, and nobody on the wire reads
what is sent. On loopback (and over `ipc://`, in a 0700 directory) no key is needed: only
this machine's own processes reach the operators there.
"""

from __future__ import annotations

import hmac
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zmq
import zmq.asyncio
from zmq.auth.asyncio import AsyncioAuthenticator

from tidings.errors import ErrorCode, TidingsError
from tidings.private import create_private


@dataclass(frozen=True, slots=True)
class ClusterKey:
    public: bytes  # Z85, 40 characters
    secret: bytes


def cluster_key(path: Path) -> ClusterKey:
    """The key pair in `path`, made there (0600) if there is none yet."""
    if not path.exists():
        public, secret = zmq.curve_keypair()
        create_private(path)
        path.write_bytes(public + b"\n" + secret + b"\n")
    lines = path.read_bytes().split()
    if len(lines) != 2 or not all(len(line) == 40 for line in lines):
        detail = f"{path} is not a Tidings cluster key (two Z85 lines of 40 characters)"
        raise TidingsError(ErrorCode.CONFIG_INVALID, field="elastic__key_file", detail=detail)
    if os.stat(path).st_mode & 0o077:
        detail = f"{path} is readable by other users: chmod 600 it"
        raise TidingsError(ErrorCode.CONFIG_INVALID, field="elastic__key_file", detail=detail)
    return ClusterKey(lines[0], lines[1])


def as_server(sock: zmq.Socket[Any], key: ClusterKey) -> None:
    sock.curve_secretkey = key.secret
    sock.curve_publickey = key.public
    sock.curve_server = True


def as_client(sock: zmq.Socket[Any], key: ClusterKey) -> None:
    sock.curve_serverkey = key.public
    sock.curve_publickey = key.public
    sock.curve_secretkey = key.secret


class _Members:
    """The ZAP handler's question: is this client a holder of the cluster's secret key?"""

    def __init__(self, public: bytes) -> None:
        self.public = public

    def callback(self, domain: str, key: bytes) -> bool:
        """`key`: the client's public key, Z85 (as pyzmq's handler gives it)."""
        return hmac.compare_digest(key, self.public)


def guard(context: zmq.asyncio.Context, key: ClusterKey) -> AsyncioAuthenticator:
    """Start the process's ZAP handler on `context` (one per context, before any inbox)."""
    authenticator = AsyncioAuthenticator(context)
    authenticator.start()
    authenticator.configure_curve_callback("*", credentials_provider=_Members(key.public))
    return authenticator
