"""The history page of a system: each path over the nights, how far each
night was from the accepted runs (% worse, positive is worse), the band the accepted runs
spread over, and the change points, as the judge found them
(runner/histories.py computes them, judge/changepoints.py finds them); this
module only draws.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pandas as pd

from reports.page import WORSE_HEADER, page_html

COLUMNS = 3
#: Each panel's share of the figure (its axes, title and tick labels) and the
#: room the axes keep around them, in inches: fixed, where matplotlib's
#: tight_layout measured every label of every panel first (two fifths of a
#: busy night's history page, drawn while the night waits to end).
PANEL_IN = (4.3, 3.3)
MARGINS_IN = {"left": 1.0, "right": 0.2, "top": 0.7, "bottom": 0.8, "wspace": 0.6, "hspace": 1.0}


def _night(stamp: str) -> str:
    """'2026-11-24T22:34:55' -> '11-24 22:34': a night on an axis."""
    return stamp[5:16].replace("T", " ")


def _panel(ax, path: str, rows: pd.DataFrame, flagged) -> None:
    worse = rows["worse"].to_numpy(float)
    x = np.arange(len(worse))
    ax.axhspan(rows["band_low"].iloc[0], rows["band_high"].iloc[0], color="#dddddd", label="accepted ±2 spreads")
    ax.plot(x, worse, marker="o", ms=3, lw=1, color="#1f77b4")
    # The change points the nightly found (the table's `starts`, runner/histories.py).
    for start in np.flatnonzero(rows["starts"].to_numpy(bool)):
        ax.axvline(start - 0.5, color="#ff7f0e", ls="--", lw=1)
    if flagged:
        start = len(worse) - flagged.nights
        ax.plot(x[start:], worse[start:], marker="o", ms=4, lw=2, color="#d62728")
    ax.axhline(0, color="black", lw=0.5)
    ax.set_title(path, fontsize=10)
    ax.tick_params(labelsize=9)
    step = max(1, len(x) // 5)
    ax.set_xticks(x[::step], [_night(r) for r in rows["run"].iloc[::step]], fontsize=9, rotation=25, ha="right")


def draw(table: pd.DataFrame, found: list, outdir: Path) -> list[Path]:
    """One figure per kind of path, a panel per path."""
    # Here, not at the top: every command's parser imports this module, and pyplot takes half a second.
    from reports.figures.common import plt  # the figures' backend and style set before pyplot

    flagged = {c.path: c for c in found}
    kinds = table.groupby("kind", sort=True)
    written = []
    for kind, rows in kinds:
        paths = sorted(rows["path"].unique())
        ncols = min(COLUMNS, len(paths))
        nrows = math.ceil(len(paths) / ncols)
        fig, axes = plt.subplots(
            nrows, ncols, figsize=(PANEL_IN[0] * ncols + 0.8, PANEL_IN[1] * nrows + 0.9), squeeze=False
        )
        for ax, path in zip(axes.flat, paths):
            path_rows = rows[rows["path"] == path]
            _panel(ax, path, path_rows, flagged.get(path))
        for ax in list(axes.flat)[len(paths) :]:
            ax.set_visible(False)
        fig.supylabel("% worse (positive is worse)", fontsize=10, x=0.2 / fig.get_figwidth())
        title = f"{kind}: each night against the accepted runs"
        fig.suptitle(title, fontsize=11, y=1 - 0.15 / fig.get_figheight())  # a fixed room above, in inches
        _fixed_margins(fig, nrows, ncols)
        path = outdir / f"history-{kind}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written


def _fixed_margins(fig, nrows: int, ncols: int) -> None:
    """The panels placed with MARGINS_IN's room around and between them."""
    m, (width, height) = MARGINS_IN, fig.get_size_inches()
    panel_w = (width - m["left"] - m["right"] - (ncols - 1) * m["wspace"]) / ncols
    panel_h = (height - m["top"] - m["bottom"] - (nrows - 1) * m["hspace"]) / nrows
    fig.subplots_adjust(
        left=m["left"] / width,
        right=1 - m["right"] / width,
        top=1 - m["top"] / height,
        bottom=m["bottom"] / height,
        wspace=m["wspace"] / panel_w,
        hspace=m["hspace"] / panel_h,
    )


def beyond(table: pd.DataFrame) -> dict[str, list[str]]:
    """The nights a path stood far off the accepted runs (the table's `far`:
    runner/histories.py's), worse or better, by night: the figures' spikes."""
    nights: dict[str, list[str]] = {}
    for row in table[table["far"].astype(bool)].sort_values(["run", "path"]).itertuples():
        nights.setdefault(row.run, []).append(f"{row.path} {row.worse:+.0f}%")
    return dict(sorted(nights.items()))


def starts_of(table: pd.DataFrame) -> dict[str, list[str]]:
    """Each path's change points (the nights a new level starts), as the page's dashed lines."""
    found = table[table["starts"].astype(bool)] if "starts" in table.columns else table.iloc[0:0]
    return {path: [_night(r) for r in rows["run"]] for path, rows in found.groupby("path", sort=True)}


def write_history(system: str, outdir: Path, drawn: tuple, back: str = "", kind: str | None = None) -> Path | None:
    """history.html and its figures under `outdir` for one kind of the
    system's nodes, with a link to `back` where given, from `drawn`: what the
    judge found over the nights (runner/histories.py: each path's level per
    night as % worse with its change points, the accepted band and the
    nights far off it, its scaled spread, the changes reported);
    None where it holds no night. Drawn only: nothing is judged here."""
    table, _, found = drawn
    if table.empty:
        return None
    outdir.mkdir(parents=True, exist_ok=True)
    images = draw(table, found, outdir)
    nights = table["run"].nunique()
    if found:
        lines = "".join(f"<li>{html.escape(c.line())}</li>" for c in found)
        parts = [f"<h2>Changes the nightly reports (held three nights or more)</h2><ul>{lines}</ul>"]
    else:
        parts = [
            "<h2>Changes the nightly reports</h2><p>No new level has held three nights off the accepted one "
            "(by half the path's floor or more): what stands out below is single nights and steps that did not "
            "hold.</p>"
        ]
    spikes = beyond(table)
    if spikes:
        items = "".join(
            f"<li>{html.escape(_night(stamp))}: {html.escape('; '.join(paths))}</li>" for stamp, paths in spikes.items()
        )
        parts.append(
            f"<h3>Nights far off the accepted runs, as {WORSE_HEADER}: beyond twice the floor and the grey band"
            "</h3><p>Each judged by its own "
            f"night's verdict (its page); a path its night called transient is drawn at its rerun's level.</p>"
            f"<ul>{items}</ul>"
        )
    starts = starts_of(table)
    if starts:
        items = "".join(f"<li>{html.escape(p)}: {', '.join(map(html.escape, s))}</li>" for p, s in starts.items())
        held = "; a red line is one that held" if found else "; none held three nights"
        parts.append(f"<h3>Change points (the dashed lines): where a new level starts{held}</h3><ul>{items}</ul>")
    parts.append(
        f"<p>Each figure is a kind of path, a panel a path: each night's {WORSE_HEADER} than the accepted runs, "
        "their spread (grey: ±2 spreads), the change points (dashed) and a change held three nights (red).</p>"
    )
    parts += [f"<figure><img src='{html.escape(quote(p.name))}' alt='{html.escape(p.stem)}'></figure>" for p in images]
    of = f"{system}, {kind}" if kind else system
    heading = f"History of {of}: {table['path'].nunique()} paths over {nights} nights"
    page = outdir / "history.html"
    page.write_text(page_html(f"History of {of}", parts, heading=heading, back=back))
    return page


def slug(kind: str) -> str:
    """'2 x NVIDIA H100 80GB HBM3' -> '2xNVIDIA-H100-80GB-HBM3': a kind in a folder's name."""
    return "-".join(kind.replace(" x ", "x").replace(",", "").split())
