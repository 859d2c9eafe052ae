"""The admin token: it guards the console's overview and the admin calls (`/v1/admin`).

Configured (`TIDINGS_ADMIN_TOKEN`), or made at the first start and kept in
`<data-dir>/admin-token` (readable by its owner only), so that it survives restarts; the
broker prints a made token once, when it makes it. Brokers sharing a store should be given
the same configured token.
"""

from __future__ import annotations

import os
from pathlib import Path

from tidings.ids import new_token
from tidings.private import private_dir

FILE = "admin-token"


def admin_token(configured: str, data_dir: Path) -> tuple[str, bool]:
    """The token, and whether it was made just now (to be shown once)."""
    if configured:
        return configured, False
    path = data_dir / FILE
    if path.exists():
        return path.read_text().strip(), False
    token = new_token()
    private_dir(data_dir)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(token + "\n")
    return token, True
