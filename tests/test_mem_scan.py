"""checks/mem_scan.py: the random-access scan's lines (tests/data/mem_scan_h200.txt:
its output on the pair of H200), their summaries and samples, and the seed's
speed of light."""

from pathlib import Path

import pytest

from experiments.mem_scan import (
    PLATEAU_FROM,
    SEGMENTS,
    WIDTHS,
    block_summaries,
    parse_link,
    parse_scan,
    scan_limit,
    scan_speed_of_light,
    summarise,
)
from systems import data

DATA = Path(__file__).parent / "data"
MiB = 2**20


def scan_points(op=None, mode="single"):
    points = parse_scan((DATA / "mem_scan_h200.txt").read_text())
    return [p for p in points if p.mode == mode and (op is None or p.op == op)]


@pytest.mark.parametrize("mode", ["single", "chunked", "multiprocess"])
def test_every_point_of_the_sweep_parses(mode):
    assert len(scan_points(mode=mode)) == 13 * 3 * 2 + 13


def test_every_point_of_one_mode():
    points = scan_points()
    assert len(points) == 13 * 3 * 2 + 13  # read and write x widths, atomic at 4 B per thread
    reads = scan_points("read")
    assert sorted({p.segment for p in reads}) == SEGMENTS
    assert sorted({p.width for p in reads}) == WIDTHS
    assert {p.width for p in scan_points("atomic")} == {4}


def test_a_scan_line_has_each_gpu_and_the_aggregate():
    p = next(p for p in scan_points("read") if p.segment == 4 and p.width == 16)
    assert (p.mode, p.gpus, p.thread_bytes) == ("single", 2, 4)  # a 4-byte segment is one 4-byte thread
    assert p.per_gpu == [22.41, 22.40]
    assert p.min_gbs == 22.40
    assert p.aggregate_gbs == pytest.approx(sum(p.per_gpu), abs=0.01)
    assert p.mean_gbs == pytest.approx(p.aggregate_gbs / 2, abs=0.01)


def test_summaries_take_each_segments_best_width():
    reads = scan_points("read")
    s = summarise(reads, 900.0)
    best = {seg: max(p.mean_gbs for p in reads if p.segment == seg) for seg in SEGMENTS}
    assert s["plateau_gbs"] == min(v for seg, v in best.items() if seg >= PLATEAU_FROM)
    assert s["seg64_gbs"] == best[64]
    assert s["best_gbs"] == max(best.values())
    assert s["best_segment"] >= PLATEAU_FROM
    assert s["plateau_of_sol"] == pytest.approx(s["plateau_gbs"] / 900.0)
    assert "best_of_sol" not in summarise(reads, None)  # no fraction of an unknown limit


def test_link_lines_give_the_yardstick_of_their_mode_and_op():
    text = (DATA / "mem_scan_h200.txt").read_text()
    read = parse_link(text, "single", "read")
    assert read.gbs == 337.69 and read.scan_limit_gbs == 675.38  # x N/(N-1) = 2 on a pair
    assert parse_link(text, "multiprocess", "write").gbs == 366.70
    assert parse_link(text, "single", "atomic") is None  # atomics have no yardstick
    assert parse_link("", "single", "read") is None


def test_summaries_against_the_link_yardstick_only_where_measured():
    reads = scan_points("read")
    s = summarise(reads, 900.0, 675.38)
    assert s["plateau_of_link"] == pytest.approx(s["plateau_gbs"] / 675.38)
    assert s["best_of_link"] == pytest.approx(s["best_gbs"] / 675.38)
    assert "plateau_of_link" not in summarise(reads, 900.0)


def test_the_seeds_speed_of_light_for_the_dgx_a100():
    # 12 NVLink3 links of 25 GB/s, 300 GB/s per GPU and direction; 7/8 of the
    # segments cross them: 300 x 8/7 = 342.9 GB/s, the seed's "343".
    node = data.load_file(Path(data.SYSTEMS_DIR) / "dgx-a100.yaml")["partitions"][0]["node"]
    fabric = data.speed_of_light(node)["gpu_fabric"]
    assert fabric == pytest.approx(300e9)
    assert scan_speed_of_light(fabric, 8) / 1e9 == pytest.approx(342.857, abs=0.001)
    assert round(scan_speed_of_light(fabric, 8) / 1e9) == 343
    assert 260 / (scan_speed_of_light(fabric, 8) / 1e9) == pytest.approx(0.76, abs=0.005)  # the seed's 76%
    assert scan_limit(node) == scan_speed_of_light(fabric, 8)


def test_no_scan_limit_where_some_pairs_meet_through_the_cpus():
    # Summit: each GPU joined to the two others of its socket only.
    node = data.load_file(Path(data.SYSTEMS_DIR) / "summit.yaml")["partitions"][0]["node"]
    assert scan_limit(node) is None


def test_the_h200_pairs_speed_of_light_doubles_its_link():
    # 18 NVLink4 links, 450 GB/s per direction (NVIDIA's 900 GB/s counts both
    # ways); half of each GPU's segments are its own.
    assert scan_speed_of_light(data.nvlink_bandwidth(4, 18), 2) / 1e9 == pytest.approx(900)
    assert scan_speed_of_light(None, 2) is None
    assert scan_speed_of_light(300e9, 1) is None


BLOCK_SCAN = (
    "Scan: mode=single op=read segment={segment} width=16 thread_bytes=16 gpus=2 launch_bytes=1048576 reps=20 "
    "per_gpu_gbs=660.00,670.00 min_gbs=660.00 mean_gbs={mean} aggregate_gbs=1330.00 block_mean_gbs={blocks}"
)


def test_block_rates_are_the_samples_of_the_headline_summaries():
    text = "\n".join(
        [
            BLOCK_SCAN.format(segment=64, mean=360.0, blocks="359,360,361,362,358"),
            BLOCK_SCAN.format(segment=128, mean=665.0, blocks="664,665,666,663,667"),
            BLOCK_SCAN.format(segment=256, mean=668.0, blocks="668,669,667,670,666"),
            "Link: mode=single op=read gpus=2 launch_bytes=1 reps=20 per_gpu_gbs=337.00,338.00 min_gbs=337.00 "
            "mean_gbs=337.50 aggregate_gbs=675.00 block_mean_gbs=337,338,337,338,337 scan_limit_gbs=675.00",
        ]
    )
    points = parse_scan(text)
    assert points[0].block_means == (359.0, 360.0, 361.0, 362.0, 358.0)
    blocks = block_summaries(points, 900.0, 5)
    assert [b["plateau_gbs"] for b in blocks] == [664.0, 665.0, 666.0, 663.0, 666.0]
    assert [b["seg64_gbs"] for b in blocks] == [359.0, 360.0, 361.0, 362.0, 358.0]
    assert parse_link(text, "single", "read").block_means == (337.0, 338.0, 337.0, 338.0, 337.0)
    with pytest.raises(ValueError, match="without 5 block rates"):
        block_summaries(parse_scan((DATA / "mem_scan_h200.txt").read_text()), 900.0, 5)  # older output


def test_the_common_window_of_the_start_gate_parses():
    """Since the GPUs start together at a gate, each line also gives the window
    the aggregate is taken over; the aggregate is the line's, not a sum."""
    text = "\n".join(
        [
            "Scan: mode=single op=read segment=128 width=16 thread_bytes=16 gpus=2 launch_bytes=1073741824 reps=20 "
            "per_gpu_gbs=668.10,667.90 min_gbs=667.90 mean_gbs=668.00 aggregate_gbs=1331.20 window_s=0.064531 "
            "block_mean_gbs=668,668,667,669,668",
            "Link: mode=single op=read gpus=2 launch_bytes=1 reps=20 per_gpu_gbs=337.00,338.00 min_gbs=337.00 "
            "mean_gbs=337.50 aggregate_gbs=674.00 window_s=0.031000 block_mean_gbs=337,338,337,338,337 "
            "scan_limit_gbs=675.00",
        ]
    )
    (point,) = parse_scan(text)
    assert point.aggregate_gbs == 1331.2 and point.block_means[3] == 669.0
    assert parse_link(text, "single", "read").block_means == (337.0, 338.0, 337.0, 338.0, 337.0)


def test_the_figures_named_before_the_run_are_those_the_output_gives():
    """The check names its figures at setup (deferred, no output read): the
    summaries its sweep and limits allow, which are exactly what summarise()
    finds in a real output; each evaluates to summarise()'s value."""
    import reframe.utility.sanity as sn

    from checks.mem_scan import block_summary, link_yardstick, scan_points, summary
    from experiments.mem_scan import summary_names

    path = str(DATA / "mem_scan_h200.txt")
    for op in ("read", "write", "atomic"):
        points = parse_scan(Path(path).read_text())
        points = [p for p in points if p.mode == "single" and p.op == op]
        link = parse_link(Path(path).read_text(), "single", op)
        assert (link is not None) == (op != "atomic")
        limit = link.scan_limit_gbs if link else None
        eager = {k: v for k, v in summarise(points, 900.0, limit).items() if v is not None}
        assert set(summary_names(SEGMENTS, True, link is not None)) == set(eager)
        deferred = scan_points(path, "single", op)
        limit_d = sn.getattr(link_yardstick(path, "single", op), "scan_limit_gbs") if link else None
        for name, value in eager.items():
            assert sn.evaluate(summary(deferred, 900.0, limit_d, name)) == value
        # This output predates the block rates: the headline samples fail, saying why.
        with pytest.raises(sn.SanityError, match="a Scan line without 5 block rates"):
            sn.evaluate(block_summary(deferred, 900.0, "plateau_gbs"))
    assert summary_names([4, 8, 16], False, False) == ["best_gbs", "best_segment", "best_aggregate_gbs"]


def test_a_case_is_incomplete_without_its_points_block_rates_or_link():
    """What the figures are made of is checked in sanity: ReFrame would skip
    a figure it cannot evaluate with a warning only."""
    import reframe.utility.sanity as sn

    from checks.mem_scan import complete_case

    path = str(DATA / "mem_scan_h200.txt")
    with pytest.raises(sn.SanityError, match="Scan records without 5 block rates: 4 B at 4 B"):
        sn.evaluate(complete_case(path, "single", "read", SEGMENTS, WIDTHS, True))
    with pytest.raises(sn.SanityError, match="no Scan record of mode=single op=read for 32768 B at 4 B"):
        sn.evaluate(complete_case(path, "single", "read", [*SEGMENTS, 32768], WIDTHS, True))


def test_a_complete_case_passes(tmp_path):
    import reframe.utility.sanity as sn

    from checks.mem_scan import complete_case

    out = tmp_path / "out.txt"
    out.write_text(
        "\n".join(
            [
                BLOCK_SCAN.format(segment=64, mean=360.0, blocks="359,360,361,362,358"),
                "Link: mode=single op=read gpus=2 launch_bytes=1 reps=20 per_gpu_gbs=337.00,338.00 min_gbs=337.00 "
                "mean_gbs=337.50 aggregate_gbs=675.00 block_mean_gbs=337,338,337,338,337 scan_limit_gbs=675.00",
            ]
        )
    )
    assert sn.evaluate(complete_case(str(out), "single", "read", [64], [16], True))
    out.write_text(BLOCK_SCAN.format(segment=64, mean=360.0, blocks="359,360,361,362,358"))
    with pytest.raises(sn.SanityError, match="no Link record of mode=single op=read"):
        sn.evaluate(complete_case(str(out), "single", "read", [64], [16], True))
    assert sn.evaluate(complete_case(str(out), "single", "read", [64], [16], False))  # atomics have none
