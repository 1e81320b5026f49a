"""Two sets of runs, chosen by one field of the table, judged figure by figure.

The sets are chosen by one field (driver_version, cuda_runtime_version,
node, time...); each headline figure's samples on either side go through
the gate (reports/gate.py): a one-sided test for a change beyond the
figure's practical threshold, with Holm's correction for the number of
figures. A figure that cannot be judged says why and is never passed.
"""

from __future__ import annotations

import fnmatch

import pandas as pd

from experiments.keys import FIGURE_KEY
from systems.toolkits import base_environment

from . import gate


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


#: Fields that a CUDA toolkit sets: each toolkit is an environment of its own,
#: so comparing them compares environments.
TOOLKIT_FIELDS = {"cuda_compiler"}


def comparison_key(by: str, key: tuple = FIGURE_KEY) -> tuple:
    """The figure key without the field the sets are chosen by (partitions
    and environments are named per system, so comparing systems drops them;
    compilers are environments, so comparing them drops the environment;
    runtimes are twins of one environment, see :func:`compare`)."""
    dropped = {by} | ({"partition", "environ"} if by == "system" else set())
    dropped |= {"environ"} if by in TOOLKIT_FIELDS else set()
    return tuple(k for k in key if k not in dropped)


def compare(
    frame: pd.DataFrame, by: str, base: str, new: str, alpha: float = 0.05, threshold: float | None = None
) -> pd.DataFrame:
    """The gate's verdict per headline figure; `threshold` in percent replaces every figure's own."""
    base_mask, new_mask = select_mask(frame, by, base), select_mask(frame, by, new)
    overlap = base_mask & new_mask
    if overlap.any():
        raise ValueError(f"{int(overlap.sum())} values are on both sides ({by} {base!r} and {new!r})")
    fraction = threshold / 100 if threshold is not None else None
    if by == "cuda_runtime_version":
        # A runtime's twin of an environment (gnu-rt13_5) is compared with the environment (gnu).
        frame = frame.assign(environ=frame["environ"].map(lambda e: base_environment(e) if isinstance(e, str) else e))
    return gate.judge(frame, base_mask, new_mask, alpha, fraction, comparison_key(by))


def pool(frame: pd.DataFrame, spec: str) -> pd.DataFrame:
    """'REGEX=NAME': the figures matching REGEX also become samples of one headline figure NAME.

    For ad hoc comparisons of records that predate samples, e.g. the
    reprex's per-run values of older perflogs: 'run([2-9])_bw=steady_runs'.
    With groups, NAME may refer to them ('(read|write)_bw_node(\\d+)_run\\d+=\\1_bw_node\\2').
    """
    regex, sep, name = spec.rpartition("=")
    if not sep or not regex or not name:
        raise ValueError(f"--pool takes REGEX=NAME, not {spec!r}")
    figures = frame["figure"].astype(str)
    matches = frame["sample"].isna() & figures.str.fullmatch(regex)
    pooled = frame[matches].copy()
    pooled["figure"] = figures[matches].str.replace(f"^(?:{regex})$", name, regex=True)
    pooled["sample"] = pooled.groupby(list(FIGURE_KEY)[:-2] + ["figure", "time"], dropna=False).cumcount() + 1
    pooled["perf_var"] = pooled["figure"] + ".s" + pooled["sample"].astype(str)
    return pd.concat([frame, pooled], ignore_index=True)
