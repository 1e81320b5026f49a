"""Each GPU against its siblings (judge/siblings.py): on tables made here,
and replayed on the committed nights of the pair of H100s joined by NVLink."""

import math

import pandas as pd
import pytest

from judge import select, siblings, verdict
from reports import runs
from reports.load import load
from runner import nightly

PAIR = "2 x NVIDIA H100 80GB HBM3"


def table(values: dict[str, dict[str, float]], cv: float = 0.005, n: int = 5) -> pd.DataFrame:
    """A per-run table with paths: {run: {figure: GB/s}} of path_matrix's host cells."""
    rows = [
        {
            "test": "path_matrix",
            "case": "paths=host-ce size=256M",
            "environ": "gnu",
            "figure": figure,
            "unit": "GB/s",
            "run": run,
            "value": value,
            "cv": cv,
            "n": n,
            "nan_samples": "",
        }
        for run, figures in values.items()
        for figure, value in figures.items()
    ]
    return verdict.attach_paths(pd.DataFrame(rows))


def found(values, **kwargs) -> pd.DataFrame:
    return siblings.judge(table(values, **kwargs)).set_index("path")


def test_a_gpu_behind_its_sibling_beyond_the_floor_lags_and_its_sibling_does_not():
    result = found({"tonight": {"gpu0_h2d_numa0_ce": 54.5, "gpu1_h2d_numa0_ce": 45.0}})
    assert result.loc["host link h2d of GPU 1, ce", "verdict"] == "lagging"
    assert result.loc["host link h2d of GPU 1, ce", "vs_siblings_pct"] == pytest.approx(45.0 / 54.5 * 100 - 100)
    assert result.loc["host link h2d of GPU 0, ce", "verdict"] == "pass"


def test_within_the_floor_or_within_the_runs_noise_nothing_lags():
    assert (found({"tonight": {"gpu0_h2d_numa0_ce": 54.5, "gpu1_h2d_numa0_ce": 53.2}})["verdict"] == "pass").all()
    noisy = found({"tonight": {"gpu0_h2d_numa0_ce": 54.5, "gpu1_h2d_numa0_ce": 51.0}}, cv=0.08)
    assert noisy.loc["host link h2d of GPU 1, ce", "reason"] == "within 3 standard errors"


def test_an_asymmetry_the_accepted_runs_have_is_the_node_as_accepted():
    """GPU 1 always 8% behind (a slower slot): tonight's 8% is as accepted, 20% is not."""
    usual = {f"a{i}": {"gpu0_h2d_numa0_ce": 54.5, "gpu1_h2d_numa0_ce": 54.5 * 0.92} for i in range(3)}
    same = found({**usual, "tonight": {"gpu0_h2d_numa0_ce": 54.0, "gpu1_h2d_numa0_ce": 54.0 * 0.92}})
    assert same.loc["host link h2d of GPU 1, ce", "verdict"] == "pass"
    assert same.loc["host link h2d of GPU 1, ce", "accepted_vs_siblings_pct"] == pytest.approx(-8.0)
    worse = found({**usual, "tonight": {"gpu0_h2d_numa0_ce": 54.0, "gpu1_h2d_numa0_ce": 54.0 * 0.8}})
    assert worse.loc["host link h2d of GPU 1, ce", "verdict"] == "lagging"


def test_one_sample_is_not_a_noiseless_run():
    """A figure of one sample (or identical ones) has no spread of its own: it
    counts as CV_FLOOR, so a lag just past the floor is within the noise."""
    one = found({"tonight": {"gpu0_h2d_numa0_ce": 54.5, "gpu1_h2d_numa0_ce": 54.5 / 1.032}}, cv=0.0, n=1)
    assert one.loc["host link h2d of GPU 1, ce", "verdict"] == "pass"
    assert math.isfinite(one.loc["host link h2d of GPU 1, ce", "z"])


def test_a_gpus_figure_in_another_build_is_not_its_sibling():
    """Two environments (Summit's cuda and spack): each GPU's siblings are of its own build."""
    builds = pd.concat(
        [
            table({"tonight": {"gpu0_h2d_numa0_ce": 54.5, "gpu1_h2d_numa0_ce": 54.4}}).assign(environ="cuda"),
            table({"tonight": {"gpu0_h2d_numa0_ce": 40.0, "gpu1_h2d_numa0_ce": 40.1}}).assign(environ="spack"),
        ],
        ignore_index=True,
    )
    result = siblings.judge(builds)
    assert (result["siblings"] == 1).all() and (result["verdict"] == "pass").all()


def test_a_lag_the_rerun_does_not_show_is_transient_and_one_it_did_not_measure_stands():
    first = siblings.judge(table({"tonight": {"gpu0_h2d_numa0_ce": 54.5, "gpu1_h2d_numa0_ce": 40.0}}))
    again = siblings.judge(table({"tonight": {"gpu0_h2d_numa0_ce": 54.5, "gpu1_h2d_numa0_ce": 54.3}}))
    confirmed = siblings.confirm(first, again).set_index("path")
    assert confirmed.loc["host link h2d of GPU 1, ce", "verdict"] == "transient"
    unmeasured = siblings.confirm(first, again.iloc[0:0]).set_index("path")
    assert unmeasured.loc["host link h2d of GPU 1, ce", "verdict"] == "lagging"
    assert "not measured by the rerun" in unmeasured.loc["host link h2d of GPU 1, ce", "reason"]
    unscored = siblings.confirm(first, again.assign(z=math.nan)).set_index("path")  # measured, not scored
    assert unscored.loc["host link h2d of GPU 1, ce", "verdict"] == "lagging"


def test_a_lag_that_lasts_through_the_rerun_stays_lagging_though_the_rerun_alone_would_not_name_it():
    """Confirmation is the nightly's rule: the rerun behind beyond the floor at
    CONFIRM_ALPHA for that path, not past the first run's threshold again."""
    first = siblings.judge(table({"tonight": {"gpu0_h2d_numa0_ce": 54.5, "gpu1_h2d_numa0_ce": 40.0}}))
    again = siblings.judge(table({"tonight": {"gpu0_h2d_numa0_ce": 54.5, "gpu1_h2d_numa0_ce": 52.45}}))
    rerun = again.set_index("path").loc["host link h2d of GPU 1, ce"]
    assert rerun["verdict"] == "pass" and siblings.Z_CONFIRM < rerun["z"] < siblings.Z
    confirmed = siblings.confirm(first, again).set_index("path")
    assert confirmed.loc["host link h2d of GPU 1, ce", "verdict"] == "lagging"


def test_a_figure_of_no_gpu_or_without_siblings_is_not_compared():
    assert siblings.sibling_group("read_bw_node0") is None
    assert siblings.sibling_group("gpu1_read_gpu0_both_ce") == ("gpu*_read_gpu*_both_ce", (1, 0))
    assert siblings.judge(table({"tonight": {"gpu0_h2d_numa0_ce": 54.5}})).empty


def _paths(rows: dict[str, tuple[str, float]]) -> pd.DataFrame:
    """The verdict's paths against the accepted runs: {path: (verdict, change %)}, rates, a 3% floor."""
    return pd.DataFrame(
        [{"path": p, "verdict": v, "change_pct": c, "better": "higher", "floor_pct": 3.0} for p, (v, c) in rows.items()]
    )


def test_a_gpu_as_accepted_behind_siblings_that_improved_does_not_lag_and_a_gpu_that_fell_still_does():
    lags = siblings.judge(table({"tonight": {"gpu0_h2d_numa0_ce": 54.5, "gpu1_h2d_numa0_ce": 51.0}}))
    gpu1 = "host link h2d of GPU 1, ce"
    assert siblings.lagging(lags) == [gpu1]
    improved = siblings.as_accepted(lags, _paths({gpu1: ("pass", -0.5), "host link h2d of GPU 0, ce": ("improved", 6)}))
    assert siblings.lagging(improved) == []
    assert improved.set_index("path").loc[gpu1, "reason"].startswith("as accepted: +0.5% worse")
    # Worse by the floor against the accepted runs (significant or not there), or flagged there: it lags.
    for own in [("pass", -3.5), ("moved", -2.0), ("unjudged", math.nan)]:
        assert siblings.lagging(siblings.as_accepted(lags, _paths({gpu1: own}))) == [gpu1], own
    assert siblings.lagging(siblings.as_accepted(lags, None)) == [gpu1]  # no baseline: the siblings alone
    assert siblings.held_as_accepted(improved)["path"].tolist() == [gpu1]
    # Flagged against the accepted runs at first, as accepted in the rerun: its siblings moved, not it.
    first = siblings.as_accepted(lags, _paths({gpu1: ("moved", -3.5)}))
    confirmed = siblings.confirm(first, improved)
    assert siblings.lagging(confirmed) == [] and confirmed.set_index("path").loc[gpu1, "reason"].endswith(
        "as accepted in the rerun"
    )


@pytest.mark.slow
def test_the_four_h200s_clean_night_whose_gpus_0_and_2_improved_names_no_gpu():
    """Measured on a freshly started node of four H200s (2026-11-28T20:11:22):
    GPUs 0 and 2 reached their peers 6% sooner than in every accepted run,
    so GPUs 1 and 3, as accepted, lagged them by 6% through the rerun and
    the later measure; judged as the nightly judges it, no GPU lags."""
    frame = load(runs.PERFLOGS / "hopper-vm", warn=None).frame
    accepted = runs.read_accepted("hopper-vm", "4 x NVIDIA H200")
    (night,) = [
        r for r in runs.finished_runs("hopper-vm", kind="4 x NVIDIA H200") if r["stamp"] == "2026-11-28T20:11:22"
    ]
    alone = siblings.judge(_table(frame, {r["stamp"]: r for r in accepted["runs"]}, night))
    slow = [f"peer link latency GPU {a} -> GPU {b}" for a in (1, 3) for b in range(4) if a != b]
    assert siblings.lagging(alone) == sorted(slow)
    judged = nightly.judge_window(frame, "hopper-vm", accepted, night, alpha=0.05)
    assert siblings.lagging(judged.siblings) == [] and judged.flagged_paths() == []


# --- the committed nights of the pair ---------------------------------------------


@pytest.fixture(scope="module")
def pair_nights():
    frame = load(runs.PERFLOGS / "hopper-vm", warn=None).frame
    return frame, runs.finished_runs("hopper-vm", drills=True, kind=PAIR)


@pytest.mark.slow
def test_the_pairs_clean_nights_have_no_gpu_behind_its_sibling(pair_nights):
    """Replayed through the nightly's own functions: each clean night of the
    pair alone (as its first nights were judged, no baseline), and each
    against the other two accepted nights (leaving itself out)."""
    frame, nights = pair_nights
    clean = [night for night in nights if not night.get("drill")]
    assert len(clean) >= 3
    for night in clean:
        alone = siblings.judge(_table(frame, {}, night))
        others = {r["stamp"]: r for r in clean if r["stamp"] != night["stamp"]}
        against = siblings.judge(_table(frame, others, night))
        assert len(alone) >= 36 and siblings.lagging(alone) == [] and siblings.lagging(against) == []


@pytest.mark.slow
def test_the_drill_names_gpu_1s_host_link_and_nothing_of_gpu_0(pair_nights):
    frame, nights = pair_nights
    accepted = {r["stamp"]: r for r in nights if not r.get("drill")}
    for drill in [night for night in nights if night.get("drill")]:
        lagging = siblings.lagging(siblings.judge(_table(frame, accepted, drill)))
        assert "host link h2d of GPU 1, ce" in lagging and "host link d2h of GPU 1, ce" in lagging
        assert not [path for path in lagging if "GPU 0" in path]


def _table(frame, accepted: dict, night: dict) -> pd.DataFrame:
    masks = {stamp: select.run_rows(frame, "hopper-vm", [run]) for stamp, run in accepted.items()}
    tonight = select.run_rows(frame, "hopper-vm", [night])
    return verdict.attach_paths(verdict.run_values(frame, {**masks, "tonight": tonight}))


def test_change_pct_is_a_fall_for_rates_and_a_rise_for_times():
    assert siblings._change_pct(math.log(2), rates=True) == pytest.approx(-50.0)
    assert siblings._change_pct(math.log(2), rates=False) == pytest.approx(100.0)
