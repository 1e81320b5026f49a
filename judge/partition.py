"""A partition's night: each node against its siblings of the same night,
and the partition against the accepted runs of its kind of node.

Nodes of one kind measured in the same hour share what drifts with time (a
busy shared host, the season's temperatures, a driver), so tonight's other
nodes are a tighter reference for one node than last month's runs, and a
change every node shows alike is one change of the partition, not N alarms.
Both questions are asked of one matrix, nodes by paths, all at once:

- **Levels.** For each node and headline figure, the worse-oriented log of
  its run median (a rate's fall, a time's rise is positive). A node's level
  on a path is the median over the path's figures of that log less the
  figure's median over the nodes (`siblings`), and less the figure's median
  over the accepted runs (`history`).
- **Node fault.** A node's sibling level against the median and the spread
  of the *other* nodes (left out as it is: a sick node does not pull its own
  reference). The spread is Qn with fewer than `MAD_FROM` others and the MAD
  of the whole column from then on (one node moves it by one order statistic
  at most), combined with the node's own standard error from its samples'
  spread. A node is behind where its deviation less the path's floor
  (systems/paths/paths.yaml) stands out against the statistic's null:
  below MAD_FROM others, the spread shrunk toward a prior: its kind of
  path's (fitted over the kind's paths, as the verdict's) joined by the
  path's own spread between the accepted runs, each worth what its runs
  are; the null simulated for Qn's small samples with that prior; Student's t with the
  MAD's effective degrees of freedom from MAD_FROM others on (`sibling_p`); Holm's
  correction is taken over every node and path judged. A partition of four
  nodes compares each with three others, so it names a node only far
  beyond them.
- **Fleet change.** A path whose median over the nodes moved against the
  accepted runs beyond the floor, by Student's t: the accepted runs' spread
  is how far a whole night may sit off their centre (tonight's nodes share
  their night), tonight's spread between nodes adds its median's error;
  the p-value is the larger of Student's t on the accepted nights' degrees
  of freedom (a partition's night accepted is one night however many nodes
  it gave; two nights at least) and the simulated null of so few runs'
  robust spread; Holm's correction is over the paths. A worse one is a change of the
  partition, reported once; a better one is an improvement.
- **Both.** A node behind its siblings on a path the whole partition moved on.
- **Confirmed.** As the nightly's flags are: the flagged nodes measure the
  flagged paths again (`with_rerun` puts those values in their place, the
  siblings' first ones kept) and a node stays behind only where the rerun
  agrees (`confirm`); where it does not, the cell is transient.

Pure functions over tables and matrices; no ReFrame, no files. Every step
is vectorised over nodes and paths: 4,608 nodes by 40 paths judge in about
a second (tests/test_partition.py).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np
import pandas as pd

from experiments.keys import FIGURE_KEY
from judge.siblings import MEDIAN_SE
from judge.verdict import (
    CONFIRM_ALPHA,
    CV_FLOOR,
    MIN_RUNS,
    MIN_SPREAD,
    Prior,
    fit_priors,
    holm,
    moderated,
    null_distribution,
    pool_step,
    qn_scale,
    qn_variance_moments,
)

#: From this many other nodes on, a path's spread between nodes is the MAD
#: of the column: Qn's small-sample factor is simulated per size, which is
#: cheap only for small ones, and with many nodes the MAD's lower efficiency
#: costs little (its standard error over ten values is 25% of the SD).
MAD_FROM = 10
#: The MAD of normal values over their SD.
MAD_NORMAL = NormalDist().inv_cdf(0.75)
#: The MAD's efficiency for normal values: its degrees of freedom per value.
MAD_EFFICIENCY = 0.37


#: Accepted nights a fleet change is judged against, at least: one says nothing of how nights differ.
MIN_NIGHTS = 2
#: Fewer other nodes than this and a node has no siblings to be judged against:
#: with one, no spread tells which of the two is behind.
MIN_SIBLINGS = 2


def _t_sf(t, df):
    """Student's t survival function: SciPy's stats, imported when a partition is judged (every
    command's parser imports this module, and scipy.stats takes most of a second to import)."""
    from scipy import stats

    return stats.t.sf(t, df)


class Cell(enum.StrEnum):
    """A node's verdict on one path."""

    PASS = "pass"
    NODE_FAULT = "node fault"  # behind its siblings tonight
    BOTH = "both"  # behind its siblings on a path the whole partition moved on
    NOT_MEASURED = "not measured"  # the other nodes measured it, this one did not
    UNJUDGED = "unjudged"  # too few siblings measured the path
    TRANSIENT = "transient"  # behind its siblings, but not when the node measured it again
    CONTENDED = "contended"  # behind its siblings while another process used its GPUs (judge/contention.py)


class Fleet(enum.StrEnum):
    """The partition's verdict on one path against the accepted runs."""

    PASS = "pass"
    CHANGE = "fleet change"  # every node moved the same way, for the worse
    IMPROVED = "improved"
    UNJUDGED = "unjudged"  # no accepted runs of the path, or too few


@dataclass
class Levels:
    """The matrices a partition is judged from: nodes by paths (worse
    positive, logs), and per path its floor, direction, kind and history."""

    siblings: pd.DataFrame  # log deviation from the figures' median over the nodes
    se: pd.DataFrame  # that level's standard error from the node's samples
    history: pd.DataFrame  # log deviation from the figures' median over the accepted runs
    history_spread: pd.Series  # the accepted runs' spread of the path level (Qn of their logs)
    history_runs: pd.Series  # how many accepted runs measured the path
    history_nights: pd.Series  # on how many nights (a partition's night accepted is one night of many runs)
    floor: pd.Series  # the smallest move worth an alarm, a fraction
    rates: pd.Series  # True where higher is better
    kind: pd.Series = field(default_factory=lambda: pd.Series(dtype=str))


@dataclass
class Partition:
    """The partition judged: `cells` one row per node and path, `fleet` one
    row per path, `nodes` one row per node (its worst path), and the nodes
    expected that did not report."""

    cells: pd.DataFrame
    fleet: pd.DataFrame
    nodes: pd.DataFrame
    silent: list[str]

    def faults(self) -> pd.DataFrame:
        """The cells of nodes behind their siblings, worst first."""
        bad = self.cells[self.cells["verdict"].isin([Cell.NODE_FAULT, Cell.BOTH])]
        return bad.sort_values("z", ascending=False)

    def fleet_changes(self) -> pd.DataFrame:
        return self.fleet[self.fleet["verdict"] == Fleet.CHANGE]

    def contended(self) -> pd.DataFrame:
        """The cells of nodes behind their siblings while another process used their GPUs: not drained."""
        return self.cells[self.cells["verdict"] == Cell.CONTENDED]

    def drain(self) -> list[str]:
        """The nodes to take out of service: behind their siblings, silent, or with paths not measured."""
        bad = self.nodes["state"].isin([NodeState.FAULT, NodeState.SILENT, NodeState.INCOMPLETE])
        return list(self.nodes.loc[bad, "node"])


class NodeState(enum.StrEnum):
    OK = "ok"
    FAULT = "behind its siblings"
    CONTENDED = "behind its siblings, its GPUs shared"  # another process explains every path it is behind on
    SILENT = "did not report"
    INCOMPLETE = "paths not measured"


# --- the tables ------------------------------------------------------------


def node_values(frame: pd.DataFrame, mask: pd.Series) -> pd.DataFrame:
    """One row per node and headline figure of the rows `mask` selects: the
    median of its samples, their robust CV (normalised MAD over median) and
    how many there were. Grouped once, not node by node."""
    samples = frame[mask & frame["sample"].notna()]
    key = ["node", *(k for k in FIGURE_KEY if k in frame.columns)]
    values = pd.to_numeric(samples["value"], errors="coerce")
    good = samples.assign(value=values)[np.isfinite(values) & (values > 0)]
    groups = [good[k].fillna("").astype(str) for k in key]
    median = good.groupby(groups, sort=False)["value"].transform("median")
    spread = (good["value"] - median).abs().groupby(groups, sort=False).median() / MAD_NORMAL
    table = good.groupby(groups, sort=False)["value"].agg(["median", "size"])
    table["cv"] = spread / table["median"]
    table = table.rename(columns={"median": "value", "size": "n"}).reset_index()
    return table.rename(columns=dict(enumerate(key)))


def _judged(values: pd.DataFrame) -> pd.DataFrame:
    """Rows the partition judges (a path, a direction, no yardstick, a value), with their worse-oriented logs."""
    rows = values[(values["path"] != "") & (values["yardstick"] == "") & (values["better"] != "")]
    rows = rows[np.isfinite(rows["value"].to_numpy(float)) & (rows["value"] > 0)]
    sign = np.where(rows["better"] == "higher", -1.0, 1.0)
    return rows.assign(worse=sign * np.log(rows["value"].to_numpy(float)))


def _figure_key(table: pd.DataFrame) -> list[str]:
    return [k for k in FIGURE_KEY if k in table.columns]


def levels(tonight: pd.DataFrame, accepted: pd.DataFrame | None = None) -> Levels:
    """The matrices of `tonight` (node_values with verdict.attach_paths)
    against `accepted` (verdict.run_values of the accepted runs with
    attach_paths; None: no history)."""
    rows = _judged(tonight)
    key = _figure_key(rows)
    rows = rows.assign(dev=rows["worse"] - rows.groupby(key)["worse"].transform("median"))
    cv = np.maximum(np.nan_to_num(rows["cv"].to_numpy(float)), CV_FLOOR)
    rows = rows.assign(se=MEDIAN_SE * cv / np.sqrt(np.maximum(rows["n"].to_numpy(float), 1)))
    by_cell = rows.groupby(["node", "path"])
    siblings = by_cell["dev"].median().unstack()
    se = by_cell["se"].median().unstack().reindex_like(siblings)
    paths = rows.groupby("path")
    floor, rates = paths["floor"].first(), paths["better"].first() == "higher"
    history, spread, runs, nights = _history(rows, accepted, key, siblings)
    return Levels(siblings, se, history, spread, runs, nights, floor, rates, paths["kind"].first())


def _history(rows: pd.DataFrame, accepted: pd.DataFrame | None, key: list[str], shape: pd.DataFrame):
    """Tonight's levels against the accepted runs' medians, and the accepted
    runs' spread, count and nights by path (a run 'STAMP@NODE' is one node of
    a partition's night STAMP)."""
    empty = pd.Series(np.nan, index=shape.columns)
    if accepted is None or accepted.empty:
        return shape * np.nan, empty, empty.fillna(0), empty.fillna(0)
    base = _judged(accepted)
    center = base.groupby(key)["worse"].median().rename("center")
    base = base.join(center, on=key)
    per_run = base.assign(dev=base["worse"] - base["center"]).groupby(["run", "path"])["dev"].median().unstack()
    spread = pd.Series({p: robust_sd(col.dropna().to_numpy()) for p, col in per_run.items()})
    runs = per_run.notna().sum()
    night_of = pd.Series(per_run.index.astype(str).str.split("@").str[0], index=per_run.index)
    nights = per_run.notna().apply(lambda col: night_of[col].nunique())
    dev = rows.join(center, on=key)
    history = (dev["worse"] - dev["center"]).groupby([dev["node"], dev["path"]]).median().unstack()
    counts = (runs.reindex(shape.columns).fillna(0), nights.reindex(shape.columns).fillna(0))
    return history.reindex_like(shape), spread.reindex(shape.columns), *counts


def robust_sd(values: np.ndarray) -> float:
    """Qn of a few values, the MAD of many (MAD_FROM): Qn's factor is simulated per count; NaN for one value."""
    if values.size < 2:
        return np.nan
    if values.size >= MAD_FROM:
        return float(np.median(np.abs(values - np.median(values))) / MAD_NORMAL)
    return float(qn_scale(values))


def with_rerun(tonight: pd.DataFrame, rerun: pd.DataFrame) -> pd.DataFrame:
    """`tonight` (node_values) with each node's figures the rerun measured
    again in place of the first values; the other nodes' and figures' kept."""
    key = ["node", *_figure_key(tonight)]
    again = rerun.set_index(key)
    kept = ~tonight.set_index(key).index.isin(again.index)
    return pd.concat([tonight[kept], rerun[rerun.columns.intersection(tonight.columns)]], ignore_index=True)


def confirm(first: Partition, again: Partition, measured: set[tuple[str, str]]) -> Partition:
    """`first` with each node fault the rerun measured (`measured`: its
    (node, path) pairs) kept where `again` (the judgement with the rerun's
    values) has the node behind beyond the floor there too, at CONFIRM_ALPHA
    for that cell alone (the nightly's rule: judge/verdict.py's confirm, not
    the whole partition's test passed again), transient where it does not; a
    fault the rerun did not measure stays, unconfirmed (`confirmed` False;
    True where it agreed)."""
    cells = first.cells.copy()
    rerun = again.cells.set_index(["node", "path"])
    flagged = cells["verdict"].isin([Cell.NODE_FAULT, Cell.BOTH]).to_numpy()
    pairs = list(zip(cells.loc[flagged, "node"], cells.loc[flagged, "path"]))
    p_again = rerun["p_worse"].reindex(pd.MultiIndex.from_tuples(pairs, names=["node", "path"])).to_numpy(float)
    # Measured and scored by the rerun; one it measured but could not score stands, unconfirmed.
    seen = np.array([pair in measured for pair in pairs], dtype=bool) & ~np.isnan(p_again)
    agreed = p_again <= CONFIRM_ALPHA
    index = cells.index[flagged]
    cells["rerun_vs_siblings_pct"] = np.nan
    cells.loc[index[seen], "rerun_vs_siblings_pct"] = rerun["vs_siblings_pct"].reindex(pairs).to_numpy()[seen]
    cells["confirmed"] = pd.Series(pd.NA, index=cells.index, dtype="boolean")
    cells.loc[index, "confirmed"] = seen & agreed
    cells.loc[index[seen & ~agreed], "verdict"] = Cell.TRANSIENT
    return Partition(cells, first.fleet, _node_rows(cells, first.silent, list(first.nodes["node"])), first.silent)


def contend(result: Partition, contended: dict[tuple[str, str], str]) -> Partition:
    """`result` with each node fault whose (node, path) is in `contended`
    (who used its GPUs, judge/contention.py) a contended cell, `contended_by`
    saying who; a node behind its siblings only on such paths is not drained."""
    cells = result.cells.copy()
    cells["contended_by"] = [contended.get(pair, "") for pair in zip(cells["node"], cells["path"])]
    faulty = cells["verdict"].isin([Cell.NODE_FAULT, Cell.BOTH]) & (cells["contended_by"] != "")
    cells.loc[faulty, "verdict"] = Cell.CONTENDED
    cells.loc[~faulty, "contended_by"] = ""
    return Partition(cells, result.fleet, _node_rows(cells, result.silent, list(result.nodes["node"])), result.silent)


def measured_pairs(rerun: pd.DataFrame) -> set[tuple[str, str]]:
    """The (node, path) pairs a rerun's table (node_values with paths) measured."""
    rows = _judged(rerun)
    return set(zip(rows["node"], rows["path"]))


# --- each node against its siblings -------------------------------------


def leave_one_out_median(x: np.ndarray) -> np.ndarray:
    """Each cell's column median over the other rows (NaN ignored), for every cell at once.

    A column sorted, its valid count c: leaving out the value of rank r, the
    others' median is that of c - 1 values, whose order statistics are the
    sorted column's with rank r skipped."""
    order = np.argsort(x, axis=0)  # NaN sorts last
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(x.shape[0])[:, None].repeat(x.shape[1], 1), axis=0)
    s = np.take_along_axis(x, order, axis=0)
    c = np.sum(np.isfinite(x), axis=0)
    m = c - 1  # the others' count, per column

    def kth(k):  # the k-th smallest of the others (0-based), per cell
        k = np.clip(k, 0, max(x.shape[0] - 1, 0))
        index = np.where(k < ranks, k, k + 1)
        return np.take_along_axis(s, np.clip(index, 0, x.shape[0] - 1), axis=0)

    lower, upper = kth(np.broadcast_to((m - 1) // 2, x.shape)), kth(np.broadcast_to(m // 2, x.shape))
    out = (lower + upper) / 2
    out[~np.isfinite(x) | (np.broadcast_to(m, x.shape) < 1)] = np.nan
    return out


def leave_one_out_spread(x: np.ndarray) -> np.ndarray:
    """Each cell's column spread (a robust SD) over the other rows: Qn of the
    others, exactly, below MAD_FROM others; the MAD of the whole column from then on."""
    out = np.full(x.shape, np.nan)
    for j in range(x.shape[1]):
        valid = np.flatnonzero(np.isfinite(x[:, j]))
        others = valid.size - 1
        if others < MIN_SIBLINGS:
            continue
        column = x[valid, j]
        if others >= MAD_FROM:
            out[valid, j] = robust_sd(column)  # the MAD: so many values
        else:
            loo = np.array([np.delete(column, i) for i in range(valid.size)])
            out[valid, j] = qn_scale(loo)
    return out


def _moderated(
    values: np.ndarray,
    spread: np.ndarray,
    others: np.ndarray,
    kinds: np.ndarray,
    history: tuple[np.ndarray, np.ndarray] | None = None,
):
    """The few-others cells' spread shrunk toward a prior, and each cell's
    prior degrees of freedom: their kind of path's (limma's, as
    verdict.fit_priors fits it over the kind's paths: their columns' Qn over
    the nodes), joined by the path's own spread between the accepted runs
    where `history` (per path: that spread and how many runs) has one
    (with_history). Qn of three values alone has a 99.9% null point a hundred
    times the normal's: without the prior, four nodes could name no node on
    a night of twenty paths; with seven others, a node half as fast on a
    path spread 8% between nodes went unnamed in most partitions of eight."""
    counts = np.isfinite(values).sum(axis=0)
    variances = np.array([robust_sd(values[np.isfinite(values[:, j]), j]) ** 2 for j in range(values.shape[1])])
    members = {k: (np.nan_to_num(variances[kinds == k]), counts[kinds == k]) for k in set(kinds)}
    priors = fit_priors(members)
    shrunk, prior_df = spread.copy(), np.zeros(values.shape, dtype=int)
    for j, kind in enumerate(kinds):
        prior = priors[kind] if history is None else with_history(priors[kind], history[0][j], history[1][j])
        cells = others[:, j] < MAD_FROM
        shrunk[cells, j] = np.sqrt(moderated(spread[cells, j] ** 2, prior, others[cells, j]))
        prior_df[cells, j] = prior.df
    return shrunk, prior_df


def with_history(prior: Prior, spread: float, runs: float) -> Prior:
    """A path's prior joined by its accepted runs' spread between them (the
    nightly's Pool does so for a kind's few runs): their robust variance
    weighed by what it is worth (Qn² of n runs, made mean-unbiased:
    verdict.qn_variance_moments; the MAD of MAD_FROM runs or more, its
    square taken as unbiased: its efficiency's share of n - 1), the weight
    rounded down to a step (verdict.pool_step: fewer nulls to simulate,
    never more weight than measured) and never below the kind's own. The
    accepted runs of single nodes spread by their nights as well as their
    nodes: a prior no tighter than tonight's siblings."""
    runs = int(runs) if np.isfinite(runs) else 0
    if runs < 2 or not np.isfinite(spread) or spread <= 0:
        return prior
    if runs >= MAD_FROM:
        mean, worth = 1.0, MAD_EFFICIENCY * (runs - 1)
    else:
        mean, worth = qn_variance_moments(runs)
    weight = prior.df + worth
    variance = (prior.df * prior.variance + worth * spread**2 / mean) / weight
    return Prior(variance, max(prior.df, pool_step(weight)))


def _simulated_p(t: float, n: int, prior_df: int = 0) -> float:
    """P(null >= t) of (y - median(x)) / Qn(x) for n normal x (verdict.null_distribution), one draw's worth at least."""
    null = null_distribution(n, prior_df)
    return (null.size - np.searchsorted(null, t, side="left") + 1) / (null.size + 1)


def sibling_p(t: np.ndarray, others: np.ndarray, prior_df: np.ndarray) -> np.ndarray:
    """One-sided p-values of the siblings' statistic, by how many others each
    cell was compared with. Below MAD_FROM others: from the simulated null of
    (x - median(others)) / moderated Qn(others) for normal values with the
    kind's prior (verdict.null_distribution); the node's own error only
    lowers the statistic, so this errs toward no alarm. From MAD_FROM on:
    Student's t with the MAD's effective degrees of freedom (37% of the
    others: its efficiency)."""
    p = np.full(t.shape, np.nan)
    finite = np.isfinite(t)
    for m, df in {(int(m), int(d)) for m, d in zip(others[finite], prior_df[finite])}:
        cells = finite & (others == m) & (prior_df == df)
        if m < MAD_FROM:
            p[cells] = _simulated_p(t[cells], m, df)
        else:
            p[cells] = _t_sf(t[cells], max(round(MAD_EFFICIENCY * m), 1))
    return p


def _percent(logs: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """Worse-oriented log deviations as percent changes of the values: a rate behind is below, a time above."""
    return np.where(rates, np.expm1(-logs), np.expm1(logs)) * 100


def _worse_percent(logs: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """Worse-oriented log deviations as % worse (judge/explain.py): the value's change, positive where worse."""
    return np.where(rates, -np.expm1(-logs), np.expm1(logs)) * 100


def judge(levels: Levels, alpha: float = 0.05, expected: list[str] | None = None) -> Partition:
    """The partition judged (module docstring); `expected` the nodes that
    should have reported: one that did not is silent, and never judged away."""
    nodes = sorted(set(levels.siblings.index) | set(expected or []))
    x = levels.siblings.reindex(nodes)
    values = x.to_numpy(float)
    center, spread = leave_one_out_median(values), leave_one_out_spread(values)
    own = levels.se.reindex(index=nodes, columns=x.columns).to_numpy(float)
    others = np.broadcast_to(np.isfinite(values).sum(axis=0) - 1, values.shape)
    prior_df = np.zeros(values.shape, dtype=int)
    few = others < MAD_FROM
    if few.any():  # a few others' spread borrows from the other paths of its kind, as the verdict's does
        history = (
            levels.history_spread.reindex(x.columns).to_numpy(float),
            levels.history_runs.reindex(x.columns).to_numpy(float),
        )
        kinds = levels.kind.reindex(x.columns).fillna("").to_numpy()
        spread, prior_df = _moderated(values, spread, others, kinds, history)
    # From MAD_FROM others on, the reference median's own error is added; below, the simulated null holds it.
    centre_error = np.where(others >= MAD_FROM, MEDIAN_SE**2 / np.maximum(others, 1), 0.0)
    scale = np.maximum(np.sqrt(spread**2 * (1 + centre_error) + np.nan_to_num(own) ** 2), MIN_SPREAD)
    behind = values - center
    margin = np.log1p(levels.floor.reindex(x.columns).to_numpy(float))
    t = (behind - margin) / scale
    p = sibling_p(t, others, prior_df)
    judged = np.isfinite(t)
    adjusted = np.full(t.shape, np.nan)
    adjusted[judged] = holm(p[judged])
    fleet = judge_fleet(levels, x.columns, alpha)
    moved = (fleet["verdict"] == Fleet.CHANGE).to_numpy(bool)
    fault = judged & (adjusted <= alpha)
    verdicts = np.full(t.shape, Cell.PASS, dtype=object)
    verdicts[fault] = Cell.NODE_FAULT
    verdicts[fault & moved[None, :]] = Cell.BOTH
    measured_by_others = np.isfinite(values).sum(axis=0) > 0
    verdicts[~np.isfinite(values) & measured_by_others[None, :]] = Cell.NOT_MEASURED
    verdicts[np.isfinite(values) & ~judged] = Cell.UNJUDGED
    rates = levels.rates.reindex(x.columns).to_numpy(bool)[None, :]
    history = levels.history.reindex(index=nodes, columns=x.columns).to_numpy(float)
    cells = pd.DataFrame(
        {
            "node": np.repeat(nodes, len(x.columns)),
            "path": np.tile(x.columns, len(nodes)),
            "verdict": verdicts.ravel(),
            "vs_siblings_pct": _percent(behind, rates).ravel(),
            "behind_pct": (np.expm1(behind) * 100).ravel(),  # worse positive, whatever the unit
            "worse_pct": _worse_percent(behind, rates).ravel(),  # the pages' sign: the value's change, worse positive
            "vs_history_pct": _percent(history, rates).ravel(),
            "spread_pct": (np.expm1(scale) * 100).ravel(),
            "z": t.ravel(),
            "p_worse": p.ravel(),  # this cell's alone: what a rerun confirms by
            "p_adjusted": adjusted.ravel(),
        }
    )
    silent = sorted(set(nodes) - set(levels.siblings.index))
    return Partition(cells, fleet, _node_rows(cells, silent, nodes), silent)


def judge_fleet(levels: Levels, paths: pd.Index, alpha: float) -> pd.DataFrame:
    """Each path's median over the nodes against the accepted runs: a fleet change, an improvement, or not."""
    h = levels.history.reindex(columns=paths).to_numpy(float)
    count = np.isfinite(h).sum(axis=0)
    filled = np.where(count > 0, h, 0.0)  # a path no node has a history of: no All-NaN median
    median = np.nanmedian(filled, axis=0)
    between = np.nanmedian(np.abs(filled - median), axis=0) / MAD_NORMAL
    runs = levels.history_runs.reindex(paths).fillna(0).to_numpy(float)
    nights = levels.history_nights.reindex(paths).fillna(0).to_numpy(float)
    past = np.maximum(levels.history_spread.reindex(paths).to_numpy(float), MIN_SPREAD)
    # Tonight's nodes share the night: the accepted runs' spread is how far a whole night may sit off their
    # centre (a prediction, its centre's error added), tonight's spread between nodes only that of its median.
    se = np.sqrt(past**2 * (1 + MEDIAN_SE**2 / np.maximum(runs, 1)) + MEDIAN_SE**2 * between**2 / np.maximum(count, 1))
    margin = np.log1p(levels.floor.reindex(paths).to_numpy(float))
    t = (np.abs(median) - margin) / np.maximum(se, MIN_SPREAD)
    # One accepted night says nothing of how nights differ: two at least (MIN_NIGHTS), three runs at least.
    judged = (runs >= MIN_RUNS) & (nights >= MIN_NIGHTS) & (count > 0) & np.isfinite(t)
    p = np.full(len(paths), np.nan)
    for j in np.flatnonzero(judged):
        # The larger of two nulls: Student's t on the nights' degrees of freedom, and the simulated one of a
        # robust spread of so few runs (Qn's, or the MAD's effective degrees of freedom from MAD_FROM on).
        n = int(runs[j])
        spread_p = _simulated_p(t[j], n) if n < MAD_FROM else _t_sf(t[j], max(round(MAD_EFFICIENCY * n), 1))
        p[j] = max(_t_sf(t[j], nights[j] - 1), spread_p)
    adjusted = np.full(len(paths), np.nan)
    adjusted[judged] = holm(p[judged])
    verdicts = np.where(judged, Fleet.PASS, Fleet.UNJUDGED).astype(object)
    changed = judged & (adjusted <= alpha)
    verdicts[changed & (median > 0)] = Fleet.CHANGE
    verdicts[changed & (median < 0)] = Fleet.IMPROVED
    rates = levels.rates.reindex(paths).to_numpy(bool)
    with np.errstate(invalid="ignore"):
        share = np.sum(np.sign(h) == np.sign(median), axis=0) / np.maximum(count, 1)
    return pd.DataFrame(
        {
            "path": paths,
            "verdict": verdicts,
            "change_pct": _percent(median, rates),
            "worse_pct": _worse_percent(median, rates),
            "share": np.where(count > 0, share, np.nan),
            "nodes": count,
            "accepted_runs": runs.astype(int),
            "accepted_nights": nights.astype(int),
            "floor_pct": levels.floor.reindex(paths).to_numpy(float) * 100,
            "z": t,
            "p_adjusted": adjusted,
        }
    )


def _node_rows(cells: pd.DataFrame, silent: list[str], nodes: list[str]) -> pd.DataFrame:
    """Per node of `nodes` (every one, whether or not it has a cell): its
    state, its worst path against its siblings, and how many paths it is
    behind on or did not measure."""
    bad = cells["verdict"].isin([Cell.NODE_FAULT, Cell.BOTH])
    missing = cells["verdict"] == Cell.NOT_MEASURED
    worst = cells.assign(_z=cells["z"].fillna(-np.inf)).sort_values("_z", ascending=False).drop_duplicates("node")
    rows = worst.set_index("node")[["path", "vs_siblings_pct", "z"]].rename(columns={"path": "worst_path"})
    rows = rows.reindex(sorted(set(nodes) | set(rows.index)))
    rows.index.name = "node"
    rows["faults"] = bad.groupby(cells["node"]).sum().reindex(rows.index).fillna(0).astype(int)
    rows["not_measured"] = missing.groupby(cells["node"]).sum().reindex(rows.index).fillna(0).astype(int)
    shared = (cells["verdict"] == Cell.CONTENDED).groupby(cells["node"]).sum().reindex(rows.index).fillna(0)
    # One state a node, ranked as the exit statuses are: silent and incomplete (1) before behind (2); a node's
    # line names both its missing paths and those it is behind on.
    state = np.where(rows["faults"] > 0, NodeState.FAULT, NodeState.OK).astype(object)
    state[((rows["faults"] == 0) & (shared > 0)).to_numpy()] = NodeState.CONTENDED
    state[(rows["not_measured"] > 0).to_numpy()] = NodeState.INCOMPLETE
    state[rows.index.isin(silent)] = NodeState.SILENT
    rows["state"] = state
    order = {NodeState.SILENT: 0, NodeState.INCOMPLETE: 1, NodeState.FAULT: 2, NodeState.CONTENDED: 3, NodeState.OK: 4}
    rows = rows.assign(_order=rows["state"].map(order), _z=rows["z"].fillna(-np.inf))
    rows = rows.sort_values(["_order", "_z"], ascending=[True, False]).drop(columns=["_order", "_z"])
    return rows.reset_index()


def node_line(row, cells: pd.DataFrame) -> str:
    """'behind its siblings: host memory read -48.2% against its siblings (z 31.0); ...' for the drain list."""
    if row.state == NodeState.SILENT:
        return str(NodeState.SILENT)
    shown = [Cell.NODE_FAULT, Cell.BOTH, Cell.NOT_MEASURED, Cell.CONTENDED]
    mine = cells[(cells["node"] == row.node) & cells["verdict"].isin(shown)]
    parts = []
    for cell in mine.sort_values("z", ascending=False).itertuples():
        if cell.verdict == Cell.NOT_MEASURED:
            parts.append(f"{cell.path} not measured")
        elif cell.verdict == Cell.CONTENDED:
            parts.append(
                f"{cell.path} {cell.vs_siblings_pct:+.1f}% against its siblings, contended: {cell.contended_by}"
            )
        else:
            both = ", the partition moved too" if cell.verdict == Cell.BOTH else ""
            parts.append(f"{cell.path} {cell.vs_siblings_pct:+.1f}% against its siblings (z {cell.z:.1f}{both})")
    return f"{row.state}: " + "; ".join(parts)


def fleet_line(row) -> str:
    """'host memory read: -30.0% on 4 of 4 nodes against 5 accepted runs (floor 3%, z 12.0)'."""
    moved = int(round(row.share * row.nodes)) if row.share == row.share else 0
    return (
        f"{row.path}: {row.change_pct:+.1f}% on the partition ({moved} of {row.nodes} nodes the same way) "
        f"against {row.accepted_runs} accepted runs (floor {row.floor_pct:.0f}%, z {row.z:.1f})"
    )
