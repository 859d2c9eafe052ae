"""The data directory is the broker's alone: 0700 directories, 0600 files, from a real
`tidings serve` that wrote subscribers, messages, a webhook's secret and event logs."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import httpx

from tidings.private import create_private, tighten
from tidings.server import broker_process


def modes(root: Path) -> dict[str, int]:
    found = {".": stat.S_IMODE(root.stat().st_mode)}
    for path in root.rglob("*"):
        found[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def test_a_broker_keeps_its_data_directory_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with broker_process(data) as (_, url):
        sid, token = _registered(url)
        headers = {"Authorization": f"Bearer {token}"}
        httpx.post(
            f"{url}/v1/subscribers/{sid}/subscriptions", json={"topics": ["a"]}, headers=headers
        )
        hook = {"url": "http://192.0.2.1:9/hook"}  # documentation's: a secret sealed, no push
        httpx.put(f"{url}/v1/subscribers/{sid}/webhook", json=hook, headers=headers)
        httpx.post(f"{url}/v1/publications", json={"data": "secret", "topics": ["a"]})
    found = modes(data)
    assert any(name.endswith("tidings.db") for name in found)
    assert any("log/publications" in name for name in found)
    wrong = {
        name: oct(mode)
        for name, mode in found.items()
        if mode != (0o700 if (data / name).is_dir() else 0o600)
    }
    assert wrong == {}


def _registered(url: str) -> tuple[str, str]:
    answer = httpx.post(f"{url}/v1/subscribers").json()
    return answer["id"], answer["token"]


def test_an_older_data_directory_is_tightened(tmp_path: Path) -> None:
    (tmp_path / "d" / "log").mkdir(parents=True, mode=0o755)
    (tmp_path / "d" / "tidings.db").write_bytes(b"")
    os.chmod(tmp_path / "d" / "tidings.db", 0o644)
    os.chmod(tmp_path / "d", 0o755)
    tighten(tmp_path / "d")
    assert modes(tmp_path / "d") == {".": 0o700, "log": 0o700, "tidings.db": 0o600}


def test_a_file_made_private_before_a_library_opens_it_keeps_its_contents(
    tmp_path: Path,
) -> None:
    path = tmp_path / "f"
    create_private(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.write_text("kept")
    create_private(path)
    assert path.read_text() == "kept"
