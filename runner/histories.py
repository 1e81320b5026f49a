"""A system's history, judged: each path's level per night against the
accepted runs, its change points and the changes reported (judge/
changepoints.py), the spreads they are scaled by (judge/verdict.py). The
nightly computes it over tonight and every earlier night; the report and
`history` compute it over the nights the perflogs hold; reports/history.py
draws what this gives, and judges nothing.

    python -m commands history [--system NAME] [--kind KIND] -o DIR    DIR/history.html and a figure per kind of path
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.progress import Progress
from experiments.roots import REPO
from judge import changepoints, explain, verdict
from judge.select import RERUNS, accepted_masks, run_rows, windows_of
from reports import store
from reports.history import slug, write_history
from reports.load import load
from reports.runs import PERFLOGS, finished_runs, read_accepted, read_baselines, selected_system


def night_levels(system: str, accepted: dict, tonight: dict | None = None) -> pd.DataFrame:
    """Each path's level over every night of the system (changepoints.path_levels), tonight's
    included (`tonight`, its reruns' windows and path verdicts as they are
    now, over its run.json on disk): what tonight's changes are found in and
    its history page is drawn from. Each night's levels are kept once computed (kept_levels)."""
    runs = kind_nights(system, accepted)
    if tonight is not None:  # a drill too: judged over the history as any night is
        runs = [r for r in runs if r["stamp"] != tonight["stamp"]] + [tonight]
    return kept_levels(system, accepted, runs)


def kind_nights(system: str, accepted: dict) -> list[dict]:
    """The kind's finished nights, oldest first, with the accepted nodes of a partition's night ('STAMP@NODE':
    no night of their own, their runs added)."""
    runs = finished_runs(system, kind=accepted.get("kind"))
    return sorted(runs + [r for r in accepted["runs"] if r.get("node")], key=lambda r: r["start"])


#: Nights whose levels are computed from one read of the store (a kind's first night on a long history, a
#: night after a new baseline): a window of their records and the accepted runs', never the years at once.
LEVEL_BATCH = 60
#: What a night's levels depend on besides its records and its run.json: the paths and how a level is made.
_LEVEL_CODE = ("judge/changepoints.py", "judge/verdict.py", "experiments/paths.py", "systems/paths/paths.yaml")


def level_basis(system: str, accepted: dict) -> str:
    """What the levels kept for the kind are judged on: its accepted runs, and the code and paths that turn
    records into levels (a change of any computes every night again)."""
    digest = hashlib.sha256(f"{system}|{accepted.get('kind')}|".encode())
    for run in accepted["runs"]:
        digest.update(json.dumps(run, sort_keys=True, default=str).encode())
    for name in _LEVEL_CODE:
        digest.update((REPO / name).read_bytes())
    return digest.hexdigest()[:24]


def night_digest(run: dict) -> str:
    """What a night's levels depend on of its run.json: its windows (reruns' included) and paths' verdicts."""
    keys = ("stamp", "start", "end", "node", "paths", *RERUNS)
    return hashlib.sha256(json.dumps({k: run.get(k) for k in keys}, sort_keys=True, default=str).encode()).hexdigest()[
        :24
    ]


def kept_levels(system: str, accepted: dict, runs: list[dict]) -> pd.DataFrame:
    """changepoints.path_levels of `runs` (in order) against `accepted`, each night's read from what was kept
    when it was judged, the others (a new night, a night judged again, a new baseline) computed from a
    window of the store and kept. Where the store cannot be written, computed without keeping."""
    basis, digests = level_basis(system, accepted), {r["stamp"]: night_digest(r) for r in runs}
    runs = list({r["stamp"]: r for r in runs}.values())  # a stamp once, as path_levels keys it
    try:
        with store.opened(PERFLOGS / system) as con:
            known = store.level_nights(con, basis)
        todo = [r for r in runs if known.get(r["stamp"]) != digests[r["stamp"]]]
        for batch in [todo[i : i + LEVEL_BATCH] for i in range(0, len(todo), LEVEL_BATCH)]:
            table = _levels_of(system, accepted, runs, batch)  # loads: the store is not held meanwhile
            with store.opened(PERFLOGS / system) as con:
                store.keep_levels(con, basis, {r["stamp"]: digests[r["stamp"]] for r in batch}, table)
        with store.opened(PERFLOGS / system) as con:
            kept = store.read_levels(con, basis)
    except store.failures():
        kept = pd.concat([_levels_of(system, accepted, runs, [r]) for r in runs] or [pd.DataFrame()])
    return _in_order(kept, runs)


def _levels_of(system: str, accepted: dict, runs: list[dict], batch: list[dict]) -> pd.DataFrame:
    """The levels of the nights `batch`, from a window of their records and of the accepted runs among
    `runs` (what each figure's accepted median is taken over, as over the whole history)."""
    stamps = [r["stamp"] for r in accepted["runs"]]
    # The accepted runs among the kind's nights, whatever nights are asked for: a night's level is the same
    # whoever computes it (a report of some nights keeps it for the nightly's).
    references = [r for r in kind_nights(system, accepted) if r["stamp"] in stamps]
    references = [r for r in references if r["stamp"] not in {b["stamp"] for b in batch}]
    window = sorted(batch + references, key=lambda r: r["start"])
    frame = load([PERFLOGS / system], warn=None, windows=windows_of(window)).frame
    table = changepoints.path_levels(frame, system, window, stamps)
    if table.empty:
        return pd.DataFrame(columns=list(store.LEVEL_COLUMNS))
    return table[table["run"].isin({r["stamp"] for r in batch})]


def _in_order(kept: pd.DataFrame, runs: list[dict]) -> pd.DataFrame:
    """The kept levels of `runs`, by path and then in the nights' order (path_levels' order)."""
    order = {r["stamp"]: i for i, r in enumerate(runs)}
    table = kept[kept["run"].isin(order)] if not kept.empty else kept
    if table.empty:
        return pd.DataFrame(columns=list(store.LEVEL_COLUMNS))
    table = table.sort_values(["path", "run"], key=lambda c: c.map(order) if c.name == "run" else c)
    return table.reset_index(drop=True)


#: A night is far off the accepted runs (the history page lists it) beyond this many times both its path's
#: floor and the accepted band (±2 spreads): a spike to read about, not the noise around the band.
FAR = 2.0


def drawn(
    levels: pd.DataFrame, spreads: dict[str, float], changes: list, starts: dict | None = None, accepted=()
) -> tuple:
    """What the history page draws: the levels with each night that starts a
    new level marked (`starts`: the change points, the series scaled as the
    nightly scales it), each level as % worse (`worse`, judge/explain.py's
    sign), the accepted band of ±2 spreads in the same unit (`band_low`,
    `band_high`) and the nights far off it (`far`); each path's spread as
    scaled, and the changes. `starts`: the change points the nightly found (changepoints.found_starts over
    `accepted` and its window), found here where not given."""
    scaled = {path: changepoints.scale(spreads.get(path)) for path in levels["path"].unique()}
    starts = changepoints.found_starts(levels, scaled, accepted) if starts is None else starts
    columns = {name: pd.Series(dtype, index=levels.index) for name, dtype in [("starts", False), ("far", False)]}
    worse, low, high = (pd.Series(float("nan"), index=levels.index) for _ in range(3))
    for path, rows in levels.groupby("path", sort=False):
        values = rows["level"].to_numpy(float)
        columns["starts"][list(starts[path].rows) if path in starts else []] = True
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
    """`drawn` over those of the `nights` that `frame` holds (by default every one the system's perflogs hold),
    from their kept levels, the spreads judged against the last of them."""
    held = nights_held(frame, system, nights) if frame is not None else nights
    if frame is None and held:
        windows = windows_of([*accepted["runs"], *held])
        frame = load([PERFLOGS / system], warn=None, windows=windows).frame
        held = nights_held(frame, system, held)
    table = kept_levels(system, accepted, held) if held else pd.DataFrame()
    if table.empty:
        return pd.DataFrame(columns=[*store.LEVEL_COLUMNS, "starts"]).astype({"starts": bool}), {}, []
    last = run_rows(frame, system, [held[-1]])
    paths = verdict.judge(frame, accepted_masks(frame, system, accepted), last).paths
    spreads = dict(zip(paths["path"], paths["spread_pct"] / 100))
    stamps = [r["stamp"] for r in accepted["runs"]]
    starts = changepoints.found_starts(table, spreads, stamps)
    return drawn(table, spreads, changepoints.changes(table, spreads, stamps, starts), starts)


def nights_held(frame: pd.DataFrame, system: str, nights: list[dict]) -> list[dict]:
    """The `nights` that have a row of `system` in `frame`: by its rows' sorted times, not a mask a night."""
    rows = frame[frame["system"] == system]
    times = np.sort(rows["time"].dropna().dt.tz_convert(None).to_numpy(dtype="datetime64[us]"))
    held = []
    for night in nights:
        start, end = (np.datetime64(pd.Timestamp(night[k], tz="UTC").tz_convert(None), "us") for k in ("start", "end"))
        first, last = np.searchsorted(times, start, "left"), np.searchsorted(times, end, "right")
        if last > first and (not night.get("node") or run_rows(rows, system, [night]).any()):
            held.append(night)
    return held


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
