"""Change points over the nights: steps and drifts no single night shows.

Each night is judged against the accepted runs alone, so a path that drifts
by 1% a night passes every night's verdict. Here each path is one series
over the nights: per night, the median over its figures of the figure's
worse-oriented log move from its accepted median (a rate's fall, a time's
rise count as worse). Each series is scaled by the path's spread between
accepted runs on separately started nodes, or by the nights' own spread
where that is wider (from the differences of consecutive nights, which a
step or a spike hardly widens), and ruptures' PELT (an exact
search for the segmentation of least l2 cost plus a penalty per change)
splits it into levels.

The penalty is set so that pure noise at the spread flags nothing over 30
nights: none of 100 seeds (tests/test_changepoints.py). When the series has a
change and its last level, held since that change for two nights or more,
has held three nights or more, every one off the accepted level the same
way, and its median off by half the path's floor and as surely as a change
is found (its nights times its squared distance in spreads, at least the
penalty) (the floor is
the least move worth an alarm in one night: systems/paths/paths.yaml), the
nightly prints a CHANGE line and exits 2 (something moved), every night
until the path returns or a new baseline is accepted, as a moved path does.

Why PELT, of ruptures: it is exact for a penalised cost (binary
segmentation, ruptures' other fast search, is a greedy approximation of it
and can miss a change between two others), it needs no assumed number of
changes, and it runs in milliseconds on hundreds of nights. E-Divisive
(Apache Otava, MongoDB's signal-processing-algorithms) tests distributions
by permutation: with two or three nights in the new level its permutation
p-values cannot get small enough to hold false alarms down over many paths.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import pandas as pd

from experiments.keys import FIGURE_KEY, direction
from judge import verdict
from judge.select import RERUNS, run_rows

#: The penalty of one change, in units of the series' variance: pure noise
#: flags nothing (the tests). A step of d spreads with n1 nights before and n2
#: after lowers the cost by d^2 n1 n2 / (n1 + n2): after 19 nights, 2.8
#: spreads are seen in 3 nights, 3.4 in 2. So a 3% step is seen within two
#: nights on a path that spreads 0.7% or less between nodes (all the host
#: link's paths and GPU memory's but the SMs' both ways, 1.1%), later or not
#: at all on the others (1.1-18%).
PENALTY = 20.0
#: A segment spans two nights at least: one bad night is the night's own verdict's.
MIN_NIGHTS = 2
#: A new level is reported once it has held three nights (its first and two more).
REPORT_NIGHTS = 3
#: The least spread a path is scaled by (a fraction): no series is quieter than this.
SPREAD_FLOOR = 0.001
#: A level is reported off the accepted one by this share of its path's floor:
#: a level held over nights is evidence one night is not.
FLOOR_SHARE = 0.5


@dataclass(frozen=True)
class Change:
    path: str
    stamp: str  # the first night of the new level
    nights: int  # nights at the new level, tonight's included
    move_pct: float  # worse-oriented: positive is worse
    floor_pct: float
    earlier: bool = False  # it may have begun before `stamp`: the first night the change points looked at

    @property
    def worse(self) -> bool:
        return self.move_pct > 0

    def line(self) -> str:
        word = "worse" if self.worse else "better"
        return (
            f"{self.path}: {abs(self.move_pct):.1f}% {word} since {self.stamp}{' or earlier' if self.earlier else ''} "
            f"({self.nights} night(s); "
            f"floor {self.floor_pct:.0f}%)"
        )


def path_levels(frame: pd.DataFrame, system: str, runs: list[dict], accepted: list[str]) -> pd.DataFrame:
    """One row per path and night: its level (the median over its figures of
    the worse-oriented log move from the figure's median over the `accepted`
    runs), the path's floor, its kind and its direction (`better`). A path its night called transient
    is at the level its night's last rerun measured (settled_levels)."""
    empty = pd.DataFrame(columns=["path", "run", "level", "floor", "kind", "better"])
    masks = {r["stamp"]: run_rows(frame, system, [r]) for r in runs}
    reruns = {f"{r['stamp']} {key}": run_rows(frame, system, [r[key]]) for r in runs for key in RERUNS if key in r}
    values = verdict.run_values(frame, {**masks, **reruns})
    if values.empty:  # no night's samples: its columns have no types to filter on
        return empty
    values = verdict.attach_paths(values)
    values = values[(values["path"] != "") & (values["yardstick"] == "") & np.isfinite(values["value"])]
    values = values[values["value"] > 0]
    if values.empty:
        return empty
    sign = values["unit"].map(lambda u: -1.0 if direction(u) == "higher" else 1.0)
    worse = sign * np.log(values["value"].astype(float))
    key = [k for k in FIGURE_KEY if k in values.columns]
    figure = [values[k].fillna("").astype(str) for k in key]
    reference = worse.where(values["run"].isin(accepted)).groupby(figure).transform("median")
    moves = values.assign(level=worse - reference)
    levels = moves[np.isfinite(moves["level"])].groupby(["path", "run"], sort=False)
    table = levels.agg(
        level=("level", "median"), floor=("floor", "first"), kind=("kind", "first"), better=("better", "first")
    ).reset_index()
    table = settled_levels(table, runs)
    order = {stamp: i for i, stamp in enumerate(masks)}
    return table.sort_values(["path", "run"], key=lambda c: c.map(order) if c.name == "run" else c)


def settled_levels(table: pd.DataFrame, runs: list[dict]) -> pd.DataFrame:
    """Each night's level per path as its verdict settled it: where the night
    called the path transient (its rerun, or on a shared host its later
    measure, found it gone), the run's level was a passing load's, not the
    node's, and a history fed by it would show a step that never held; the
    path is at its last rerun's level that night, or has none if no rerun
    measured it. The reruns' own rows are dropped."""
    at = table.set_index(["path", "run"])["level"]
    keep = pd.Series(True, index=table.index)
    for run in runs:
        for path, judged in (run.get("paths") or {}).items():
            if judged.get("verdict") != "transient":
                continue
            row = (table["path"] == path) & (table["run"] == run["stamp"])
            last = [f"{run['stamp']} {key}" for key in RERUNS if (path, f"{run['stamp']} {key}") in at.index]
            if last:
                table.loc[row, "level"] = at[(path, last[-1])]
            else:
                keep &= ~row
    stamps = {r["stamp"] for r in runs}
    return table[keep & table["run"].isin(stamps)].reset_index(drop=True)


def scale(spread: float | None) -> float:
    """The spread a path's series is scaled by: its own, not below the floor (none known: the floor)."""
    return spread if spread is not None and math.isfinite(spread) and spread > SPREAD_FLOOR else SPREAD_FLOOR


def noise_of(levels: np.ndarray) -> float:
    """A series' spread between nights, robust to its steps and spikes: from
    the median absolute difference of consecutive nights."""
    if len(levels) < 3:
        return SPREAD_FLOOR
    return scale(float(np.median(np.abs(np.diff(levels)))) / (0.6745 * math.sqrt(2)))


def series_spread(levels: np.ndarray, accepted: float | None) -> float:
    """What a path's series is scaled by: the accepted runs' spread, or the
    nights' own where wider (few accepted runs, a busier fleet)."""
    return max(scale(accepted), noise_of(levels))


class _SummedL2:
    """ruptures' l2 cost (a segment's squared deviations from its mean) from running sums: the same
    segmentation as model="l2", each cost in constant time where ruptures takes a slice's variance (13
    times faster over 400 nights)."""

    model = "l2-sums"
    min_size = MIN_NIGHTS

    def fit(self, signal: np.ndarray):
        self.signal = np.asarray(signal, float).reshape(len(signal), -1)  # ruptures reads its length
        x = self.signal[:, 0]
        self.sums = np.concatenate([[0.0], np.cumsum(x)]).tolist()
        self.squares = np.concatenate([[0.0], np.cumsum(x * x)]).tolist()
        return self

    def error(self, start: int, end: int) -> float:
        total = self.sums[end] - self.sums[start]
        return (self.squares[end] - self.squares[start]) - total * total / (end - start)


def change_points(levels: np.ndarray, spread: float, penalty: float = PENALTY) -> list[int]:
    """The indices where a new level starts (PELT, l2 cost, on the series in units of `spread`)."""
    if len(levels) < 2 * MIN_NIGHTS:
        return []
    import ruptures  # here: it imports scipy.stats, most of a second that every command's parser would pay
    from ruptures.base import BaseCost

    cost = type("SummedL2", (_SummedL2, BaseCost), {})()
    scaled = (np.asarray(levels, float) / scale(spread)).reshape(-1, 1)
    ends = ruptures.Pelt(custom_cost=cost, min_size=MIN_NIGHTS, jump=1).fit(scaled).predict(pen=penalty)
    return [e for e in ends if e < len(levels)]


#: The nights the change points are sought over: the accepted runs' (the level a change is from) and the
#: last WINDOW_NIGHTS. PELT's cost grows with the square of its nights: over a path's three years (1,153
#: nights) it took 0.3 s a path, over this window 5 ms. A level held since before the window is seen as a
#: change at its first night, and said to be so old or older.
WINDOW_NIGHTS = 120


def searched(rows: pd.DataFrame, accepted: Collection[str] = ()) -> np.ndarray:
    """The positions in a path's nights (in order) that its change points are sought over."""
    n = len(rows)
    keep = np.zeros(n, dtype=bool)
    keep[max(0, n - WINDOW_NIGHTS) :] = True
    keep |= rows["run"].isin(accepted).to_numpy(bool)
    return np.flatnonzero(keep)


@dataclass(frozen=True)
class Starts:
    """A path's change points as found once a night: the rows (labels of the levels table) that start a new
    level, the spread its series was scaled by, and whether the search began after the path's first night."""

    rows: tuple
    spread: float
    windowed: bool


def found_starts(table: pd.DataFrame, spreads: dict[str, float], accepted: Collection[str] = ()) -> dict[str, Starts]:
    """Each path's change points over its searched nights (`table`: one row per path and night, in order;
    `spreads` by path, as fractions; `accepted`: the accepted runs' stamps): what the nightly reports and
    its history page marks, found once."""
    found = {}
    for path, rows in table.groupby("path", sort=True):
        at = searched(rows, accepted)
        levels = rows["level"].to_numpy(float)[at]
        spread = series_spread(levels, spreads.get(path))
        starts = change_points(levels, spread)
        found[path] = Starts(tuple(rows.index[at[i]] for i in starts), spread, len(at) < len(rows))
    return found


def changes(
    table: pd.DataFrame,
    spreads: dict[str, float],
    accepted: Collection[str] = (),
    starts: dict[str, Starts] | None = None,
) -> list[Change]:
    """The paths whose last level, since a change, is off the accepted one as
    surely as a change is found and by half their floor or more; `spreads`
    (fractions) by path; `starts`, the change points found_starts found (found here where not given)."""
    starts = found_starts(table, spreads, accepted) if starts is None else starts
    found = []
    for path, rows in table.groupby("path", sort=True):
        path_starts = starts.get(path)
        if path_starts is None or not path_starts.rows:
            continue
        spread = path_starts.spread
        first = rows.index.get_loc(path_starts.rows[-1])
        levels = rows["level"].to_numpy(float)
        last = levels[first:]
        level = float(np.median(last))
        floor = float(rows["floor"].iloc[0]) * 100 if math.isfinite(rows["floor"].iloc[0]) else 0.0
        # Three nights at least, so that one night's spike cannot make a level; every night off the
        # accepted level the same way, and their median as surely as a change and by half the floor.
        held = len(last) >= REPORT_NIGHTS and bool(np.all(np.sign(last) == np.sign(level)))
        if held and (level / spread) ** 2 * len(last) >= PENALTY and abs(np.expm1(level)) * 100 >= FLOOR_SHARE * floor:
            move = (math.exp(level) - 1) * 100
            # A change at the window's first night may have begun before it.
            earlier = path_starts.windowed and first == len(rows) - min(len(rows), WINDOW_NIGHTS)
            found.append(Change(path, rows["run"].iloc[first], len(levels) - first, move, floor, earlier))
    return found
