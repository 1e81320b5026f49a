"""The nightly's verdict: did tonight's run move a path against the accepted runs?

The unit of evidence is the run, not the sample. Samples taken back to back
in one process share that run's conditions (the node, its tenants, the
link's training): counting them as independent gives p = 1e-13 for an event
of a few seconds. So each headline figure enters as one value per run, the
median of its samples, and tonight's value is judged against the accepted
runs' values, taken on separately started nodes: the spread between them is
the noise a new night must be told apart from.

Per figure and per path (systems/paths/paths.yaml: the physical path that bounds
a figure), on the logarithm of the values (a change is a ratio):

- **Location.** The statistic is tonight's distance from the accepted runs'
  median, beyond the path's practical floor (the smallest move worth an
  alarm), in units of a moderated spread: the accepted runs' robust
  variance (Rousseeuw and Croux's Qn, squared) shrunk toward the typical
  variance of the figures (or paths) of the same kind, with the weight the
  kind's own dispersion earns, as limma's moderated t does for many
  features with few replicates (Smyth 2004). Three runs alone cannot say how
  far a fourth may fall; the kind's other figures can. Median and Qn, so
  that one odd accepted run neither widens the band until nothing fails it
  nor narrows it until everything does. The statistic's null distribution
  for n accepted runs and the kind's prior weight is simulated once,
  exactly as it is computed (`null_distribution`), so that a p-value means
  what it says whatever n is.
- **Paths.** A path's statistic per run is the median over its figures of
  their (worse-oriented) log deviations: tonight's from the accepted runs'
  medians, each accepted run's from the medians of the others (left out as
  tonight is). What the figures agree on, not what one of them says; it is
  judged like one figure. Paths are the verdict's unit ("host link d2h of GPU 0, ce: -20%,
  14 of 14 figures agree"); figures are judged too, and one that moves
  alone is named, but flags its path only where it is the path's only
  figure.
- **Multiple testing.** Holm's correction over the paths, and over the
  figures, each at alpha / 2 (Bonferroni between the two families), so that
  a night of pure noise flags nothing with probability at least 1 - alpha.
- **Stability.** The samples inside a run measure its stability, not the
  move. A path is unstable where its figures' robust coefficient of
  variation tonight is, in the median over its figures, STABILITY_FACTOR
  times the accepted runs' typical one (their median, at least CV_FLOOR):
  an erratic link is a fault too. The typical, not the largest: one
  accepted run caught in a transient would otherwise blind the path.
- **Yardsticks.** A figure that only normalises its case (the copy engine
  inside the reprex) is not judged again: its path is judged once a night by
  the check the data names.

The flagged paths are confirmed by a rerun of their cases (runner/nightly.py):
`confirm` judges the rerun the same way; what flagged a path (its move, a
figure's move alone, its spread) and the rerun does not show again is
transient, and what the rerun could not measure stays flagged.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from functools import cached_property, lru_cache, partial
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import special

from experiments import code as fingerprints
from experiments.caches import cached_array
from experiments.keys import FIGURE_KEY, direction, parse_case
from experiments.paths import US_PER as _US_PER
from experiments.paths import path_of
from experiments.references import bound_of

#: Accepted runs, at least, that a figure is judged against.
MIN_RUNS = 3
#: A path's verdicts that flag it: what makes a night, a comparison or an upgrade exit 2.
FLAGGED = ("moved", "unstable")
#: A path is unstable when its samples spread this many times more than the accepted runs' typically did...
STABILITY_FACTOR = 5.0
#: ... counting any accepted spread below this (a relative SD) as this.
CV_FLOOR = 0.005
#: Draws of the simulated null distribution per number of accepted runs.
NULL_DRAWS = 400_000
#: The smallest robust spread between runs taken as real (a relative SD):
#: timers and counters resolve no better.
MIN_SPREAD = 0.001
#: The most weight, in degrees of freedom, a kind's typical variance gets in a
#: figure's (or path's) moderated variance: where a kind's figures spread alike.
MAX_PRIOR_DF = 40

VERDICTS = ("pass", "moved", "improved", "unstable", "transient", "broken", "unjudged", "yardstick")


@dataclass(frozen=True)
class Rules:
    """Which parts of the verdict may flag a path: runner/power.py measures
    what each buys on the bench's real nights (docs/verdict.md's table), and
    the nightly judges with all of them.

    - `holm`: Holm's correction over the paths and over the figures; without
      it each is tested at alpha / 2 alone (the rerun still confirms).
    - `moderation`: each spread shrunk toward its kind's (and the pool's);
      without it a path's own accepted runs alone say how far a night may fall.
    - `guard`: a move beyond its kind's guard rail (paths.yaml's `guard`)
      flags its path or figure whatever the spread: no large move passes
      where the accepted runs spread widely.
    - `figures`: a figure that moved alone flags its path, naming its case,
      where the path has other figures too (without: only a path's only
      figure does)."""

    holm: bool = True
    moderation: bool = True
    guard: bool = True
    figures: bool = True


#: What the nightly and `rejudge` judge with.
ALL_RULES = Rules()
#: What an upgrade's pairs, and a baseline's runs each against the others
#: (runner/accept.py), are judged with: no rerun confirms a figure that moved
#: alone there (one pair of three caught in a transient), so a case flags its
#: path only where it is the path's only figure, as before.
UPGRADE_RULES = Rules(figures=False)


@lru_cache(maxsize=512)
def null_distribution(n: int, prior_df: int, k: int = 1) -> np.ndarray:
    """The sorted null distribution of the location statistic for n accepted
    runs x and tonight's y (the median of k runs: nights after a driver
    upgrade, say), all normal and independent, with the kind's prior
    (prior_df degrees of freedom, variance 1): (y - median(x)) / moderated
    spread. Each draw's true variance is drawn from the prior, as the model
    that estimated it says (limma's: scaled inverse chi-squared). Seeded:
    the same p-values every time, and kept (build/cache/arrays/) for every
    process of the checkout: a night judges against the same few each night."""
    return cached_array("null", _null_key(n, prior_df, k), lambda: _simulate_null(n, prior_df, k))


def _simulate_null(n: int, prior_df: int, k: int) -> np.ndarray:
    rng = np.random.default_rng(20261124 + 1000 * n + prior_df + 100_000 * (k - 1))
    sigma = np.sqrt(prior_df / rng.chisquare(prior_df, NULL_DRAWS)) if prior_df else np.ones(NULL_DRAWS)
    x = rng.standard_normal((NULL_DRAWS, n)) * sigma[:, None]
    y = (rng.standard_normal(NULL_DRAWS) if k == 1 else np.median(rng.standard_normal((NULL_DRAWS, k)), axis=1)) * sigma
    center = np.median(x, axis=1)
    own = qn_scale(x) ** 2
    return np.sort((y - center) / np.sqrt(np.maximum(moderated(own, Prior(1.0, prior_df), n), 1e-24)))


@lru_cache(maxsize=1)
def _source_digest() -> str:
    """This module's code: a kept null is one this code simulated."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def _null_key(n: int, prior_df: int, k: int) -> str:
    """Everything a null depends on: its arguments, the draws, numpy (its generator's streams) and this code."""
    return f"{n}|{prior_df}|{k}|{NULL_DRAWS}|numpy {np.__version__}|{_source_digest()}"


@lru_cache(maxsize=512)
def paired_null_distribution(n: int, prior_df: int) -> np.ndarray:
    """The sorted null distribution of the paired statistic for n pairs of
    runs (old, new) whose worse-oriented log differences d are normal,
    independent and centred on zero, with the kind's prior as above:
    median(d) / moderated SD of d. Computed as `locate_pairs` computes
    it, so that its p-values mean what they say for three pairs as for ten;
    kept as the null above is."""
    return cached_array("paired-null", _null_key(n, prior_df, 1), lambda: _simulate_paired_null(n, prior_df))


def _simulate_paired_null(n: int, prior_df: int) -> np.ndarray:
    rng = np.random.default_rng(20261126 + 1000 * n + prior_df)
    sigma = np.sqrt(prior_df / rng.chisquare(prior_df, NULL_DRAWS)) if prior_df else np.ones(NULL_DRAWS)
    d = rng.standard_normal((NULL_DRAWS, n)) * sigma[:, None]
    own = d.var(axis=1, ddof=1)
    return np.sort(np.median(d, axis=1) / np.sqrt(np.maximum(moderated(own, Prior(1.0, prior_df), n), 1e-24)))


@dataclass(frozen=True)
class Prior:
    """A kind's typical variance between runs and its weight in degrees of freedom (0: none)."""

    variance: float
    df: int


#: A prior of no weight: a spread judged by its own runs alone (Rules.moderation off).
NO_PRIOR = Prior(0.0, 0)


def moderated(own_variance, prior: Prior, n: int):
    """The variance of n runs shrunk toward the kind's: (d0 s0^2 + (n-1) s^2) / (d0 + n - 1)."""
    return (prior.df * prior.variance + (n - 1) * own_variance) / (prior.df + n - 1)


def _log_variance_terms(variances: np.ndarray, runs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """limma's e_g = log s_g^2 - digamma(d/2) + log(d/2), with d = runs - 1, and d, for the usable members."""
    keep = (variances > 0) & (runs >= 2)
    d = (runs[keep] - 1).astype(float)
    return np.log(variances[keep]) - special.digamma(d / 2) + np.log(d / 2), d


def fit_priors(members: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, Prior]:
    """Each kind's prior from its members' variances (each from `runs`
    values): limma's moment estimates (Smyth 2004, fitFDist). How alike the
    members of a kind are (the prior's weight d0) is estimated once, from
    the spread of the log-variances within every kind beyond what sampling
    alone gives, so that a kind of two paths (host memory read and write)
    still earns a weight; where each kind sits (s0^2) is its own members'
    mean. A kind of one member gets no prior: its one variance would be
    counted twice. Robust variances scatter more than sample variances, so
    d0 comes out smaller: less shrinkage, fewer false alarms."""
    terms = {kind: _log_variance_terms(*values) for kind, values in members.items()}
    shared = [(e, d) for e, d in terms.values() if e.size >= 2]
    if not shared:
        return {kind: Prior(0.0, 0) for kind in members}
    within = np.concatenate([e - e.mean() for e, _ in shared])
    dof = sum(e.size - 1 for e, _ in shared)
    excess = float(np.sum(within**2) / dof - np.mean(special.polygamma(1, np.concatenate([d for _, d in shared]) / 2)))
    df = int(round(MAX_PRIOR_DF if excess <= 0 else min(MAX_PRIOR_DF, 2 * _trigamma_inverse(excess))))
    priors = {}
    for kind, (e, _) in terms.items():
        if e.size < 2 or df == 0:
            priors[kind] = Prior(0.0, 0)
        else:
            priors[kind] = Prior(float(np.exp(e.mean() + special.digamma(df / 2) - np.log(df / 2))), df)
    return priors


def _trigamma_inverse(y: float) -> float:
    """x with trigamma(x) = y, by Newton's method (limma's trigammaInverse)."""
    x = 0.5 + 1 / y
    for _ in range(50):
        step = special.polygamma(1, x) * (1 - special.polygamma(1, x) / y) / special.polygamma(2, x)
        x += step
        if -step / x < 1e-8:
            break
    return float(x)


def p_beyond(statistic: float, n: int, prior_df: int, null=null_distribution) -> float:
    """P(null >= statistic) for n accepted runs (or pairs, with the paired
    null), never below one draw's worth (NaN for no statistic)."""
    if not math.isfinite(statistic):
        return math.nan
    null = null(n, prior_df)
    above = null.size - np.searchsorted(null, statistic, side="left")
    return max(above, 1) / null.size


@lru_cache(maxsize=64)
def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(n, 1)


def _median(values: np.ndarray) -> float:
    """np.median of a 1-D array, the same float, without its overhead on the few
    values of a figure (a night calls it tens of thousands of times)."""
    n = values.size
    if n == 0 or n > 64:
        return float(np.median(values))
    ordered = np.sort(values)
    if np.isnan(ordered[-1]):  # NaN sorts last: np.median's NaN
        return math.nan
    half = n // 2
    return float(ordered[half]) if n % 2 else float((ordered[half - 1] + ordered[half]) / 2)


#: Rows of values whose pairwise distances _qn_raw takes at once where there are many (the null's draws).
QN_BLOCK = 8192


def _qn_raw(x: np.ndarray) -> np.ndarray:
    """Rousseeuw and Croux's Qn along the last axis, unscaled: the k-th
    smallest of the pairwise distances, k = C(n // 2 + 1, 2)."""
    n = x.shape[-1]
    h = n // 2 + 1
    k = h * (h - 1) // 2
    if x.size <= QN_BLOCK * n:
        i, j = _pairs(n)
        return np.partition(np.abs(x[..., i] - x[..., j]), k - 1, axis=-1)[..., k - 1]
    return _qn_raw_blocked(x.reshape(-1, n), k).reshape(x.shape[:-1])


def _qn_raw_blocked(rows: np.ndarray, k: int) -> np.ndarray:
    """_qn_raw of many rows, the same floats in a third of the time: a block
    of rows at a time, transposed, each pair's distances one contiguous
    subtraction (indexing every pair of every row at once copies twice the
    values through memory)."""
    i, j = _pairs(rows.shape[1])
    found = np.empty(rows.shape[0])
    distances = np.empty((i.size, QN_BLOCK))
    for start in range(0, rows.shape[0], QN_BLOCK):
        block = np.ascontiguousarray(rows[start : start + QN_BLOCK].T)
        width = block.shape[1]
        for pair, (a, b) in enumerate(zip(i, j)):
            np.subtract(block[a], block[b], out=distances[pair, :width])
        np.abs(distances[:, :width], out=distances[:, :width])
        found[start : start + width] = np.partition(distances[:, :width], k - 1, axis=0)[k - 1]
    return found


@lru_cache(maxsize=64)
def _qn_factor(n: int) -> float:
    """What makes Qn of n normal values median-unbiased for their SD (simulated once per n)."""
    return 1 / float(np.median(_qn_raw(np.random.default_rng(n).standard_normal((200_000, n)))))


@lru_cache(maxsize=64)
def qn_variance_moments(n: int) -> tuple[float, float]:
    """Of Qn² of n normal values of variance 1 (simulated once per n): its
    mean (what makes it a mean-unbiased variance) and the degrees of freedom
    a scaled chi-squared of its mean and variance has, 2 mean² / var: what
    one such variance is worth as evidence (0.8 for three values, where a
    sample variance is worth 2)."""
    squares = qn_scale(np.random.default_rng(1000 + n).standard_normal((200_000, n))) ** 2
    mean = float(squares.mean())
    return mean, float(2 * mean**2 / squares.var())


def qn_scale(x: np.ndarray) -> np.ndarray:
    """A robust SD along the last axis: Qn, which, unlike the MAD (37% as
    efficient as the SD for normal data), keeps 82% of the SD's efficiency
    and still ignores up to half the values being wild: with eight runs its
    5% tail is half the MAD's."""
    n = x.shape[-1]
    return _qn_raw(x) * _qn_factor(n) if n >= 2 else np.zeros(x.shape[:-1])


def robust_spread(values: np.ndarray) -> tuple[float, float]:
    """The median of `values` and their robust SD (Qn)."""
    values = np.asarray(values, dtype=float)
    return _median(values) if values.ndim == 1 else float(np.median(values)), float(qn_scale(values))


def robust_cv(samples: np.ndarray) -> float:
    """A run's robust coefficient of variation: its samples' robust SD over their median."""
    center, spread = robust_spread(samples)
    return spread / abs(center) if center else math.inf


@dataclass(frozen=True)
class Location:
    """A value's move against accepted values, all worse-oriented logs
    (positive is worse): the move, the band's scale, and the p-values of a
    move beyond the floor in the worse and in the better direction."""

    move: float
    scale: float
    p_worse: float
    p_better: float


def locate(accepted: np.ndarray, tonight: float, floor: float, prior: Prior, k: int = 1) -> Location:
    """Tonight (the median of k runs) against the accepted values
    (worse-oriented logs): the move from their median, the moderated spread,
    and how unlikely a move beyond log(1 + floor) either way is if nothing
    changed."""
    center, own = robust_spread(accepted)
    n = accepted.size
    scale = max(math.sqrt(moderated(own**2, prior, n)), MIN_SPREAD)
    move = tonight - center
    margin = math.log1p(floor)
    null = partial(null_distribution, k=k)
    return Location(
        move,
        scale,
        p_beyond((move - margin) / scale, n, prior.df, null),
        p_beyond((-move - margin) / scale, n, prior.df, null),
    )


#: The interval of a paired change: its central 95%.
INTERVAL = 0.95


@dataclass(frozen=True)
class PairedLocation(Location):
    """A paired change with its interval (worse-oriented logs, as `move`)."""

    low: float
    high: float


def pair_spread(differences: np.ndarray) -> float:
    """The spread of paired runs' log differences: their SD (locate_pairs says
    why not Qn); 0 for fewer than two."""
    return float(np.std(differences, ddof=1)) if differences.size > 1 else 0.0


@lru_cache(maxsize=512)
def _paired_quantile(n: int, prior_df: int, q: float) -> float:
    return float(np.quantile(paired_null_distribution(n, prior_df), q))


def locate_pairs(differences: np.ndarray, floor: float, prior: Prior) -> PairedLocation:
    """Paired runs' worse-oriented log differences (new - old): their median
    change, the moderated spread of the differences, how unlikely a change
    beyond log(1 + floor) either way is if nothing changed, and the change's
    interval. Pairs that ran side by side share what drifts with time, so
    their differences hold only what changed between the sides. The median
    for the center, so that one pair caught in a transient does not move it;
    the SD for the spread, not Qn: of three to six pairs Qn is the smallest
    distance or two, whose null tail is ten times the SD's (the 99.9%
    point of three pairs' statistic: 128 against 11), and a transient pair
    widens the SD, which errs toward not calling a move, as a transient
    should."""
    center = float(np.median(differences))
    own = pair_spread(differences)
    n = differences.size
    scale = max(math.sqrt(moderated(own**2, prior, n)), MIN_SPREAD)
    margin = math.log1p(floor)
    half = _paired_quantile(n, prior.df, 0.5 + INTERVAL / 2) * scale
    return PairedLocation(
        center,
        scale,
        p_beyond((center - margin) / scale, n, prior.df, paired_null_distribution),
        p_beyond((-center - margin) / scale, n, prior.df, paired_null_distribution),
        center - half,
        center + half,
    )


def kind_priors(table: pd.DataFrame) -> dict[str, Prior]:
    """Per kind, the prior its judged rows' robust variances give."""
    members = {
        kind: ((rows["spread_pct"].to_numpy(float) / 100) ** 2, np.array([len(logs) for logs in rows["_logs"]]))
        for kind, rows in table.groupby("kind")
    }
    return fit_priors(members)


#: What a figure is called on any kind of node (its key without the node
#: facts), and a path (its name): what the pool of other kinds' spreads is keyed by.
POOL_KEY = ("test", "case", "environ", "figure", "unit")


@dataclass(frozen=True)
class Pool:
    """The spreads other kinds of node measured of the same figures and
    paths (the same links, memories and copies on other nodes), each as a
    prior: their accepted runs' variances of worse-oriented log values
    pooled, weighing what those runs are worth (_pooled). A kind of node
    with three accepted runs has three values
    a path to draw a spread from: alone, its kinds' priors weigh about one
    degree of freedom, so that a move must be tens of spreads to be seen;
    beside the runs other kinds measured it is judged as a kind with their
    runs would be, its own three runs moderating their spread."""

    figures: dict[tuple, Prior]
    paths: dict[tuple, Prior]


NO_POOL = Pool({}, {})


#: The weights a pooled prior takes, its degrees of freedom rounded down to
#: one of them: fewer nulls to simulate (each a second), never more weight than measured.
POOL_DF_STEPS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, MAX_PRIOR_DF)


def _pooled(members: dict[tuple, list[tuple[float, int, tuple]]]) -> dict[tuple, Prior]:
    """Each key's members (a robust variance, Qn², of n runs, on a kind of
    node) pooled into one prior: each made mean-unbiased and weighed by what
    it is worth (qn_variance_moments), the prior weighing each kind once, by
    its best-measured member (its GPUs' paths are measured in the same
    runs), rounded down to a step; members of no spread (equal values) say
    nothing of it and are left out, as fit_priors leaves them."""
    found = {}
    for key, found_in in members.items():
        usable = [(v, n, node) for v, n, node in found_in if v > 0 and n >= 2]
        weights = [qn_variance_moments(n)[1] for _, n, _ in usable]
        unbiased = [v / qn_variance_moments(n)[0] for v, n, _ in usable]
        per_kind: dict[tuple, float] = {}
        for weight, (_, _, node) in zip(weights, usable):
            per_kind[node] = max(per_kind.get(node, 0.0), weight)
        dof = sum(per_kind.values())
        if dof >= POOL_DF_STEPS[0]:
            variance = sum(w * v for w, v in zip(weights, unbiased)) / sum(weights)
            found[key] = Prior(variance, pool_step(dof))
    return found


def pool_step(dof: float) -> int:
    """A pooled prior's weight: its degrees of freedom rounded down to a step
    of POOL_DF_STEPS (0 below the first)."""
    return max((step for step in POOL_DF_STEPS if step <= dof), default=0)


_ONE_OF_MANY = re.compile(r"(GPU |gpu|device=|peer=)\d+")


def anonymous(name: str) -> str:
    """'host link h2d of GPU 1, ce' -> 'host link h2d of GPU *, ce': a path
    or figure named without which GPU it is (one GPU's host link is its
    sibling's, on another kind of node as on this one); a NUMA node stays
    named (a remote one is another path)."""
    return _ONE_OF_MANY.sub(r"\1*", name)


def pool_of(values: pd.DataFrame) -> Pool:
    """The pool of other kinds' accepted runs (`values`: run_values with
    attach_paths of those runs; each kind's runs its own figures by their
    node facts): each judged figure's spread over its kind's runs, and each
    path's over its runs' medians of their figures' moves, as a night's
    paths are taken; pooled over the kinds and over the GPUs, by the
    figure's and path's names without them (anonymous)."""
    key = [k for k in FIGURE_KEY if k in values.columns]
    usable = values["path"].ne("") & values["better"].ne("") & values["yardstick"].eq("")
    rows = values[usable & (pd.to_numeric(values["value"], errors="coerce") > 0)]
    figures: dict[tuple, list] = {}
    moves: dict[tuple, dict[str, list[float]]] = {}
    for name, group in rows.groupby(key, sort=False):
        logs = worse_sign(group["better"].iloc[0]) * np.log(group["value"].to_numpy(float))
        if logs.size < MIN_RUNS:
            continue
        named = dict(zip(key, name))
        node = tuple(v for k, v in named.items() if k not in POOL_KEY)
        path = group["path"].iloc[0]
        pooled_as = ("figure", *(anonymous(str(named[k])) for k in POOL_KEY), _gpus_sharing({**named, "path": path}))
        figures.setdefault(pooled_as, []).append((float(qn_scale(logs)) ** 2, logs.size, node))
        # Each run's move from the others' median, as a night's paths take it (_judge_figure's `_moves`).
        for i, (run, log) in enumerate(zip(group["run"], logs)):
            moves.setdefault((node, path, named.get("gpu_count")), {}).setdefault(run, []).append(
                log - _median(np.delete(logs, i))
            )
    paths: dict[tuple, list] = {}
    for (node, path, count), per_run in moves.items():
        logs = np.array([_median(np.array(m, dtype=float)) for m in per_run.values()])
        if logs.size >= MIN_RUNS:
            pooled_as = ("path", anonymous(path), _gpus_sharing({"path": path, "gpu_count": count}))
            paths.setdefault(pooled_as, []).append((float(qn_scale(logs)) ** 2, logs.size, node))
    return Pool(_pooled(figures), _pooled(paths))


_ALL_GPUS = re.compile(r"all GPUs at once|allgpus")


def _gpus_sharing(named: dict) -> int | None:
    """How many GPUs a figure or path of all GPUs at once shares its links
    with (two H200s' host side is not four's): part of its name in a Pool;
    None for any other."""
    text = " ".join(str(named.get(k, "")) for k in ("path", "figure", "case"))
    return int(named.get("gpu_count") or 0) if _ALL_GPUS.search(text) else None


def _pool_keys(table: pd.DataFrame) -> list[tuple]:
    """Each row's key in a Pool: a figure's name, or a path's (anonymous),
    and for all GPUs at once, how many."""
    counts = table["gpu_count"].tolist() if "gpu_count" in table.columns else [None] * len(table)
    if "figure" in table.columns:
        rows = zip(*(table[k].tolist() for k in (*POOL_KEY, "path")), counts)
        return [
            (
                "figure",
                *map(anonymous, map(str, row[:-2])),
                _gpus_sharing(dict(zip((*POOL_KEY, "path", "gpu_count"), row))),
            )
            for row in rows
        ]
    return [
        ("path", anonymous(name), _gpus_sharing({"path": name, "gpu_count": count}))
        for name, count in zip(table["path"].tolist(), counts)
    ]


def worse_sign(better: str | None) -> float:
    """+1 where a larger value is worse (times), -1 where it is better (rates)."""
    return -1.0 if better == "higher" else 1.0


# --- the per-run table -----------------------------------------------------


def run_values(
    frame: pd.DataFrame, runs: dict[str, pd.Series], statistic: str = "median", physical: bool = False
) -> pd.DataFrame:
    """One row per headline figure and run: the median of its samples, its
    robust CV, how many samples it had and which were not numbers.

    With `physical`, the runs were made with ``reference_bounds=physical``
    (the nightly's, an upgrade's): each row also has the physical bound its
    line carries (a rate's limit, a time's floor; `bound`), which the verdict
    holds tonight's value to. Without it (perflogs of any run, whose
    references may hold tolerances) `bound` is NaN.

    `runs` maps a run's label to a mask of `frame` (load.py's table).
    `statistic` 'best' takes each run's best sample instead (the largest rate,
    the smallest time), as STREAM reports: runner/power.py compares the two."""
    key = [k for k in FIGURE_KEY if k in frame.columns]
    parts = []
    for label, mask in runs.items():
        # Only the columns a run's row is made of: grouping slices every column it is given, per group.
        kept = [*key, "value", "sample", *(["code"] if "code" in frame.columns else [])]
        samples = frame.loc[mask & frame["sample"].notna(), kept]
        if samples.empty:
            continue
        bounds = _bounds(frame[mask & frame["sample"].isna()], key) if physical else {}
        # The figures in the order they first appear (groupby's sort=False), each its rows' positions: plain
        # arrays, not a DataFrame sliced per figure (a night's run has a thousand figures or more).
        names = zip(*(samples[k].fillna("").astype(str).tolist() for k in key))
        positions: dict[tuple, list[int]] = {}
        for i, name in enumerate(names):
            positions.setdefault(name, []).append(i)
        values = pd.to_numeric(samples["value"], errors="coerce").to_numpy(float)
        numbers = samples["sample"].to_numpy()
        codes = samples["code"].to_numpy(object) if "code" in samples.columns else None
        rows = [
            {
                **_run_row(dict(zip(key, name)), values[at], numbers[at], label, statistic),
                "bound": bounds.get(name, math.nan),
                "code": _code_of(codes, at),
            }
            for name, at in positions.items()
        ]
        parts.append(pd.DataFrame(rows))
    columns = [*key, "run", "value", "cv", "n", "nan_samples", "bound", "code"]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=columns)


def _code_of(codes: np.ndarray | None, at: list[int]) -> str:
    """The fingerprint of what measured a figure in one run
    (experiments/code.py; UNKNOWN where its lines carry none)."""
    if codes is None:
        return fingerprints.UNKNOWN
    return next((str(c) for c in codes[at] if fingerprints.known(c)), fingerprints.UNKNOWN)


def _run_row(info: dict, values: np.ndarray, numbers: np.ndarray, label: str, statistic: str = "median") -> dict:
    """A figure's row of one run from its samples' values (NaN: not a number) and their sample numbers."""
    usable = np.isfinite(values) & (values > 0)
    bad = [f"s{int(k)}" for k, ok in zip(numbers, usable) if not ok]
    good = values[usable]
    if not good.size:
        value = math.nan
    elif statistic == "best":
        value = float(good.max() if direction(info.get("unit", "")) == "higher" else good.min())
    else:
        value = _median(good)
    return {
        **info,
        "run": label,
        "value": value,
        "cv": robust_cv(good) if good.size else math.nan,
        "n": int(good.size),
        "nan_samples": " ".join(bad),
    }


def _bounds(headlines: pd.DataFrame, key: list[str]) -> dict[tuple, float]:
    """Per figure (its key's values as text), the physical bound its headline
    line carries: the line of the figure's median, whose reference ReFrame
    held it to (the samples' lines carry none)."""
    if headlines.empty or "ref" not in headlines.columns:
        return {}
    names = zip(*(headlines[k].fillna("").astype(str).tolist() for k in key))
    values = zip(*(headlines[c].tolist() for c in ("unit", "ref", "lower_thres", "upper_thres")))
    return {name: bound_of(*value) for name, value in zip(names, values)}


def attach_paths(values: pd.DataFrame) -> pd.DataFrame:
    """The table with each figure's path, kind, floor and yardstick (None where no rule names it)."""
    found = {}
    for test, case, figure in values[["test", "case", "figure"]].drop_duplicates().itertuples(index=False):
        found[(test, case, figure)] = path_of(test, parse_case(case), figure)
    paths = [found[(t, c, f)] for t, c, f in values[["test", "case", "figure"]].itertuples(index=False)]
    return values.assign(
        path=[p.name if p else "" for p in paths],
        kind=[p.kind if p else "" for p in paths],
        floor=[p.floor if p else math.nan for p in paths],
        min_us=[p.min_us if p and p.min_us else math.nan for p in paths],
        yardstick=[p.yardstick or "" if p else "" for p in paths],
        guard=[p.guard if p and p.guard else math.nan for p in paths],
        better=values["unit"].map(lambda u: direction(u) or ""),
    )


def unbounded_paths(values: pd.DataFrame) -> list[str]:
    """The paths of `values` (attach_paths's table) with a rate that no limit
    bounds or a time that no floor does, its line's or its path kind's: what
    no physical bound can call impossible (a CPU that systems/cpus/memory.yaml
    does not list leaves host memory so). Ratios have none to have."""
    rates = values["better"].eq("higher") & values["unit"].ne("fraction")
    times = values["unit"].isin(_US_PER.keys())
    open_ = values["bound"].isna() & (rates | (times & values["min_us"].isna()))
    return sorted(set(values.loc[open_ & values["path"].ne(""), "path"]))


# --- judging ---------------------------------------------------------------

FIGURE_COLUMNS = [
    "path",
    "kind",
    "verdict",
    "reason",
    "runs",
    "accepted",
    "tonight",
    "change_pct",
    "floor_pct",
    "guard_pct",
    "spread_pct",
    "prior_df",
    "p_worse",
    "p_better",
    "cv_tonight",
    "cv_accepted",
    "nan_samples",
    "bound",
]
_PRIVATE = ["_worse", "_moves", "_cvs", "_logs", "_night", "_k"]
PATH_COLUMNS = [
    "path",
    "kind",
    "better",
    "verdict",
    "reason",
    "flagged_by",
    "figures",
    "agree",
    "change_pct",
    "floor_pct",
    "guard_pct",
    "spread_pct",
    "prior_df",
    "runs",
    "p_worse",
    "p_better",
    "instability",
    "figure_names",
]


@dataclass
class Verdict:
    """Every headline figure's verdict (`figures`) and every path's (`paths`)."""

    figures: pd.DataFrame
    paths: pd.DataFrame

    def flagged_paths(self) -> list[str]:
        return sorted(self.paths.loc[self.paths["verdict"].isin(FLAGGED), "path"])

    def counts(self) -> dict[str, int]:
        figures = self.figures["verdict"].value_counts()
        judged = len(self.figures) - int(figures.get("unjudged", 0)) - int(figures.get("yardstick", 0))
        return {
            "figures": int(len(self.figures)),
            "judged": judged,
            **{v: int(figures.get(v, 0)) for v in VERDICTS},
            "paths": int(len(self.paths)),
            **{f"paths_{v}": int((self.paths["verdict"] == v).sum()) for v in VERDICTS},
        }


def judge(
    frame: pd.DataFrame,
    accepted: dict[str, pd.Series],
    tonight: pd.Series | list[pd.Series],
    alpha: float = 0.05,
    physical: bool = False,
    pool: Pool = NO_POOL,
    rules: Rules = ALL_RULES,
) -> Verdict:
    """Tonight's run (a mask of `frame`), or several runs judged as one (their
    median: the nights since an upgrade), against the accepted runs (label ->
    mask), with the `pool` of other kinds' spreads as the nightly has it; with
    `physical`, tonight's values held to the physical bounds their lines
    carry (`run_values`)."""
    nights = (
        {"tonight": tonight} if isinstance(tonight, pd.Series) else {f"tonight{i}": m for i, m in enumerate(tonight, 1)}
    )
    table = attach_paths(run_values(frame, {**accepted, **nights}, physical=physical))
    return judge_values(table, alpha, pool, rules)


def judge_values(table: pd.DataFrame, alpha: float = 0.05, pool: Pool = NO_POOL, rules: Rules = ALL_RULES) -> Verdict:
    """The verdict from the per-run table (`run_values` with `attach_paths`;
    tonight's rows under the run label 'tonight'), with the `pool` of other
    kinds of node's spreads beside its own accepted runs', by `rules`."""
    return locate_values(table, pool, rules).conclude(alpha)


@dataclass
class Located:
    """A night judged up to its correction: every figure and path located
    against the accepted runs (its raw p-values), the kinds' priors fitted
    from the figures and paths judged. `conclude` corrects it into the
    verdict; `with_tonight` locates it again with some figures' rows of
    tonight replaced, the rest as they are (runner/power.py plants a move on
    each path in turn: the night is located once, not once a path)."""

    key: list[str]
    groups: dict[tuple, list[dict]]  # each figure's per-run records, accepted and tonight's
    figures: pd.DataFrame  # located, with the private columns
    paths: pd.DataFrame
    figure_priors: dict[str, Prior]
    path_priors: dict[str, Prior]
    pool: Pool = NO_POOL  # what the priors drew on: a night located anew draws on it again
    rules: Rules = ALL_RULES

    def conclude(self, alpha: float = 0.05) -> Verdict:
        """Holm's correction over the figures and over the paths, the guard
        rail, then the paths a figure flags alone: the verdict (this night
        left as it is)."""
        figures, paths = self.figures.copy(), self.paths.copy()
        _correct(figures, alpha / 2, self.rules)
        _correct(paths, alpha / 2, self.rules)
        _mark_paths_by_figures(figures, paths, self.rules)
        return Verdict(figures.drop(columns=_PRIVATE), paths.drop(columns=_PRIVATE, errors="ignore"))

    def with_tonight(self, rows: pd.DataFrame) -> Located:
        """The night with tonight's rows of the figures in `rows` (per-run
        rows, run 'tonight', of those figures) replaced by them: those
        figures and their paths located again against the same priors. The
        priors are the judged figures' and paths', from their accepted runs
        alone: where the new rows judge the same figures, they hold, and this
        is what locate_values gives on the whole table; where not, it is that."""
        relocated = self._relocate(rows)
        if isinstance(relocated, Located):
            return relocated
        groups, redone, again = relocated
        figures, paths = self.figures.copy(), self.paths.copy()
        figures.loc[redone.index] = redone
        paths.loc[again.index] = again[paths.columns]
        return Located(self.key, groups, figures, paths, self.figure_priors, self.path_priors, self.pool, self.rules)

    def flagged(self, alpha: float = 0.05, rows: pd.DataFrame | None = None) -> list[str]:
        """The paths the night flags, conclude(alpha).flagged_paths(), with
        tonight's rows of the figures in `rows` replaced as with_tonight
        replaces them: from arrays, in a thousandth of the time of the
        tables (./suite power asks it for each path and move of each night)."""
        relocated = None if rows is None else self._relocate(rows)
        if isinstance(relocated, Located):
            return relocated.flagged(alpha)
        arrays = self._arrays
        figure_verdicts, figure_p, figure_worse = arrays["figure_verdicts"], arrays["figure_p"], arrays["figure_worse"]
        path_verdicts, path_p, path_worse = arrays["path_verdicts"], arrays["path_p"], arrays["path_worse"]
        if relocated is not None:
            _, redone, again = relocated
            figure_verdicts, figure_p, figure_worse = figure_verdicts.copy(), figure_p.copy(), figure_worse.copy()
            at = self.figures.index.get_indexer(redone.index)
            figure_verdicts[at], figure_p[:, at] = redone["verdict"], redone[["p_worse", "p_better"]].to_numpy(float).T
            figure_worse[at] = worse_pct(redone["change_pct"].to_numpy(float), _figure_better(redone))
            path_verdicts, path_p, path_worse = path_verdicts.copy(), path_p.copy(), path_worse.copy()
            at = self.paths.index.get_indexer(again.index)
            path_verdicts[at], path_p[:, at] = again["verdict"], again[["p_worse", "p_better"]].to_numpy(float).T
            path_worse[at] = worse_pct(again["change_pct"].to_numpy(float), again["better"].to_numpy(object))
        rules = self.rules
        figure_verdicts = _corrected(
            figure_verdicts, *figure_p, alpha / 2, None, rules, figure_worse, arrays["figure_guard"]
        )[0]
        path_verdicts = _corrected(
            path_verdicts, *path_p, alpha / 2, arrays["instability"], rules, path_worse, arrays["path_guard"]
        )[0]
        names, counts = arrays["path_names"], arrays["path_figures"]
        cases = _cases_that_moved(figure_verdicts, arrays["figure_paths"], arrays["figure_cases"])
        for name in _moved_figures(figure_verdicts, arrays["figure_paths"]):
            i = arrays["path_at"].get(name)
            if i is None or path_verdicts[i] not in _FLAGGED_BY_ITS_FIGURE:
                continue
            if counts[i] <= 1 or (rules.figures and name in cases):
                path_verdicts[i] = "moved"
        return sorted(names[np.isin(path_verdicts, FLAGGED)])

    @cached_property
    def _arrays(self) -> dict:
        """The located tables' columns that their conclusion reads, as arrays."""
        figures, paths = self.figures, self.paths
        return {
            "figure_verdicts": figures["verdict"].to_numpy(object),
            "figure_p": figures[["p_worse", "p_better"]].to_numpy(float).T.copy(),
            "figure_worse": worse_pct(figures["change_pct"].to_numpy(float), _figure_better(figures)),
            "figure_guard": figures["guard_pct"].to_numpy(float),
            "figure_paths": figures["path"].to_numpy(object),
            "figure_cases": _case_keys(figures),
            "path_verdicts": paths["verdict"].to_numpy(object),
            "path_p": paths[["p_worse", "p_better"]].to_numpy(float).T.copy(),
            "path_worse": worse_pct(paths["change_pct"].to_numpy(float), paths["better"].to_numpy(object)),
            "path_guard": paths["guard_pct"].to_numpy(float),
            "instability": paths["instability"].to_numpy(float),
            "path_names": paths["path"].to_numpy(object),
            "path_figures": paths["figures"].to_numpy(),
            "path_at": {name: i for i, name in enumerate(paths["path"])},
        }

    def _relocate(self, rows: pd.DataFrame):
        """with_tonight's work: the figures' records with tonight's replaced,
        and the replaced figures' and their paths' rows located again
        against the same priors (indexed as in the tables); or, where they
        judge other figures or paths than before, the whole night located anew."""
        key = self.key
        groups = dict(self.groups)
        for figure, records in _records_by_figure(rows, key).items():
            groups[figure] = [r for r in groups.get(figure, []) if not r["run"].startswith("tonight")] + records
        changed = [figure for figure in groups if groups[figure] is not self.groups.get(figure)]
        at = self._figure_at
        if any(figure not in at for figure in changed):
            return _locate_groups(groups, key, self.pool, self.rules)
        redone = pd.DataFrame([_judge_figure(groups[f], key) for f in changed], columns=self.figures.columns)
        redone.index = self.figures.index[[at[f] for f in changed]]
        if list(redone["verdict"]) != list(self.figures.loc[redone.index, "verdict"]):  # other figures judged
            return _locate_groups(groups, key, self.pool, self.rules)
        _locate_rows(redone, self.figure_priors, moderation=self.rules.moderation)
        names = set(redone["path"]) - {""}
        kept = self.figures[self.figures["path"].isin(names)]
        again = _judge_paths(pd.concat([kept.drop(index=redone.index), redone]).loc[kept.index])
        again.index = self.paths.index[[self._arrays["path_at"][name] for name in again["path"]]]
        if list(again["verdict"]) != list(self.paths.loc[again.index, "verdict"]):  # other paths judged
            return _locate_groups(groups, key, self.pool, self.rules)
        _locate_rows(again, self.path_priors, moderation=self.rules.moderation)
        return groups, redone, again

    @cached_property
    def _figure_at(self) -> dict[tuple, int]:
        return {figure: i for i, figure in enumerate(zip(*(self.figures[k].tolist() for k in self.key)))}


def locate_values(table: pd.DataFrame, pool: Pool = NO_POOL, rules: Rules = ALL_RULES) -> Located:
    """The per-run table judged up to its correction (judge_values' first
    steps), the priors drawing on the `pool` of other kinds of node too."""
    key = [k for k in FIGURE_KEY if k in table.columns]
    return _locate_groups(_records_by_figure(table, key), key, pool, rules)


def _records_by_figure(table: pd.DataFrame, key: list[str]) -> dict[tuple, list[dict]]:
    """Each figure's rows, as plain records (as to_dict("records") makes them, five times faster)."""
    groups: dict[tuple, list[dict]] = {}
    columns = list(table.columns)
    for values in zip(*(table[c].tolist() for c in columns)):
        record = dict(zip(columns, values))
        groups.setdefault(tuple(record[k] for k in key), []).append(record)
    return groups


def _locate_groups(
    groups: dict[tuple, list[dict]], key: list[str], pool: Pool = NO_POOL, rules: Rules = ALL_RULES
) -> Located:
    figures = pd.DataFrame(
        [_judge_figure(rows, key) for rows in groups.values()], columns=[*key, *FIGURE_COLUMNS, *_PRIVATE]
    )
    paths = _judge_paths(figures)
    return Located(
        key,
        groups,
        figures,
        paths,
        _locate_rows(figures, pooled=pool.figures, moderation=rules.moderation),
        _locate_rows(paths, pooled=pool.paths, moderation=rules.moderation),
        pool,
        rules,
    )


def _blank_figure_row(first: dict, key: list[str], runs: int) -> dict:
    row = {k: first[k] for k in key}
    row.update(
        path=first["path"],
        kind=first["kind"],
        verdict="unjudged",
        reason="",
        runs=0,
        accepted=math.nan,
        tonight=math.nan,
        change_pct=math.nan,
        floor_pct=first["floor"] * 100,
        guard_pct=first.get("guard", math.nan) * 100,
        spread_pct=math.nan,
        prior_df=math.nan,
        p_worse=math.nan,
        p_better=math.nan,
        cv_tonight=math.nan,
        cv_accepted=math.nan,
        nan_samples="",
        bound=math.nan,
        _worse=math.nan,
        _moves=None,
        _cvs=None,
        _logs=None,
        _night=math.nan,
        _k=1,
    )
    row["runs"] = runs
    return row


def _judge_figure(rows: list[dict], key: list[str]) -> dict:
    first = rows[0]
    base = [r for r in rows if not r["run"].startswith("tonight") and np.isfinite(r["value"])]
    night = [r for r in rows if r["run"].startswith("tonight")]
    row = _blank_figure_row(first, key, len(base))
    sign = worse_sign(first["better"])
    # Worse-oriented logs of the accepted runs' values: positive is worse.
    logs = sign * np.log(np.array([r["value"] for r in base], dtype=float))
    if base:
        row["accepted"] = math.exp(sign * _median(logs))
        row["cv_accepted"] = _median(np.array([r["cv"] for r in base], dtype=float))
        # Each accepted run's deviation from the median of the others (left out, as tonight is from all of
        # them: in-sample deviations would shrink the path's spread), whence the path's statistic per run.
        row["_moves"] = (
            {r["run"]: logs[i] - _median(np.delete(logs, i)) for i, r in enumerate(base)} if len(base) > 1 else {}
        )
    if len(night) == 1:
        row.update(tonight=night[0]["value"], cv_tonight=night[0]["cv"], nan_samples=night[0]["nan_samples"])
    elif night:  # several runs judged as one: their median
        finite = [r for r in night if np.isfinite(r["value"])]
        row.update(
            tonight=_median(np.array([r["value"] for r in finite], dtype=float)) if finite else math.nan,
            cv_tonight=_median(np.array([r["cv"] for r in finite], dtype=float)) if finite else math.nan,
            nan_samples=_join(*(f"{r['run']}: {r['nan_samples']}" for r in night if r["nan_samples"])),
        )
    row["_k"] = max(1, sum(np.isfinite(r["value"]) for r in night))
    row["bound"] = _night_bound(night)
    if first["yardstick"] and not row["nan_samples"]:
        row.update(verdict="yardstick", reason=f"normalises its case; its path is judged by {first['yardstick']}")
        return row
    reason = _why_not_judged(row, first, night, base) or _other_program(night, base)
    if reason:
        row.update(verdict="broken" if row["nan_samples"] else "unjudged", reason=reason)
        return row
    tonight = sign * math.log(row["tonight"])
    row.update(
        verdict="pass",
        change_pct=(row["tonight"] / row["accepted"] - 1) * 100,
        _logs=logs,
        _worse=tonight - _median(logs),
        _night=tonight,
        spread_pct=robust_spread(logs)[1] * 100,
        _cvs=(row["cv_tonight"], row["cv_accepted"]),
    )
    return row


def _locate_rows(
    table: pd.DataFrame,
    priors: dict | None = None,
    pooled: dict[tuple, Prior] | None = None,
    moderation: bool = True,
) -> dict:
    """Each judged row located against its accepted values, with its prior
    variance (in place): the pool's for its figure or path where other kinds
    of node measured it, else its kind's; the priors (by kind, and the
    pool's by name), fitted from the judged rows where none are given.
    Without `moderation`, each row's own accepted runs alone (NO_PRIOR)."""
    judged = (table["verdict"] == "pass").to_numpy()
    if priors is None:
        priors = {**kind_priors(table[judged]), **(pooled or {})}
    columns = {c: table[c].to_numpy(float).copy() for c in ("spread_pct", "prior_df", "p_worse", "p_better")}
    rows = zip(*(table[c].tolist() for c in ("_logs", "_night", "floor_pct", "kind", "_k")), _pool_keys(table))
    for i, (logs, night, floor, kind, k, name) in enumerate(rows):
        if not judged[i]:
            continue
        pooled_prior, own = priors.get(name), priors[kind]
        prior = pooled_prior if pooled_prior is not None and pooled_prior.df > own.df else own
        prior = prior if moderation else NO_PRIOR
        x = locate(logs, night, floor / 100, prior, int(k))
        columns["spread_pct"][i], columns["prior_df"][i] = x.scale * 100, prior.df
        columns["p_worse"][i], columns["p_better"][i] = x.p_worse, x.p_better
    for column, values in columns.items():  # whole columns: a masked assignment each costs more than locating
        table[column] = values
    return priors


#: How a reason names the two sides: the nightly's, and an upgrade's pairs.
#: Why a figure another program measured than its accepted runs is not judged.
OTHER_PROGRAM = "measured by another program since it was accepted (code {tonight}, accepted {accepted}): re-accept"
NIGHT_WORDS = {
    "vanished": "the accepted runs have it, tonight's run did not measure it",
    "runs": "accepted run(s)",
    "other program": OTHER_PROGRAM,
}
PAIR_WORDS = {
    "vanished": "the old side has it, the new side did not measure it",
    "runs": "pair(s) of runs",
    "other program": "measured by another program on each side (code {tonight} new, {accepted} old)",
}


def _why_not_judged(row: dict, first: dict, night: list, base: list, words: dict = NIGHT_WORDS) -> str:
    if not first["path"]:
        return "no path: systems/paths/paths.yaml names none for this figure"
    if not first["better"]:
        return f"unit {first['unit']!r} says neither 'higher is better' nor 'lower is better'"
    if not night:
        return f"vanished: {words['vanished']}"
    if row["nan_samples"]:
        return f"broken measurement: samples {row['nan_samples']} are not positive numbers"
    beyond = _beyond_physics(row["tonight"], first, row["bound"])
    if beyond:
        row["nan_samples"] = "median"
        return f"broken measurement: {beyond}"
    if not base:
        return f"no baseline: no {words['runs']} measured this figure"
    if len(base) < MIN_RUNS:
        return f"in {len(base)} {words['runs']}, {MIN_RUNS} needed"
    return ""


def by_another_program(figures: pd.DataFrame) -> pd.Series:
    """The figures of a verdict not judged because another program measured them than their accepted runs."""
    return figures["reason"].str.startswith(OTHER_PROGRAM.split(" (")[0])


def _other_program(night: list[dict], base: list[dict], words: dict = NIGHT_WORDS) -> str:
    """Why tonight's figure cannot be held to its accepted runs ('' where it
    can): a program other than theirs measured it (experiments/code.py).
    Where either side's records carry no fingerprint (runs from before
    fingerprints were kept), nothing says the program changed."""
    tonight = {r.get("code") for r in night if fingerprints.known(r.get("code"))}
    accepted = {r.get("code") for r in base if fingerprints.known(r.get("code"))}
    if not tonight or not accepted or tonight <= accepted:
        return ""
    return words["other program"].format(tonight=", ".join(sorted(tonight)), accepted=", ".join(sorted(accepted)))


def _night_bound(night: list[dict]) -> float:
    """The physical bound tonight's runs were held to (the first that carries one)."""
    return next((r["bound"] for r in night if pd.notna(r.get("bound"))), math.nan)


def _beyond_physics(value: float, first: dict, bound: float) -> str:
    """Why `value` cannot be a correct measurement of its figure ('' where it can):
    a rate above its limit, a time below its floor (its line's, else its path's kind's)."""
    unit, path = first["unit"], first["path"]
    if first["better"] == "higher":
        if pd.notna(bound) and value > bound:
            return f"{value:.4g} {unit} is above the physical limit of {path} ({bound:.4g} {unit})"
        return ""
    floors = [f for f in (first["min_us"] / _US_PER.get(unit, math.nan), bound) if pd.notna(f)]
    if floors and value < max(floors):
        return f"{value:.4g} {unit} is below the physical floor of {path} ({max(floors):.4g} {unit})"
    return ""


def _judge_paths(figures: pd.DataFrame, paired: bool = False) -> pd.DataFrame:
    rows = []
    for name, group in figures[figures["path"] != ""].groupby("path", sort=True):
        judged = group[group["verdict"] == "pass"]
        row = {
            "path": name,
            "kind": group["kind"].iloc[0],
            "better": direction(group["unit"].iloc[0]) or "",
            "verdict": "unjudged",
            "reason": "",
            "flagged_by": "",
            "figures": len(judged),
            "agree": 0,
            "change_pct": math.nan,
            "floor_pct": group["floor_pct"].iloc[0],
            "guard_pct": group["guard_pct"].iloc[0],
            "spread_pct": math.nan,
            "prior_df": math.nan,
            "runs": 0,
            "p_worse": math.nan,
            "p_better": math.nan,
            "instability": math.nan,
            "figure_names": " ".join(sorted(set(judged["figure"]))),
        }
        if (group["verdict"] == "yardstick").all():
            row.update(verdict="yardstick", reason=group["reason"].iloc[0])
        elif judged.empty:
            row["reason"] = "none of its figures could be judged"
        else:
            row.update(_path_statistic(judged, paired))
        rows.append(row)
    return pd.DataFrame(rows, columns=[*PATH_COLUMNS, "_logs", "_night", "_k"])


def _path_statistic(judged: pd.DataFrame, paired: bool = False) -> dict:
    """The path as one measurement: per run, the median of its figures'
    worse-oriented log moves; or, `paired`, per pair of runs the median of
    its figures' differences, the path's change their median."""
    moves: dict[str, list[float]] = {}  # per run (in the order the figures name them), its figures' moves
    for figure in judged["_moves"]:
        for run, move in figure.items():
            if not math.isnan(move):  # skipped, as pandas' median skips NaN
                moves.setdefault(run, []).append(move)
    logs = np.array([_median(np.array(values, dtype=float)) for values in moves.values()], dtype=float)
    if len(logs) < MIN_RUNS:
        return {"reason": f"in {len(logs)} {(PAIR_WORDS if paired else NIGHT_WORDS)['runs']}, {MIN_RUNS} needed"}
    tonight = _median(logs if paired else judged["_worse"].to_numpy(float))
    move = tonight if paired else tonight - _median(logs)
    agree = int((np.sign(judged["_worse"]) == np.sign(move)).sum()) if move else 0
    ratios = [night / max(base, CV_FLOOR) for night, base in judged["_cvs"]]
    return {
        "verdict": "pass",
        "agree": agree,
        "change_pct": _change_pct(judged, tonight),
        "spread_pct": (pair_spread(logs) if paired else robust_spread(logs)[1]) * 100,
        "runs": int(len(logs)),
        "instability": _median(np.array(ratios, dtype=float)),
        "_logs": logs,
        "_night": tonight,
        "_k": int(judged["_k"].max()),
    }


def _change_pct(judged: pd.DataFrame, move: float) -> float:
    """The path's median move as a percent change of the values: a rate's
    worse move is a fall, a time's a rise. Paths hold one kind of unit."""
    rates = direction(judged["unit"].iloc[0]) == "higher"
    return (math.exp(-move) - 1) * 100 if rates else (math.exp(move) - 1) * 100


def smallest_seen(paths: pd.DataFrame, alpha: float = 0.05) -> dict[str, float]:
    """Per judged path of a located night (Located.paths), the smallest move
    worse, as a fraction of its value (a rate's fall, a time's rise), that
    its own test flags tonight: its statistic past the null's point of
    alpha / 2m with m judged paths, Holm's first step (the verdict's
    correction, the worse direction's half of alpha), from where tonight
    already is. One figure moving alone can flag a path sooner; never later."""
    judged = paths["verdict"].eq("pass").to_numpy()
    m = int(judged.sum())
    columns = ("path", "better", "floor_pct", "spread_pct", "prior_df", "_logs", "_night", "_k")
    found = {}
    for path, better, floor, spread, prior_df, logs, night, k in zip(*(paths.loc[judged, c].tolist() for c in columns)):
        null = null_distribution(len(logs), int(prior_df), int(k))
        point = null[min(null.size - 1, int(math.ceil((1 - alpha / 2 / m) * null.size)))]
        needed = max(0.0, math.log1p(floor / 100) + point * spread / 100 - (night - _median(logs)))
        found[path] = -math.expm1(-needed) if better == "higher" else math.expm1(needed)
    return found


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values. (statsmodels' multipletests does
    the same, but collects garbage on every call: a quarter of a second a
    night, which the simulated nights of the tests cannot afford.)"""
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p)
    m = p.size
    adjusted = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.minimum(adjusted, 1.0)
    return out


def worse_pct(change_pct, better):
    """Percent changes as moves worse (a rate's fall, a time's rise): positive
    is worse. A Series stays one (on its index), a number one, anything else
    becomes an array: judge/explain.py and the pages say it with the same sign."""
    if isinstance(change_pct, pd.Series):
        flip = pd.Series(better, index=change_pct.index).eq("higher")
        return change_pct.where(~flip, -change_pct)
    if np.ndim(change_pct) == 0:
        return -change_pct if better == "higher" else change_pct
    change = np.asarray(change_pct, dtype=float)
    return np.where(np.asarray(better, dtype=object) == "higher", -change, change)


def _figure_better(figures: pd.DataFrame) -> np.ndarray:
    """Each figure's direction ('higher', 'lower' or '') from its unit."""
    return np.array([direction(u) or "" for u in figures["unit"]], dtype=object)


def _correct(table: pd.DataFrame, alpha: float, rules: Rules = ALL_RULES) -> None:
    """Holm's correction over the judged rows, worse and better apart, and
    the guard rail; flags 'moved' and 'improved' in place, and 'unstable'
    paths, and says what flagged a path ('flagged_by': path, spread, guard)."""
    paths = "instability" in table.columns
    better = table["better"].to_numpy(object) if paths else _figure_better(table)
    worse = worse_pct(table["change_pct"].to_numpy(float), better)
    verdicts, adjusted, flagged_by, guarded = _corrected(
        table["verdict"].to_numpy(object),
        table["p_worse"].to_numpy(float),
        table["p_better"].to_numpy(float),
        alpha,
        table["instability"].to_numpy(float) if paths else None,
        rules,
        worse,
        table["guard_pct"].to_numpy(float),
    )
    reasons, guards = table["reason"].to_numpy(object).copy(), table["guard_pct"].to_numpy(float)
    for i in np.flatnonzero(guarded):
        reasons[i] = _join(reasons[i], f"{worse[i]:.1f}% worse, beyond the guard rail of {guards[i]:g}%")
    table["reason"] = reasons
    table["p_adjusted"] = adjusted
    table["verdict"] = verdicts
    if flagged_by is not None:
        table["flagged_by"] = flagged_by


#: A figure beyond its guard rail flags only where it moved beyond its own
#: spread too, at this level uncorrected: one figure of fifteen is far
#: noisier than their median (a DAXPY point of a clean night moves up to
#: 70%, its path's median 19%), and what a figure's own accepted runs call
#: ordinary is no alarm however far it went.
FIGURE_GUARD_ALPHA = 0.01


def _beyond_guard(verdicts: np.ndarray, worse: np.ndarray, guard) -> np.ndarray:
    """The judged rows (verdict 'pass' before the correction) that moved worse beyond their guard rail."""
    guard = np.asarray(guard, dtype=float)
    with np.errstate(invalid="ignore"):
        return (verdicts == "pass") & np.isfinite(guard) & (np.nan_to_num(worse, nan=-np.inf) > guard)


def _corrected(
    verdicts: np.ndarray,
    p_worse: np.ndarray,
    p_better: np.ndarray,
    alpha: float,
    instability: np.ndarray | None = None,
    rules: Rules = ALL_RULES,
    worse_pcts: np.ndarray | None = None,
    guard: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    """Holm's correction over the judged rows (verdict 'pass'), worse and
    better apart (each row at `alpha` alone without `rules.holm`), and the
    guard rail (with `rules.guard`, a path that moved `worse_pcts` percent
    beyond its `guard` is 'moved' whatever its p-value, a figure where its
    p-value is FIGURE_GUARD_ALPHA or less too): each row's verdict after
    them ('moved', 'improved'; with `instability`, 'unstable' where its
    samples spread more than STABILITY_FACTOR times the accepted runs'), its
    adjusted p_worse (NaN where not judged), with `instability` what flagged
    it (path, spread, guard; None where nothing was judged: the table keeps
    its own), and which rows the guard rail flagged. Rows are paths where
    `instability` is given, figures where not."""
    verdicts = verdicts.copy()
    adjusted = np.full(verdicts.size, math.nan)
    judged = verdicts == "pass"
    if not judged.any():
        return verdicts, adjusted, None, np.zeros(verdicts.size, bool)
    correction = holm if rules.holm else np.asarray
    adjusted[judged] = correction(p_worse[judged])
    worse, better = np.zeros(verdicts.size, bool), np.zeros(verdicts.size, bool)
    worse[judged] = adjusted[judged] <= alpha
    better[judged] = correction(p_better[judged]) <= alpha
    guarded = np.zeros(verdicts.size, bool)
    if rules.guard and guard is not None and worse_pcts is not None:
        guarded = _beyond_guard(verdicts, worse_pcts, guard)
        if instability is None:  # figures: beyond the guard and beyond their own spread (FIGURE_GUARD_ALPHA)
            guarded &= np.nan_to_num(p_worse, nan=1.0) <= FIGURE_GUARD_ALPHA
    verdicts[worse | guarded] = "moved"
    verdicts[better & ~worse & ~guarded] = "improved"
    if instability is None:
        return verdicts, adjusted, None, guarded
    spread = judged & (instability > STABILITY_FACTOR)
    flagged_by = np.array(
        [
            _join(*w)
            for w in zip(np.where(worse, "path", ""), np.where(spread, "spread", ""), np.where(guarded, "guard", ""))
        ],
        object,
    )
    verdicts[spread & np.isin(verdicts, ["pass", "improved"])] = "unstable"
    return verdicts, adjusted, flagged_by, guarded


#: The verdicts of a path that one figure, its only judged one, moving alone turns into 'moved'.
_FLAGGED_BY_ITS_FIGURE = ("pass", "improved", "unjudged")


def _moved_figures(figure_verdicts: np.ndarray, figure_paths: np.ndarray) -> dict[str, list[int]]:
    """The positions of the figures that moved, by path."""
    moved: dict[str, list[int]] = {}
    for i in np.flatnonzero(figure_verdicts == "moved"):
        moved.setdefault(figure_paths[i], []).append(int(i))
    return moved


#: What a figure is judged and counted among its case's figures as.
_JUDGED = ("pass", "moved", "improved", "transient")


def _case_keys(figures: pd.DataFrame) -> np.ndarray:
    """Each figure's case, as one key: its check and case."""
    return np.array([f"{t}\0{c}" for t, c in zip(figures["test"], figures["case"])], dtype=object)


def _cases_that_moved(verdicts: np.ndarray, paths: np.ndarray, cases: np.ndarray) -> dict[str, list[int]]:
    """By path, the moved figures of each case whose judged figures on the
    path moved, half of them or more: a case moved (one of an advice's two
    bandwidths, a path matrix's one cell), not one point of a case's many
    (one of DAXPY's sixteen kernel times, one size of the small copies),
    which a clean night's noise moves alone."""
    judged: dict[tuple, int] = {}
    moved: dict[tuple, list[int]] = {}
    for i in np.flatnonzero(np.isin(verdicts, _JUDGED)):
        key = (paths[i], cases[i])
        judged[key] = judged.get(key, 0) + 1
        if verdicts[i] == "moved":
            moved.setdefault(key, []).append(int(i))
    found: dict[str, list[int]] = {}
    for (path, _), at in moved.items():
        if 2 * len(at) >= judged[(path, _)]:
            found.setdefault(path, []).extend(at)
    return found


def _mark_paths_by_figures(figures: pd.DataFrame, paths: pd.DataFrame, rules: Rules = ALL_RULES) -> None:
    """A case that moved (half its figures on the path or more, each
    beyond its own spread and floor, or beyond the guard rail) flags its
    path, named with its figures' changes, where `rules.figures` holds; a
    path's only figure always does. The path's median over fifteen figures
    hides one case moving alone (one Unified Memory advice 7% slower), and
    the rerun, which must show the same figures moved again, keeps a
    moment's noise on one case from flagging. An unstable path stays
    unstable; 'figures' joins what flagged it. A figure that moved where its
    case did not (one point of many) is named in the reason and flags
    nothing."""
    tests, cases, names = figures["test"].tolist(), figures["case"].tolist(), figures["figure"].tolist()
    changes = figures["change_pct"].tolist()
    verdicts, on_paths = figures["verdict"].to_numpy(object), figures["path"].to_numpy(object)
    by_case = _cases_that_moved(verdicts, on_paths, _case_keys(figures))
    for name, moved in _moved_figures(verdicts, on_paths).items():
        at = paths.index[paths["path"] == name]
        if not len(at):
            continue
        alone = paths.loc[at[0], "figures"] <= 1
        flags = alone or (rules.figures and name in by_case)
        shown = moved if alone or not flags else by_case[name]
        said = ", ".join(f"{tests[i]} {cases[i]} {names[i]} {changes[i]:+.1f}%" for i in shown)
        if not flags:
            if paths.loc[at[0], "verdict"] in ("pass", "improved"):
                said = f"a figure moved, the path did not: {said}"
                paths.loc[at[0], "reason"] = _join(paths.loc[at[0], "reason"], said)
            continue
        words = "moved alone" if alone else "a case moved"
        paths.loc[at[0], "reason"] = _join(paths.loc[at[0], "reason"], f"{words}: {said}")
        paths.loc[at[0], "flagged_by"] = _join(paths.loc[at[0], "flagged_by"], "figures")
        if paths.loc[at[0], "verdict"] in _FLAGGED_BY_ITS_FIGURE:
            paths.loc[at[0], "verdict"] = "moved"


# --- an upgrade: runs in pairs, old beside new -----------------------------

#: A paired verdict's further columns: the change's interval, in percent.
INTERVAL_COLUMNS = ["low_pct", "high_pct"]


def judge_pairs(
    frame: pd.DataFrame, pairs: list[tuple[pd.Series, pd.Series]], alpha: float = 0.05, physical: bool = False
) -> Verdict:
    """Two sides run in pairs, side by side (old, new, old, new, ...): each
    pair a (mask of the old run, mask of the new run) of `frame`; with
    `physical`, the new side held to its lines' physical bounds."""
    runs, labels = {}, []
    for i, (old, new) in enumerate(pairs, start=1):
        runs[f"old{i}"], runs[f"new{i}"] = old, new
        labels.append((f"old{i}", f"new{i}"))
    return judge_pair_values(attach_paths(run_values(frame, runs, physical=physical)), labels, alpha)


def judge_pair_values(table: pd.DataFrame, pairs: list[tuple[str, str]], alpha: float = 0.05) -> Verdict:
    """The paired verdict from the per-run table (labels as `pairs` name
    them): per figure and per path, the median of the pairs' worse-oriented
    log differences against the path's floor, in units of their moderated
    spread (`locate_pairs`), with the nightly's vocabulary, floors, priors,
    stability rule and correction. One pair caught in a transient moves a
    median of three no more than the other two allow."""
    key = [k for k in FIGURE_KEY if k in table.columns]
    groups: dict[tuple, list[dict]] = {}
    for record in table.to_dict("records"):
        groups.setdefault(tuple(record[k] for k in key), []).append(record)
    figures = pd.DataFrame(
        [_judge_figure_paired(rows, key, pairs) for rows in groups.values()],
        columns=[*key, *FIGURE_COLUMNS, *INTERVAL_COLUMNS, *_PRIVATE],
    )
    for row in figures.index[figures["verdict"] == "pass"]:  # the kind's prior weighs the pairs' spreads
        figures.at[row, "spread_pct"] = pair_spread(figures.at[row, "_logs"]) * 100
    paths = _judge_paths(figures, paired=True)
    for table_ in (figures, paths):
        _locate_pair_rows(table_)
        _correct(table_, alpha / 2, UPGRADE_RULES)
    _mark_paths_by_figures(figures, paths, UPGRADE_RULES)
    return Verdict(figures.drop(columns=_PRIVATE), paths.drop(columns=_PRIVATE, errors="ignore"))


def _judge_figure_paired(rows: list[dict], key: list[str], pairs: list[tuple[str, str]]) -> dict:
    first = rows[0]
    by_run = {r["run"]: r for r in rows}
    old = [by_run[o] for o, _ in pairs if o in by_run]
    new = [by_run[n] for _, n in pairs if n in by_run]
    usable = [
        (by_run[o], by_run[n])
        for o, n in pairs
        if o in by_run and n in by_run and np.isfinite(by_run[o]["value"]) and np.isfinite(by_run[n]["value"])
    ]
    row = _blank_figure_row(first, key, len(usable))
    row.update(low_pct=math.nan, high_pct=math.nan)
    finite = [r["value"] for r in old if np.isfinite(r["value"])]
    row["accepted"] = _median(np.array(finite, dtype=float)) if finite else math.nan
    night = [r for r in new if np.isfinite(r["value"])]
    if night:
        row["tonight"] = _median(np.array([r["value"] for r in night], dtype=float))
    row["nan_samples"] = _join(*(f"{r['run']}: {r['nan_samples']}" for r in rows if r["nan_samples"]))
    row["bound"] = _night_bound(new)
    if first["yardstick"] and not row["nan_samples"]:
        row.update(verdict="yardstick", reason=f"normalises its case; its path is judged by {first['yardstick']}")
        return row
    reason = _why_not_judged(row, first, new, usable, PAIR_WORDS) or _other_program(new, old, PAIR_WORDS)
    if reason:
        row.update(verdict="broken" if row["nan_samples"] else "unjudged", reason=reason)
        return row
    sign = worse_sign(first["better"])
    differences = {n["run"]: sign * math.log(n["value"] / o["value"]) for o, n in usable}
    logs = np.array(list(differences.values()))
    row.update(
        verdict="pass",
        _logs=logs,
        _moves=differences,
        _worse=_median(logs),
        # The pairs' median change, not the change between the sides' medians.
        change_pct=(math.exp(sign * _median(logs)) - 1) * 100,
        # Erratic only if the new side's calmest run spread more than the old side's most erratic one:
        # three runs a side on a shared host otherwise swap their transients into 'unstable'.
        _cvs=(float(np.min([n["cv"] for _, n in usable])), float(np.max([o["cv"] for o, _ in usable]))),
        cv_tonight=_median(np.array([n["cv"] for _, n in usable], dtype=float)),
        cv_accepted=_median(np.array([o["cv"] for o, _ in usable], dtype=float)),
    )
    return row


def _locate_pair_rows(table: pd.DataFrame) -> None:
    """Each judged row's pairs located (`locate_pairs`), with its kind's prior variance (in place)."""
    judged = table["verdict"] == "pass"
    if "low_pct" not in table.columns:
        table["low_pct"] = table["high_pct"] = math.nan
    priors = kind_priors(table[judged])
    located = [
        locate_pairs(logs, floor / 100, priors[kind])
        for logs, floor, kind in table.loc[judged, ["_logs", "floor_pct", "kind"]].itertuples(index=False)
    ]
    if "better" in table.columns:  # paths
        rates = table.loc[judged, "better"] == "higher"
    else:  # figures
        rates = table.loc[judged, "unit"].map(lambda u: direction(u) == "higher")
    # A worse-oriented log change as a percent change of the values: a rate's worse is a fall.
    pct = [
        sorted(((math.exp(-x) if rate else math.exp(x)) - 1) * 100 for x in (loc.low, loc.high))
        for loc, rate in zip(located, rates)
    ]
    table.loc[judged, "spread_pct"] = [x.scale * 100 for x in located]
    table.loc[judged, "prior_df"] = [priors[kind].df for kind in table.loc[judged, "kind"]]
    table.loc[judged, "p_worse"] = [x.p_worse for x in located]
    table.loc[judged, "p_better"] = [x.p_better for x in located]
    table.loc[judged, "low_pct"] = [lo for lo, _ in pct]
    table.loc[judged, "high_pct"] = [hi for _, hi in pct]


def summary_line(verdict: Verdict) -> str:
    c = verdict.counts()
    return (
        f"{c['figures']} headline figures: {c['judged']} judged, {c['moved']} moved, {c['improved']} improved, "
        f"{c['broken']} broken, {c['unjudged']} not judged, {c['yardstick']} yardsticks judged elsewhere; "
        f"{c['paths']} paths: {c['paths_moved']} moved, {c['paths_unstable']} unstable, "
        f"{c['paths_transient']} transient, {c['paths_improved']} improved"
    )


# --- confirmation by a rerun ------------------------------------------------

#: The rerun tests paths already singled out, so no correction for the many:
#: it confirms a flagged path at this level.
CONFIRM_ALPHA = 0.05


def cases_of_paths(verdict: Verdict, paths: list[str]) -> pd.DataFrame:
    """The (test, case, environ) of every figure on the given paths: what a rerun must run."""
    rows = verdict.figures[verdict.figures["path"].isin(paths) & (verdict.figures["verdict"] != "yardstick")]
    return rows[["test", "case", "environ"]].drop_duplicates()


#: What a path's reason says where a rerun did not measure what flagged it,
#: and where it no longer showed it, by rerun (runner/nightly.py's keys).
UNMEASURED = {"rerun": "not rerun: unconfirmed", "later": "not measured later"}
CLEARED = {"rerun": "", "later": "gone when measured again later"}


def confirm(first: Verdict, rerun: Verdict, by: str = "rerun") -> Verdict:
    """The first run's verdict with each flagged path confirmed or not by the
    rerun: what flagged it (the path's move, a figure's move alone, the
    samples' spread) is confirmed where the rerun shows it again (a move the
    same way beyond the floor at CONFIRM_ALPHA, a spread beyond
    STABILITY_FACTOR). Refuted on every count, the path is 'transient'; where
    the rerun did not measure what flagged it (a case that failed or was not
    rerun), the flag stands, unconfirmed. The rerun's change and instability
    stand beside the first run's, in columns named `by` ('rerun', or 'later'
    for a second confirmation on a shared host)."""
    paths = first.paths.copy()
    again = rerun.paths.set_index("path")
    paths[f"{by}_change_pct"] = paths["path"].map(again["change_pct"])
    paths[f"{by}_instability"] = paths["path"].map(again["instability"])
    paths[f"{by}_p_worse"] = paths["path"].map(again["p_worse"])
    figures = first.figures.copy()
    # What flagged a path of several figures: the cases that moved, not a point of a case that did not.
    cases = _cases_that_moved(
        figures["verdict"].to_numpy(object), figures["path"].to_numpy(object), _case_keys(figures)
    )
    for index in paths.index[paths["verdict"].isin(FLAGGED)]:
        row = paths.loc[index]
        on_path = (figures["path"] == row["path"]) & (figures["verdict"] == "moved")
        flagging = figures.index[cases.get(row["path"], [])] if row["figures"] > 1 else figures.index[on_path]
        evidence = _rerun_evidence(
            row, again.loc[row["path"]] if row["path"] in again.index else None, figures.loc[flagging], rerun.figures
        )
        if evidence is None:
            paths.loc[index, "reason"] = _join(row["reason"], UNMEASURED[by])
        elif not evidence:
            paths.loc[index, "verdict"] = "transient"
            paths.loc[index, "reason"] = _join(row["reason"], CLEARED[by])
            figures.loc[on_path, "verdict"] = "transient"
    return Verdict(figures, paths)


def _rerun_evidence(first: pd.Series, again: pd.Series | None, moved: pd.DataFrame, rerun: pd.DataFrame):
    """True where the rerun shows any of what flagged the path again, False
    where it shows none of it, None where it did not measure some of it."""
    seen = []
    flagged_by = str(first.get("flagged_by") or "")
    measured = again is not None and again["verdict"] != "unjudged"
    if "path" in flagged_by:
        seen.append(
            bool(again["p_worse"] <= CONFIRM_ALPHA) if measured and again["p_worse"] == again["p_worse"] else None
        )
    if "spread" in flagged_by:
        seen.append(bool(again["instability"] > STABILITY_FACTOR) if measured else None)
    if "guard" in flagged_by:
        seen.append(bool(_still_beyond_guard(again)) if measured else None)
    if "figures" in flagged_by:
        key = [k for k in FIGURE_KEY if k in moved.columns and k in rerun.columns]
        again_of = {tuple(r[k] for k in key): r for _, r in rerun.iterrows()}
        for _, figure in moved.iterrows():
            found = again_of.get(tuple(figure[k] for k in key))
            p = math.nan if found is None else found["p_worse"]
            seen.append(bool(p <= CONFIRM_ALPHA or _still_beyond_guard(found)) if p == p else None)
    if any(s is True for s in seen):
        return True
    return None if (not seen or any(s is None for s in seen)) else False


def _still_beyond_guard(again: pd.Series) -> bool:
    """Whether a rerun's path or figure moved worse beyond its guard rail again."""
    guard = again.get("guard_pct", math.nan)
    better = again["better"] if "better" in again.index else direction(again.get("unit", "")) or ""
    return bool(pd.notna(guard) and worse_pct(float(again["change_pct"]), better) > guard)


def _join(*parts: str) -> str:
    return "; ".join(str(p) for p in parts if isinstance(p, str) and p)
