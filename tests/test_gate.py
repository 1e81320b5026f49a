"""The gate's verdicts on synthetic runs: what it flags, what it passes,
what it refuses to judge, and its false alarms and detections over seeds."""

import numpy as np
import pandas as pd
import pytest

from reports import gate
from reports.cli import main
from reports.load import load

FIGURES = 200
SEEDS = range(20)


def samples(figure: str, values, side: str, run: int, unit: str = "GiB/s", tolerance: float = 0.03) -> list[dict]:
    """Rows as the loader makes them: the samples, and the figure with its logged thresholds."""
    common = {
        "test": "Check",
        "case": f"case={figure}",
        "environ": "gnu",
        "system": "local",
        "partition": "default",
        "gpu_model": "GPU",
        "gpu_count": "1",
        "host_link": "pcie gen5 x16",
        "figure": figure,
        "unit": unit,
        "side": side,
        "run": run,
    }
    rows = [{**common, "sample": k + 1, "value": v} for k, v in enumerate(values)]
    lower, upper = (-tolerance, None) if gate.direction(unit) == "higher" else (None, tolerance)
    rows.append(
        {**common, "sample": None, "value": float(np.median(values)), "lower_thres": lower, "upper_thres": upper}
    )
    return rows


def runs(rng, figures: int, drop: dict, within: float = 0.01, between: float = 0.003) -> pd.DataFrame:
    """Three accepted runs and a new one, five samples each, per figure; `drop` scales some figures of the new run."""
    rows = []
    for f in range(figures):
        level = rng.uniform(10, 2000)
        for run, side in ((0, "base"), (1, "base"), (2, "base"), (3, "new")):
            offset = rng.normal(0, between)
            values = level * np.exp(offset + rng.normal(0, within, 5)) * (drop.get(f, 1.0) if side == "new" else 1.0)
            rows += samples(f"f{f}", values, side, run)
    frame = pd.DataFrame(rows)
    frame["sample"] = frame["sample"].astype("Int64")
    return frame


def judged(frame: pd.DataFrame, **kw) -> pd.DataFrame:
    return gate.judge(frame, frame["side"] == "base", frame["side"] == "new", **kw)


@pytest.mark.slow  # hundreds of simulated nights
def test_a_seven_percent_drop_in_one_of_200_noisy_figures_is_the_only_one_flagged():
    for seed in SEEDS:
        result = judged(runs(np.random.default_rng(seed), FIGURES, {17: 0.93}))
        flagged = result.loc[result["verdict"] == "regression", "figure"].tolist()
        assert flagged == ["f17"], f"seed {seed}: {flagged}"
        assert gate.summary(result) == {"figures": 200, "judged": 200, "flagged": 1, "improved": 0, "unjudged": 0}


@pytest.mark.slow  # hundreds of simulated nights
def test_pure_noise_flags_nothing():
    for seed in SEEDS:
        result = judged(runs(np.random.default_rng(100 + seed), FIGURES, {}))
        assert not (result["verdict"] == "regression").any(), f"seed {seed}"


def test_a_change_within_the_practical_threshold_is_not_flagged_however_significant():
    result = judged(runs(np.random.default_rng(1), 5, {2: 0.98}, within=0.001))  # -2% against a 3% threshold
    assert (result["verdict"] == "pass").all()


def test_longer_times_are_regressions_and_shorter_ones_improvements():
    rng = np.random.default_rng(3)
    rows = []
    for run, side in ((0, "base"), (1, "base"), (2, "new")):
        scale = 1.2 if side == "new" else 1.0
        rows += samples("slow_us", 10 * scale * np.exp(rng.normal(0, 0.01, 5)), side, run, unit="us")
        rows += samples("fast_us", 10 / scale * np.exp(rng.normal(0, 0.01, 5)), side, run, unit="us")
    frame = pd.DataFrame(rows).astype({"sample": "Int64"})
    verdicts = judged(frame).set_index("figure")["verdict"]
    assert verdicts.to_dict() == {"fast_us": "improvement", "slow_us": "regression"}


@pytest.mark.parametrize(
    "base, new, unit, tolerance, reason",
    [
        ([], [1.0] * 5, "GiB/s", 0.03, "no baseline"),
        ([1.0] * 5, [], "GiB/s", 0.03, "not measured in this run"),
        ([1.0], [1.0], "GiB/s", 0.03, "too few samples (1 in the baseline, 1 in the run"),
        ([1.0] * 5, [1.0] * 5, "B", 0.03, "unit 'B' says neither"),
        ([1.0] * 5, [1.0] * 5, "GiB/s", 0.0, "no practical threshold"),
    ],
)
def test_what_cannot_be_judged_says_why(base, new, unit, tolerance, reason):
    rows = (samples("x", base, "base", 0, unit, tolerance) if base else []) + (
        samples("x", new, "new", 1, unit, tolerance) if new else []
    )
    frame = pd.DataFrame(rows).astype({"sample": "Int64"})
    [row] = judged(frame).to_dict("records")
    assert row["verdict"] == "unjudged" and reason in row["reason"]


HEADER = (
    "job_completion_time|display_name|system|partition|environ|case|gpu_model|host_link|"
    "perf_var|perf_value|perf_unit|perf_ref|perf_lower_thres|perf_upper_thres"
)


def _perflog(tmp_path, samples_per_side: int):
    lines = [HEADER]
    for day, level in ((1, 50.0), (2, 40.0)):
        t = f"2026-11-0{day}T10:00:00+00:00"
        common = f"{t}|Check|local|default|gnu|op=read|GPU|pcie gen5 x16"
        lines.append(f"{common}|bw|{level}|GiB/s|{level}|-0.05|null")
        lines += [f"{common}|bw.s{k}|{level + k * 0.01}|GiB/s|0|null|null" for k in range(1, samples_per_side + 1)]
    (tmp_path / "Check.log").write_text("\n".join(lines) + "\n")
    return [
        "compare",
        str(tmp_path),
        "--by",
        "time",
        "--base",
        "2026-11-01",
        "--new",
        "2026-11-02",
        "--csv",
        str(tmp_path / "c.csv"),
    ]


def test_compare_with_one_sample_per_side_exits_3(tmp_path, capsys):
    assert main(_perflog(tmp_path, 1)) == 3
    assert "UNJUDGED Check op=read bw: too few samples" in capsys.readouterr().out


def test_compare_flags_a_twenty_percent_drop_with_exit_2_and_writes_every_verdict(tmp_path):
    args = _perflog(tmp_path, 5)
    assert main(args) == 2
    table = pd.read_csv(tmp_path / "c.csv")
    assert table[["figure", "verdict"]].values.tolist() == [["bw", "regression"]]
    assert main([*args, "--threshold", "25"]) == 0  # a 20% drop within a 25% threshold


def test_compare_that_cannot_start_exits_3(tmp_path):
    args = _perflog(tmp_path, 5)
    assert main([*args[:2], "--by", "no_such_field", "--base", "a", "--new", "b"]) == 3
    assert main(["compare", str(tmp_path), "--bogus"]) == 3
    assert main([*args[:2], "--by", "time", "--base", "2026-12-01", "--new", "2026-12-02"]) == 3


def test_samples_and_figures_load_apart(tmp_path):
    _perflog(tmp_path, 3)
    frame = load(tmp_path, warn=None).frame
    assert sorted(frame["figure"].unique()) == ["bw"]
    assert frame["sample"].dropna().astype(int).tolist() == [1, 2, 3, 1, 2, 3]
    assert (frame["case"] == "op=read").all()


@pytest.mark.parametrize("threshold", [0.22, 0.5, 1.5])
def test_a_time_is_flagged_just_beyond_one_plus_its_threshold(threshold):
    """A time's reference bounds it at base * (1 + t), t above 1 included: the gate flags there too."""
    rng = np.random.default_rng(5)

    def frame(scale):
        rows = []
        for run, side in ((0, "base"), (1, "base"), (2, "base"), (3, "new")):
            factor = scale if side == "new" else 1.0
            rows += samples("t_us", 100 * factor * np.exp(rng.normal(0, 0.005, 5)), side, run, "us", threshold)
        return pd.DataFrame(rows).astype({"sample": "Int64"})

    [beyond] = judged(frame((1 + threshold) * 1.05)).to_dict("records")
    [within] = judged(frame((1 + threshold) * 0.95)).to_dict("records")
    assert beyond["verdict"] == "regression" and within["verdict"] == "pass"


def test_a_sample_that_is_not_finite_is_not_judged():
    rows = samples("x", [1.0, 1.0, 1.1, 1.0, 1.0], "base", 0) + samples("x", [1.0, np.inf, 1.0, 1.0, 1.0], "new", 1)
    [row] = judged(pd.DataFrame(rows).astype({"sample": "Int64"})).to_dict("records")
    assert row["verdict"] == "unjudged" and "not finite" in row["reason"]


def _toolkit_perflog(tmp_path, field: str, values: tuple, planted: str):
    """Two sets of runs on one node that differ in `field` (each CUDA runtime an
    environment of its own, a driver not), five samples of three figures a
    side, with one figure of the new side 20% down."""
    header = f"job_completion_time|display_name|system|partition|environ|case|gpu_model|host_link|{field}|" + (
        "perf_var|perf_value|perf_unit|perf_ref|perf_lower_thres|perf_upper_thres"
    )
    lines = [header]
    for side, value in enumerate(values):
        environ = f"gnu-rt{value.replace('.', '_')}" if field == "cuda_runtime_version" and side else "gnu"
        common = f"2026-11-23T1{side}:00:00+00:00|Check|local|default|{environ}|op=read|GPU|pcie gen5 x16|{value}"
        for figure, level in (("read_bw", 50.0), ("write_bw", 40.0), ("copy_bw", 45.0)):
            level *= 0.8 if side and figure == planted else 1.0
            lines.append(f"{common}|{figure}|{level}|GiB/s|0|-0.05|null")
            lines += [f"{common}|{figure}.s{k}|{level * (1 + k / 1000)}|GiB/s|0|null|null" for k in range(1, 6)]
    (tmp_path / "Check.log").write_text("\n".join(lines) + "\n")
    return [
        "compare",
        str(tmp_path),
        "--by",
        field,
        "--base",
        values[0],
        "--new",
        values[1],
        "--threshold",
        "5",
        "--csv",
        str(tmp_path / "c.csv"),
    ]


@pytest.mark.parametrize(
    "field, values", [("cuda_runtime_version", ("13.0", "13.5")), ("driver_version", ("580.159.04", "590.10"))]
)
def test_an_upgrade_compared_flags_exactly_the_one_planted_change(tmp_path, field, values):
    assert main(_toolkit_perflog(tmp_path, field, values, planted="write_bw")) == 2
    table = pd.read_csv(tmp_path / "c.csv").set_index("figure")
    assert table["verdict"].to_dict() == {"copy_bw": "pass", "read_bw": "pass", "write_bw": "regression"}
    assert table.loc["write_bw", "change_pct"] == pytest.approx(-20.0)
