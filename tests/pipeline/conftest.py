"""Spark's Python workers must run this interpreter (the venv with tidings installed), not
whatever `python3` is first on PATH; the shared session reads this when it is created."""

from __future__ import annotations

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
