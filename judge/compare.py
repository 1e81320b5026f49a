"""Two sets of runs, chosen by one field of the table, judged by the verdict by path.

The sets are chosen by one field (driver_version, cuda_runtime_version,
environ, node, time...). Each set's records are cut into runs where its
record times leave a gap of RUN_GAP_S or more (a ReFrame session logs its
cases back to back), and the runs are judged by the verdict
(judge/verdict.py), the one judge of the suite:

- as many runs a side as the verdict needs, or more, and the same number:
  paired in time order (`verdict.judge_pairs`), the design `./suite
  upgrade` runs (old, new, old, new, ...);
- otherwise the new side's runs, one or more, judged as one (their median)
  against the base side's, as the nightly judges a night against its
  accepted runs (`verdict.judge`): the nights since a driver upgrade against
  the runs accepted before it. Fewer than MIN_RUNS base runs leave every
  figure unjudged, saying so.

A figure or path the verdict cannot judge says why and is never passed.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from experiments.keys import FIGURE_KEY
from judge import verdict
from judge.select import select_mask
from judge.status import FAILED, MOVED, UNJUDGED
from systems.toolkits import base_environment

#: A gap this long between one side's records starts a new run of that side.
RUN_GAP_S = 60


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


@dataclass
class Comparison:
    """The verdict of two sets of runs, and the design that judged them."""

    design: str
    result: verdict.Verdict


def runs_of(frame: pd.DataFrame, mask: pd.Series) -> list[pd.Series]:
    """The runs among the masked rows, oldest first: cut where their times leave a gap of RUN_GAP_S or more."""
    times = frame.loc[mask, "time"].sort_values()
    if times.empty:
        return []
    starts = times[times.diff().dt.total_seconds().fillna(RUN_GAP_S) >= RUN_GAP_S]
    bounds = [*starts, times.iloc[-1] + pd.Timedelta(seconds=1)]
    return [mask & (frame["time"] >= lo) & (frame["time"] < hi) for lo, hi in zip(bounds, bounds[1:])]


def compare(frame: pd.DataFrame, by: str, base: str, new: str, alpha: float = 0.05) -> Comparison:
    """The verdict by path of the `new` set against the `base` set (see the module's design)."""
    base_mask, new_mask = select_mask(frame, by, base), select_mask(frame, by, new)
    overlap = base_mask & new_mask
    if overlap.any():
        raise ValueError(f"{int(overlap.sum())} values are on both sides ({by} {base!r} and {new!r})")
    if by == "cuda_runtime_version":
        # A runtime's twin of an environment (gnu-rt13_5) is compared with the environment (gnu).
        frame = frame.assign(environ=frame["environ"].map(lambda e: base_environment(e) if isinstance(e, str) else e))
    kept = comparison_key(by)
    # What the sets differ in by choice leaves the figure's key: the two sides' figures then meet.
    frame = frame.assign(**{k: "" for k in FIGURE_KEY if k not in kept and k in frame.columns})
    olds, news = runs_of(frame, base_mask), runs_of(frame, new_mask)
    if len(olds) == len(news) >= verdict.MIN_RUNS:
        design = f"{len(olds)} pairs of runs, paired in time order"
        return Comparison(design, verdict.judge_pairs(frame, list(zip(olds, news)), alpha))
    if not news:
        raise ValueError(f"no run has {by} {new!r}")
    what = "one new run" if len(news) == 1 else f"{len(news)} new runs judged as one (their median)"
    design = f"{what} against {len(olds)} base run(s), as a night against its accepted runs"
    return Comparison(design, verdict.judge(frame, {f"base{i}": m for i, m in enumerate(olds, 1)}, news, alpha))


def status_of(result: verdict.Verdict) -> int:
    """A comparison's exit status, with the nightly's meanings: 1 a broken
    measurement, 2 a path moved or unstable, 3 a path not judged, else 0."""
    if (result.figures["verdict"] == "broken").any():
        return FAILED
    if result.paths["verdict"].isin(verdict.FLAGGED).any():
        return MOVED
    if result.paths.empty or (result.paths["verdict"] == "unjudged").any():
        return UNJUDGED
    return 0


def path_lines(paths: pd.DataFrame) -> list[str]:
    """Per path: its verdict, the change and its interval where it has one, the floor, the reason."""
    lines = []
    for row in paths.sort_values(["verdict", "path"]).to_dict("records"):
        if row["verdict"] == "yardstick":
            continue
        change = f"{row['change_pct']:+.1f}%" if pd.notna(row["change_pct"]) else "-"
        if pd.notna(row.get("low_pct")):
            change += f" [{row['low_pct']:+.1f}, {row['high_pct']:+.1f}]"
        reason = row["reason"] if isinstance(row["reason"], str) else ""
        lines.append(
            f"{row['verdict'].upper():10} {row['path']}: {change} (floor {row['floor_pct']:g}%) {reason}".rstrip()
        )
    return lines


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
