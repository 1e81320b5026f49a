"""./suite report compare (judge/compare.py): two sets of runs chosen by a
field, cut into runs, judged by the verdict by path in the design the runs
allow."""

import pytest

from judge import compare as cmp
from judge.status import MOVED, UNJUDGED
from reports.load import load

CASE = "memory=managed op=read size_class=small small_size=1G touch_on_host=notouch"
HEADER = (
    "job_completion_time|display_name|system|partition|environ|case|gpu_model|host_link|driver_version|"
    "perf_var|perf_value|perf_unit|perf_ref|perf_lower_thres|perf_upper_thres"
)
GPU_MEMORY = "GPU memory of GPU 0"


def perflog(tmp_path, runs: list[tuple[str, str, float]]):
    """um_bandwidth's two headline figures, five samples each, per run (time, driver, factor on steady_bw)."""
    lines = [HEADER]
    for when, driver, factor in runs:
        common = f"{when}|um_bandwidth %op=read|local|default|gnu|{CASE}|H100|pcie gen5 x16|{driver}"
        for figure, level in (("steady_bw", 1900.0 * factor), ("first_run_bw", 20.0)):
            lines += [f"{common}|{figure}.s{k}|{level * (1 + k / 1000)}|GB/s|0|null|null" for k in range(1, 6)]
    (tmp_path / "um_bandwidth.log").write_text("\n".join(lines) + "\n")
    return load(tmp_path, warn=None).frame


def interleaved(pairs: int, drop: float) -> list[tuple[str, str, float]]:
    """Runs ten minutes apart, old and new in turn, each round 1% off the last alike on both sides."""
    runs = []
    for i in range(pairs):
        drift = 1 + 0.01 * (i % 2)
        runs.append((f"2026-11-01T10:{20 * i:02d}:00", "570.1", drift))
        runs.append((f"2026-11-01T10:{20 * i + 10:02d}:00", "580.1", drift * (1 - drop)))
    return runs


@pytest.mark.parametrize("drop, moved", [(0.0, False), (0.07, True)])
def test_runs_side_by_side_are_judged_in_pairs(tmp_path, drop, moved):
    found = cmp.compare(perflog(tmp_path, interleaved(3, drop)), "driver_version", "570", "580")
    assert found.design.startswith("3 pairs of runs")
    paths = found.result.paths.set_index("path")
    assert paths.loc[GPU_MEMORY, "verdict"] == ("moved" if moved else "pass")
    assert paths.loc[GPU_MEMORY, "low_pct"] <= paths.loc[GPU_MEMORY, "change_pct"] <= paths.loc[GPU_MEMORY, "high_pct"]
    assert cmp.status_of(found.result) == (MOVED if moved else 0)


def test_one_new_run_is_judged_as_a_night_against_the_base_runs(tmp_path):
    runs = [r for r in interleaved(3, 0.07) if r[1] == "570.1"] + [("2026-11-01T12:00:00", "580.1", 0.93)]
    found = cmp.compare(perflog(tmp_path, runs), "driver_version", "570", "580")
    assert found.design.startswith("one new run against 3 base run(s)")
    assert found.result.paths.set_index("path").loc[GPU_MEMORY, "verdict"] == "moved"


def test_new_runs_that_cannot_be_paired_are_judged_as_one_against_the_base_runs(tmp_path):
    runs = [r for r in interleaved(3, 0.07) if r[1] == "570.1"]  # three base runs, then two nights under 580
    runs += [("2026-11-02T10:00:00", "580.1", 0.93), ("2026-11-03T10:00:00", "580.1", 0.935)]
    found = cmp.compare(perflog(tmp_path, runs), "driver_version", "570", "580")
    assert found.design.startswith("2 new runs judged as one (their median) against 3 base run(s)")
    assert found.result.paths.set_index("path").loc[GPU_MEMORY, "verdict"] == "moved"


def test_a_new_side_without_runs_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no run has driver_version '590'"):
        cmp.compare(perflog(tmp_path, interleaved(3, 0.0)), "driver_version", "570", "590")


def test_a_run_is_cut_where_its_sides_records_leave_a_gap(tmp_path):
    frame = perflog(tmp_path, interleaved(3, 0.0))
    assert len(cmp.runs_of(frame, frame["driver_version"] == "570.1")) == 3


def test_the_command_line_says_the_design_and_exits_as_the_verdict(tmp_path, capsys):
    from commands.cli import main

    logs = tmp_path / "perflogs"
    logs.mkdir()
    perflog(logs, interleaved(3, 0.07))
    csv = tmp_path / "out.csv"
    assert (
        main(["compare", str(logs), "--by", "driver_version", "--base", "570", "--new", "580", "--csv", str(csv)])
        == MOVED
    )
    out = capsys.readouterr().out
    assert "3 pairs of runs, paired in time order" in out and f"MOVED      {GPU_MEMORY}" in out
    assert csv.exists() and csv.with_suffix(".paths.csv").exists()
    perflog(logs, interleaved(2, 0.0))  # two runs a side: too few to judge by
    assert (
        main(["compare", str(logs), "--by", "driver_version", "--base", "570", "--new", "580", "--csv", str(csv)])
        == UNJUDGED
    )
