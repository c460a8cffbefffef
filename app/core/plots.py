"""Figures shared by the app and the report (matplotlib without pyplot: no global figure list to leak in a
long-running app)."""
from __future__ import annotations

from collections.abc import Sequence


def grouped_bars(rows: Sequence[dict], x: str, y: str, group: str, ylabel: str, *, ax=None, title: str = "",
                 ylim: tuple[float, float] | None = None):
    """Bars of each group side by side per x value, with a legend: two models' values must not stack.
    Draws on `ax` when given, else on a new Figure; returns the Figure. `ylim` fixes the axis for rates, which
    would otherwise span -0.04..0.04 when every bar is 0."""
    xs = list(dict.fromkeys(r[x] for r in rows))
    groups = list(dict.fromkeys(r[group] for r in rows))
    if ax is None:
        from matplotlib.figure import Figure

        ax = Figure(figsize=(max(6.0, 0.55 * len(xs) + 2), 3.0), layout="tight").subplots()
    values = {(r[x], r[group]): r[y] for r in rows}
    width = 0.8 / max(1, len(groups))
    for k, g in enumerate(groups):
        ax.bar([i + (k - (len(groups) - 1) / 2) * width for i in range(len(xs))],
               [float(values.get((v, g)) or 0.0) for v in xs], width, label=str(g))
    ax.axhline(0, color="#888", linewidth=0.6)
    tilt = len(xs) > 6
    ax.set_xticks(range(len(xs)), [str(v) for v in xs], rotation=30 if tilt else 0, ha="right" if tilt else "center",
                  fontsize=8)
    ax.set_ylabel(ylabel)
    if ylim is not None:
        ax.set_ylim(*ylim)
    if title:
        ax.set_title(title)
    if groups:
        ax.legend(fontsize=8)
    return ax.figure

