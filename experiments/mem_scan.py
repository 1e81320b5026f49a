"""mem_scan: what its program prints and what it means (parsing and
derivations), free of ReFrame; checks/mem_scan.py runs it, reports/ draw it."""

from __future__ import annotations

from typing import NamedTuple

from experiments.records import numbers, records, require
from systems import data

NAME = "mem_scan"

GiB = 2**30


SEGMENTS = [4 << i for i in range(13)]  # 4 B .. 16 KiB


WIDTHS = [4, 8, 16]


ATOMIC_WIDTHS = [4]


PLATEAU_FROM = 128  # the seed: "if the segment size is 128 bytes or more, about 260 GB/s"

#: Records from before this measured another layout under the same case: each
#: GPU's chunk rounded to 2 MiB, where today's program rounds it to a whole GiB
#: (--chunk-align), and small segments ran up to ten times slower at a few
#: hundred GiB (docs/results/mem_scan.md). No tolerance is widened by them.
ALIKE_SINCE = "2026-11-27T16:00:00+00:00"


#: Blocks each point's timed launches are timed in (src/mem_scan's kBlocks),
#: and the scan's headline figures, whose samples those blocks give.
SCAN_BLOCKS = 5


HEADLINE_SCAN = ("plateau_gbs", "seg64_gbs", "best_gbs")


class ScanPoint(NamedTuple):
    mode: str
    op: str
    segment: int
    width: int
    thread_bytes: int
    gpus: int
    per_gpu: list
    min_gbs: float
    mean_gbs: float
    aggregate_gbs: float
    block_means: tuple = ()  # the mean per-GPU rate of each block of timed launches


_SCAN_FIELDS = [
    "mode",
    "op",
    "segment",
    "width",
    "thread_bytes",
    "gpus",
    "per_gpu_gbs",
    "min_gbs",
    "mean_gbs",
    "aggregate_gbs",
]


def parse_scan(text: str) -> list:
    """Every 'Scan:' record of mem_scan's output."""
    points = []
    for r in records(text, "Scan"):
        require(r, _SCAN_FIELDS, "Scan")
        points.append(
            ScanPoint(
                r["mode"],
                r["op"],
                int(r["segment"]),
                int(r["width"]),
                int(r["thread_bytes"]),
                int(r["gpus"]),
                list(numbers(r["per_gpu_gbs"])),
                float(r["min_gbs"]),
                float(r["mean_gbs"]),
                float(r["aggregate_gbs"]),
                numbers(r.get("block_mean_gbs")),
            )
        )
    return points


class LinkYardstick(NamedTuple):
    """What every GPU streaming through its peers' chunks at once reaches in
    the same run: per-GPU GB/s to its peers, and the scan's limit from it."""

    gbs: float
    scan_limit_gbs: float
    block_means: tuple = ()


def parse_link(text: str, mode: str, op: str) -> LinkYardstick | None:
    """The 'Link:' record of one mode and op (reads and writes have one)."""
    for r in records(text, "Link"):
        if (r.get("mode"), r.get("op")) == (mode, op):
            require(r, ["mean_gbs", "scan_limit_gbs"], "Link")
            return LinkYardstick(float(r["mean_gbs"]), float(r["scan_limit_gbs"]), numbers(r.get("block_mean_gbs")))
    return None


def scan_speed_of_light(fabric: float | None, gpus: int) -> float | None:
    """The seed's per-GPU limit in bytes/s: what a GPU reaches of all its
    peers at once, per direction, times N/(N-1), as (N-1)/N of a GPU's
    segments cross the links."""
    if not fabric or gpus < 2:
        return None
    return fabric * gpus / (gpus - 1)


def scan_limit(node: dict) -> float | None:
    """The scan's per-GPU limit on a node, bytes/s. The seed's formula holds
    where every pair of GPUs is joined alike (NVSwitch, a full mesh, PCIe);
    where some pairs meet through the CPUs (Summit's two sockets) their
    share crosses another link, which the data does not give: no limit."""
    if not data.every_pair_joined(node):
        return None
    return scan_speed_of_light(data.speed_of_light(node)["gpu_fabric"], node["gpus"]["count"])


def summarise(points: list, sol_gbs: float | None, link_limit_gbs: float | None = None) -> dict:
    """The summaries of one case: at each segment its best width's mean per-GPU
    GB/s, against the speed of light and, where measured, the link yardstick."""
    best = {}
    for p in points:
        if p.mean_gbs > best.get(p.segment, (-1.0, None))[0]:
            best[p.segment] = (p.mean_gbs, p.aggregate_gbs)
    plateau = [bw for seg, (bw, _) in best.items() if seg >= PLATEAU_FROM]
    top_segment = max(best, key=lambda s: best[s][0])
    # What the sweep did not measure, or a limit that is unknown, is None, never made up.
    out = {
        "plateau_gbs": min(plateau) if plateau else None,
        "seg64_gbs": best[64][0] if 64 in best else None,
        "best_gbs": best[top_segment][0],
        "best_segment": top_segment,
        "best_aggregate_gbs": max(agg for _, agg in best.values()),
    }
    for name, limit in (("sol", sol_gbs), ("link", link_limit_gbs)):
        if limit:
            out[f"plateau_of_{name}"] = out["plateau_gbs"] / limit if out["plateau_gbs"] is not None else None
            out[f"best_of_{name}"] = out["best_gbs"] / limit
    return out


def block_summaries(points: list, sol_gbs: float | None, blocks: int) -> list:
    """:func:`summarise` of each block of timed launches alone: the samples of the summaries."""
    out = []
    for k in range(blocks):
        if any(len(p.block_means) != blocks for p in points):
            raise ValueError(f"a Scan line without {blocks} block rates")
        out.append(summarise([p._replace(mean_gbs=p.block_means[k]) for p in points], sol_gbs))
    return out


#: Units of the summaries that are not per-GPU GB/s.
SUMMARY_UNITS = {
    "best_segment": "B",
    **dict.fromkeys(("plateau_of_sol", "best_of_sol", "plateau_of_link", "best_of_link"), "fraction"),
}


def summary_names(segments: list, with_sol: bool, with_link: bool) -> list:
    """The summaries a case logs: what its sweep measures, fractions only of known limits."""
    names = ["best_gbs", "best_segment", "best_aggregate_gbs"]
    names += ["plateau_gbs"] if any(s >= PLATEAU_FROM for s in segments) else []
    names += ["seg64_gbs"] if 64 in segments else []
    for limit, known in (("sol", with_sol), ("link", with_link)):
        if known:
            names += [f"best_of_{limit}"] + ([f"plateau_of_{limit}"] if "plateau_gbs" in names else [])
    return names


def curve_figures(lines: list[str], figures: dict) -> dict:
    """The figures of a kept curve (its lines), beside the run's logged `figures`."""
    # Each point's per-GPU and aggregate rate, and its fraction of the speed of light.
    text = "\n".join(lines)
    sol = next((float(r["sol_gbs"]) for r in records(text, "Limit") if "sol_gbs" in r), None)
    found = {}
    for p in parse_scan(text):
        key = f"s{p.segment}_w{p.width}"
        found[f"gbs_{key}"], found[f"agg_gbs_{key}"] = (p.mean_gbs, "GB/s"), (p.aggregate_gbs, "GB/s")
        if sol:
            found[f"sol_{key}"] = (p.mean_gbs / sol, "fraction")
    return found


#: What reads each test's kept curve back as figures (reports/curves.py).
CURVE_FIGURES = {"mem_scan": curve_figures}


# ------------------------------------------------------------ in the report --

NOTE = (
    "every GPU reads, writes or atomically adds random segments of a buffer spread over the node's N GPUs; "
    "per-GPU GB/s against segment size, one line per way of spreading it. The speed of light is the GPU-GPU "
    "bandwidth per direction times N/(N-1) (1/N of the segments are local), derived in the figure from the "
    "perflog (each point's GB/s over its logged fraction of it)."
)
TABLE_CAPTION = (
    "Per-GPU GB/s, median over executions, each segment at its best width: at 64 B segments, the plateau "
    "(the lowest from 128 B on), the best and its segment; the plateau as a share of the speed of light "
    "(GPU-GPU bandwidth per direction x N/(N-1))."
)
