"""The DAXPY study's output, perflog and crossover, on inputs made by hand
(and one real run of the program on the H100)."""

from pathlib import Path

import pytest
import reframe.utility.sanity as sn

from checks.daxpy import _pairs, _point_samples
from experiments.daxpy import (
    LOGGED_METRICS,
    METRICS,
    POINT_PAIR_RECORD,
    POINT_RECORD,
    Point,
    crossover,
    crossovers,
    figure_points,
    parse_perf_var,
    parse_points,
    perf_var_name,
)

DATA = Path(__file__).parent / "data"


def _line(alloc="managed", prefetch="off", size=8000, inner=4, outer=8, **values) -> str:
    v = {m: 1.0 for m in METRICS} | values
    fields = " ".join(f"{m}={v[m]:.3f}" for m in METRICS)
    return (
        f"DAXPY alloc={alloc} prefetch={prefetch} size={size} rows=100 cols={size // 8} "
        f"inner={inner} outer={outer} {fields}"
    )


def _point(case: str, size: int, inner: int, kernel_us: float, outer: int = 4, **values) -> Point:
    alloc, _, rest = case.partition("+")
    return Point(alloc, "on" if rest else "off", size, inner, outer, {"kernel_us": kernel_us, **values})


def _series(case: str, size: int, times: list, outer: int = 4) -> list:
    """Points at inner = 1, 2, ... with the given kernel times."""
    return [_point(case, size, i + 1, t, outer) for i, t in enumerate(times)]


# ------------------------------------------------------------------ output --


def test_one_line_per_point_with_every_field():
    text = "\n".join(
        [
            "Device 0: NVIDIA H100 80GB HBM3, 79.18 GiB; pageable memory access: no",
            _line(inner=4, outer=8, kernel_us=1234.5, touch_us=77.25, total_us=99999.125),
            _line(alloc="system", prefetch="on", size=800, inner=7, outer=1),
            "Verified: 2 points (y as the kernels and touches must leave it)",
        ]
    )
    first, second = parse_points(text)
    assert (first.alloc, first.prefetch, first.size, first.inner, first.outer) == ("managed", "off", 8000, 4, 8)
    assert first.values["kernel_us"] == pytest.approx(1234.5)
    assert first.values["touch_us"] == pytest.approx(77.25)
    assert first.values["total_us"] == pytest.approx(99999.125)
    assert set(first.values) == set(METRICS)
    assert (second.case, second.size, second.inner, second.outer) == ("system+prefetch", 800, 7, 1)


def test_a_line_missing_a_field_is_an_error():
    with pytest.raises(ValueError, match="without touch_us"):
        parse_points(_line().replace("touch_us=", "touch="))


def test_other_lines_are_not_points():
    assert parse_points("error: verification failed at size=800 inner=1 outer=1\nVerified: 0 points") == []


def test_the_programs_output_on_the_h100():
    text = (DATA / "daxpy_h100_managed_off_800000.txt").read_text()
    points = parse_points(text)
    assert [(p.inner, p.outer) for p in points] == figure_points()
    assert {(p.alloc, p.prefetch, p.size) for p in points} == {("managed", "off", 800000)}
    assert "Verified: 24 points" in text
    for p in points:
        v = p.values
        assert v["per_kernel_us"] == pytest.approx(v["kernel_us"] / (p.inner * p.outer), rel=1e-3)
        assert v["gpu_kernel_us"] <= v["kernel_us"]
        parts = v["alloc_us"] + v["init_us"] + v["warmup_us"] + v["kernel_us"] + v["touch_us"]
        assert parts <= v["total_us"] * 1.001


# ----------------------------------------------------------------- points --


def test_figure_points_cover_every_figure_once():
    points = figure_points()
    assert len(points) == len(set(points)) == 24
    assert {(i, 4) for i in range(1, 17)} <= set(points)  # figures 3, 4, 8
    assert {(4, o) for o in (1, 2, 4, 8, 16)} <= set(points)  # figures 1, 5, 6, 7
    assert {(7, o) for o in (1, 2, 4, 8, 16)} <= set(points)  # figure 2
    assert figure_points([1, 2], [1, 3], 3, [2]) == [(1, 3), (2, 1), (2, 3)]


def test_perf_var_names_round_trip():
    assert perf_var_name("kernel_us", 4, 16) == "kernel_us_i4_o16"
    for metric in LOGGED_METRICS:
        assert parse_perf_var(perf_var_name(metric, 12, 8)) == (metric, 12, 8)
    assert parse_perf_var("steady_bw") is None
    assert parse_perf_var("run1_bw") is None


# -------------------------------------------------------------- crossover --


def test_crossover_where_managed_overtakes_system():
    # Managed pays for migrating y once per outer iteration, then runs from
    # HBM; system memory pays the link on every kernel.
    managed = _series("managed", 8000, [100 + 10 * i for i in range(10)])
    system = _series("system", 8000, [20 + 15 * i for i in range(10)])
    # managed: 100 110 ... 190; system: 20 35 50 65 80 95 110 125 140 155 -> never below
    assert crossover(managed + system, "managed", "system") == {8000: None}
    system = _series("system", 8000, [30 * (i + 1) for i in range(10)])
    # system: 30 60 90 120 150 180 210 ...; managed below from inner 5 (140 < 150)
    assert crossover(managed + system, "managed", "system") == {8000: 5}


def test_no_crossover_when_the_candidate_never_wins():
    explicit = _series("explicit", 800, [10, 12, 14, 16])
    managed = _series("managed", 800, [50, 51, 52, 53])
    assert crossover(explicit + managed, "managed", "explicit") == {800: None}


def test_a_lost_last_point_means_no_crossover():
    managed = _series("managed", 800, [50, 40, 30, 20])
    system = _series("system", 800, [60, 50, 40, 19])
    assert crossover(managed + system, "managed", "system") == {800: None}


def test_an_early_win_that_does_not_last_is_not_the_crossover():
    managed = _series("managed", 8000, [10, 20, 30, 40, 50, 60])
    system = _series("system", 8000, [12, 15, 25, 35, 55, 65])
    # wins at inner 1, loses at 2-4, wins from 5 on
    assert crossover(managed + system, "managed", "system") == {8000: 5}


def test_a_candidate_faster_throughout_crosses_at_the_first_inner():
    points = _series("managed+prefetch", 80000, [1, 2, 3]) + _series("explicit", 80000, [5, 6, 7])
    assert crossover(points, "managed+prefetch", "explicit") == {80000: 1}


def test_prefetch_cases_are_told_apart():
    points = (
        _series("managed", 800, [9, 9])
        + _series("managed+prefetch", 800, [1, 1])
        + _series("system", 800, [5, 5])
        + _series("system+prefetch", 800, [0.5, 0.5])
    )
    assert crossover(points, "managed", "system") == {800: None}
    assert crossover(points, "managed+prefetch", "system") == {800: 1}
    assert crossover(points, "managed+prefetch", "system+prefetch") == {800: None}


def test_only_the_chosen_outer_and_shared_sizes_count():
    points = (
        _series("managed", 800, [1, 1])
        + _series("system", 800, [2, 2], outer=8)  # another outer: not compared
        + _series("managed", 8000, [1, 1])
        + _series("system", 8000, [2, 2])
        + _series("managed", 80000, [1, 1])  # no system at this size
    )
    assert crossover(points, "managed", "system") == {8000: 1}
    assert crossover(points, "managed", "system", outer=8) == {}


def test_crossover_of_summed_metrics():
    # Faster kernels, slower touches: the kernel time crosses, the sum does not.
    managed = [_point("managed", 800, i, 10, touch_us=100) for i in (1, 2)]
    explicit = [_point("explicit", 800, i, 20, touch_us=10) for i in (1, 2)]
    assert crossover(managed + explicit, "managed", "explicit") == {800: 1}
    assert crossover(managed + explicit, "managed", "explicit", metric=("kernel_us", "touch_us")) == {800: None}


def test_crossovers_names_every_comparison():
    points = _series("managed", 800, [1]) + _series("explicit", 800, [2])
    result = crossovers(points)
    assert result["managed vs explicit"] == {800: 1}
    assert result["managed vs system"] == {}
    assert set(result) == {
        "managed vs system",
        "managed+prefetch vs system+prefetch",
        "managed vs explicit",
        "managed+prefetch vs explicit",
    }


# ---------------------------------------------------------------- perflog --

HEADER = (
    "job_completion_time|reframe version|name|display_name|system|partition|environ|job_nodelist|gpu_model|"
    "driver_version|cuda_version|host_link|result|perf_var|perf_value|perf_unit|perf_ref|perf_lower_thres|"
    "perf_upper_thres"
)


def _row(alloc, prefetch, size, var, value, system="summit", gpu="Tesla V100-SXM2-16GB", when="2026-11-22T16:43:19"):
    name = f"daxpy %allocator={alloc} %prefetch={prefetch} %data_size={size}"
    return (
        f"{when}|reframe 4.10.4|{name}|{name}|{system}|batch|cuda|a01n01|{gpu}|418.67|10.1|nvlink gen2|pass|"
        f"{var}|{value}|us|0|null|null"
    )


def _perflog(rows) -> str:
    return "\n".join([HEADER, *rows]) + "\n"


def _points(tmp_path, text: str) -> dict:
    """The study's points of a perflog, by machine, as the reports read them."""
    from reports.figures.daxpy import _daxpy_table, daxpy_points
    from reports.load import load

    path = tmp_path / "daxpy.log"
    path.write_text(text)
    table = _daxpy_table(load([path], warn=None).frame)
    return {key: daxpy_points(group) for key, group in table.groupby(["system", "gpu_model"])}


def test_points_from_a_perflog(tmp_path):
    text = _perflog(
        [
            _row("managed", "off", 8000, "kernel_us_i4_o4", 100.0),
            _row("managed", "off", 8000, "touch_us_i4_o4", 30.0),
            _row("system", "off", 8000, "kernel_us_i4_o4", 200.0),
            _row("managed", "off", 8000, "kernel_us_i4_o4", 90.0, when="2026-11-23T10:00:00"),  # a later run
            _row("managed", "off", 8000, "kernel_us_i4_o4", 5.0, system="local", gpu="NVIDIA H100 80GB HBM3"),
            "2026-11-22T16:43:19|reframe 4.10.4|um_bandwidth %memory=managed|x|summit|batch|cuda|n|g|d|c|"
            "l|pass|steady_bw|207.4|GiB/s|0|null|null",
        ]
    )
    by_machine = _points(tmp_path, text)
    assert set(by_machine) == {("summit", "Tesla V100-SXM2-16GB"), ("local", "NVIDIA H100 80GB HBM3")}
    summit = {(p.case, p.size, p.inner, p.outer): p.values for p in by_machine[("summit", "Tesla V100-SXM2-16GB")]}
    assert summit == {  # repeated executions: their median
        ("managed", 8000, 4, 4): {"kernel_us": 95.0, "touch_us": 30.0},
        ("system", 8000, 4, 4): {"kernel_us": 200.0},
    }


def test_crossover_from_a_perflog(tmp_path):
    rows = []
    for inner in range(1, 11):
        rows.append(_row("managed", "off", 8000, f"kernel_us_i{inner}_o4", 100 + 10 * inner))
        rows.append(_row("system", "off", 8000, f"kernel_us_i{inner}_o4", 25 * inner))
        rows.append(_row("managed", "off", 800, f"kernel_us_i{inner}_o4", 100 + 10 * inner))
        rows.append(_row("system", "off", 800, f"kernel_us_i{inner}_o4", 5 * inner))
    (points,) = _points(tmp_path, _perflog(rows)).values()
    # managed 110..200, system 25..250: managed below from inner 7 (170 < 175); never at 800 B
    assert crossover(points, "managed", "system") == {800: None, 8000: 7}


def test_points_from_a_perflog_with_every_loggable_field(tmp_path):
    # rfmconfig/settings.py's %(check_#ALL)s: every loggable attribute, sorted by
    # name, the check's parameters and variables among them.
    fields = ["allocator", "data_size", "display_name", "fixed_outer", "gpu_model", "name", "prefetch", "system"]
    header = "|".join(["job_completion_time", "reframe version", *fields, "result", "perf_var", "perf_value"])
    name = "daxpy %allocator=explicit %prefetch=off %data_size=80000"
    values = {"allocator": "explicit", "data_size": "80000", "display_name": name, "fixed_outer": "4"}
    values |= {"gpu_model": "NVIDIA H100 80GB HBM3", "name": name, "prefetch": "off", "system": "local"}
    row = "|".join(["2026-11-24T09:00:00", "reframe 4.10.4", *(values[f] for f in fields), "pass", "touch_us_i7_o16"])
    by_machine = _points(tmp_path, f"{header}\n{row}|1234.5\n")
    (point,) = by_machine[("local", "NVIDIA H100 80GB HBM3")]
    assert (point.case, point.size, point.inner, point.outer) == ("explicit", 80000, 7, 16)
    assert point.values == {"touch_us": 1234.5}


def test_the_checks_sanity_and_performance_extraction():
    path = str(DATA / "daxpy_h100_managed_off_800000.txt")
    assert sn.evaluate(_pairs(sn.extractall(POINT_PAIR_RECORD, path, [1, 2], int))) == figure_points()
    lines = sn.extractall(POINT_RECORD, path, 1)
    assert sn.evaluate(_point_samples(lines, 4, 4, "kernel_us")) == [pytest.approx(59757.552)]
    assert sn.evaluate(_point_samples(lines, 7, 16, "per_kernel_us"))[0] > 0
    with pytest.raises(sn.SanityError, match="no DAXPY line for inner=3 outer=3"):
        sn.evaluate(_point_samples(lines, 3, 3, "kernel_us"))


def test_a_point_measured_again_gives_its_samples_in_order():
    lines = [
        _line(inner=4, outer=4, kernel_us=v).removeprefix("DAXPY ") + f" sample={k}"
        for k, v in ((2, 20.0), (1, 10.0), (3, 30.0))
    ]
    assert sn.evaluate(_point_samples(lines, 4, 4, "kernel_us")) == [10.0, 20.0, 30.0]
