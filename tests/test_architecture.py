"""The plan of the house (docs/architecture.md) stays true: its import rules hold, and it
names every room of the code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "tidings"
PLAN = ROOT / "docs" / "architecture.md"


def test_the_import_rules_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_the_plan_names_every_room() -> None:
    plan = PLAN.read_text()
    rooms = [p.name + "/" for p in SOURCE.iterdir() if (p / "__init__.py").exists()]
    modules = [p.name for p in SOURCE.glob("*.py") if p.name != "__init__.py"]
    missing = [name for name in rooms + modules if f"`{name}`" not in plan and name not in plan]
    assert missing == []
