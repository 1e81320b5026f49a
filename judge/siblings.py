"""Each GPU against its siblings in the same run: is one GPU's path slower
than the same path of the node's other GPUs tonight?

The verdict (judge/verdict.py) holds a night to the accepted runs of its
kind of node; that needs a baseline, and a busy host (another tenant's DMA,
a night's thermal state) moves every GPU of the node alike. The GPUs of one
node measured in one run share both, so a GPU that lags its siblings is the
GPU's own: a link trained down, a GPU throttled, a process of someone else
on it. This is how DCGM's diagnostics and SuperBench find a bad GPU in a
fleet, inside one node, and it works on a node's first night.

A figure's siblings are the figures of the same check and case whose names
differ only in their GPU indices (``gpu1_h2d_numa0_ce`` beside
``gpu0_h2d_numa0_ce``, ``gpu1_read_gpu0_ce`` beside ``gpu0_read_gpu1_ce``).
For each, on the logarithm of the run medians, worse positive:

- **Deviation.** Its distance from the median of its siblings (the others
  of its group, left out as it is). With accepted runs of the node's kind,
  less their median deviation there: a GPU that always sits 2% behind its
  sibling (a longer PCIe path, a slower slot) is the node as accepted, not
  a fault.
- **Lagging.** A path lags where the median deviation of its figures is
  beyond the path's floor (systems/paths/paths.yaml: the smallest move
  worth an alarm) and beyond Z standard errors of that difference, the
  standard error from the samples' spread inside the run (and the accepted
  deviations' spread): one noisy run of five samples does not lag.
- **As accepted.** Where the night is also judged against the accepted
  runs, a path whose own change there is not worse by its floor does not
  lag (`as_accepted`): its siblings moved, not it. On a clean night of four
  H200s, GPUs 0 and 2 reached their peers 6% sooner than in every accepted
  run; GPUs 1 and 3, as accepted, then lagged them by 6%, through the rerun
  and the later measure, and a healthy node was to be drained.
- **Confirmed.** As the verdict's flags are, by a rerun of the path's cases
  (`confirm`): a lag the rerun does not show again is transient.

Pure functions over the per-run table of the verdict (`verdict.run_values`
with `verdict.attach_paths`); no ReFrame, no files.
"""

from __future__ import annotations

import math
import re
from statistics import NormalDist

import numpy as np
import pandas as pd

from experiments.keys import CASE_KEY
from judge.explain import worse_pct
from judge.verdict import CONFIRM_ALPHA, CV_FLOOR, qn_scale

#: What a GPU's path against its siblings can be: as its siblings, behind them, or behind them and not when
#: measured again (each a finding of systems/findings/codes.yaml).
VERDICTS = ("pass", "lagging", "transient")
#: A lag must stand this many standard errors beyond the floor.
Z = 3.0
#: The standard error of a median of n samples, per standard deviation over sqrt(n).
MEDIAN_SE = math.sqrt(math.pi / 2)
#: A rerun confirms a lag as the nightly's rerun confirms a move (judge/verdict.py's
#: confirm): behind beyond the floor again, at CONFIRM_ALPHA for that path alone
#: (one-sided), not by passing the first run's test of every path again.
Z_CONFIRM = NormalDist().inv_cdf(1 - CONFIRM_ALPHA)

_GPU_IN_FIGURE = re.compile(r"gpu(\d+)")

COLUMNS = [
    "path",
    "kind",
    "gpus",
    "verdict",
    "vs_siblings_pct",
    "accepted_vs_siblings_pct",
    "floor_pct",
    "z",
    "siblings",
    "figures",
    "reason",
    "as_accepted",
    "cases",
]


def sibling_group(figure: str) -> tuple[str, tuple[int, ...]] | None:
    """'gpu1_read_gpu0_ce' -> ('gpu*_read_gpu*_ce', (1, 0)); None for a figure of no GPU."""
    gpus = tuple(int(g) for g in _GPU_IN_FIGURE.findall(figure))
    return (_GPU_IN_FIGURE.sub("gpu*", figure), gpus) if gpus else None


def deviations(table: pd.DataFrame) -> pd.DataFrame:
    """Per run and figure with siblings: its worse-oriented log deviation from
    the median of its siblings' run medians, and that difference's standard
    error from the samples' spread inside the run. `table`: the verdict's
    per-run table with paths (judged figures only: a path, a direction, no yardstick)."""
    rows = table[(table["path"] != "") & (table["yardstick"] == "") & (table["better"] != "")]
    rows = rows[np.isfinite(rows["value"].to_numpy(float)) & (rows["value"] > 0)]
    found = [(i, sibling_group(f)) for i, f in zip(rows.index, rows["figure"])]
    keyed = rows.loc[[i for i, g in found if g]].assign(
        group=[g[0] for _, g in found if g], gpus=[g[1] for _, g in found if g]
    )
    parts = []
    # Siblings are of one run, case, environment and node: never a GPU's own figure in another build.
    for _, group in keyed.groupby(["run", *_case_key(keyed), "group"], sort=False):
        if len(group) < 2:
            continue
        sign = np.where(group["better"] == "higher", -1.0, 1.0)
        logs = sign * np.log(group["value"].to_numpy(float))
        # A run's spread counts as CV_FLOOR at least: one sample, or identical ones, are not a noiseless run.
        cv = np.maximum(np.nan_to_num(group["cv"].to_numpy(float)), CV_FLOOR)
        variance = cv**2 / np.maximum(group["n"].to_numpy(float), 1)
        for k, index in enumerate(group.index):
            others = np.delete(np.arange(len(group)), k)
            behind = logs[k] - float(np.median(logs[others]))
            se = MEDIAN_SE * math.sqrt(variance[k] + float(np.median(variance[others])) / len(others))
            parts.append({"index": index, "behind": behind, "se": se, "siblings": len(others)})
    if not parts:
        return keyed.iloc[0:0].assign(behind=[], se=[], siblings=[])
    found = pd.DataFrame(parts).set_index("index")
    return keyed.loc[found.index].join(found)


def judge(table: pd.DataFrame, tonight: str = "tonight", z: float = Z) -> pd.DataFrame:
    """Tonight's paths against their siblings (COLUMNS), with the accepted
    runs of the table (every run but `tonight`) as the node's usual deviation
    where there are any; an empty frame where no path has siblings."""
    found = deviations(table)
    if found.empty or not (found["run"] == tonight).any():
        return pd.DataFrame(columns=COLUMNS)
    night, accepted = found[found["run"] == tonight], found[found["run"] != tonight]
    key = [*_case_key(found), "figure"]
    usual = accepted.groupby(key)["behind"].agg(["median", _qn_or_zero, "size"])
    rows = []
    for path, figures in night.groupby("path", sort=True):
        behind, se, before = [], [], []
        for row in figures.to_dict("records"):
            index = tuple(row[k] for k in key)
            base = usual.loc[index] if index in usual.index else None
            shift = float(base["median"]) if base is not None else 0.0
            spread = float(base["_qn_or_zero"]) ** 2 / base["size"] if base is not None else 0.0
            behind.append(row["behind"] - shift)
            se.append(math.sqrt(row["se"] ** 2 + spread))
            before.append(shift if base is not None else math.nan)
        rows.append(_path_row(path, figures, np.median(behind), np.median(se), before, z))
    return pd.DataFrame(rows, columns=COLUMNS)


def _case_key(table: pd.DataFrame) -> list[str]:
    """The columns that make a case on a node (experiments/keys.py), of those the table has."""
    return [k for k in CASE_KEY if k in table.columns]


def _qn_or_zero(values: pd.Series) -> float:
    return float(qn_scale(values.to_numpy(float))) if len(values) > 1 else 0.0


def _path_row(path: str, figures: pd.DataFrame, behind: float, se: float, before: list, z: float) -> dict:
    floor = float(figures["floor"].iloc[0])
    margin = math.log1p(floor)
    score = (behind - margin) / se if se > 0 else (math.inf if behind > margin else -math.inf)
    lags = behind > margin and score > z
    accepted = [b for b in before if b == b]
    gpus = sorted({g for gpus in figures["gpus"] for g in gpus})
    rates = figures["better"].iloc[0] == "higher"
    return {
        "path": path,
        "kind": figures["kind"].iloc[0],
        "gpus": " ".join(map(str, gpus)),
        "verdict": "lagging" if lags else "pass",
        "vs_siblings_pct": _change_pct(behind, rates),
        "accepted_vs_siblings_pct": _change_pct(float(np.median(accepted)), rates) if accepted else math.nan,
        "floor_pct": floor * 100,
        "z": score,
        "siblings": int(figures["siblings"].max()),
        "figures": " ".join(sorted(figures["figure"])),
        "cases": sorted({(t, c, e) for t, c, e in figures[["test", "case", "environ"]].itertuples(index=False)}),
        "reason": "" if lags else ("within the floor" if behind <= margin else f"within {z:g} standard errors"),
        "as_accepted": False,
    }


def _change_pct(behind: float, rates: bool) -> float:
    """A worse-oriented log deviation as a percent change of the values: a
    rate behind its siblings is below theirs, a time above."""
    return (math.exp(-behind) - 1) * 100 if rates else (math.exp(behind) - 1) * 100


def lagging(findings: pd.DataFrame) -> list[str]:
    """The lagging paths' names."""
    return sorted(findings.loc[findings["verdict"] == "lagging", "path"]) if not findings.empty else []


def cases_of_paths(findings: pd.DataFrame, paths: list[str]) -> pd.DataFrame:
    """The (test, case, environ) of the given paths' figures and their siblings': what a rerun must run."""
    rows = findings[findings["path"].isin(paths)] if not findings.empty else findings
    found = sorted({case for cases in rows.get("cases", []) for case in cases})
    return pd.DataFrame(found, columns=["test", "case", "environ"])


#: The verdicts against the accepted runs under which a path can be as accepted.
_AS_ACCEPTED = ("pass", "improved")


def held_as_accepted(findings: pd.DataFrame) -> pd.DataFrame:
    """The rows behind their siblings that `as_accepted` passed (the night's log and run.json still name them)."""
    if findings.empty or "as_accepted" not in findings:
        return findings.iloc[0:0]
    return findings[findings["as_accepted"].astype(bool)]


def as_accepted(findings: pd.DataFrame, paths: pd.DataFrame | None) -> pd.DataFrame:
    """`findings` with each lagging path that the verdict against the
    accepted runs (`paths`, verdict.Verdict.paths; None without a baseline)
    finds not worse by its floor passed: the GPU measured as accepted, and
    the lag is its siblings' move (an improvement, or moves each within the
    floor), not a fault of this GPU. The siblings' rule alone cannot tell
    which side moved."""
    if findings.empty or paths is None or paths.empty:
        return findings
    findings = findings.copy()
    own = paths.set_index("path")
    for index in findings.index[findings["verdict"] == "lagging"]:
        path = findings.loc[index, "path"]
        if path not in own.index or own.loc[path, "verdict"] not in _AS_ACCEPTED:
            continue
        worse = float(worse_pct(float(own.loc[path, "change_pct"]), str(own.loc[path, "better"])))
        if not worse < float(own.loc[path, "floor_pct"]):  # NaN either side: not shown as accepted
            continue
        findings.loc[index, ["verdict", "as_accepted"]] = ["pass", True]
        findings.loc[index, "reason"] = (
            f"as accepted: {worse:+.1f}% worse than the accepted runs (floor {own.loc[path, 'floor_pct']:g}%), "
            "so its siblings moved, not it"
        )
    return findings


def confirm(first: pd.DataFrame, rerun: pd.DataFrame, by: str = "rerun") -> pd.DataFrame:
    """The first run's findings with each lagging path confirmed by the rerun
    (behind beyond the floor there too, at Z_CONFIRM standard errors) or
    'transient' (it was measured and was not); one the rerun did not measure
    (or could not score) stays lagging, unconfirmed."""
    findings = first.copy()
    again = rerun.set_index("path") if not rerun.empty else pd.DataFrame(columns=COLUMNS).set_index("path")
    findings[f"{by}_vs_siblings_pct"] = findings["path"].map(again["vs_siblings_pct"]) if not findings.empty else []
    for index in findings.index[findings["verdict"] == "lagging"]:
        path = findings.loc[index, "path"]
        if path not in again.index or math.isnan(again.loc[path, "z"]):
            # Not measured, or measured and not scored: the lag stands, unconfirmed (as the nightly's).
            why = f"not measured by the {by}" if path not in again.index else f"not scored by the {by}"
            findings.loc[index, "reason"] = _join(findings.loc[index, "reason"], why)
        elif again.loc[path, "as_accepted"]:
            # Measured again as accepted (its own path within the floor there): its siblings moved, not it.
            findings.loc[index, ["verdict", "as_accepted"]] = ["pass", True]
            findings.loc[index, "reason"] = _join(findings.loc[index, "reason"], f"as accepted in the {by}")
        elif again.loc[path, "z"] < Z_CONFIRM:
            findings.loc[index, "verdict"] = "transient"
            findings.loc[index, "reason"] = _join(findings.loc[index, "reason"], f"not behind its siblings in the {by}")
    return findings


def line(row) -> str:
    """'host link h2d of GPU 1, ce: -20.1% against its 1 sibling(s) (accepted: -0.4%; floor 3%, z 9.1)'."""
    text = f"{row.path}: {row.vs_siblings_pct:+.1f}% against its {row.siblings} sibling(s)"
    usual = row.accepted_vs_siblings_pct
    details = [f"accepted: {usual:+.1f}%"] if usual == usual else []
    details += [f"floor {row.floor_pct:.0f}%", f"z {row.z:.1f}"]
    for key in ("rerun", "later"):
        value = getattr(row, f"{key}_vs_siblings_pct", math.nan)
        if value == value:
            details.append(f"{key} {value:+.1f}%")
    return f"{text} ({'; '.join(details)})" + (f"; {row.reason}" if row.reason else "")


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if isinstance(p, str) and p)
