"""src/copy_latency's output and the crossovers computed from it."""

import re
from pathlib import Path

import pytest
import reframe.utility.sanity as sn
from reframe.core.exceptions import SanityError

from checks.copy_latency import _complete_curves
from experiments.copy_latency import crossover, crossovers, parse_latencies, parse_skipped, parse_verified, perf_name

DATA = Path(__file__).parent / "data"
# A real run on the H100 (PCIe Gen5, driver 580.159.04, CUDA 13.0): the
# program's defaults, a build without GDRCopy.
H100 = DATA / "copy_latency_h100.txt"
SIZES = [2**k for k in range(25)]  # 1 B .. 16 MiB


@pytest.fixture(scope="module")
def h100():
    return H100.read_text()


def test_every_method_direction_and_size_is_parsed(h100):
    curves = parse_latencies(h100)
    assert set(curves) == {(m, d) for m in ("pageable", "pinned", "async", "zerocopy") for d in ("h2d", "d2h")}
    for curve in curves.values():
        assert sorted(curve) == SIZES
    assert parse_verified(h100) == 200


def test_values_are_the_printed_ones(h100):
    medians, minima = parse_latencies(h100), parse_latencies(h100, "min")
    assert medians[("pinned", "h2d")][4096] == pytest.approx(8.6130)
    assert minima[("pinned", "h2d")][4096] == pytest.approx(7.9560)
    assert medians[("zerocopy", "d2h")][1] == pytest.approx(10.5190)
    assert medians[("pageable", "d2h")][16777216] == pytest.approx(1448.5775)


def test_the_gdrcopy_leg_says_why_it_did_not_run(h100):
    assert parse_skipped(h100) == {
        "gdrcopy": "built without GDRCopy (configure with -DGPU_MEMPATHS_WITH_GDRCOPY=ON)",
    }


def test_perf_names_are_parseable():
    assert perf_name("pinned", "h2d", 4096) == "lat_us_pinned_h2d_4096"


def test_crossover_where_the_large_copy_method_takes_over():
    zerocopy = {1: 3.0, 2: 3.0, 4: 3.1, 8: 3.5, 16: 5.0, 32: 9.0}
    pinned = {1: 7.0, 2: 7.0, 4: 7.1, 8: 7.2, 16: 7.3, 32: 7.5}
    assert crossover(zerocopy, pinned) == 32
    # The other way round there is no crossover: pinned never leads first.
    assert crossover(pinned, zerocopy) is None


def test_crossover_is_where_the_lead_lasts():
    a = {1: 1.0, 2: 1.0, 4: 1.0, 8: 1.0, 16: 1.0}
    b = {1: 2.0, 2: 0.5, 4: 2.0, 8: 0.5, 16: 0.5}  # ahead at 2, behind at 4, ahead from 8 on
    assert crossover(a, b) == 8


def test_no_crossover_when_the_second_method_never_overtakes():
    assert crossover({1: 1.0, 2: 2.0}, {1: 5.0, 2: 3.0}) is None
    assert crossover({1: 1.0, 2: 2.0}, {1: 5.0, 2: 2.0}) is None  # a tie is no lead


def test_crossover_compares_common_sizes_only():
    a = {1: 1.0, 4: 2.0, 16: 8.0, 64: 30.0}
    b = {1: 5.0, 2: 5.0, 16: 6.0, 64: 7.0, 256: 8.0}
    assert crossover(a, b) == 16
    assert crossover({1: 1.0}, {1: 2.0}) is None


def test_crossovers_name_both_methods_and_the_direction():
    curves = {
        ("zerocopy", "h2d"): {1: 3.0, 1024: 4.0, 2**20: 60.0},
        ("pinned", "h2d"): {1: 7.0, 1024: 7.5, 2**20: 30.0},
        ("zerocopy", "d2h"): {1: 3.0, 1024: 3.0, 2**20: 3.0},
        ("pinned", "d2h"): {1: 7.0, 1024: 7.0, 2**20: 70.0},
    }
    assert crossovers(curves) == {"crossover_h2d_pinned_over_zerocopy": 2**20}


def test_crossovers_of_the_h100_run(h100):
    found = crossovers(parse_latencies(h100))
    # Small pageable copies are the fastest there; pinned copies overtake at 32 KiB.
    assert found["crossover_h2d_pinned_over_pageable"] == 32768
    assert all(name.startswith(("crossover_h2d_", "crossover_d2h_")) for name in found)


def _write(tmp_path, text):
    path = tmp_path / "out.txt"
    path.write_text(text)
    return str(path)


METHODS = ["pageable", "pinned", "async", "zerocopy"]
_GDRCOPY_SKIPPED = re.compile(r"^Skipped: method=gdrcopy .*\n", re.MULTILINE)


@pytest.fixture
def h100_measured(h100):
    """The H100 run as a node without gdrdrv runs it: GDRCopy's leg not asked for."""
    return _GDRCOPY_SKIPPED.sub("", h100)


def test_sanity_accepts_the_h100_run(h100_measured, tmp_path):
    assert sn.evaluate(_complete_curves(_write(tmp_path, h100_measured), METHODS, ["h2d", "d2h"]))


def test_sanity_rejects_a_missing_size(h100_measured, tmp_path):
    broken = h100_measured.replace(
        "Latency: method=async direction=d2h size=4096 ", "Latency: method=async direction=d2h size=4095 "
    )
    with pytest.raises(SanityError, match="async d2h: sizes"):
        sn.evaluate(_complete_curves(_write(tmp_path, broken), METHODS, ["h2d", "d2h"]))


def test_sanity_rejects_a_skipped_leg_gdrcopys_too(h100, tmp_path):
    # GDRCopy's leg is asked for only where the node has gdrdrv: a build
    # without GDRCopy there leaves a leg the node promises unmeasured.
    with pytest.raises(SanityError, match="the gdrcopy leg was skipped: built without GDRCopy"):
        sn.evaluate(_complete_curves(_write(tmp_path, h100), [*METHODS, "gdrcopy"], ["h2d", "d2h"]))
    broken = h100.replace("Skipped: method=gdrcopy", "Skipped: method=zerocopy")
    with pytest.raises(SanityError, match="zerocopy leg was skipped"):
        sn.evaluate(_complete_curves(_write(tmp_path, broken), METHODS, ["h2d", "d2h"]))


def test_sanity_rejects_an_unfinished_run(h100_measured, tmp_path):
    cut = h100_measured[: h100_measured.index("Data verified")]
    with pytest.raises(SanityError, match="0 cases verified, 200 timed"):
        sn.evaluate(_complete_curves(_write(tmp_path, cut), METHODS, ["h2d", "d2h"]))


def test_sanity_requires_the_block_medians_of_every_headline_size(h100_measured, tmp_path):
    """The headline latencies' samples are their block medians: an output
    without them (this one predates them) fails, naming the case; a run's
    output with them passes."""
    with pytest.raises(SanityError, match="pageable h2d 8 B: not 5 block medians"):
        sn.evaluate(_complete_curves(_write(tmp_path, h100_measured), METHODS, ["h2d", "d2h"], 5))
    run = (DATA / "runs" / "copy_latency_h100.out").read_text()
    assert sn.evaluate(_complete_curves(_write(tmp_path, run), METHODS, ["h2d", "d2h"], 5))


def test_a_copys_floor_is_its_bytes_at_the_host_links_limit():
    from checks.copy_latency import copy_latency
    from experiments.copy_latency import copy_size
    from systems import data

    node = next(p["node"] for p in data.load_all()["dgx-a100"]["partitions"] if "node" in p)
    link = data.speed_of_light(node)["host_link"]
    assert copy_size("lat_us_pinned_h2d_1048576") == 1048576 and copy_size("crossover_h2d_async_over_pinned") is None
    assert copy_latency.floor_us_of("lat_us_pinned_h2d_1048576", {}, node) == pytest.approx(1048576 / link * 1e6)
    # Small copies keep the path's own floor (anything that crosses a link: 0.5 us).
    assert copy_latency.floor_us_of("lat_us_zerocopy_d2h_8", {}, node) == pytest.approx(0.5)
