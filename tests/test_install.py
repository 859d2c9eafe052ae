"""The README's install, as a newcomer does it: a wheel of this checkout installed into a fresh
venv, the core alone (no extras), serves the broker and the console (issue #31); the slim
install for functions (`tidings-broker[serverless]`, or the core alone) fits Lambda's unzipped
limit, its size measured here (issue #32).

One wheel and one venv for the whole module (pip's cache makes the installs quick). The venv is
made without pip of its own and filled by this environment's pip (`pip --python VENV`): the
same wheel and the same pinned versions land in it (pip is not shipped, NOT_SHIPPED), without
the ~5 s of ensurepip and the venv's bundled, slower pip. Bytecode is not compiled at install
(`--no-compile`): a deployment package holds none (see NOT_SHIPPED), Python compiles what it
imports, and the sizes measured leave __pycache__ out. Locally, the tests skip when the
package index cannot be reached; under CI (CI=true) that fails."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tidings.ports import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = ROOT / "constraints.txt"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
CI = os.environ.get("CI", "").lower() == "true"

# Lambda's limit on a function's unzipped deployment package and layers is 250 MB in AWS's
# words, 262,144,000 bytes (250 MiB) in fact; the test holds the install to the smaller
# 250 * 10**6 bytes.
LAMBDA_BYTES = 250 * 10**6

# What pip says when the package index (or a build dependency on it) cannot be reached. A
# resolution failure with none of these ("could not find a version" alone) is a real
# conflict between pyproject.toml's ranges and constraints.txt: it fails, never skips.
UNREACHABLE = (
    "(from versions: none)",  # not one release of a package the index surely has
    "failed to establish a new connection",
    "max retries exceeded",
    "temporary failure in name resolution",
    "name or service not known",
    "network is unreachable",
    "could not fetch url",
    "connection broken by",
    "connecttimeouterror",
    "read timed out",
    "proxyerror",
)

# Not part of a deployment package: one built with `pip install --target` has no pip or
# setuptools, and its bytecode is compiled at run time.
NOT_SHIPPED = {"pip", "setuptools", "_distutils_hack", "pkg_resources", "distutils-precedence.pth"}


def clean_env() -> dict[str, str]:
    """This process's environment without what would let the venv's Python import this
    checkout (PYTHONPATH=src) instead of what the wheel installed."""
    drop = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONSAFEPATH"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("TIDINGS_")}
    return {**env, "PYTHONNOUSERSITE": "1"}


def pip(*args: str, cwd: Path, into: Path | None = None) -> None:
    """This environment's `pip ARGS`, acting on the venv whose Python is `into` if given; a
    failure to reach the index skips (locally), any other fails."""
    target = ["--python", str(into)] if into is not None else []
    command = [sys.executable, "-m", "pip", "--no-input", *target, *args]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=600, env=clean_env(), cwd=cwd
    )
    if done.returncode == 0:
        return
    lines = (done.stdout + done.stderr).strip().splitlines()
    told = [line.strip() for line in lines if any(m in line.lower() for m in UNREACHABLE)]
    if told and not CI:
        pytest.skip(f"the package index cannot be reached (pip {args[0]}): {told[-1][:300]}")
    tail = "\n".join(lines[-15:])
    pytest.fail(f"pip {' '.join(args)} failed ({done.returncode}):\n{tail}")


def shipped_bytes(site: Path) -> int:
    """The bytes of every file under site-packages a deployment package would hold."""
    total = 0
    for folder, dirs, files in os.walk(site):
        top = Path(folder) == site
        dirs[:] = [d for d in dirs if d != "__pycache__" and not (top and not_shipped(d))]
        for name in files:
            if not (top and not_shipped(name)):
                total += (Path(folder) / name).lstat().st_size
    return total


def not_shipped(name: str) -> bool:
    if name in NOT_SHIPPED:
        return True
    project = name.split("-")[0]
    return name.endswith(".dist-info") and project in {"pip", "setuptools"}


def mb(size: int) -> str:
    return f"{size:,} bytes ({size / 10**6:.1f} MB)"


@dataclass
class Venv:
    root: Path
    wheel: Path
    work: Path  # the current directory of every command: not the checkout
    core_bytes: int  # site-packages right after the core's install

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def site(self) -> Path:
        [site] = (self.root / "lib").glob("python3*/site-packages")
        return site

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(args),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=clean_env(),
            cwd=self.work,
        )

    def imports(self, module: str) -> bool:
        code = f"import importlib.util as u, sys; sys.exit(u.find_spec({module!r}) is None)"
        return self.run(str(self.python), "-c", code).returncode == 0


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of this checkout, built once. The build runs in a copy of what goes into it
    (pyproject.toml, README.md, src/): a build in the checkout would leave build/ and
    *.egg-info there, and a stale build/lib would put modules deleted since into the wheel."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    junk = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    shutil.copytree(ROOT / "src", source / "src", ignore=junk)
    out = base / "dist"
    pip("wheel", "--no-deps", "--quiet", "-w", str(out), str(source), cwd=base)
    [built] = out.glob("tidings_broker-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A fresh venv with the core installed from the wheel: `pip install tidings-broker`."""
    base = tmp_path_factory.mktemp("venv")
    root, work = base / "venv", base / "work"
    work.mkdir()
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(root)],
        check=True,
        env=clean_env(),
        cwd=work,
        capture_output=True,
        timeout=300,
    )
    python = root / "bin" / "python"
    install = ("install", "--quiet", "--no-compile", "-c", str(CONSTRAINTS), str(wheel))
    pip(*install, cwd=work, into=python)
    made = Venv(root, wheel, work, 0)
    made.core_bytes = shipped_bytes(made.site)
    return made


def test_the_installed_command_says_pyproject_s_version(venv: Venv) -> None:
    done = venv.run(str(venv.root / "bin" / "tidings"), "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"tidings {VERSION}"


def test_the_core_is_the_slim_install_from_the_wheel(venv: Venv) -> None:
    where = venv.run(str(venv.python), "-c", "import tidings; print(tidings.__file__)")
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(venv.site)  # the wheel's, not src/
    for compiler in ("numba", "llvmlite"):  # the `fast` extra's, 208 MB
        assert not venv.imports(compiler), f"{compiler} is installed with the core"
    print(f"core site-packages: {mb(venv.core_bytes)}; wheel: {mb(venv.wheel.stat().st_size)}")
    assert venv.core_bytes < LAMBDA_BYTES, f"the core's site-packages is {mb(venv.core_bytes)}"


@pytest.fixture(scope="module")
def broker(venv: Venv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`tidings serve` from the venv, on a free port, with its own data directory."""
    data = tmp_path_factory.mktemp("data")
    port = free_port()
    log_path = data.parent / f"{data.name}-serve.log"
    command = [str(venv.root / "bin" / "tidings"), "serve", "--port", str(port)]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [*command, "--data-dir", str(data)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=clean_env(),
            cwd=venv.work,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/healthz", timeout=1)
                break
            except httpx.TransportError:
                said = log_path.read_text(errors="replace")[-800:]
                assert proc.poll() is None, f"tidings serve exited: {said}"
                assert time.monotonic() < deadline, f"tidings serve did not answer in 60 s: {said}"
                time.sleep(0.1)
        yield url
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_the_core_serves_health_and_the_console(broker: str) -> None:
    health = httpx.get(f"{broker}/healthz")
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    console = httpx.get(f"{broker}/ui", follow_redirects=True)
    assert console.status_code == 200, console.text[:300]
    assert console.headers["content-type"].startswith("text/html")
    assert "<html" in console.text.lower()


def test_the_core_carries_the_tour_round_trip(broker: str) -> None:
    with httpx.Client(base_url=broker, timeout=30) as http:
        registered = http.post("/v1/subscribers")
        assert registered.status_code == 201, registered.text
        me = registered.json()
        auth = {"Authorization": f"Bearer {me['token']}"}
        rule = {"topics": ["home/#"]}
        subscribed = http.post(f"/v1/subscribers/{me['id']}/subscriptions", json=rule, headers=auth)
        assert subscribed.status_code == 201, subscribed.text
        sent = http.post("/v1/publications", json={"data": "hello", "topics": ["home/kitchen"]})
        assert sent.status_code == 201, sent.text
        assert sent.json()["deliveries"] == 1
        pulled = http.get(me["queue_url"], params={"max": 10, "wait": 5}, headers=auth)
        assert pulled.status_code == 200, pulled.text
        messages = pulled.json()["messages"]
        assert [m["body"]["data"] for m in messages] == ["hello"]
        receipts = {"receipts": [m["receipt"] for m in messages]}
        acked = http.post(f"{me['queue_url']}/ack", json=receipts, headers=auth)
        assert acked.status_code == 200, acked.text
        assert acked.json()["unknown"] == [] and len(acked.json()["acked"]) == 1


def test_the_serverless_install_fits_a_lambda_function(
    venv: Venv, record_property: Callable[[str, object], None]
) -> None:
    extra = f"{venv.wheel}[serverless]"
    install = ("install", "--quiet", "--no-compile", "-c", str(CONSTRAINTS), extra)
    pip(*install, cwd=venv.work, into=venv.python)
    handlers = venv.run(str(venv.python), "-c", "import mangum, azure.functions")
    assert handlers.returncode == 0, handlers.stderr
    size = shipped_bytes(venv.site)
    record_property("core_site_packages_bytes", venv.core_bytes)
    record_property("serverless_site_packages_bytes", size)
    print(f"core: {mb(venv.core_bytes)}; with [serverless]: {mb(size)}")
    assert size < LAMBDA_BYTES, f"site-packages with [serverless] is {mb(size)}, over 250 MB"
