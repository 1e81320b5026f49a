"""p2p_pingpong: what its program prints and what it means (parsing and
derivations), free of ReFrame; checks/p2p_pingpong.py runs it, reports/ draw it."""

from __future__ import annotations

from experiments.records import records, require

NAME = "p2p_pingpong"

GiB = 2**30


def _pingpong_records(text: str) -> list:
    return [require(r, ["variant", "time_s", "bandwidth_gibs"], "PingPong") for r in records(text, "PingPong")]


def parse_pingpong(text: str) -> dict:
    """{variant: (seconds, GiB/s)} from p2p_pingpong's output (its first sample)."""
    found = {}
    for r in _pingpong_records(text):
        found.setdefault(r["variant"], (float(r["time_s"]), float(r["bandwidth_gibs"])))
    return found


def parse_pingpong_samples(text: str) -> dict:
    """{variant: [(seconds, GiB/s), ...]} in sample order, from p2p_pingpong's output."""
    found: dict = {}
    for r in _pingpong_records(text):
        found.setdefault(r["variant"], []).append((float(r["time_s"]), float(r["bandwidth_gibs"])))
    return found


def pingpong_bandwidth(size: int, iters: int, seconds: float) -> float:
    """The seed's bandwidth: size * ITERS / time in units of 2^30 bytes per second."""
    return size * iters / seconds / 2**30


def pingpong_final(a: int, b: int, iters: int) -> tuple:
    """(src, dst) after `iters` iterations from src = a, dst = b: iteration k
    writes a + 2 (k + 1), to dst when k is even and to src when k is odd."""
    odd, even = iters // 2, (iters + 1) // 2
    return (a + 4 * odd if odd else a, a + 4 * even - 2 if even else b)


# ------------------------------------------------------------ in the report --

NOTE = "the NVBit seed's persistent ping-pong kernel; slowdown is against the baseline of the same job."
TABLE_CAPTION = (
    "The persistent kernel's ping-pong of 64 MiB between two GPUs, 10000 iterations: time, the seed's "
    "bandwidth (GB/s) and the slowdown against the baseline run first in the same job; median over executions."
)
