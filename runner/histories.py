"""A system's history, judged: each path's level per night against the
accepted runs, its change points and the changes reported (judge/
changepoints.py), the spreads they are scaled by (judge/verdict.py). The
nightly computes it over tonight and every earlier night; the report and
`history` compute it over the nights the perflogs hold; reports/history.py
draws what this gives, and judges nothing.

    python -m commands history [--system NAME] [--kind KIND] -o DIR    DIR/history.html and a figure per kind of path
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments.progress import Progress
from judge import changepoints, explain, verdict
from judge.select import accepted_masks, run_rows
from reports.history import slug, write_history
from reports.load import load
from reports.runs import PERFLOGS, finished_runs, read_accepted, read_baselines, selected_system


def night_levels(frame: pd.DataFrame, system: str, accepted: dict, tonight: dict | None = None) -> pd.DataFrame:
    """Each path's level over every night of the system (changepoints.path_levels), tonight's
    included (`tonight`, its reruns' windows and path verdicts as they are
    now, over its run.json on disk): what tonight's changes are found in and
    its history page is drawn from."""
    runs = finished_runs(system, kind=accepted.get("kind"))
    # Accepted nodes of a partition's night ('STAMP@NODE') are no night of their own: their runs are added.
    runs = sorted(runs + [r for r in accepted["runs"] if r.get("node")], key=lambda r: r["start"])
    if tonight is not None:  # a drill too: judged over the history as any night is
        runs = [r for r in runs if r["stamp"] != tonight["stamp"]] + [tonight]
    stamps = [r["stamp"] for r in accepted["runs"]]
    return changepoints.path_levels(frame, system, runs, stamps)


#: A night is far off the accepted runs (the history page lists it) beyond this many times both its path's
#: floor and the accepted band (±2 spreads): a spike to read about, not the noise around the band.
FAR = 2.0


def drawn(levels: pd.DataFrame, spreads: dict[str, float], changes: list) -> tuple:
    """What the history page draws: the levels with each night that starts a
    new level marked (`starts`: the change points, the series scaled as the
    nightly scales it), each level as % worse (`worse`, judge/explain.py's
    sign), the accepted band of ±2 spreads in the same unit (`band_low`,
    `band_high`) and the nights far off it (`far`); each path's spread as
    scaled, and the changes."""
    scaled = {path: changepoints.scale(spreads.get(path)) for path in levels["path"].unique()}
    columns = {name: pd.Series(dtype, index=levels.index) for name, dtype in [("starts", False), ("far", False)]}
    worse, low, high = (pd.Series(float("nan"), index=levels.index) for _ in range(3))
    for path, rows in levels.groupby("path", sort=False):
        values = rows["level"].to_numpy(float)
        found = changepoints.change_points(values, changepoints.series_spread(values, scaled[path]))
        columns["starts"][rows.index[[i for i in found if 0 <= i < len(rows)]]] = True
        better = str(rows["better"].iloc[0]) if "better" in rows.columns else "higher"
        worse[rows.index] = explain.worse_of_levels(values, better)
        band = explain.worse_of_levels([-2 * scaled[path], 2 * scaled[path]], better)
        low[rows.index], high[rows.index] = band[0], band[1]
        floor = float(rows["floor"].iloc[0]) * 100 if "floor" in rows.columns else 0.0
        columns["far"][rows.index] = worse[rows.index].abs() > FAR * max(floor, abs(band[0]), abs(band[1]))
    return (
        levels.assign(
            starts=columns["starts"].to_numpy(bool),
            worse=worse.to_numpy(float),
            band_low=low.to_numpy(float),
            band_high=high.to_numpy(float),
            far=columns["far"].to_numpy(bool),
        ),
        scaled,
        changes,
    )


def history_table(system: str, accepted: dict, nights: list[dict], frame: pd.DataFrame | None = None) -> tuple:
    """`drawn` over those of the `nights` that `frame` holds (by default the
    system's perflogs), the spreads judged against the last of them."""
    if frame is None:
        frame = load([PERFLOGS / system], warn=None).frame
    held = [r for r in nights if run_rows(frame, system, [r]).any()]
    table = changepoints.path_levels(frame, system, held, [r["stamp"] for r in accepted["runs"]])
    if table.empty:
        return table.assign(starts=pd.Series(dtype=bool)), {}, []
    last = run_rows(frame, system, [held[-1]])
    paths = verdict.judge(frame, accepted_masks(frame, system, accepted), last).paths
    spreads = dict(zip(paths["path"], paths["spread_pct"] / 100))
    return drawn(table, spreads, changepoints.changes(table, spreads))


def write_kind(system: str, outdir: Path, frame: pd.DataFrame | None = None, back: str = "", kind: str | None = None):
    """The history page of one kind of the system's nodes (its only one by
    default), judged here and drawn by reports/history.py; None where that
    kind has no accepted runs or nights, or `frame` holds none of them."""
    accepted = read_accepted(system, kind)
    nights = finished_runs(system, kind=accepted["kind"]) if accepted else []
    if accepted is None or not nights:
        return None
    return write_history(system, outdir, history_table(system, accepted, nights, frame), back=back, kind=kind)


def report_histories(frame: pd.DataFrame, outdir: Path) -> dict[str, Path]:
    """The history page of each system and kind of node whose accepted runs
    and nights the records hold, for a report under `outdir` (its `histories`)."""
    pages = {}
    kinds = [
        (system, kind)
        for system in sorted(frame["system"].dropna().unique())
        for kind in sorted(read_baselines(system)) or [None]
    ]
    progress = Progress("report", "histories drawn", len(kinds))
    for system, kind in kinds:
        label, folder = (
            (f"{system}, {kind}", f"history-{system}-{slug(kind)}") if kind else (system, f"history-{system}")
        )
        pages[label] = write_kind(system, outdir / folder, frame, back="../index.html", kind=kind)
        progress.step()
    return {label: page for label, page in pages.items() if page is not None}


def missing(system: str, kind: str | None = None) -> str | None:
    """What the system (one kind of its nodes) lacks for a history: accepted
    runs or finished nights; None if nothing."""
    accepted = read_accepted(system, kind)
    if accepted is None and kind is None and len(read_baselines(system)) > 1:
        return f"baselines of several kinds of node ({'; '.join(sorted(read_baselines(system)))}): name one"
    if accepted is None:
        return "no accepted runs" + (f" of {kind}" if kind else "")
    return None if finished_runs(system, kind=accepted["kind"]) else "no finished nightly runs"


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
    written = 0
    for kind in kinds:
        outdir = Path(args.output) / slug(kind) if len(kinds) > 1 else Path(args.output)
        page = write_kind(system, outdir, kind=kind)
        if page is None:  # each kind that can be drawn is, whatever another lacks
            print(f"history: {system}{', ' + kind if kind else ''} has {missing(system, kind) or 'no nightly run'}")
            continue
        written += 1
        print(f"history of {kind or system} written to {page}")
    if not written:
        raise SystemExit(f"history: no history of {system} to draw")
    return 0
