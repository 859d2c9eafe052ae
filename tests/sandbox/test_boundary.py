"""The operating-system boundary alone holds: a real worker started exactly as the pool starts
it, but with the Python walls off (`--walls-off`: full builtins, no audit hook, no compile
check), runs code that tries to get out. Everything it tries fails at the kernel."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from tests.sandbox.hostile import ATTACK, ENV_CANARY

from tidings.config import FunctionSettings
from tidings.sandbox import boundary
from tidings.sandbox.boundary import command, probe, worker_env

SETTINGS = FunctionSettings(cpu_ms=5_000, memory_mib=256)


class Unwalled:
    """A sandboxed worker without the Python walls, driven over its pipes."""

    def __init__(self) -> None:
        argv = [*command(SETTINGS, "code", bounded=True), "--walls-off"]
        os.environ[ENV_CANARY] = "the broker's secret"
        try:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=worker_env()
            )
        finally:
            os.environ.pop(ENV_CANARY)
        assert self.proc.stdout is not None
        assert orjson.loads(self.proc.stdout.readline()) == {"ready": True, "seccomp": 2}
        self.n = 0

    def run(self, body: str, data: Any = None) -> tuple[bool, str | None]:
        """Run `def match(publication):` + body; its error, or "ok: <repr>" when it raised
        RuntimeError(repr(value)) to report a value."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.n += 1
        source = f"def match(publication):\n{body}\n"
        call = {"sid": "s", "kind": "code", "hash": f"h{self.n}", "source": source, "params": {}}
        request = {"publication": {"data": data}, "calls": [call]}
        self.proc.stdin.write(orjson.dumps(request) + b"\n")
        self.proc.stdin.flush()
        answer = orjson.loads(self.proc.stdout.readline())
        assert orjson.loads(self.proc.stdout.readline()) == {"done": True}
        return bool(answer["match"]), answer["error"]

    def python_pid(self) -> int:
        """The worker's Python process, as the host sees it (bubblewrap's descendant)."""
        todo, found = [self.proc.pid], []
        while todo:
            pid = todo.pop()
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
            if Path(f"/proc/{pid}/comm").read_text().startswith("python"):
                found.append(pid)
        assert len(found) == 1, found
        return found[0]

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="module")
def worker() -> Iterator[Unwalled]:
    w = Unwalled()
    yield w
    w.close()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Stands for the broker's data directory: a secret file in it."""
    path = tmp_path_factory.mktemp("broker-data")
    (path / "secret.txt").write_text(f"canary-{uuid.uuid4()}")
    return path


def status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


def test_the_boundary_starts_here() -> None:
    assert probe(SETTINGS) is None


def test_the_walls_really_are_off(worker: Unwalled) -> None:
    assert worker.run("    import sys\n    return 'os' in sys.modules") == (True, None)


def test_the_worker_is_unprivileged_as_the_host_sees_it(worker: Unwalled) -> None:
    seen = status(worker.python_pid())
    uids, gids = set(seen["Uid"].split()), set(seen["Gid"].split())
    if os.geteuid() == 0:
        assert (uids, gids) == ({str(SETTINGS.sandbox_uid)}, {str(SETTINGS.sandbox_gid)})
    else:  # the broker's own uid outside, 65534 inside its user namespace
        assert uids == {str(os.geteuid())}
    assert seen["NoNewPrivs"] == "1" and seen["Seccomp"] == "2"
    assert int(seen["CapEff"], 16) == int(seen["CapPrm"], 16) == int(seen["CapBnd"], 16) == 0


def test_the_broker_data_directory_is_not_there(worker: Unwalled, data_dir: Path) -> None:
    _, error = worker.run(
        "    return open(publication['data']).read() != ''", str(data_dir / "secret.txt")
    )
    assert error and error.startswith("FileNotFoundError")
    _, error = worker.run(
        "    import os\n    return bool(os.listdir(publication['data']))", str(data_dir)
    )
    assert error and error.startswith("FileNotFoundError")


def test_only_what_python_needs_is_mounted(worker: Unwalled) -> None:
    _, error = worker.run("    import os\n    raise RuntimeError(repr(sorted(os.listdir('/'))))")
    top = set(eval(error.split(": ", 1)[1]))  # our own repr of a list
    assert not top & {"home", "var", "srv", "mnt", "opt", "boot"}
    _, error = worker.run("    import os\n    raise RuntimeError(repr(os.listdir('/tmp')))")
    # empty, but for the way to a Python or a checkout that lives under /tmp (a CI clone)
    tmp = Path("/tmp")
    needed = {p.relative_to(tmp).parts[0] for p in boundary.readable_paths() if tmp in p.parents}
    assert set(eval(error.split(": ", 1)[1])) == needed
    for private in ("/root/.bashrc", "/etc/shadow", "/etc/passwd", "/home"):
        _, error = worker.run(f"    return open({private!r}).read() != ''")
        assert error and error.startswith(("FileNotFoundError", "IsADirectoryError")), private


@pytest.mark.parametrize(
    "path", ["/usr/written", str(boundary.tidings_root() / "written"), "/written"]
)
def test_nothing_outside_its_tmp_can_be_written(worker: Unwalled, path: str) -> None:
    _, error = worker.run(f"    open({path!r}, 'w').write('x')\n    return True")
    assert error and error.startswith(("OSError", "PermissionError")), error
    assert not Path(path).exists()


@pytest.mark.parametrize(
    "body",
    [
        "    import subprocess\n    subprocess.run(['/bin/sh', '-c', 'true'])\n    return True",
        "    import os\n    os.fork()\n    return True",
        "    import os\n    os.execv('/bin/sh', ['sh'])\n    return True",
        "    import os\n    os.posix_spawn('/bin/sh', ['sh'], {})\n    return True",
    ],
    ids=["subprocess", "fork", "exec", "posix-spawn"],
)
def test_no_process_can_be_started(worker: Unwalled, body: str) -> None:
    _, error = worker.run(body)
    assert error and error.startswith("PermissionError: [Errno 1]"), error


def test_threads_still_work(worker: Unwalled) -> None:
    body = (
        "    import threading\n    out = []\n"
        "    t = threading.Thread(target=lambda: out.append(1))\n"
        "    t.start()\n    t.join()\n    return out == [1]"
    )
    assert worker.run(body) == (True, None)


@pytest.mark.parametrize("family", ["AF_INET", "AF_INET6", "AF_UNIX", "AF_NETLINK"])
def test_no_socket_can_be_opened(worker: Unwalled, family: str) -> None:
    _, error = worker.run(f"    import socket\n    socket.socket(socket.{family})\n    return True")
    assert error and error.startswith("PermissionError")


def test_the_broker_environment_is_not_there(worker: Unwalled) -> None:
    _, error = worker.run("    import os\n    raise RuntimeError(repr(sorted(os.environ)))")
    names = set(eval(error.split(": ", 1)[1]))
    assert ENV_CANARY not in names and names <= set(worker_env()) | {"PWD", "LC_CTYPE"}


@pytest.mark.parametrize(
    ("call", "what"),
    [
        ("libc.unshare(0x10000000)", "unshare"),
        ("libc.ptrace(16, 1, 0, 0)", "ptrace"),
        ("libc.mount(b'none', b'/tmp', b'tmpfs', 0, None)", "mount"),
        ("libc.syscall(321, 0, 0, 0)", "bpf"),
        ("libc.syscall(425, 8, 0)", "io_uring_setup"),
    ],
)
def test_the_kernel_machinery_is_refused(worker: Unwalled, call: str, what: str) -> None:
    body = (
        "    import ctypes\n    libc = ctypes.CDLL(None, use_errno=True)\n"
        f"    if {call} == -1:\n        raise RuntimeError(ctypes.get_errno())\n    return True"
    )
    assert worker.run(body) == (False, "RuntimeError: 1"), what


def test_processes_outside_cannot_be_seen_or_signalled(worker: Unwalled) -> None:
    _, error = worker.run(f"    import os\n    os.kill({os.getpid()}, 0)\n    return True")
    assert error and error.startswith("ProcessLookupError")
    _, error = worker.run("    import os\n    os.kill(1, 9)\n    return True")
    assert error and error.startswith("PermissionError")


def test_the_escape_suites_attack_gets_nothing(
    worker: Unwalled, data_dir: Path, tmp_path: Path
) -> None:
    attack = "\n".join("    " + line for line in ATTACK.splitlines())
    body = attack + "\n    return attack(__builtins__, __import__, publication['data'])"
    data = {
        "secret": str(data_dir / "secret.txt"),
        "data_dir": str(data_dir),
        "env": ENV_CANARY,
        "marker": str(tmp_path / "spawned"),
        "write_to": str(data_dir / "written"),
        "port": 9,
    }
    assert worker.run(body, data) == (False, None)
    assert not (tmp_path / "spawned").exists() and not (data_dir / "written").exists()


def test_its_private_tmp_cannot_fill_the_hosts_memory(worker: Unwalled) -> None:
    body = (
        "    with open('/tmp/fill', 'wb') as f:\n"
        "        for _ in range(1024):\n"
        "            f.write(bytes(1024 * 1024))\n"
        "    return True"
    )
    _, error = worker.run(body)
    assert error and "No space left on device" in error
    worker.run("    import os\n    os.remove('/tmp/fill')\n    return True")


def test_the_command_line_binds_only_python_and_tidings_read_only() -> None:
    argv = command(SETTINGS, "code", bounded=True)
    binds = {argv[i + 1] for i, a in enumerate(argv) if a in ("--bind", "--ro-bind")}
    allowed = {"/usr", *map(str, boundary.readable_paths()), *boundary.ETC_FILES}
    allowed |= {t for t in boundary.TOP_LEVEL if os.path.isdir(t) and not os.path.islink(t)}
    assert binds <= allowed and "--bind" not in argv and "--dev-bind" not in argv
    assert {"--clearenv", "--die-with-parent", "--new-session"} <= set(argv)
    assert "--unshare-net" in argv or "--unshare-all" in argv
    assert argv[-1] == "--seccomp"
