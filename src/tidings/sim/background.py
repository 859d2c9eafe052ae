"""Simulations started from the console: `tidings sim` in its own process against the broker
that started it, watched through the files it writes (its live progress, then its summary).

A process of its own keeps the simulator's publishers and subscribers off the broker's event
loop and GIL, as a real load would be. One simulation runs at a time per broker.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec
import orjson

from tidings.errors import ErrorCode, TidingsError
from tidings.ids import new_id
from tidings.sim.config import SimConfig

Status = Literal["running", "done", "failed"]


@dataclass
class Simulation:
    id: str
    directory: Path
    process: subprocess.Popen[bytes]
    log: Any = field(repr=False)  # the process's stderr, kept for a failure's reason

    @property
    def status(self) -> Status:
        code = self.process.poll()
        if code is None:
            return "running"
        return "done" if code == 0 and self.summary_path() is not None else "failed"

    def summary_path(self) -> Path | None:
        found = sorted(self.directory.glob("runs/*/summary.json"))
        return found[0] if found else None

    def progress(self) -> dict[str, Any] | None:
        return _read(self.directory / "progress.json")

    def summary(self) -> dict[str, Any] | None:
        path = self.summary_path()
        return _read(path) if path is not None else None

    def error(self) -> str | None:
        if self.status != "failed":
            return None
        lines = (self.directory / "stderr.txt").read_text(errors="replace").strip().splitlines()
        return lines[-1][:500] if lines else f"exit status {self.process.returncode}"

    def state(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status,
            "progress": self.progress(),
            "summary": self.summary(),
            "error": self.error(),
        }


def _read(path: Path) -> dict[str, Any] | None:
    try:
        value = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None  # not written yet
    return value if isinstance(value, dict) else None


class Simulations:
    """The simulations this broker started, kept under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._runs: dict[str, Simulation] = {}

    def start(self, config: SimConfig, broker_url: str) -> Simulation:
        if any(s.status == "running" for s in self._runs.values()):
            raise TidingsError(
                ErrorCode.CONFLICT, detail="a simulation is running: wait for it to finish"
            )
        simulation_id = new_id()
        directory = self.root / simulation_id
        directory.mkdir(parents=True)
        path = directory / "config.json"
        path.write_bytes(msgspec.json.encode(msgspec.structs.replace(config, url=broker_url)))
        command = [sys.executable, "-m", "tidings.cli.main", "sim", str(path), "--no-progress"]
        command += ["--runs", str(directory / "runs")]
        command += ["--progress-file", str(directory / "progress.json")]
        log = (directory / "stderr.txt").open("wb")
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)
        self._runs[simulation_id] = Simulation(simulation_id, directory, process, log)
        return self._runs[simulation_id]

    def get(self, simulation_id: str) -> Simulation:
        found = self._runs.get(simulation_id)
        if found is None:
            raise TidingsError(ErrorCode.NOT_FOUND, detail=f"no simulation {simulation_id!r}")
        return found

    def close(self) -> None:
        for run in self._runs.values():
            if run.process.poll() is None:
                run.process.terminate()
                run.process.wait(10)
            run.log.close()
