"""checks/p2p_pingpong.py: the ping-pong's lines (tests/data/p2p_pingpong_h200.txt:
its output on the pair of H200), the seed's table and the kernel's closed form."""

from pathlib import Path

import pytest
import reframe.utility.sanity as sn

from checks import p2p_pingpong as pp
from experiments.p2p_pingpong import parse_pingpong, parse_pingpong_samples, pingpong_bandwidth, pingpong_final

DATA = Path(__file__).parent / "data"
MiB = 2**20


@pytest.mark.parametrize(
    "seconds, bandwidth",
    [(1.99599, 313.128), (2.39037, 261.466), (22.9334, 27.2528)],  # baseline, manual, NVBit
)
def test_the_seeds_pingpong_table_is_size_times_iters_in_gib(seconds, bandwidth):
    assert pingpong_bandwidth(64 * MiB, 10000, seconds) == pytest.approx(bandwidth, rel=1e-5)


def test_pingpong_lines_parse_with_the_baseline_of_the_same_run():
    runs = parse_pingpong((DATA / "p2p_pingpong_h200.txt").read_text())
    assert set(runs) == {"baseline", "manual"}
    time, bw = runs["manual"]
    assert bw == pytest.approx(pingpong_bandwidth(64 * MiB, 10000, time), rel=1e-4)
    # On the H200 pair the empty calls cost nothing measurable (the seed: 1.2x on A100).
    assert time / runs["baseline"][0] == pytest.approx(1.0, abs=0.01)


def simulate(a, b, iters):
    src, dst = a, b
    for i in range(iters):
        if i % 2 == 0:
            dst = src + 2
        else:
            src = dst + 2
    return src, dst


@pytest.mark.parametrize("iters", [0, 1, 2, 3, 4, 7, 10, 101, 10000])
def test_pingpong_closed_form_matches_the_kernels_loop(iters):
    for a, b in [(0, -1), (65535, -1), (12, 7)]:
        assert pingpong_final(a, b, iters) == simulate(a, b, iters)


def test_pingpong_closed_form_for_the_seeds_iterations():
    assert pingpong_final(0, -1, 10000) == (20000, 19998)


BLOCK_SCAN = (
    "Scan: mode=single op=read segment={segment} width=16 thread_bytes=16 gpus=2 launch_bytes=1048576 reps=20 "
    "per_gpu_gbs=660.00,670.00 min_gbs=660.00 mean_gbs={mean} aggregate_gbs=1330.00 block_mean_gbs={blocks}"
)


def test_every_pingpong_sample_parses_in_order():
    text = "\n".join(
        f"PingPong: variant={v} size=67108864 iters=10000 block=256 src_device=0 dst_device=1 sample={k} "
        f"time_s={t} bandwidth_gibs={640 / t:.4f}"
        for v, times in (("baseline", (1.0, 1.01)), ("manual", (1.2, 1.21)))
        for k, t in enumerate(times, start=1)
    )
    samples = parse_pingpong_samples(text)
    assert [t for t, _ in samples["manual"]] == [1.2, 1.21]
    assert parse_pingpong(text)["baseline"] == (1.0, 640.0)


def test_the_checks_deferred_figures_are_the_parsed_samples():
    path = str(DATA / "p2p_pingpong_h200.txt")
    parsed = parse_pingpong_samples((DATA / "p2p_pingpong_h200.txt").read_text())
    for variant in ("baseline", "manual"):
        assert sn.evaluate(pp.pingpong_values(path, variant, "bw")) == [bw for _, bw in parsed[variant]]
        assert sn.evaluate(pp.pingpong_values(path, variant, "time")) == [t for t, _ in parsed[variant]]
    manual, baseline = (pp.pingpong_values(path, v, "time") for v in ("manual", "baseline"))
    slowdowns = sn.evaluate(pp.ratios(manual, baseline))
    assert slowdowns == pytest.approx([1.0] * len(slowdowns), abs=0.01)
    assert sn.evaluate(pp.pingpong_values(path, "nvbit", "bw")) == []
    with pytest.raises(sn.SanityError, match="3 samples against 2 of the baseline"):
        sn.evaluate(pp.ratios([1, 2, 3], [1, 2]))
