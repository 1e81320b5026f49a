"""The nightly's verdict by path (judge/verdict.py): on simulated nights drawn
from the committed accepted runs' between-run spread, and on planted faults.
Each test runs in seconds."""

import json
import math
from functools import lru_cache

import baselines
import numpy as np
import pandas as pd
import pytest
from committed import PERFLOGS as COMMITTED

from experiments.keys import parse_case
from experiments.paths import load_rules, path_of
from judge import status, verdict
from reports import runs
from reports.load import load
from runner import nightly, power

HOST_LINK = "host link h2d of GPU 0, sm"


@lru_cache(maxsize=1)
def model() -> power.Model:
    """The committed baseline's spread between runs, per path and figure (the
    one-H100 kind's accepted runs, as tests/baselines.py keeps them)."""
    return power.Model.fit(verdict.attach_paths(baselines.read()))


@pytest.mark.slow  # parses the whole committed history
def test_the_kept_baseline_is_what_the_committed_perflogs_give():
    pd.testing.assert_frame_equal(baselines.read(), baselines.from_perflogs(), obj="write it again: tests/baselines.py")
    pd.testing.assert_frame_equal(  # within a tolerance: the last digits of floats differ from CPU to CPU
        power.accepted_table(baselines.SYSTEM, baselines.KIND), verdict.attach_paths(baselines.read()), rtol=1e-9
    )


#: The verdict's statistics alone: what the simulated nights can say. The rules
#: beside them (the guard rail, one case moving alone) are measured on the
#: kind's real clean nights (runner/replay.py's bench, docs/verdict.md): the
#: model draws each path's move from a normal of the accepted runs' spread,
#: whose tails are wider than the nights' (one H100's DAXPY: 12% spread
#: between accepted runs, its 27 clean nights all within 19% worse).
STATISTICS = verdict.Rules(guard=False, figures=False)


def night_with(
    rng,
    moves: dict[str, float] | None = None,
    spread: dict[str, float] | None = None,
    rules: verdict.Rules = verdict.ALL_RULES,
):
    base, night = model().baseline_and_night(rng)
    for path, move in (moves or {}).items():
        night = power.plant(night, path, move)
    for path, factor in (spread or {}).items():
        night = power.plant(night, path, 0.0, factor)
    return verdict.judge_values(pd.concat([base, night], ignore_index=True), rules=rules)


@pytest.mark.long
@pytest.mark.slow  # hundreds of simulated nights
def test_two_hundred_clean_nights_exit_2_at_most_twice():
    rng = np.random.default_rng(7)
    alarms = [night_with(rng, rules=STATISTICS).flagged_paths() for _ in range(200)]
    nights = [a for a in alarms if a]
    assert len(nights) <= 2, nights  # 1% of 200, before any confirming rerun


@pytest.mark.long
@pytest.mark.slow  # hundreds of simulated nights
def test_a_seven_percent_drop_of_one_path_is_caught_in_95_percent_of_nights():
    rng = np.random.default_rng(8)
    caught = wrong = 0
    for _ in range(100):
        flagged = night_with(rng, {HOST_LINK: 0.07}, rules=STATISTICS).flagged_paths()
        caught += HOST_LINK in flagged
        wrong += bool(set(flagged) - {HOST_LINK})
    assert caught >= 95 and wrong <= 1, (caught, wrong)


def test_a_simulated_baseline_holds_each_path_in_as_many_runs_as_the_accepted_runs_do():
    # A path newer than the baseline's first runs (path_matrix's) rests on
    # fewer runs: simulating it on all of them would be kinder than the nights.
    m = model()
    assert min(m.path_runs.values()) < m.runs, "the committed baseline has a newer path to test this on"
    base, night = m.baseline_and_night(np.random.default_rng(3))
    assert base.groupby("path")["run"].nunique().to_dict() == m.path_runs
    assert set(night["path"]) == set(m.path_runs)


@pytest.mark.slow  # thirty judgements of the committed baseline
def test_a_replayed_run_from_before_a_path_existed_counts_as_no_night_of_it():
    table = power.accepted_table("hopper-vm", "1 x NVIDIA H100 80GB HBM3")
    m = model()
    newer = min(m.path_runs, key=m.path_runs.get)
    older = max(m.path_runs, key=m.path_runs.get)
    result = power.sweep(table[table["path"].isin([newer, older])], [0.5], nights=0, alpha=0.05).set_index("path")
    assert result.loc[newer, "replay_nights"] == m.path_runs[newer] < result.loc[older, "replay_nights"]


def test_the_path_says_how_many_figures_agree():
    result = night_with(np.random.default_rng(9), {HOST_LINK: 0.20})
    row = result.paths.set_index("path").loc[HOST_LINK]
    assert row["verdict"] == "moved" and row["change_pct"] == pytest.approx(-20, abs=3)
    assert row["agree"] == row["figures"] > 1


@pytest.mark.long
def test_samples_spread_ten_times_wider_make_a_path_unstable_not_moved():
    rng = np.random.default_rng(10)
    for _ in range(20):
        result = night_with(rng, spread={HOST_LINK: 10.0})
        assert result.paths.set_index("path").loc[HOST_LINK, "verdict"] == "unstable"


def test_one_figure_moved_alone_flags_its_path_naming_it_and_without_that_rule_only_a_paths_only_figure_does():
    base, night = model().baseline_and_night(np.random.default_rng(12))
    on_path = night.index[night["path"] == HOST_LINK]
    assert len(on_path) > 1
    night.loc[on_path[0], "value"] *= 0.5  # one of the path's figures halves, the others hold
    table = pd.concat([base, night], ignore_index=True)
    result = verdict.judge_values(table)
    figure = result.figures.loc[result.figures["path"] == HOST_LINK]
    assert (figure["verdict"] == "moved").sum() == 1
    path = result.paths.set_index("path").loc[HOST_LINK]
    assert path["verdict"] == "moved" and "a case moved" in path["reason"] and "figures" in path["flagged_by"]
    assert night.loc[on_path[0], "case"] in path["reason"]
    result = verdict.judge_values(table, rules=verdict.Rules(figures=False))
    path = result.paths.set_index("path").loc[HOST_LINK]
    assert path["verdict"] == "pass" and "a figure moved, the path did not" in path["reason"]
    # A path of one figure is that figure.
    alone = verdict.judge_values(
        _one_path_table({**{f"r{i}": [55.0 * (1 + 0.002 * (i % 3 - 1))] for i in range(5)}, "tonight": [40.0]})
    )
    assert alone.paths["verdict"].tolist() == ["moved"]


@pytest.mark.parametrize(
    "move, rules",
    [(0.05, verdict.ALL_RULES), (0.5, verdict.ALL_RULES), (0.5, STATISTICS), (0.5, verdict.Rules(False, False))],
)
def test_a_night_located_once_then_moved_on_one_path_is_judged_as_the_whole_night_moved_is(move, rules):
    # ./suite power plants a move on each path in turn: the night is located once, each path again.
    base, night = model().baseline_and_night(np.random.default_rng(14))
    located = verdict.locate_values(pd.concat([base, night], ignore_index=True), rules=rules)
    paths = sorted(set(power.judged_rows(night)["path"]))
    for path in [HOST_LINK, *paths[:: len(paths) // 4]]:
        planted = power.plant(night, path, move)
        whole = verdict.judge_values(pd.concat([base, planted], ignore_index=True), rules=rules)
        again = located.with_tonight(planted[planted["path"] == path]).conclude()
        pd.testing.assert_frame_equal(again.figures, whole.figures, check_dtype=False)
        pd.testing.assert_frame_equal(again.paths, whole.paths, check_dtype=False)
        assert located.flagged(rows=planted[planted["path"] == path]) == whole.flagged_paths()
        assert path != HOST_LINK or move < 0.07 or HOST_LINK in whole.flagged_paths()  # it sees 7% (power)


def test_a_night_moved_so_that_other_figures_are_judged_is_located_anew():
    # A sample that is not a number breaks its figure: the kinds' priors then come from other figures.
    base, night = model().baseline_and_night(np.random.default_rng(15))
    located = verdict.locate_values(pd.concat([base, night], ignore_index=True))
    broken = night[night["path"] == HOST_LINK].copy()
    broken.loc[broken.index[0], "nan_samples"] = "s1"
    whole = verdict.judge_values(pd.concat([base, night.drop(index=broken.index), broken], ignore_index=True))
    again = located.with_tonight(broken).conclude()
    assert (again.figures["verdict"] == "broken").sum() == 1
    pd.testing.assert_frame_equal(
        again.paths.set_index("path").sort_index(), whole.paths.set_index("path").sort_index(), check_dtype=False
    )
    assert located.flagged(rows=broken) == whole.flagged_paths()


def test_one_accepted_run_caught_in_a_transient_does_not_blind_the_paths_stability():
    base, night = model().baseline_and_night(np.random.default_rng(13))
    first = base["run"] == base["run"].iloc[0]
    base.loc[first & (base["path"] == HOST_LINK), "cv"] *= 30  # an accepted run whose samples spread 30 times wider
    night = power.plant(night, HOST_LINK, 0.0, 10.0)
    result = verdict.judge_values(pd.concat([base, night], ignore_index=True))
    assert result.paths.set_index("path").loc[HOST_LINK, "verdict"] == "unstable"


@pytest.mark.long
def test_a_clean_night_is_not_unstable():
    rng = np.random.default_rng(11)
    for _ in range(50):
        assert not (night_with(rng).paths["verdict"] == "unstable").any()


def _one_path_table(
    values_by_run: dict[str, list[float]],
    cv=0.002,
    unit="GB/s",
    test="path_matrix",
    figure="gpu0_h2d_numa0_ce",
    case="paths=host-ce size=256M",
):
    rows = [
        {
            "test": test,
            "case": case,
            "environ": "gnu",
            "system": "local",
            "partition": "default",
            "gpu_model": "G",
            "gpu_count": "1",
            "host_link": "pcie gen5 x16",
            "figure": figure,
            "unit": unit,
            "run": run,
            "value": v,
            "cv": cv,
            "n": 5,
            "nan_samples": "",
        }
        for run, values in values_by_run.items()
        for v in values
    ]
    return verdict.attach_paths(pd.DataFrame(rows))


def test_one_odd_accepted_run_neither_hides_a_move_nor_makes_one():
    base = {f"r{i}": [55.0 * (1 + 0.002 * (i % 3 - 1))] for i in range(7)}
    base["r7"] = [30.0]  # a node whose copy engine ran at 30 GB/s was accepted
    moved = verdict.judge_values(_one_path_table({**base, "tonight": [49.0]}))  # -11%
    assert moved.paths["verdict"].tolist() == ["moved"]
    calm = verdict.judge_values(_one_path_table({**base, "tonight": [54.9]}))
    assert calm.paths["verdict"].tolist() == ["pass"]


def test_a_broken_measurement_is_named_not_improved():
    table = _one_path_table(
        {**{f"r{i}": [1229.0 + i] for i in range(5)}, "tonight": [12.0]},
        unit="ns",
        figure="gpu0_latency_numa0",
        case="paths=latency-sm size=256M",
    )
    [row] = verdict.judge_values(table).figures.itertuples()
    assert row.verdict == "broken" and "below the physical floor" in row.reason  # 12 ns: nothing was measured
    table.loc[table["run"] == "tonight", "nan_samples"] = "s3"
    [row] = verdict.judge_values(table).figures.itertuples()
    assert row.verdict == "broken" and "s3" in row.reason
    assert nightly.nightly_status({"failed": []}, verdict.judge_values(table), [], False) == status.FAILED


def test_a_value_beyond_the_physical_bound_its_line_carries_is_named_broken_and_fails():
    # A rate above its link's limit and a time below its point's floor: what a
    # run made with reference_bounds=physical logged (run_values' `bound`).
    rate = _one_path_table({**{f"r{i}": [52.0 + 0.1 * i] for i in range(5)}, "tonight": [70.0]})
    rate["bound"] = 63.0
    [row] = verdict.judge_values(rate).figures.itertuples()
    assert row.verdict == "broken" and "above the physical limit of host link h2d of GPU 0, ce (63 GB/s)" in row.reason
    assert nightly.nightly_status({"failed": []}, verdict.judge_values(rate), [], False) == status.FAILED
    time = _one_path_table(
        {**{f"r{i}": [121.0 + i] for i in range(5)}, "tonight": [1.21]},
        unit="us",
        test="daxpy",
        figure="kernel_us_i4_o4",
        case="allocator=explicit data_size=800 prefetch=off rows=100",
    )
    assert verdict.judge_values(time).figures["verdict"].tolist() == ["improved"]  # above the kernel's 1 us
    time["bound"] = 16.0  # 16 kernels
    [row] = verdict.judge_values(time).figures.itertuples()
    assert row.verdict == "broken" and "below the physical floor of DAXPY with explicit copies" in row.reason


def test_only_runs_held_to_physical_bounds_carry_one():
    # A run by hand holds its figures to the references' tolerances, which say nothing physical.
    frame = pd.DataFrame(
        {
            "test": "path_matrix",
            "case": "paths=host-ce size=256M",
            "figure": "gpu0_h2d_numa0_ce",
            "unit": "GB/s",
            "sample": [1.0, 2.0, math.nan],  # the samples, then the headline ReFrame held to the reference
            "value": [50.0, 51.0, 50.5],
            "ref": [0.0, 0.0, 50.0],
            "lower_thres": [None, None, -0.05],
            "upper_thres": [None, None, 0.26],
        }
    )
    runs = {"tonight": frame["value"].notna()}
    assert verdict.run_values(frame, runs, physical=True)["bound"].tolist() == [pytest.approx(63.0)]
    assert verdict.run_values(frame, runs)["bound"].isna().all()


@pytest.mark.parametrize("bad", [["s2"], ["s1", "s2", "s3", "s4", "s5"]])
def test_a_sample_that_is_not_a_number_is_named_at_load_and_its_figure_broken(tmp_path, bad):
    # One 'nan' among five, or all five: kept and named by the loader, never
    # dropped so that the median of the rest passes or the figure reads as vanished.
    source = runs.PERFLOGS / "hopper-vm" / "default" / "path_matrix.log"
    lines = source.read_text().splitlines()
    samples = [line for line in lines if "|gpu0_h2d_numa0_ce.s" in line][-5:]
    fields = lines[0].split("|")
    at = fields.index("perf_value")
    written = [lines[0]]
    for line in samples:
        parts = line.split("|")
        if parts[fields.index("perf_var")].rsplit(".", 1)[1] in bad:
            parts[at] = "nan"
        written.append("|".join(parts))
    (tmp_path / "path_matrix.log").write_text("\n".join(written) + "\n")
    loaded = load(tmp_path, warn=None)
    assert [i.kind for i in loaded.issues] == ["not-a-number"] * len(bad)
    values = verdict.run_values(loaded.frame, {"tonight": pd.Series(True, index=loaded.frame.index)})
    assert values["nan_samples"].tolist() == [" ".join(bad)]
    base = pd.concat([values.assign(run=f"r{i}", value=55.0, nan_samples="", cv=0.002) for i in range(4)])
    [row] = verdict.judge_values(verdict.attach_paths(pd.concat([base, values]))).figures.itertuples()
    assert row.verdict == "broken" and " ".join(bad) in row.reason


def test_a_check_fails_on_a_sample_that_is_not_a_number():
    # The figure's median is not a number either, and ReFrame's reference
    # check fails any value that is not, bounded or not: the check fails
    # naming both, and the perflog keeps them for the verdict.
    import reframe.utility.sanity as sn

    from checks.suite.base import median

    assert sn.evaluate(median([1.0, 3.0, 2.0])) == 2.0
    assert math.isnan(sn.evaluate(median([1.0, math.nan, 3.0])))
    for bounds in ((0, None, None), (50.0, -0.03, None)):
        with pytest.raises(sn.SanityError):
            sn.evaluate(sn.assert_reference(math.nan, *bounds))


def test_a_vanished_figure_is_its_own_reason_and_is_never_allowed():
    table = _one_path_table({f"r{i}": [55.0] for i in range(4)})
    result = verdict.judge_values(table)
    reasons = nightly.unjudged_reasons(result, node_judged=True, health_ran=True)
    assert reasons == ["vanished"]
    assert nightly.nightly_status({"failed": []}, result, reasons, allow_unjudged=True) == status.UNJUDGED
    assert nightly.nightly_status({"failed": []}, None, ["no-baseline"], allow_unjudged=True) == 0
    assert nightly.nightly_status({"failed": []}, None, ["no-baseline"], allow_unjudged=False) == status.UNJUDGED
    assert nightly.unjudged_reasons(
        verdict.judge_values(_one_path_table({f"r{i}": [55.0] for i in range(4)} | {"tonight": [55.0]})), False, True
    ) == ["other-kind"]


def test_a_yardstick_is_judged_by_its_own_check_only():
    table = _one_path_table(
        {**{f"r{i}": [51.3] for i in range(4)}, "tonight": [34.4]},
        unit="GiB/s",
        test="um_bandwidth",
        figure="copy_engine_bw",
        case="memory=managed op=write",
    )
    result = verdict.judge_values(table)
    assert result.figures["verdict"].tolist() == ["yardstick"] and result.flagged_paths() == []
    assert "path_matrix" in result.figures["reason"].iloc[0]


def test_a_rerun_confirms_a_move_or_makes_it_transient():
    base = {f"r{i}": [55.0 * (1 + 0.002 * (i % 3 - 1))] for i in range(6)}
    first = verdict.judge_values(_one_path_table({**base, "tonight": [44.0]}))
    assert first.flagged_paths() == ["host link h2d of GPU 0, ce"]
    again = verdict.judge_values(_one_path_table({**base, "tonight": [43.5]}))
    confirmed = verdict.confirm(first, again)
    assert confirmed.paths["verdict"].tolist() == ["moved"]
    assert confirmed.paths["rerun_change_pct"].iloc[0] == pytest.approx(-20.9, abs=0.1)
    back = verdict.judge_values(_one_path_table({**base, "tonight": [55.1]}))
    transient = verdict.confirm(first, back)
    assert transient.paths["verdict"].tolist() == ["transient"] and transient.flagged_paths() == []
    assert nightly.nightly_status({"failed": []}, transient, [], False) == 0
    # A rerun that did not measure the path (a later verdict flags what the night did not rerun): it stands.
    unmeasured = verdict.judge_values(_one_path_table(base))
    kept = verdict.confirm(first, unmeasured)
    assert kept.paths["verdict"].tolist() == ["moved"] and "not rerun" in kept.paths["reason"].iloc[0]


def test_on_a_shared_host_a_move_its_rerun_confirmed_must_last_until_it_is_measured_later():
    base = {f"r{i}": [55.0 * (1 + 0.002 * (i % 3 - 1))] for i in range(6)}
    first = verdict.judge_values(_one_path_table({**base, "tonight": [44.0]}))
    rerun = verdict.confirm(first, verdict.judge_values(_one_path_table({**base, "tonight": [43.5]})))
    # Another tenant's load that outlasted the rerun, gone three minutes later: transient, exit 0.
    back = verdict.judge_values(_one_path_table({**base, "tonight": [55.1]}))
    passed = verdict.confirm(rerun, back, by="later")
    assert passed.paths["verdict"].tolist() == ["transient"]
    assert passed.paths["reason"].iloc[0].endswith(verdict.CLEARED["later"])
    assert passed.paths["rerun_change_pct"].iloc[0] == pytest.approx(-20.9, abs=0.1)
    assert passed.paths["later_change_pct"].iloc[0] == pytest.approx(0.2, abs=0.1)
    assert nightly.nightly_status({"failed": []}, passed, [], False) == 0
    # Still there later: moved, exit 2, with all three runs' changes.
    still = verdict.confirm(rerun, verdict.judge_values(_one_path_table({**base, "tonight": [44.2]})), by="later")
    assert still.paths["verdict"].tolist() == ["moved"] and still.paths["later_change_pct"].iloc[0] < -19
    assert nightly.nightly_status({"failed": []}, still, [], False) == 2
    assert "; rerun +20.9% worse; later +19." in nightly.path_line(next(still.paths.itertuples()))
    # Not measured later (its case failed): the rerun's confirmation stands, and the reason says so.
    kept = verdict.confirm(rerun, verdict.judge_values(_one_path_table(base)), by="later")
    assert kept.paths["verdict"].tolist() == ["moved"] and verdict.UNMEASURED["later"] in kept.paths["reason"].iloc[0]


def test_a_nights_later_rerun_is_judged_again_from_its_window(monkeypatch):
    """run.json's 'later' window is part of the night whenever it is judged again (./suite accept --rejudge)."""
    seen, lags, tables = [], [], []
    monkeypatch.setattr(nightly, "accepted_values", lambda frame, system, accepted: "the accepted runs' table")
    monkeypatch.setattr(nightly, "others_pool", lambda frame, system, accepted: "the other kinds' pool")

    def judge_window(frame, system, accepted, window, alpha, accepted_table=None, pool=None, rules=None):
        tables.append((accepted_table, pool))
        return nightly.Judgement(window["start"], window["start"])

    monkeypatch.setattr(nightly, "judge_window", judge_window)
    monkeypatch.setattr(nightly.verdict, "confirm", lambda result, again, by: seen.append((result, again, by)) or by)
    monkeypatch.setattr(nightly.siblings, "confirm", lambda found, again, by: lags.append((found, again, by)) or by)
    run = {"start": "run", "rerun": {"start": "rerun"}, "later": {"start": "later"}}
    judged = nightly.judged_with_rerun(None, "s", {"runs": []}, run, 0.05)
    assert judged.verdict == "later" and judged.siblings == "later"
    assert seen == lags == [("run", "rerun", "rerun"), ("rerun", "later", "later")]
    # made once for the run and its two measures again
    assert tables == [("the accepted runs' table", "the other kinds' pool")] * 3


def test_the_delay_of_a_later_confirmation_comes_from_the_system_unless_given(monkeypatch):
    monkeypatch.setattr(nightly.data, "load_all", lambda: {"vm": {"confirm_later_s": 180}, "bare": {}})
    assert nightly.later_delay("vm", None) == 180
    assert nightly.later_delay("bare", None) == 0
    assert nightly.later_delay("vm", 0) == 0
    with pytest.raises(Exception, match="give 0 to 3600"):
        nightly._seconds("7200")
    with pytest.raises(Exception, match="not a whole number"):
        nightly._seconds("3m")


@pytest.mark.parametrize(
    "after, budget, elapsed, rerun, wait",
    [
        (180, None, 500, 30, 180),  # no budget: the system's wait
        (180, 600, 200, 20, 180),  # a short night waits it all
        (180, 600, 395, 30, 130),  # four GPUs: the wait shrinks to end the night within its budget
        (180, 600, 550, 30, 60),  # never below a minute
        (30, 600, 590, 10, 30),  # nor above the system's
    ],
)
def test_the_later_measures_wait_shrinks_to_the_nights_budget(after, budget, elapsed, rerun, wait):
    assert nightly.sized_wait(after, budget, elapsed, rerun) == wait


def test_an_unstable_path_needs_its_rerun_to_be_unstable_too():
    base = {f"r{i}": [55.0] for i in range(6)}
    wild = verdict.judge_values(
        _one_path_table({**base, "tonight": [55.0]}).assign(cv=lambda t: np.where(t["run"] == "tonight", 0.25, 0.002))
    )
    assert wild.paths["verdict"].tolist() == ["unstable"]
    calm = verdict.judge_values(_one_path_table({**base, "tonight": [55.0]}))
    assert verdict.confirm(wild, calm).paths["verdict"].tolist() == ["transient"]
    assert verdict.confirm(wild, wild).paths["verdict"].tolist() == ["unstable"]


def test_the_null_distribution_gives_p_values_that_mean_what_they_say():
    rng = np.random.default_rng(12)
    for n, df in ((3, 6), (8, 0), (5, 40)):
        prior = verdict.Prior(1.0, df)
        sigma = np.sqrt(df / rng.chisquare(df, 4000)) if df else np.ones(4000)
        p = [verdict.locate(rng.normal(0, s, n), rng.normal(0, s), 0.0, prior).p_worse for s in sigma]
        # MIN_SPREAD is a relative floor on logs: with unit variance it never binds.
        assert np.mean(np.array(p) <= 0.05) == pytest.approx(0.05, abs=0.015), (n, df)


def test_the_prior_of_alike_paths_weighs_more_than_that_of_unalike_ones():
    rng = np.random.default_rng(13)
    runs = np.full(30, 5)
    alike = np.array([np.var(rng.normal(0, 0.01, 5), ddof=1) for _ in range(30)])
    unalike = np.array([np.var(rng.normal(0, s, 5), ddof=1) for s in np.geomspace(0.001, 0.3, 30)])
    prior = verdict.fit_priors({"alike": (alike, runs)})["alike"]
    assert prior.df > verdict.fit_priors({"unalike": (unalike, runs)})["unalike"].df
    assert prior.variance == pytest.approx(1e-4, rel=0.5)
    # Two members of a kind borrow the weight the others earn, and keep their own level.
    two = np.array([0.2**2, 0.15**2])
    priors = verdict.fit_priors({"alike": (alike, runs), "two": (two, np.array([8, 8]))})
    assert priors["two"].df == priors["alike"].df > 0 and priors["two"].variance == pytest.approx(0.03, rel=0.5)
    assert verdict.fit_priors({"one": (two[:1], np.array([8]))})["one"].df == 0


def test_holm_matches_its_definition():
    p = np.array([0.01, 0.04, 0.03, 0.005])
    assert verdict.holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])


@pytest.mark.slow  # parses the whole committed history
def test_every_headline_figure_of_the_committed_runs_has_a_path():
    frame = load([COMMITTED], warn=None).frame
    headline = frame[frame["sample"].notna()][["test", "case", "figure"]].drop_duplicates()
    missing = [(t, c, f) for t, c, f in headline.itertuples(index=False) if path_of(t, parse_case(c), f) is None]
    assert not missing, missing[:5]


@pytest.mark.parametrize(
    "test, case, figure, path",
    [
        ("gdrcopy_copybw", {"placement": "local"}, "write_bw", "GPU memory through its BAR by the CPU, write"),
        ("gdrcopy_copylat", {}, "lat_us_gdrcopy_d2h_4", "small copies d2h through the BAR, gdrcopy"),
        ("p2p_pingpong", {"variant": "nvbit"}, "slowdown", "peer link ping-pong under instrumentation, nvbit"),
        ("path_matrix", {}, "gpu1_read_gpu0_sm", "peer link GPU 0 -> GPU 1, sm"),
        ("path_matrix", {}, "gpu0_write_gpu1_both_ce", "peer link GPU 0 <-> GPU 1 both ways, ce"),
        (
            "mem_scan",
            {"mode": "single", "op": "read"},
            "best_gbs",
            "peer links of the scan's GPUs, random read, single",
        ),
    ],
)
def test_the_paths_of_checks_that_need_several_gpus_or_gdrdrv(test, case, figure, path):
    assert path_of(test, case, figure).name == path


def test_every_kinds_floor_lets_a_ten_percent_move_be_seen():
    # A move is tested beyond the floor: a floor of 10% or more passes any 10% move, however steady the path.
    kinds, _ = load_rules()
    assert {kind: spec["floor"] for kind, spec in kinds.items() if spec["floor"] >= 0.10} == {}


def test_every_rule_names_a_known_kind_and_a_valid_pattern():
    kinds, rules = load_rules()
    assert {"host-link", "gpu-memory", "latency"} <= set(kinds)
    assert all(math.isfinite(float(k["floor"])) for k in kinds.values())
    assert rules  # load_rules itself refuses an unknown kind or a bad pattern


def test_run_json_carries_the_exit_and_each_paths_verdict(tmp_path):
    result = verdict.judge_values(_one_path_table({**{f"r{i}": [55.0] for i in range(4)}, "tonight": [54.9]}))
    run = {"stamp": "s", "start": "a", "end": "b"}
    nightly.write_verdict(tmp_path, run, result, 0, [], {"failed": []})
    written = json.loads((tmp_path / "run.json").read_text())
    assert written["exit"] == 0 and written["meaning"] == "as accepted"
    path = {"verdict": "pass", "code": "GMP-100", "change_pct": -0.18, "figures": 1}
    assert written["paths"] == {"host link h2d of GPU 0, ce": path}
    assert written["counts"]["judged"] == 1 and written["counts"]["moved"] == 0
    assert (tmp_path / "paths.csv").exists() and (tmp_path / "compare.csv").exists()


def _many_paths(rng, runs: list[str], gpus: int = 8, figures: int = 14, sigma: float = 0.3) -> pd.DataFrame:
    """Pure noise: `gpus` paths (one per GPU's host link) of `figures` figures (one per NUMA node) each."""
    rows = [
        {
            "test": "path_matrix",
            "case": "paths=host-ce",
            "environ": "gnu",
            "system": "local",
            "partition": "d",
            "gpu_model": "G",
            "gpu_count": "8",
            "host_link": "x",
            "figure": f"gpu{g}_h2d_numa{f}_ce",
            "unit": "GB/s",
            "run": r,
            "value": 50 * math.exp(rng.normal(0, sigma)),
            "cv": 0.002,
            "n": 5,
            "nan_samples": "",
        }
        for g in range(gpus)
        for f in range(figures)
        for r in runs
    ]
    return verdict.attach_paths(pd.DataFrame(rows))


@pytest.mark.long
@pytest.mark.slow  # hundreds of simulated nights
@pytest.mark.parametrize("n", [3, 8])
def test_a_paths_p_values_are_not_too_small_when_nothing_moved(n):
    """Each accepted run's path statistic is taken against the others, as
    tonight's is: in-sample deviations made a path of three runs flag one
    night in four at p <= 0.05."""
    rng = np.random.default_rng(14)
    runs = [f"r{i}" for i in range(n)] + ["tonight"]
    p = np.concatenate([verdict.judge_values(_many_paths(rng, runs)).paths["p_worse"] for _ in range(60)])
    assert np.mean(p <= 0.05) <= 0.07


def test_a_rerun_must_show_again_what_flagged_a_path_and_missing_evidence_is_no_refutation():
    base = {f"r{i}": [55.0 * (1 + 0.002 * (i % 3 - 1))] for i in range(6)}
    # Moved and spread wide at once: the rerun moving it again confirms, whatever its spread.
    both = verdict.judge_values(
        _one_path_table({**base, "tonight": [40.0]}).assign(cv=lambda t: np.where(t["run"] == "tonight", 0.25, 0.002))
    )
    assert both.paths["verdict"].tolist() == ["moved"]
    assert both.paths["flagged_by"].iloc[0] == "path; spread; guard; figures"  # -27%, beyond the guard of 20%
    moved_again = verdict.judge_values(_one_path_table({**base, "tonight": [40.5]}))
    assert verdict.confirm(both, moved_again).paths["verdict"].tolist() == ["moved"]
    # The figure that moved alone, missing from the rerun (its case failed): the flag stands.
    other = _one_path_table({**base, "tonight": [55.0]}, figure="gpu0_h2d_numa1_ce")
    kept = verdict.confirm(both, verdict.judge_values(other))
    assert kept.paths["verdict"].tolist() == ["moved"] and "unconfirmed" in kept.paths["reason"].iloc[0]


def test_a_rerun_reruns_no_case_for_its_yardstick_alone():
    rows = pd.concat(
        [
            _one_path_table({**{f"r{i}": [55.0] for i in range(4)}, "tonight": [44.0]}),
            _one_path_table(
                {**{f"r{i}": [51.3] for i in range(4)}, "tonight": [51.3]},
                unit="GiB/s",
                test="um_bandwidth",
                figure="copy_engine_bw",
                case="memory=pinned op=read",
            ),
        ]
    )
    result = verdict.judge_values(rows)
    assert result.flagged_paths() == ["host link h2d of GPU 0, ce"]
    assert verdict.cases_of_paths(result, result.flagged_paths())["test"].tolist() == ["path_matrix"]


def test_paths_no_bound_holds_are_named():
    values = pd.DataFrame(
        {
            "path": ["host memory read", "host link h2d", "link latency", "small copies", "ratio", ""],
            "unit": ["GB/s", "GB/s", "ns", "us", "fraction", "GB/s"],
            "better": ["higher", "higher", "lower", "lower", "higher", "higher"],
            "bound": [math.nan, 63.0, math.nan, math.nan, math.nan, math.nan],
            "min_us": [math.nan, math.nan, 0.5, math.nan, math.nan, math.nan],
        }
    )
    # A rate without a limit, a time with neither a line's floor nor its kind's; not a ratio, not a figure of no path.
    assert verdict.unbounded_paths(values) == ["host memory read", "small copies"]


def test_a_gpu_or_numa_node_is_named_as_any_in_the_pool():
    assert verdict.anonymous("host link h2d of GPU 1, ce") == "host link h2d of GPU *, ce"
    assert verdict.anonymous("gpu3_h2d_numa1_both_ce") == "gpu*_h2d_numa1_both_ce"  # a remote NUMA node is another path
    assert verdict.anonymous("device=2 size=1G") == "device=* size=1G"
    assert verdict.anonymous("host memory read, NUMA node 0") == "host memory read, NUMA node 0"


def _three_run_kind(rng, spread: float, moved: float = 0.0) -> pd.DataFrame:
    """Three accepted runs and a night of one host-link path with one figure, worse by `moved`."""
    values = np.exp(rng.normal(0, spread, 4)) * 50.0
    values[-1] *= 1 - moved
    return pd.DataFrame(
        {
            "test": "path_matrix",
            "case": "",
            "environ": "gnu",
            "system": "s",
            "partition": "p",
            "gpu_model": "G",
            "gpu_count": 1,
            "host_link": "pcie",
            "figure": "gpu0_h2d_numa0_ce",
            "unit": "GB/s",
            "run": ["a", "b", "c", "tonight"],
            "value": values,
            "cv": 0.001,
            "n": 5,
            "nan_samples": "",
            "bound": math.nan,
        }
    )


def _other_kind(rng, runs: int, spread: float) -> pd.DataFrame:
    """Another kind of node's accepted runs of the same path, on its GPU 1 (4 GPUs)."""
    return pd.DataFrame(
        {
            **{k: v for k, v in _three_run_kind(rng, spread).iloc[0].to_dict().items() if k not in ("run", "value")},
            "gpu_count": 4,
            "figure": "gpu1_h2d_numa0_ce",
            "run": [f"r{i}" for i in range(runs)],
            "value": np.exp(rng.normal(0, spread, runs)) * 50.0,
        }
    )


def test_a_kind_of_three_runs_sees_a_move_other_kinds_spreads_say_is_large():
    """Three runs alone give a prior of little weight: a 15% fall of a path
    whose other kinds of node spread 1% passes on some nights (9 of 20 were
    flagged). With their ten runs pooled (the same link on another GPU of
    another kind), it is flagged every night, and a clean night is not."""
    rng = np.random.default_rng(11)
    pool = verdict.pool_of(verdict.attach_paths(_other_kind(rng, 10, 0.01)))
    # Ten runs' Qn² is worth 5.7 degrees of freedom (a sample variance's 9), rounded down to a step.
    assert pool.paths[("path", "host link h2d of GPU *, ce", None)].df == 4
    flagged = {False: 0, True: 0}
    false_alarms = 0
    for _ in range(10):
        night = verdict.attach_paths(_three_run_kind(rng, 0.01, moved=0.15))
        for pooled in (False, True):
            found = verdict.judge_values(night, pool=pool if pooled else verdict.NO_POOL).flagged_paths()
            flagged[pooled] += bool(found)
        clean = verdict.attach_paths(_three_run_kind(rng, 0.01))
        false_alarms += bool(verdict.judge_values(clean, pool=pool).flagged_paths())
    assert flagged[True] == 10 and flagged[False] < 10 and false_alarms == 0, (flagged, false_alarms)


def test_more_accepted_runs_see_smaller_moves_and_a_replay_needs_a_run_left_to_be_tonight():
    """power --runs on the kept baseline: baselines of three of its runs that
    measured every path are replayed against a fourth; as many runs as there
    are leave none to replay, so that count is simulated alone (marked *)."""
    table = verdict.attach_paths(baselines.read())
    complete = power.complete_runs(table)
    assert 3 < len(complete) < table["run"].nunique()  # the newer paths were measured by some runs only
    result = power.runs_sweep(table, [3, len(complete)], nights=8, alpha=0.05)
    kinds = set(zip(result["runs"], result["how"]))
    assert (3, "replayed") in kinds and (len(complete), "replayed") not in kinds
    simulated = result[result["how"] == "simulated"].groupby("runs")["seen_95_pct"].median()
    assert simulated[len(complete)] < simulated[3]
    summary = power.runs_summary(result)
    assert summary[f"seen_95_pct_{len(complete)}_runs"].str.endswith("*").all()
    assert not summary["seen_95_pct_3_runs"].str.endswith("*").any()
