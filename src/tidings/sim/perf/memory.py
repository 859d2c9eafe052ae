"""A broker process's resident memory, read from /proc while a run goes on: before, the peak
during, and after."""

from __future__ import annotations

import threading
from pathlib import Path

PROC = Path("/proc")
# the process that is each peer broker on this machine
BROKER_COMMANDS = {
    "rabbitmq": "beam.smp",
    "nats": "nats-server",
    "nats-jetstream": "nats-server",
    "redis": "redis-server",
    "mqtt": "mosquitto",
}


def rss_bytes(pid: int) -> int | None:
    """VmRSS of a process, or None when it is gone or unreadable."""
    try:
        status = (PROC / str(pid) / "status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return None


def pid_of(command: str) -> int | None:
    """The first process whose command name (/proc/PID/comm) is `command`."""
    for entry in sorted(PROC.iterdir(), key=lambda p: p.name):
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() == command:
                return int(entry.name)
        except OSError:
            continue
    return None


class RssSampler:
    """Samples one process's RSS every `interval_s` in a thread between start and stop."""

    def __init__(self, pid: int, interval_s: float = 0.5) -> None:
        self.pid, self.interval_s = pid, interval_s
        self.before = rss_bytes(pid)
        self.peak = self.before or 0
        self.after: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def start(self) -> RssSampler:
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.peak = max(self.peak, rss_bytes(self.pid) or 0)

    def stop(self) -> dict[str, float | None]:
        """Before, peak and after, in MiB."""
        self._stop.set()
        self._thread.join()
        self.after = rss_bytes(self.pid)
        return {
            "rss_before_mib": _mib(self.before),
            "rss_peak_mib": _mib(self.peak),
            "rss_after_mib": _mib(self.after),
        }


def _mib(size: int | None) -> float | None:
    return None if size is None else round(size / 2**20, 1)
