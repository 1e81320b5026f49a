"""The history page of a system: each path over the nights, how far each
night was from the accepted runs (worse up), the band the accepted runs
spread over, and the change points (judge/changepoints.py).

    python -m commands history [--system NAME] -o DIR    DIR/history.html and a figure per kind of path
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from urllib.parse import quote

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from judge import changepoints, verdict
from judge.select import accepted_masks, run_rows
from reports.figures import common  # noqa: F401  (the figures' backend and style)
from reports.load import load
from reports.page import page_html
from reports.runs import PERFLOGS, finished_runs, read_accepted, read_baselines, selected_system

COLUMNS = 4


def missing(system: str, kind: str | None = None) -> str | None:
    """What the system (one kind of its nodes) lacks for a history: accepted
    runs or finished nights; None if nothing."""
    accepted = read_accepted(system, kind)
    if accepted is None and kind is None and len(read_baselines(system)) > 1:
        return f"baselines of several kinds of node ({'; '.join(sorted(read_baselines(system)))}): name one"
    if accepted is None:
        return "no accepted runs" + (f" of {kind}" if kind else "")
    return None if finished_runs(system, kind=accepted["kind"]) else "no finished nightly runs"


def history_table(
    system: str, accepted: dict, nights: list[dict], frame: pd.DataFrame | None = None
) -> tuple[pd.DataFrame, dict[str, float], list[changepoints.Change]]:
    """Each path's level per night (percent, worse positive), its accepted
    spread, and the changes found, over those of the `nights` that `frame`
    holds (by default the system's perflogs); the spreads are judged against
    the last of them."""
    if frame is None:
        frame = load([PERFLOGS / system], warn=None).frame
    held = [r for r in nights if run_rows(frame, system, [r]).any()]
    table = changepoints.path_levels(frame, system, held, [r["stamp"] for r in accepted["runs"]])
    if table.empty:
        return table, {}, []
    last = run_rows(frame, system, [held[-1]])
    paths = verdict.judge(frame, accepted_masks(frame, system, accepted), last).paths
    spreads = dict(zip(paths["path"], paths["spread_pct"] / 100))
    return table, spreads, changepoints.changes(table, spreads)


def _panel(ax, path: str, rows: pd.DataFrame, spread: float, flagged: changepoints.Change | None) -> None:
    levels = rows["level"].to_numpy(float)
    x = np.arange(len(levels))
    ax.axhspan(-200 * spread, 200 * spread, color="#dddddd", label="accepted ±2 spreads")
    ax.plot(x, np.expm1(levels) * 100, marker="o", ms=3, lw=1, color="#1f77b4")
    # The change points the nightly finds: its series scaled as it scales them.
    for start in changepoints.change_points(levels, changepoints.series_spread(levels, spread)):
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
            _panel(ax, path, path_rows, changepoints.scale(spreads.get(path)), flagged.get(path))
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


def write_history(
    system: str,
    outdir: Path,
    frame: pd.DataFrame | None = None,
    back: str = "",
    drawn: tuple | None = None,
    kind: str | None = None,
) -> Path | None:
    """history.html and its figures under `outdir` for one kind of the
    system's nodes (its only one by default), with a link to `back` where
    given, from `drawn` (levels, spreads and changes a nightly already has)
    or else history_table; None where that kind has no accepted runs or
    nights, or `frame` holds none of its nights."""
    if drawn is None:
        accepted = read_accepted(system, kind)
        nights = finished_runs(system, kind=accepted["kind"]) if accepted else []
        if accepted is None or not nights:
            return None
        drawn = history_table(system, accepted, nights, frame)
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


def add_parsers(sub) -> None:
    """history in the suite's one parser (commands/cli.py)."""
    p = sub.add_parser("history", help="each path over the nights, with its change points")
    p.add_argument("--system", help="default: the one ReFrame picks here")
    p.add_argument("--kind", help="the kind of node ('2 x NVIDIA H100 80GB HBM3'; default: each, a folder each)")
    p.add_argument("-o", "--output", required=True, help="directory for history.html and its figures")
    p.set_defaults(func=history)


def history(args) -> int:
    system = selected_system(args.system)
    kinds = [args.kind] if args.kind else sorted(read_baselines(system)) or [None]
    drawn = 0
    for kind in kinds:
        outdir = Path(args.output) / slug(kind) if len(kinds) > 1 else Path(args.output)
        page = write_history(system, outdir, kind=kind)
        if page is None:  # each kind that can be drawn is, whatever another lacks
            print(f"history: {system}{', ' + kind if kind else ''} has {missing(system, kind) or 'no nightly run'}")
            continue
        drawn += 1
        print(f"history of {kind or system} written to {page}")
    if not drawn:
        raise SystemExit(f"history: no history of {system} to draw")
    return 0
