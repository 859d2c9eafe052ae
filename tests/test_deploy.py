"""What `deploy/` ships is valid as its tools read it: the systemd unit."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_systemd_unit_verifies(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("systemd-analyze is required under CI (Debian: apt-get install systemd)")
        pytest.skip("systemd-analyze is not installed")
    unit = (ROOT / "deploy" / "tidings.service").read_text()
    # verify checks that ExecStart's program exists: point it at this environment's
    tidings = Path(sys.executable).with_name("tidings")
    here = tmp_path / "tidings.service"
    here.write_text(unit.replace("/opt/tidings/bin/tidings", str(tidings)))
    done = subprocess.run([analyze, "verify", str(here)], capture_output=True, text=True)
    said = [line for line in done.stderr.splitlines() if "tidings.service" in line]
    assert done.returncode == 0 and said == [], done.stderr
