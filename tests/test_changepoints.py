"""Change points over the nights (judge/changepoints.py): a step is found
within two nights, a slow drift by night 30, and pure noise at the spreads
measured between separately started nodes flags nothing."""

import math

import numpy as np
import pandas as pd
import pytest

from judge import changepoints as cp

PATH = "host link h2d of GPU 0, ce"
#: Spreads between accepted runs on separately started nodes (./suite power
#: --spreads on the committed baseline), as fractions: the host link's paths
#: and GPU memory spread 0.01-1.1% (floor 3%), the others 1.2-18%: LINK is
#: the host link both ways by copy engine, 0.7%.
TIGHT, LINK, WIDE = 0.003, 0.007, 0.06


def _history(moves_pct: np.ndarray, spread: float, seed: int, floor: float = 0.03) -> pd.DataFrame:
    """A path's nights: worse-oriented log levels, noise at `spread`."""
    rng = np.random.default_rng(seed)
    levels = np.log1p(np.asarray(moves_pct) / 100) + rng.normal(0, spread, len(moves_pct))
    stamps = [f"2026-12-{1 + i // 24:02d}T{i % 24:02d}:00:00" for i in range(len(levels))]
    return pd.DataFrame({"path": PATH, "run": stamps, "level": levels, "floor": floor})


def _found_at(moves_pct: np.ndarray, spread: float, seed: int) -> int | None:
    """The first night (1-based) whose nightly reports a change, or None."""
    table = _history(moves_pct, spread, seed)
    for night in range(2 * cp.MIN_NIGHTS, len(moves_pct) + 1):
        if cp.changes(table.iloc[:night], {PATH: spread}):
            return night
    return None


@pytest.mark.long
@pytest.mark.parametrize(("spread", "within_two"), [(TIGHT, 50), (LINK, 45)])
def test_a_three_percent_step_at_night_20_is_found_within_two_nights(spread, within_two):
    """Of 50 seeds: at 0.3% every one by night 22 (its first night and two
    more); at 0.7% nine in ten, and every one within six nights."""
    step = np.where(np.arange(1, 31) >= 20, 3.0, 0.0)
    found = [_found_at(step, spread, seed) for seed in range(50)]
    assert sum(f is not None and 20 <= f <= 22 for f in found) >= within_two, found
    assert all(f is not None and 20 <= f <= 26 for f in found), found


@pytest.mark.long
def test_a_drift_of_half_a_percent_a_night_is_found_by_night_30():
    drift = 0.5 * np.arange(30)
    found = [_found_at(drift, LINK, seed) for seed in range(20)]
    assert all(f is not None and f <= 30 for f in found), found


@pytest.mark.long
@pytest.mark.slow  # 3 spreads x 100 seeds x 30 nights
@pytest.mark.parametrize("spread", [TIGHT, LINK, WIDE])
def test_pure_noise_flags_nothing_over_100_seeds(spread):
    flagged = [seed for seed in range(100) if _found_at(np.zeros(30), spread, seed) is not None]
    assert not flagged


def test_a_move_below_half_the_floor_is_no_news():
    step = np.where(np.arange(1, 31) >= 20, 2.0, 0.0)
    table = _history(step, 0.002, seed=1, floor=0.05)
    assert cp.change_points(table["level"].to_numpy(), 0.002)  # seen,
    assert not cp.changes(table, {PATH: 0.002})  # but under half the 5% floor


def test_a_wide_path_sees_a_large_step_late_and_never_a_small_one():
    """Physics, not a defect: at a 6% spread a 3% step is half a spread."""
    assert _found_at(np.where(np.arange(1, 31) >= 20, 3.0, 0.0), WIDE, seed=0) is None
    assert _found_at(np.where(np.arange(1, 31) >= 20, 25.0, 0.0), WIDE, seed=0) == 22


def test_a_change_line_names_the_path_the_move_and_the_first_night():
    change = cp.Change("host memory read, NUMA node 0", "2026-12-01T19:00:00", 3, 4.2, 5)
    assert change.line() == "host memory read, NUMA node 0: 4.2% worse since 2026-12-01T19:00:00 (3 night(s); floor 5%)"


def _host_memory_rows(when: str, read: float, write: float) -> list[dict]:
    """One night's host-memory samples (three of each figure) as the perflogs give them."""
    facts = {"system": "site", "partition": "gpu", "gpu_model": "H100", "gpu_count": 1, "host_link": "pcie"}
    return [
        {
            **facts,
            "test": "host_bandwidth",
            "case": "",
            "environ": "gnu",
            "figure": f"{op}_bw_node0",
            "perf_var": f"{op}_bw_node0.s{k}",
            "unit": "GiB/s",
            "sample": k,
            "value": value,
            "time": pd.Timestamp(when, tz="UTC"),
        }
        for op, value in (("read", read), ("write", write))
        for k in (1, 2, 3)
    ]


def test_the_levels_are_moves_from_the_accepted_runs_worse_oriented():
    """Host memory that reads 10% slower and writes 10% faster tonight: its
    read path is 10% worse, its write path 10% better, and the accepted nights sit at 0."""
    nights = {"a1": ("2026-12-01T01:00", 1.0), "a2": ("2026-12-02T01:00", 1.0), "n": ("2026-12-03T01:00", 0.9)}
    rows = [
        row
        for when, factor in nights.values()
        for row in _host_memory_rows(when, read=60.0 * factor, write=60.0 * (2 - factor))
    ]
    runs = [{"stamp": s, "start": w, "end": w} for s, (w, _) in nights.items()]
    table = cp.path_levels(pd.DataFrame(rows), "site", runs, ["a1", "a2"]).set_index(["path", "run"])["level"]
    read, write = "host memory read, NUMA node 0", "host memory write, NUMA node 0"
    assert table[(read, "a1")] == table[(read, "a2")] == 0
    assert math.exp(table[(read, "n")]) == pytest.approx(1 / 0.9)  # worse: positive
    assert math.exp(table[(write, "n")]) == pytest.approx(1 / 1.1)  # better: negative


def test_a_path_its_night_called_transient_is_at_its_last_reruns_level():
    """A passing load halves host memory in the run and its rerun and is gone when
    measured later: that night's read path is at the later level, not the run's;
    the write path, moved and confirmed, stays at the run's; a transient that no
    rerun measured has no level that night."""
    times = {"a1": "2026-12-01T01:00", "a2": "2026-12-02T01:00", "n": "2026-12-03T01:00"}
    times |= {"n rerun": "2026-12-03T01:10", "n later": "2026-12-03T01:20", "m": "2026-12-04T01:00"}
    reads = {"n": 30.0, "n rerun": 30.0, "n later": 60.0, "m": 30.0}
    rows = [
        row
        for night, when in times.items()
        for row in _host_memory_rows(when, read=reads.get(night, 60.0), write=30.0 if night == "n" else 60.0)
    ]
    read, write = "host memory read, NUMA node 0", "host memory write, NUMA node 0"
    runs = [{"stamp": s, "start": times[s], "end": times[s]} for s in ("a1", "a2", "n", "m")]
    runs[2] |= {
        "rerun": {"start": times["n rerun"], "end": times["n rerun"]},
        "later": {"start": times["n later"], "end": times["n later"]},
        "paths": {read: {"verdict": "transient"}, write: {"verdict": "moved"}},
    }
    runs[3]["paths"] = {read: {"verdict": "transient"}}  # no rerun window: not measured again
    table = cp.path_levels(pd.DataFrame(rows), "site", runs, ["a1", "a2"]).set_index(["path", "run"])["level"]
    assert table[(read, "n")] == pytest.approx(0.0)  # the later measure's, not the run's log 2
    assert math.exp(table[(write, "n")]) == pytest.approx(2.0)  # moved: the run's
    assert (read, "m") not in table.index
    assert not any(" " in run for _, run in table.index)  # the reruns are no nights of their own


def test_a_path_without_a_known_spread_is_scaled_by_the_floor():
    step = np.where(np.arange(1, 31) >= 20, 3.0, 0.0)
    table = _history(step, 0.003, seed=2)
    assert cp.changes(table, {PATH: float("nan")}) == cp.changes(table, {})
    assert cp.changes(table, {})  # 3% is 30 floors of 0.1%


def test_the_summed_cost_finds_rupturess_own_l2_segmentation():
    """The running-sums cost is ruptures' l2 made fast: the same change points on noise, steps and drifts."""
    import ruptures

    rng = np.random.default_rng(7)
    for n in (4, 9, 30, 150):
        for step in (0.0, 0.01, 0.05):
            levels = rng.normal(0, 0.004, n) + np.where(np.arange(n) >= n // 2, step, 0.0)
            scaled = (levels / 0.004).reshape(-1, 1)
            theirs = ruptures.Pelt(model="l2", min_size=cp.MIN_NIGHTS, jump=1).fit(scaled).predict(pen=cp.PENALTY)
            assert cp.change_points(levels, 0.004) == [e for e in theirs if e < n]


def test_a_level_held_since_before_the_window_is_still_reported_and_said_to_be_older():
    """Three years of nights: the path fell 5% long before the last WINDOW_NIGHTS and stayed there. The
    search sees the accepted runs' level and the window's, so the change is still reported, since the
    window's first night or earlier."""
    n = cp.WINDOW_NIGHTS * 3
    moves = np.where(np.arange(n) >= 40, 5.0, 0.0)
    table = _history(moves, LINK, seed=3)
    accepted = list(table["run"].iloc[:3])
    [change] = cp.changes(table, {PATH: LINK}, accepted)
    assert change.earlier and change.stamp == table["run"].iloc[n - cp.WINDOW_NIGHTS]
    assert change.nights == cp.WINDOW_NIGHTS and "or earlier" in change.line()
    assert cp.changes(table.iloc[: cp.WINDOW_NIGHTS], {PATH: LINK}, accepted)[0].stamp == table["run"].iloc[40]


def test_change_points_are_sought_over_the_accepted_nights_and_the_last_window():
    n = cp.WINDOW_NIGHTS + 50
    table = _history(np.zeros(n), LINK, seed=1)
    at = cp.searched(table, list(table["run"].iloc[:2]))
    assert list(at[:2]) == [0, 1] and len(at) == cp.WINDOW_NIGHTS + 2 and at[-1] == n - 1
