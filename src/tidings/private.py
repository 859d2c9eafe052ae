"""The data directory is the broker's alone: it holds every queued message, subscribers'
token hashes, webhook secrets and the admin token. Directories are 0700 and files 0600, so
no other local user reads them (docs/operations.md, "What is on disk")."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600
UMASK = 0o077  # what the broker process creates is its user's alone


def private_dir(path: Path) -> Path:
    """`path` made (with its parents) or tightened to 0700."""
    path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    os.chmod(path, DIR_MODE)
    return path


def opener(path: str, flags: int) -> int:
    """For `open(..., opener=opener)`: a file this process creates is 0600."""
    return os.open(path, flags, FILE_MODE)


def create_private(path: Path) -> None:
    """Create `path` empty as 0600 if it does not exist yet (before a library opens it)."""
    with contextlib.suppress(FileExistsError):  # made before: `tighten` sees to its mode
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))


def tighten(root: Path) -> None:
    """Every directory under `root` 0700 and every file 0600: a data directory written by an
    older version, or by tools that do not care, is made private at start."""
    private_dir(root)
    for top, dirs, files in os.walk(root):
        for name in dirs:
            os.chmod(os.path.join(top, name), DIR_MODE, follow_symlinks=False)
        for name in files:
            path = os.path.join(top, name)
            if not os.path.islink(path):
                os.chmod(path, FILE_MODE)
