"""Writing an experiment's run directory: points (CSV, JSON), savings, PNG plots (Agg)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from tidings.placement.experiments import Row, savings
from tidings.sim.rundir import environment, write_json

MARKERS = {"direct": "o", "routed": "x"}
LINES = ("-", "--", ":")


def write(out: Path, number: int, rows: list[Row], settings: dict[str, Any]) -> list[Path]:
    """Everything about one run into `out`; the files written."""
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "environment.json", environment() | {"settings": settings})
    written = [_csv(out / "points.csv", rows), _json(out / "points.json", rows)]
    if number in (1, 3):
        table = savings(rows)
        written += [_csv(out / "savings.csv", table), _json(out / "savings.json", table)]
    written += plot(out, number, rows)
    return written


def _csv(path: Path, rows: list[Row]) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else [])
        writer.writeheader()
        writer.writerows(rows)
    return path


def _json(path: Path, rows: list[Row]) -> Path:
    write_json(path, rows)
    return path


def plot(out: Path, number: int, rows: list[Row]) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    if number == 4:
        return [_runtime(out, rows)]
    cases = list(dict.fromkeys(r["case"] for r in rows))
    return [_against_bound(out / f"experiment-{number}-{case}.png", case, rows) for case in cases]


def _against_bound(path: Path, case: str, rows: list[Row]) -> Path:
    """The paper's figure 3/4/5 shape: percentile, cost a day and regions used against max_T."""
    import matplotlib.pyplot as plt

    mine = [r for r in rows if r["case"] == case]
    series = list(dict.fromkeys(r["series"] for r in mine))
    fig, (ax_p, ax_c, ax_r) = plt.subplots(1, 3, figsize=(15, 4.2))
    for i, name in enumerate(series):
        points = [r for r in mine if r["series"] == name]
        x = [r["max_ms"] for r in points]
        style = {"label": name, "drawstyle": "steps-post", "color": f"C{i}"}
        style |= {"linestyle": LINES[i % len(LINES)], "linewidth": 2.5 - 0.6 * i}
        ax_p.plot(x, [r["percentile_ms"] for r in points], **style)
        ax_c.plot(x, [r["cost_per_day"] for r in points], **style)
        if not name.startswith("MultiPub"):
            continue
        for mode, marker in MARKERS.items():
            chosen = [r for r in points if r["mode"] == mode]
            ax_r.scatter(
                [r["max_ms"] for r in chosen],
                [r["region_count"] + 0.12 * i for r in chosen],  # side by side, not on top
                marker=marker,
                color=f"C{i}",
                label=f"{name}, {mode}",
            )
    bounds = [r["max_ms"] for r in mine]
    ax_p.plot(bounds, bounds, "k:", linewidth=0.8, label="max_T")
    ax_p.set(xlabel="max_T (ms)", ylabel="delivery-time percentile (ms)", title="(a) percentile")
    ax_c.set(xlabel="max_T (ms)", ylabel="cost ($/day)", title="(b) cost")
    ax_r.set(xlabel="max_T (ms)", ylabel="regions used", title="(c) regions and mode")
    for ax in (ax_p, ax_c, ax_r):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(case)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _runtime(out: Path, rows: list[Row]) -> Path:
    """The paper's figure 6 shape: seconds against clients, and against regions."""
    import matplotlib.pyplot as plt

    path = out / "experiment-4-runtime.png"
    fig, (ax_n, ax_r) = plt.subplots(1, 2, figsize=(11, 4.2))
    by_clients = [r for r in rows if r["case"] == "clients"]
    by_regions = [r for r in rows if r["case"] == "regions"]
    for ax, points, x, label in (
        (ax_n, by_clients, "publishers", "publishers = subscribers (10 regions)"),
        (ax_r, by_regions, "regions", "regions"),
    ):
        ax.plot([r[x] for r in points], [r["seconds"] for r in points], "o-", label="solver")
        timed = [r for r in points if r["spec_seconds"] is not None]
        if timed:
            ax.plot([r[x] for r in timed], [r["spec_seconds"] for r in timed], "s--", label="spec")
        ax.set(xlabel=label, ylabel="seconds", yscale="log")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
