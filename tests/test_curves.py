"""Curves beside the perflog (checks/suite/curves.py): what is measured is
unchanged by them. The committed outputs of real runs (tests/data/runs) were
logged, before the perflog kept only headline figures, with every figure
their checks had: every size, segment and point. From the same outputs, the
checks now give the same headline figures, and their curve records give
every other figure, with the same value, the way the reports read them."""

import datetime
import math
import time
from pathlib import Path

import pytest
import reframe.utility.sanity as sn
from checkcase import Case
from committed import perflog_holding
from reframe.core.logging import _format_time_rfc3339

import experiments
from checks.copy_latency import copy_latency
from checks.daxpy import daxpy
from checks.mem_scan import mem_scan
from checks.suite.curves import append_curve, completion_time
from experiments.curves import CURVE_COLUMNS, curve_lines
from reports.load import load

REPO = Path(__file__).resolve().parent.parent
RUNS = REPO / "tests" / "data" / "runs"
PERFLOGS = REPO / "perflogs" / "hopper-vm" / "default"

#: Each committed output, with the perflog lines of its run: (check, display name, completion time).
LOGGED = {
    "copy_latency_h100.out": (copy_latency, "copy_latency", "2026-11-23T08:38:47+00:00"),
    "daxpy_h100_managed_off_800000.out": (
        daxpy, "daxpy %allocator=managed %prefetch=off %data_size=800000", "2026-11-23T08:38:29+00:00"),
    "daxpy_h100_explicit_off_800000.out": (
        daxpy, "daxpy %allocator=explicit %prefetch=off %data_size=800000", "2026-11-23T08:38:44+00:00"),
    "mem_scan_h200_single_read.out": (mem_scan, "mem_scan %mode=single %op=read", "2026-11-23T08:39:45+00:00"),
    "mem_scan_h200_single_write.out": (mem_scan, "mem_scan %mode=single %op=write", "2026-11-23T08:39:47+00:00"),
    "mem_scan_h200_single_atomic.out": (mem_scan, "mem_scan %mode=single %op=atomic", "2026-11-23T08:39:48+00:00"),
}  # fmt: skip


def run_perflog(check, when: str, into: Path) -> Path:
    """The lines of the run that ended at `when`, under their header, from
    its check's committed perflog, as a perflog of their own in `into`: a
    few hundred lines to load, where the whole history is hundreds of
    thousands (these runs logged every figure, so no curves file)."""
    header, written = "", ""
    kept: list[str] = []
    for line in perflog_holding(PERFLOGS / f"{check.__name__}.log", when).read_text().splitlines():
        fields = line.split("|")
        if "perf_var" in fields:
            header = line
        elif header and fields[header.split("|").index("job_completion_time")] == when:
            if header != written:  # a run's lines under the header they were written under
                kept.append(written := header)
            kept.append(line)
    into.mkdir(parents=True, exist_ok=True)
    path = into / f"{check.__name__}.log"
    path.write_text("\n".join(kept) + "\n")
    return path


def logged_figures(check, display_name: str, when: str, into: Path) -> dict:
    """{figure: value} of one run, from its check's committed perflog."""
    rows = load(run_perflog(check, when, into), warn=None).frame
    run = rows[(rows["display_name"] == display_name) & (rows["time"] == when)]
    assert not run.empty, f"no perflog lines of {display_name} at {when}"
    return dict(zip(run["perf_var"], run["value"]))


def _scan_sol(logged: dict) -> float | None:
    """The scan's speed of light, as the run took its fractions of it."""
    return logged["gbs_s4_w4"] / logged["sol_s4_w4"] if "sol_s4_w4" in logged else None


def headline_figures(check, stdout: Path, logged: dict, display_name: str) -> dict:
    params = dict(item.lstrip("%").split("=", 1) for item in display_name.split()[1:])
    case = Case(check, stdout, **params)
    case.sol = _scan_sol(logged)
    check.set_perf_variables(case)
    return {name: sn.evaluate(fn) for name, fn in case.perf_variables.items()}


@pytest.mark.parametrize("output", sorted(LOGGED))
def test_headlines_and_curves_give_every_figure_the_perflog_had(output, tmp_path):
    check, display_name, when = LOGGED[output]
    before = logged_figures(check, display_name, when, tmp_path)
    headline = headline_figures(check, RUNS / output, before, display_name)
    assert headline == {name: before[name] for name in headline}, "the headline figures moved"
    case = Case(check, RUNS / output)
    case.sol = _scan_sol(before)
    curve = experiments.curve_figures(check.__name__)(sn.evaluate(case.curve_records()), headline)
    after = {**{name: value for name, (value, _) in curve.items()}, **headline}
    assert sorted(after) == sorted(before)
    moved = {n: (before[n], after[n]) for n in before if not math.isclose(after[n], before[n], rel_tol=1e-9)}
    assert not moved
    # A few headline figures per case; the curve is the rest.
    assert len(curve) > len({n.split(".s")[0] for n in headline})


def test_the_reports_read_a_curve_back_as_the_figures_the_perflog_had(tmp_path):
    """A perflog of headline figures and its curves file load as the full
    perflog of the same run did."""
    output, (check, display_name, when) = "copy_latency_h100.out", LOGGED["copy_latency_h100.out"]
    perflog = perflog_holding(PERFLOGS / "copy_latency.log", when)
    lines = perflog.read_text().splitlines()
    header = lines[0].split("|")
    at = {name: header.index(name) for name in ("job_completion_time", "display_name", "perf_var")}
    run = [line for line in lines[1:] if line.split("|")[at["job_completion_time"]] == when]
    headline = headline_figures(
        check, RUNS / output, logged_figures(check, display_name, when, tmp_path / "whole"), display_name
    )
    kept = [line for line in run if line.split("|")[at["perf_var"]] in headline]
    split = tmp_path / "split"
    split.mkdir()
    (split / "copy_latency.log").write_text("\n".join([lines[0], *kept]) + "\n")
    records = curve_lines((RUNS / output).read_text(), check.curve_tags)
    append_curve(str(split / "copy_latency.curves"), when, display_name, 904, records)

    def figures(path):
        rows = load(path, warn=None).frame
        rows = rows[rows["time"] == when]
        return dict(zip(rows["perf_var"], rows["value"])), rows

    full, full_rows = figures(run_perflog(check, when, tmp_path / "whole"))
    read, split_rows = figures(split)
    assert sorted(read) == sorted(full) and all(math.isclose(read[n], full[n]) for n in full)
    # The curve's rows carry the run's node facts and case.
    for column in ("gpu_model", "host_link", "case", "test", "driver_version"):
        assert set(split_rows[column]) == set(full_rows[column])


def test_a_curve_without_its_runs_perflog_lines_is_reported(tmp_path):
    header = (PERFLOGS / "copy_latency.log").read_text().splitlines()[0]  # today's columns
    (tmp_path / "copy_latency.log").write_text(header + "\n")
    append_curve(
        str(tmp_path / "copy_latency.curves"),
        "2026-01-01T00:00:00+00:00",
        "copy_latency",
        1,
        ["Latency: method=pinned direction=h2d size=8 median_us=6.0 min_us=5.9"],
    )
    loaded = load(tmp_path, warn=None)
    assert loaded.frame.empty
    assert [i.kind for i in loaded.issues] == ["unmatched"]


def test_curves_files_have_one_header_and_refuse_what_would_break_their_columns(tmp_path):
    path = tmp_path / "sub" / "x.curves"
    append_curve(str(path), "t1", "x %a=1", 7, ["Latency: size=1"])
    append_curve(str(path), "t2", "x %a=1", 8, ["Latency: size=2"])
    assert path.read_text().splitlines() == [
        "|".join(CURVE_COLUMNS),
        "t1|x %a=1|7|Latency: size=1",
        "t2|x %a=1|8|Latency: size=2",
    ]
    with pytest.raises(sn.SanityError, match="cannot hold"):
        append_curve(str(path), "t3", "x", 9, ["Latency: reason=a|b"])


def test_completion_times_are_written_as_the_perflog_writes_them():
    now = time.time()
    assert completion_time(now) == _format_time_rfc3339(now, "%FT%T%:z")
    assert datetime.datetime.fromisoformat(completion_time(now)).tzinfo is not None


def test_curve_lines_are_the_records_of_the_curves_tags_only():
    text = "Latency: size=1\nWatch: 1 GPU(s)\nLatencyX: no\nSkipped: method=gdrcopy reason=x\nLatency: size=2 \n"
    assert curve_lines(text, ("Latency",)) == ["Latency: size=1", "Latency: size=2"]


def test_curves_go_where_the_perflog_goes_a_relative_folder_from_where_reframe_started(monkeypatch, tmp_path):
    """The sanity runs in the stage folder; ReFrame resolved a relative
    perflog folder from where it started, and so do the curves."""
    from checks.suite import curves

    settings = {
        "systems/0/prefix": ".",
        "logging/0/handlers_perflog": [{"type": "filelog"}, {"type": "stream"}],
        "logging/0/handlers_perflog/0/basedir": "relperf",
        "logging/0/handlers_perflog/0/prefix": "%(check_system)s/%(check_partition)s",
    }
    config = type("Config", (), {"get": lambda self, key: settings[key]})()
    monkeypatch.setattr(curves.rt, "runtime", lambda: type("Runtime", (), {"site_config": config})())
    monkeypatch.setattr(curves, "_LAUNCH_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path.parent)  # anywhere else, as a stage folder is
    assert curves.perflog_folders("local", "default") == [str(tmp_path / "relperf" / "local" / "default")]


def test_a_curve_joins_its_own_run_when_two_runs_end_in_the_same_second(tmp_path):
    """Two environments' runs of one test can end in the same second: the
    job id tells their curves apart."""
    when, display_name = LOGGED["copy_latency_h100.out"][2], "copy_latency"
    lines = perflog_holding(PERFLOGS / "copy_latency.log", when).read_text().splitlines()
    header = lines[0].split("|")
    at = {n: header.index(n) for n in ("job_completion_time", "perf_var", "jobid", "environ", "perf_value")}
    run = [line.split("|") for line in lines[1:] if line.split("|")[at["job_completion_time"]] == when]
    kept = [f for f in run if f[at["perf_var"]] == "lat_us_pinned_h2d_8"]
    twin = [[*f] for f in kept]
    for fields in twin:
        fields[at["jobid"]], fields[at["environ"]] = "999", "gnu-rt13_5"
    (tmp_path / "copy_latency.log").write_text("\n".join(["|".join(header), *map("|".join, kept + twin)]) + "\n")
    record = "Latency: method=pinned direction=h2d size={size} median_us={us} min_us=1.0"
    append_curve(str(tmp_path / "copy_latency.curves"), when, display_name, 999, [record.format(size=1, us=99.0)])
    append_curve(str(tmp_path / "copy_latency.curves"), when, display_name, 904, [record.format(size=1, us=5.0)])
    rows = load(tmp_path, warn=None).frame
    one = rows[rows["perf_var"] == "lat_us_pinned_h2d_1"].set_index("environ")["value"]
    assert one.to_dict() == {"gnu": 5.0, "gnu-rt13_5": 99.0}
