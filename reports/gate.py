"""The gate: did a run's headline figures move against a baseline?

Per figure (experiments/keys.py's key: check, case, environment, node
facts, figure), the run's samples are tested against the baseline's for a
change beyond the figure's practical threshold: the tolerance its reference
gives, which the acceptance derives from the spread between runs on
separately started nodes. The test is one-sided, on the logarithms of the
samples (a change is a ratio), by Student's t with the variance of both
sides pooled: one figure measured by the same program on the same kind of
node has one noise level, and pooling its estimate gives the test the
degrees of freedom that five samples a side lack (Welch's t, which does
not pool, missed a 7% drop in 1% noise one night in ten where this misses
one in a hundred; tests/test_gate.py). A regression is flagged where the run
is worse than the baseline by more than the threshold with confidence,
after Holm's correction for the number of figures tested (so that a night
of pure noise flags none with probability at least 1 - alpha).

A figure the gate cannot judge is never passed: it is 'unjudged', with the
reason (no baseline, no samples in the run, too few samples, no threshold,
a unit without a direction), and the caller decides what that means.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.stats import ttest_ind
from statsmodels.stats.multitest import multipletests

from experiments.keys import FIGURE_KEY, direction  # noqa: F401  (direction: for callers)

#: Fewer samples than this on either side cannot be judged.
MIN_SAMPLES = 3

VERDICTS = ("pass", "regression", "improvement", "unjudged")


def bounds(better: str, threshold: float) -> tuple[float, float]:
    """The ratios new/base beyond which a figure is worse, and better, by more
    than `threshold`: a rate worse below 1 - t, a time worse above 1 + t (as
    their references bound them), each better beyond the mirror bound."""
    if better == "higher":
        return max(1e-9, 1 - threshold), 1 + threshold
    return 1 + threshold, max(1e-9, 1 - threshold)


def margin_p_value(base: np.ndarray, new: np.ndarray, better: str, threshold: float, worse: bool = True) -> float:
    """One-sided p-value that `new` is worse (or, with worse=False, better)
    than `base` by more than `threshold` (a fraction): Student's t on the logs
    of the samples, the baseline's shifted by the bound's ratio."""
    worse_ratio, better_ratio = bounds(better, threshold)
    ratio = worse_ratio if worse else better_ratio
    # The new samples beyond base * ratio: below it for a worse rate or a better time.
    alternative = "less" if (better == "higher") == worse else "greater"
    if better == "lower" and not worse and threshold >= 1:
        return 1.0  # a time cannot fall by 100% or more
    log_new, shifted = np.log(new), np.log(base) + math.log(ratio)
    if np.var(log_new) == 0 and np.var(shifted) == 0:  # no spread at all: the means decide
        gap = log_new.mean() - shifted.mean()
        return 0.0 if (gap < 0 if alternative == "less" else gap > 0) else 1.0
    return float(ttest_ind(log_new, shifted, equal_var=True, alternative=alternative).pvalue)


def practical_threshold(rows: pd.DataFrame, better: str | None) -> float | None:
    """The figure's threshold from the tolerance its reference gave (as logged
    with the figure: lower for rates, upper for times), or None."""
    column = "lower_thres" if better == "higher" else "upper_thres"
    values = pd.to_numeric(rows[column], errors="coerce").dropna()
    values = values[values != 0]
    return abs(float(values.iloc[-1])) if not values.empty else None


def judge(
    frame: pd.DataFrame,
    base: pd.Series,
    new: pd.Series,
    alpha: float = 0.05,
    threshold: float | None = None,
    key: tuple = FIGURE_KEY,
) -> pd.DataFrame:
    """One row per headline figure found on either side.

    `base` and `new` are boolean masks of `frame` (load.py's table) choosing
    the two sides; `threshold` (a fraction) replaces every figure's own.
    """
    frame = frame.assign(_base=base, _new=new)
    frame = frame[frame["_base"] | frame["_new"]]
    key = [k for k in key if k in frame.columns]
    joined = pd.Series("", index=frame.index, dtype=object)
    for k in key:
        joined = joined + frame[k].fillna("").astype(str) + "\x1f"
    frame = frame.assign(_key=joined.str[:-1])
    # Headline figures are those logged with samples, on either side; the
    # figure's own rows carry the thresholds its reference gave.
    is_sample = frame["sample"].notna()
    figure_rows = dict(tuple(frame[~is_sample].groupby("_key")))
    rows = []
    for name, group in frame[is_sample].groupby("_key"):
        info = dict(zip(key, name.split("\x1f")))
        rows.append(_judge_one(info, group, figure_rows.get(name, frame.iloc[0:0]), threshold))
    result = pd.DataFrame(rows, columns=[*key, *_COLUMNS])
    return _correct(result, alpha)


_COLUMNS = [
    "better",
    "n_base",
    "n_new",
    "median_base",
    "median_new",
    "change_pct",
    "threshold_pct",
    "p_value",
    "p_improved",
    "verdict",
    "reason",
]


def _judge_one(info: dict, samples: pd.DataFrame, figure_rows: pd.DataFrame, threshold: float | None) -> dict:
    base = samples.loc[samples["_base"], "value"].dropna().to_numpy(float)
    new = samples.loc[samples["_new"], "value"].dropna().to_numpy(float)
    better = direction(info.get("unit", ""))
    limit = threshold if threshold is not None else practical_threshold(figure_rows[figure_rows["_new"]], better)
    if limit is None and threshold is None:
        limit = practical_threshold(figure_rows[figure_rows["_base"]], better)
    median_base = float(np.median(base)) if base.size else math.nan
    median_new = float(np.median(new)) if new.size else math.nan
    row = {
        **info,
        "better": better or "?",
        "n_base": base.size,
        "n_new": new.size,
        "median_base": median_base,
        "median_new": median_new,
        "change_pct": (median_new / median_base - 1) * 100 if base.size and new.size and median_base else math.nan,
        "threshold_pct": limit * 100 if limit is not None else math.nan,
        "p_value": math.nan,
        "p_improved": math.nan,
        "verdict": "unjudged",
        "reason": "",
    }
    reason = _why_unjudged(base, new, better, limit, info.get("unit", ""))
    if reason:
        row["reason"] = reason
        return row
    row["p_value"] = margin_p_value(base, new, better, limit)
    row["p_improved"] = margin_p_value(base, new, better, limit, worse=False)
    if not (math.isfinite(row["p_value"]) and math.isfinite(row["p_improved"])):
        row["reason"] = "the test gave no p-value (samples without spread on one side only?)"
        return row
    row["verdict"] = "pass"
    return row


def _why_unjudged(base, new, better, limit, unit) -> str:
    if not base.size:
        return "no baseline: the accepted runs have no samples of this figure"
    if not new.size:
        return "not measured in this run (the case failed, was skipped or is gone)"
    if min(base.size, new.size) < MIN_SAMPLES:
        return (
            f"too few samples ({base.size} in the baseline, {new.size} in the run; {MIN_SAMPLES} needed on each side)"
        )
    if better is None:
        return f"unit {unit!r} says neither 'higher is better' nor 'lower is better'"
    if limit is None:
        return "no practical threshold: no reference gives this figure a tolerance"
    if not (np.isfinite(base).all() and np.isfinite(new).all()):
        return "values that are not finite numbers (a zero time, a failed parse?) cannot be judged"
    if (base <= 0).any() or (new <= 0).any():
        return "values that are not positive cannot be compared as ratios"
    return ""


def _correct(result: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """Holm's correction over every judged figure, for regressions and improvements apart."""
    result = result.copy()
    judged = result["verdict"] == "pass"
    result["p_adjusted"] = math.nan
    if judged.any():
        worse, p_worse, _, _ = multipletests(result.loc[judged, "p_value"], alpha=alpha, method="holm")
        better, _, _, _ = multipletests(result.loc[judged, "p_improved"], alpha=alpha, method="holm")
        result.loc[judged, "p_adjusted"] = p_worse
        index = result.index[judged]
        result.loc[index[worse], "verdict"] = "regression"
        result.loc[index[better & ~worse], "verdict"] = "improvement"
    return result


def summary(result: pd.DataFrame) -> dict:
    """How many headline figures were judged, flagged, found better, and could not be judged."""
    counts = result["verdict"].value_counts()
    return {
        "figures": int(len(result)),
        "judged": int(len(result) - counts.get("unjudged", 0)),
        "flagged": int(counts.get("regression", 0)),
        "improved": int(counts.get("improvement", 0)),
        "unjudged": int(counts.get("unjudged", 0)),
    }


def summary_line(result: pd.DataFrame) -> str:
    s = summary(result)
    return (
        f"{s['figures']} headline figures: {s['judged']} judged, {s['flagged']} flagged as regressions, "
        f"{s['improved']} improved, {s['unjudged']} could not be judged"
    )
