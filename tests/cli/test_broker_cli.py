"""The broker commands, run as a user runs them, against a real server."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tidings.cli.broker import _pretty, predicate
from tidings.client import Client, Message
from tidings.config import load_settings
from tidings.ports import free_port
from tidings.server import EmbeddedServer, broker_process


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = load_settings({"data_dir": tmp_path_factory.mktemp("cli")}, env={})
    with EmbeddedServer(settings) as server:
        yield server.url


def tidings(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tidings.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_subscribe_prints_what_publish_sends(url: str) -> None:
    sub = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tidings.cli.main",
            "subscribe",
            "--url",
            url,
            "-t",
            "cli/#",
            "-w",
            "n > 1",
            "--count",
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert sub.stderr is not None
    orjson.loads(sub.stderr.readline())  # the subscriber id and token come first
    assert tidings("publish", "--url", url, "-t", "cli/a", '{"k": 1}').returncode == 0
    assert tidings("publish", "--url", url, "-a", "n=5", "plain text").returncode == 0
    out, _ = sub.communicate(timeout=30)
    bodies = [orjson.loads(line)["body"]["data"] for line in out.splitlines()]
    assert bodies == [{"k": 1}, "plain text"]


# As from a terminal: Ctrl-C raises KeyboardInterrupt even when the suite itself was started
# with SIGINT ignored (a background job of a non-interactive shell), which children inherit.
INTERRUPTIBLE = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'tidings'; from tidings.cli.main import main; main()"
)


def test_ctrl_c_stops_subscribe_without_a_traceback(url: str) -> None:
    sub = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTIBLE, "subscribe", "--url", url, "-t", "quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert sub.stderr is not None and sub.stdout is not None
    orjson.loads(sub.stderr.readline())  # registered and about to stream
    # Interrupt it while it streams (a delivery printed proves it is), not during its set-up.
    for _ in range(30):  # until the subscription exists and a delivery has been printed
        assert tidings("publish", "--url", url, "-t", "quiet", "{}").returncode == 0
        if _ready(sub):
            break
    sub.send_signal(signal.SIGINT)
    _, err = sub.communicate(timeout=30)
    assert sub.returncode == 0 and err == ""


def _ready(sub: subprocess.Popen[str]) -> bool:
    """Has the subscriber printed a delivery within a second?"""
    import select

    assert sub.stdout is not None
    if select.select([sub.stdout], [], [], 1.0)[0]:
        return bool(sub.stdout.readline())
    return False


def test_queue_shows_depth_of_a_subscriber(url: str) -> None:
    import httpx

    me = httpx.post(f"{url}/v1/subscribers").json()
    result = tidings(
        "queue", "--url", url, "--id", me["id"], "--token", me["token"], "--dead-letters"
    )
    assert orjson.loads(result.stdout.splitlines()[-1]) == {"ready": 0, "leased": 0, "dead": 0}


def test_queue_lists_then_redrives_dead_letters(url: str) -> None:
    with Client(url) as client:
        me = client.register()
        me.subscribe(topics=["dl"])
        published = client.publish("x", topics=["dl"])
        while not me.dead_letters():
            me.nack([m.receipt for m in me.pull()])
    out = tidings(
        "queue", "--url", url, "--id", me.id, "--token", me.token, "--dead-letters", "--redrive"
    ).stdout
    lines = [orjson.loads(line) for line in out.splitlines()]
    assert lines[0]["publication_id"] == published.id and lines[0]["reason"] == "max_attempts"
    assert lines[1:] == [{"redriven": 1}, {"ready": 1, "leased": 0, "dead": 0}]


def test_where_reads_lists_for_in_and_numbers_elsewhere() -> None:
    assert predicate("room in kitchen,hall") == {
        "key": "room",
        "op": "in",
        "value": ["kitchen", "hall"],
    }
    assert predicate("n in [1, 2]")["value"] == [1, 2]
    assert predicate("temp >= 20.5")["value"] == 20.5 and predicate("x exists")["op"] == "exists"


def test_a_terminal_sees_topics_and_data_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    body = {"topics": ["a/b"], "data": {"t": 1}}
    _pretty(Message(1, "r", 2, "pub-1", ["s"], 0.0, body))
    out = capsys.readouterr().out
    assert out.splitlines() == ['pub-1 a/b (attempt 2) {"t":1}']


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["publish", "-t", "a/*", "x"], "wildcards"),
        (["publish", "--url", "http://127.0.0.1:1", "x"], "cannot reach the broker"),
        (["publish", "-a", "novalue", "x"], "key=value"),
        (["subscribe", "-w", "just-a-word"], "key op value"),
    ],
)
def test_mistakes_are_one_line_without_a_traceback(url: str, args: list[str], needle: str) -> None:
    if "--url" not in args:
        args = [args[0], "--url", url, *args[1:]]
    result = tidings(*args)
    assert result.returncode != 0 and needle in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_serve_refuses_a_bad_setting_in_one_line(tmp_path: Path) -> None:
    port = str(free_port())
    result = tidings("serve", "--store", "mysql://x", "--data-dir", str(tmp_path), "--port", port)
    assert result.returncode == 2 and "unknown store URL" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_second_broker_on_the_same_embedded_store_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    with broker_process(tmp_path):
        port = str(free_port())
        result = tidings("serve", "--data-dir", str(tmp_path), "--port", port)
    assert result.returncode == 2 and "another process has it open" in result.stderr
    assert "layout=rows" in result.stderr and "Traceback" not in result.stderr


def test_a_bad_setting_is_said_before_a_taken_port(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        result = tidings(
            "serve", "--store", "mysql://x", "--data-dir", str(tmp_path), "--port", port
        )
    assert "unknown store URL" in result.stderr and "in use" not in result.stderr


def test_subscribe_keeps_printing_across_a_broker_restart(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with broker_process(tmp_path, port):
        command = ["subscribe", "--url", url, "-t", "restart", "--count", "2"]
        sub = subprocess.Popen(
            [sys.executable, "-m", "tidings.cli.main", *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert sub.stderr is not None
        orjson.loads(sub.stderr.readline())  # registered and subscribed
        assert tidings("publish", "--url", url, "-t", "restart", "before").returncode == 0
    with broker_process(tmp_path, port):  # the same data, the same port
        assert tidings("publish", "--url", url, "-t", "restart", "after").returncode == 0
        out, err = sub.communicate(timeout=30)
    assert sub.returncode == 0, err
    assert [orjson.loads(line)["body"]["data"] for line in out.splitlines()] == [
        "before",
        "after",
    ]


def test_serve_refuses_a_port_out_of_range_with_exit_2(tmp_path: Path) -> None:
    result = tidings("serve", "--port", "99999", "--data-dir", str(tmp_path), timeout=20)
    assert result.returncode == 2
    assert result.stderr.strip() == "tidings: port 99999 is not 1-65535 (port)"


def test_serve_says_in_one_line_that_its_port_is_taken(tmp_path: Path) -> None:
    with broker_process(tmp_path / "first") as (_, url):
        port = url.rsplit(":", 1)[1]
        result = tidings("serve", "--port", port, "--data-dir", str(tmp_path / "second"))
    assert result.returncode == 1
    assert f"127.0.0.1:{port} is in use" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("where", "needle"),
    [("temp >> 30", "--where"), ("temp > abc", "quote a string")],
)
def test_a_bad_where_registers_nothing_and_exits_2(url: str, where: str, needle: str) -> None:
    before = registrations(url)
    result = tidings("subscribe", "--url", url, "-w", where)
    assert result.returncode == 2 and needle in result.stderr
    assert "Traceback" not in result.stderr
    assert registrations(url) == before


def registrations(url: str) -> float:
    """Requests that registered a subscriber, from the broker's metrics (not its count of
    subscribers, which falls as earlier tests' ephemeral ones expire: this failed once)."""
    text = httpx.get(f"{url}/metrics").text
    families = text_string_to_metric_families(text)
    [family] = [f for f in families if f.name == "tidings_http_requests"]
    return sum(
        sample.value
        for sample in family.samples
        if sample.name.endswith("_total")
        and sample.labels.get("route") == "/v1/subscribers"
        and sample.labels.get("method") == "POST"
    )


def test_a_quoted_word_compares_as_a_string() -> None:
    assert predicate('name > "abc"') == {"key": "name", "op": ">", "value": "abc"}


def test_subscribers_lists_them_and_deletes_one_with_the_admin_token(tmp_path: Path) -> None:
    with broker_process(tmp_path) as (_, url):
        token = (tmp_path / "admin-token").read_text().strip()
        made = Client(url).register()
        listed = tidings("subscribers", "--url", url, "--admin-token", token)
        [line] = [orjson.loads(x) for x in listed.stdout.splitlines()]
        assert (line["id"], line["depth"]) == (made.id, {"ready": 0, "leased": 0, "dead": 0})
        deleted = tidings("subscribers", "--url", url, "--admin-token", token, "--delete", made.id)
        assert orjson.loads(deleted.stdout) == {"deleted": made.id}
        refused = tidings("subscribers", "--url", url, "--admin-token", "wrong")
    assert refused.returncode == 2 and "admin calls" in refused.stderr


def test_serve_warns_loudly_when_told_to_accept_unsafe_code_functions(tmp_path: Path) -> None:
    result = tidings(
        "serve", "--unsafe-code-functions", "--store", "mysql://x", "--data-dir", str(tmp_path)
    )
    assert "WARNING --unsafe-code-functions" in result.stderr


def test_version_says_the_installed_version_and_nothing_else() -> None:
    from tidings import __version__

    result = tidings("--version")
    assert (result.returncode, result.stdout.strip()) == (0, f"tidings {__version__}")


def test_publish_with_a_dedup_id_publishes_once(url: str) -> None:
    args = ["publish", "--url", url, "-t", "cli/dedup", "--dedup-id", "order-1", "x"]
    first, again = (orjson.loads(tidings(*args).stdout) for _ in range(2))
    assert "duplicate" not in first and again == {**first, "duplicate": True}
    long = tidings("publish", "--url", url, "--dedup-id", "x" * 129, "x")
    assert long.returncode == 2 and "--dedup-id" in long.stderr
