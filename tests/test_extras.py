"""`pip install tidings-broker` is the broker and the client; each optional part, when its extra is
missing, says in one line which extra to install. Missing packages are simulated by an
import hook in the child process, exactly as an absent package fails to import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tidings.extras import EXTRAS
from tidings.ports import free_port

WITHOUT = r"""
import importlib.abc, sys

class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ABSENT:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

ABSENT = set(sys.argv[1].split(","))
sys.meta_path.insert(0, Absent())
sys.argv = ["tidings", *sys.argv[2:]]
from tidings.cli.main import main
main()
"""
EVERY_EXTRA = ",".join(EXTRAS)


def tidings_without(absent: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", WITHOUT, absent, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_the_broker_serves_topics_and_content_with_no_extra_installed(tmp_path: Path) -> None:
    port = free_port()
    command = [sys.executable, "-c", WITHOUT, EVERY_EXTRA, "serve", "--port", str(port)]
    broker = subprocess.Popen(
        [*command, "--data-dir", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                httpx.get(f"{url}/healthz", timeout=1)
                break
            except httpx.TransportError:
                assert broker.poll() is None, broker.stderr.read() if broker.stderr else ""
                subprocess.run(["sleep", "0.1"], check=True)
        me = httpx.post(f"{url}/v1/subscribers").json()
        auth = {"Authorization": f"Bearer {me['token']}"}
        rule = {"predicates": [{"key": "t", "op": ">", "value": 1}]}
        httpx.post(f"{url}/v1/subscribers/{me['id']}/subscriptions", json=rule, headers=auth)
        published = httpx.post(f"{url}/v1/publications", json={"attributes": {"t": 2}})
        assert published.json()["deliveries"] == 1
        assert httpx.get(f"{url}/metrics").status_code == 200
    finally:
        broker.terminate()
        broker.wait(10)


def test_the_pipeline_without_spark_says_which_extra_to_install(tmp_path: Path) -> None:
    for kind in ("publications", "deliveries"):
        (tmp_path / "log" / kind).mkdir(parents=True)
    result = tidings_without("pyspark", "pipeline", "report", str(tmp_path))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "tidings: 'pipeline report' needs the 'spark' extra: pip install 'tidings-broker[spark]'"
    ]


def test_the_load_tool_without_a_peers_client_says_which_extra_to_install() -> None:
    result = tidings_without("nats", "perf", "--target", "nats", "-z", "1")
    assert result.returncode == 1
    assert "pip install 'tidings-broker[perf]'" in result.stderr
    assert "Traceback" not in result.stderr


CHECK_BUILTIN = r"""
import importlib.util, sys

VISION = ("skimage", "PIL", "pytesseract")  # as if `tidings[vision]` were not installed
found = importlib.util.find_spec
importlib.util.find_spec = lambda name, *rest: None if name in VISION else found(name, *rest)
from tidings.errors import TidingsError
from tidings.functions import check_builtin, preload
preload()  # the text functions load; the vision ones are skipped, not an error
check_builtin("detect_language", {"language": "en"})
try:
    check_builtin("detect_faces", {})
except TidingsError as exc:
    print(exc.code.value, exc.field, exc.message)
"""


def test_a_builtin_whose_extra_is_missing_is_refused_with_the_line_that_installs_it() -> None:
    result = subprocess.run(
        [sys.executable, "-c", CHECK_BUILTIN], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "function_unavailable function.builtin the builtin 'detect_faces' needs the 'vision' "
        "extra: pip install 'tidings-broker[vision]'"
    )
