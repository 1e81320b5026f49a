"""Rows of the tidy table (reports/load.py) chosen: by a field's value, glob,
version or time range, and by the windows of a run (a night, its reruns).
Pure functions over tables, as the judges that use them."""

from __future__ import annotations

import fnmatch

import numpy as np
import pandas as pd

#: The reruns a night may have (run.json's windows), in the order they run:
#: the rerun minutes after the run, and on a shared host one later still.
RERUNS = ("rerun", "later")


def _version_pattern(pattern: str) -> str:
    """'570.x' -> '570.*': 'x' components of a version are wildcards."""
    return ".".join("*" if part == "x" else part for part in pattern.split("."))


def select_mask(frame: pd.DataFrame, by: str, spec: str) -> pd.Series:
    """Which rows' `by` field matches `spec`.

    For ``time`` (or ``date``): a range 'FROM..TO' of ISO dates or times,
    either end open; a bare date is that whole day. Otherwise the value
    itself, a glob ('570.*'), 'x' as a version wildcard ('570.x'), or a
    version prefix ('580' matches '580.159.04').
    """
    if by in ("time", "date"):
        start, sep, end = spec.partition("..")
        times = frame["time"]
        keep = pd.Series(True, index=frame.index)
        if not sep:
            end = start
        if start:
            keep &= times >= pd.Timestamp(start, tz="UTC")
        if end:
            stop = pd.Timestamp(end, tz="UTC")
            if len(end) <= 10:  # a date: through the end of that day
                keep &= times < stop + pd.Timedelta(days=1)
            else:
                keep &= times <= stop
        return keep
    if by not in frame:
        raise KeyError(f"no field {by!r} in the table; fields: {', '.join(frame.columns)}")
    values = frame[by].astype(str)
    pattern = _version_pattern(spec)
    if any(c in pattern for c in "*?["):
        return values.map(lambda v: fnmatch.fnmatchcase(v, pattern)).astype(bool)
    return (values == spec) | values.str.startswith(spec + ".")


def select(frame: pd.DataFrame, by: str, spec: str) -> pd.DataFrame:
    return frame[select_mask(frame, by, spec)]


def runs_without_rows(frame: pd.DataFrame, system: str, runs: list[dict]) -> list[str]:
    """The stamps of `runs` that no row of `frame` (the system's perflogs) falls in: gone, or never written."""
    return [run["stamp"] for run in runs if not run_rows(frame, system, [run]).any()]


def run_rows(frame: pd.DataFrame, system: str, runs: list[dict]) -> pd.Series:
    """Which rows of `frame` the given runs of `system` logged."""
    mask = np.zeros(len(frame), dtype=bool)
    for run in runs:
        window = select_mask(frame, "time", f"{run['start']}..{run['end']}").to_numpy()
        if run.get("node"):
            # One node of a partition's night (runner/partition.py) is a run of its own,
            # by its short name: ReFrame's local scheduler may log a host's full one.
            window = _within(
                window, frame["node"], lambda nodes, name=run["node"]: nodes.astype(str).str.split(".").str[0] == name
            )
        mask |= window
    return pd.Series(_within(mask, frame["system"], lambda systems: systems == system), index=frame.index)


def _within(mask: np.ndarray, column: pd.Series, test) -> np.ndarray:
    """`mask` narrowed by `test` of `column`, which is applied to the rows the
    mask holds alone: a string compare of the whole history, run by run (23 ms
    for a system's, far more for a node's short name), was most of the time
    the nightly's history took, and a partition's thousands of node-runs
    would each have split every node name again."""
    inside = np.flatnonzero(mask)
    out = np.zeros(len(mask), dtype=bool)
    out[inside] = np.asarray(test(column.iloc[inside]), dtype=bool)
    return out


def windows_of(runs: list[dict]) -> list[tuple[str, str]]:
    """The time windows (from, to) that the rows of `runs` fall in, their reruns' included: what a night, a
    baseline or a history is read from, rather than every record of the system."""
    windows = []
    for run in runs:
        for window in [run, *(run[key] for key in RERUNS if isinstance(run.get(key), dict))]:
            if _readable(window.get("start")) and _readable(window.get("end")):  # a damaged run.json is named
                windows.append((str(window["start"]), str(window["end"])))  # where it is read, not here
    return sorted(set(windows))


def _readable(when) -> bool:
    """Whether a run's start or end is a time (one cut or damaged reads no rows: run_rows finds none)."""
    try:
        return when is not None and not pd.isna(pd.Timestamp(str(when), tz="UTC"))
    except (ValueError, TypeError):
        return False


def accepted_masks(frame: pd.DataFrame, system: str, accepted: dict) -> dict[str, pd.Series]:
    """Each accepted run's rows of `frame`, by its stamp."""
    return {r["stamp"]: run_rows(frame, system, [r]) for r in accepted["runs"]}
