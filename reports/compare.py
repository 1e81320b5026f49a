"""Two sets of runs, per test case and performance variable: did anything move?

The sets are chosen by one field of the table (driver_version, cuda_version,
node, time...). For each case both medians, the relative change, and a
Mann-Whitney U test (SciPy) of the repeated runs on either side: a change
counts only where it is beyond run-to-run noise. Where the runs are too few
for the test to reach the significance level at all, the verdict says
'insufficient data' rather than guess.
"""

from __future__ import annotations

import fnmatch
import math
import re

import pandas as pd
from scipy.stats import mannwhitneyu

#: Fields that identify a case; the field the sets are chosen by is left out.
CASE_FIELDS = ["system", "partition", "environ", "test", "params", "perf_var", "unit"]

#: Each check's headline figures and a few anchor points: what references
#: and per-node tables show, rather than every sample of a sweep.
HEADLINE_VARS = (
    r"first_run_bw|steady_bw|copy_engine_bw|(read|write)_bw_node\d+"
    r"|(kernel|total)_us_i[47]_o4|lat_us_\w+_(8|4096|65536|1048576)"
    r"|plateau_gbs|seg64_gbs|best_gbs|link_gbs|bandwidth|slowdown"
)

_TIME_UNITS = {"s", "ms", "us", "µs", "ns", "min", "h", "cycles"}


def better_direction(unit: str, perf_var: str = "") -> str:
    """'higher' for rates and fractions, 'lower' for times and latencies, else '?'."""
    unit = (unit or "").strip()
    name = (perf_var or "").lower()
    if unit in _TIME_UNITS or re.search(r"(latency|time|duration|slowdown)", name):
        return "lower"
    if (
        unit.endswith("/s")
        or unit in {"fraction", "%", "x", "speedup"}
        or re.search(r"(bw|bandwidth|throughput)", name)
    ):
        return "higher"
    return "?"


def _version_pattern(pattern: str) -> str:
    """'570.x' -> '570.*': 'x' components of a version are wildcards."""
    return ".".join("*" if part == "x" else part for part in pattern.split("."))


def select(frame: pd.DataFrame, by: str, spec: str) -> pd.DataFrame:
    """Rows whose `by` field matches `spec`.

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
                stop += pd.Timedelta(days=1)
                keep &= times < stop
            else:
                keep &= times <= stop
        return frame[keep]
    if by not in frame:
        raise KeyError(f"no field {by!r} in the table; fields: {', '.join(frame.columns)}")
    values = frame[by].astype(str)
    pattern = _version_pattern(spec)
    if any(c in pattern for c in "*?["):
        keep = values.map(lambda v: fnmatch.fnmatchcase(v, pattern))
    else:
        keep = (values == spec) | values.str.startswith(spec + ".")
    return frame[keep]


def min_p_value(n1: int, n2: int) -> float:
    """The smallest two-sided p-value an exact Mann-Whitney U test of n1 and n2 runs can give."""
    return min(1.0, 2.0 / math.comb(n1 + n2, n1))


def _verdict(base: pd.Series, new: pd.Series, direction: str, alpha: float) -> tuple[float | None, str]:
    if base.empty:
        return None, "only in new"
    if new.empty:
        return None, "only in base"
    if len(base) < 2 or len(new) < 2 or min_p_value(len(base), len(new)) > alpha:
        return None, "insufficient data"
    if base.nunique() == 1 and new.nunique() == 1 and base.iloc[0] == new.iloc[0]:
        return 1.0, "no significant change"
    p = float(mannwhitneyu(base, new, alternative="two-sided").pvalue)
    if p >= alpha:
        return p, "no significant change"
    worse = new.median() < base.median() if direction == "higher" else new.median() > base.median()
    if direction == "?":
        return p, "changed"
    return p, "regression" if worse else "improvement"


def compare(
    frame: pd.DataFrame,
    by: str,
    base: str,
    new: str,
    alpha: float = 0.05,
    threshold: float | None = None,
    case_fields: list[str] | None = None,
) -> pd.DataFrame:
    """One row per case and performance variable present on either side."""
    fields = list(case_fields or CASE_FIELDS)
    if by in fields:
        fields.remove(by)
    if by == "system":  # partitions and environments are named per system
        fields = [f for f in fields if f not in ("partition", "environ")]
    sides = {"base": select(frame, by, base), "new": select(frame, by, new)}
    both = pd.concat([sides["base"].assign(_side="base"), sides["new"].assign(_side="new")], ignore_index=True)
    both = both[both["value"].notna()]
    rows = []
    for key, group in both.groupby([both[f].fillna("") for f in fields], sort=True):
        key = key if isinstance(key, tuple) else (key,)
        base_values = group.loc[group["_side"] == "base", "value"]
        new_values = group.loc[group["_side"] == "new", "value"]
        info = dict(zip(fields, key))
        direction = better_direction(info.get("unit", ""), info.get("perf_var", ""))
        p, verdict = _verdict(base_values, new_values, direction, alpha)
        base_median = base_values.median() if not base_values.empty else math.nan
        new_median = new_values.median() if not new_values.empty else math.nan
        change = (new_median - base_median) / abs(base_median) * 100 if base_median else math.nan
        flagged = verdict == "regression" and threshold is not None and abs(change) >= threshold
        rows.append(
            {
                **info,
                "n_base": len(base_values),
                "n_new": len(new_values),
                "median_base": base_median,
                "median_new": new_median,
                "change_pct": change,
                "better": direction,
                "p_value": p,
                "verdict": verdict,
                "flagged": flagged,
            }
        )
    return pd.DataFrame(rows)


def pool(frame: pd.DataFrame, spec: str) -> pd.DataFrame:
    """'REGEX=NAME': performance variables matching REGEX become one, NAME.

    The reprex logs every kernel run as run1_bw..run5_bw; pooling runs 2..N
    ('run([2-9]|[1-9][0-9]+)_bw=steady_runs') makes each ReFrame run give
    several samples of the steady state; with groups, '(read|write)_bw_node(\\d+)_run\\d+=\\1_bw_node\\2_runs'
    pools each node's and operation's runs separately.
    """
    regex, sep, name = spec.rpartition("=")
    if not sep or not regex or not name:
        raise ValueError(f"--pool takes REGEX=NAME, not {spec!r}")
    names = frame["perf_var"].astype(str)
    matches = names.str.fullmatch(regex)
    # NAME may refer to REGEX's groups (\\1): one pooled variable per group value.
    pooled = frame[matches].assign(perf_var=names[matches].str.replace(f"^(?:{regex})$", name, regex=True))
    return pd.concat([frame, pooled], ignore_index=True)
