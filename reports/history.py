"""The history page of a system: each path over the nights, how far each
night was from the accepted runs (worse up), the band the accepted runs
spread over, and the change points, as the judge found them
(runner/histories.py computes them, judge/changepoints.py finds them); this
module only draws.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from urllib.parse import quote

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from reports.figures import common  # noqa: F401  (the figures' backend and style)
from reports.page import page_html

COLUMNS = 4


def _panel(ax, path: str, rows: pd.DataFrame, spread: float, flagged) -> None:
    levels = rows["level"].to_numpy(float)
    x = np.arange(len(levels))
    ax.axhspan(-200 * spread, 200 * spread, color="#dddddd", label="accepted ±2 spreads")
    ax.plot(x, np.expm1(levels) * 100, marker="o", ms=3, lw=1, color="#1f77b4")
    # The change points the nightly found (the table's `starts`, runner/histories.py).
    for start in np.flatnonzero(rows["starts"].to_numpy(bool)):
        ax.axvline(start - 0.5, color="#ff7f0e", ls="--", lw=1)
    if flagged:
        start = len(levels) - flagged.nights
        ax.plot(x[start:], np.expm1(levels[start:]) * 100, marker="o", ms=4, lw=2, color="#d62728")
    ax.axhline(0, color="black", lw=0.5)
    ax.set_title(path, fontsize=7)
    ax.tick_params(labelsize=6)
    ax.set_xticks(x[:: max(1, len(x) // 4)], rows["run"].str[5:16].iloc[:: max(1, len(x) // 4)], fontsize=5)


def draw(table: pd.DataFrame, spreads: dict[str, float], found: list, outdir: Path) -> list[Path]:
    """One figure per kind of path, a panel per path."""
    flagged = {c.path: c for c in found}
    kinds = table.groupby("kind", sort=True)
    written = []
    for kind, rows in kinds:
        paths = sorted(rows["path"].unique())
        nrows = math.ceil(len(paths) / COLUMNS)
        fig, axes = plt.subplots(nrows, COLUMNS, figsize=(4 * COLUMNS, 2.6 * nrows), squeeze=False)
        for ax, path in zip(axes.flat, paths):
            path_rows = rows[rows["path"] == path]
            _panel(ax, path, path_rows, spreads[path], flagged.get(path))
        for ax in list(axes.flat)[len(paths) :]:
            ax.set_visible(False)
        fig.supylabel("% worse than the accepted runs", fontsize=8)
        fig.suptitle(f"{kind}: each night against the accepted runs; dashed: change points", fontsize=9)
        fig.tight_layout()
        path = outdir / f"history-{kind}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written


def write_history(system: str, outdir: Path, drawn: tuple, back: str = "", kind: str | None = None) -> Path | None:
    """history.html and its figures under `outdir` for one kind of the
    system's nodes, with a link to `back` where given, from `drawn`: what the
    judge found over the nights (runner/histories.py: each path's level per
    night with its change points, its scaled spread, the changes reported);
    None where it holds no night. Drawn only: nothing is judged here."""
    table, spreads, found = drawn
    if table.empty:
        return None
    outdir.mkdir(parents=True, exist_ok=True)
    images = draw(table, spreads, found, outdir)
    nights = table["run"].nunique()
    lines = "".join(f"<li>{html.escape(c.line())}</li>" for c in found) or "<li>none</li>"
    parts = [
        f"<h2>Changes the nightly reports</h2><ul>{lines}</ul>",
        *(f"<figure><img src='{html.escape(quote(p.name))}' alt='{html.escape(p.stem)}'></figure>" for p in images),
    ]
    of = f"{system}, {kind}" if kind else system
    heading = f"History of {of}: {table['path'].nunique()} paths over {nights} nights"
    page = outdir / "history.html"
    page.write_text(page_html(f"History of {of}", parts, heading=heading, back=back))
    return page


def slug(kind: str) -> str:
    """'2 x NVIDIA H100 80GB HBM3' -> '2xNVIDIA-H100-80GB-HBM3': a kind in a folder's name."""
    return "-".join(kind.replace(" x ", "x").replace(",", "").split())
