"""The elastic report's figures, in the shape of E-SilboPS's figures 7-12: throughput,
speedup S(n), efficiency E(n) and the Karp-Flatt metric e against the number of matchers,
one line per (subscriptions, where the matchers ran), from `elastic_scaling`'s rows."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

FIGURES = (
    ("throughput", "notifications/s", "elastic_throughput.png"),
    ("speedup", "speedup S(n)", "elastic_speedup.png"),
    ("efficiency", "efficiency E(n) = S(n)/n", "elastic_efficiency.png"),
    ("karp_flatt", "Karp-Flatt e", "elastic_karp_flatt.png"),
)


def elastic_plots(rows: Sequence[dict[str, Any]], out: Path) -> list[Path]:
    """One PNG per figure; none when there are no rows. Shapes with the same number of
    matchers (1-2-1, 1-2-2) are told apart by their exit points in the label."""
    if not rows:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for column, label, name in FIGURES:
        fig, ax = plt.subplots(figsize=(6, 4))
        for key, line in _lines(rows, column).items():
            ax.plot([x for x, _ in line], [y for _, y in line], "o-", label=key)
        ax.set(xlabel="matchers n (shape 1-n-k)", ylabel=label, title=f"{label} by shape")
        ax.legend(fontsize="small")
        fig.tight_layout()
        fig.savefig(out / name, dpi=100)
        plt.close(fig)
        written.append(out / name)
    return written


def _lines(rows: Sequence[dict[str, Any]], column: str) -> dict[str, list[tuple[int, float]]]:
    lines: dict[str, list[tuple[int, float]]] = {}
    for r in sorted(rows, key=lambda r: (r["subscriptions"], str(r["matchers_in"]), r["shape"])):
        if r.get(column) is None:
            continue
        exits = r["shape"].rsplit("-", 1)[1]
        key = f"{r['subscriptions']:,} subscriptions, {r['matchers_in']}, {exits} exit point(s)"
        lines.setdefault(key, []).append((int(r["matchers"]), float(r[column])))
    return lines
