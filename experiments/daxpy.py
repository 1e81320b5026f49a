"""daxpy: what its program prints and what it means (parsing and
derivations), free of ReFrame; checks/daxpy.py runs it, reports/ draw it."""

from __future__ import annotations

import re
from typing import NamedTuple

from experiments.curves import median_figures
from experiments.records import records, require

#: Rows N: thread blocks per kernel. The paper's text does not give it; the
#: authors' published driver script runs ``axpy.ex 100 M`` (see the report).
ROWS = 100

NAME = "daxpy"


#: Data sizes per thread block (M * 8 bytes): the authors' script's M = 100,
#: 1000, 10^4, 10^5 (four sizes, as figure 3's panels a to d). The next one,
#: 8 MB, takes over a minute a case.
DATA_SIZES = [800, 8000, 80000, 800000]


#: The figures' axes and fixed values.
INNER_AXIS = list(range(1, 17))


OUTER_AXIS = [1, 2, 4, 8, 16]


FIXED_OUTER = 4


FIXED_INNERS = [4, 7]


#: What one output line reports, all in microseconds.
METRICS = [
    "kernel_us",  # sum over outer of [prefetch or copy to the GPU] + inner kernels (figures 1-5)
    "per_kernel_us",  # kernel_us / (inner * outer)
    "gpu_kernel_us",  # the kernels alone, CUDA events, summed
    "touch_us",  # sum over outer of [prefetch or copy back] + TouchOnCPU (figure 6)
    "alloc_us",
    "init_us",
    "warmup_us",
    "total_us",  # allocation, initialisation, warm-up and experiment (figures 7 and 8)
]


#: The metrics each point gives the reports (:meth:`daxpy.curve_figures`).
LOGGED_METRICS = ["kernel_us", "per_kernel_us", "gpu_kernel_us", "touch_us", "total_us"]


#: The headline figures: these metrics at these points, measured `samples` times.
HEADLINE_METRICS = ["kernel_us", "total_us"]


HEADLINE_POINTS = [(inner, FIXED_OUTER) for inner in FIXED_INNERS]


#: The comparisons a report shows: (candidate, baseline).
COMPARISONS = [
    ("managed", "system"),
    ("managed+prefetch", "system+prefetch"),
    ("managed", "explicit"),
    ("managed+prefetch", "explicit"),
]


# 'DAXPY:' records (experiments/records.py); outputs from before the colon read alike.
POINT_RECORD = r"^DAXPY:? (.*)$"


POINT_PAIR_RECORD = r"^DAXPY:? .* inner=(\d+) outer=(\d+) "


_PERF_VAR = re.compile(r"^(?P<metric>[a-z_]+)_i(?P<inner>\d+)_o(?P<outer>\d+)$")


class Point(NamedTuple):
    """One (inner, outer) point of one case; values in microseconds by metric."""

    alloc: str
    prefetch: str
    size: int
    inner: int
    outer: int
    values: dict
    sample: int = 1

    @property
    def case(self) -> str:
        return case_label(self.alloc, self.prefetch)


def case_label(alloc: str, prefetch: str) -> str:
    """'managed', 'managed+prefetch', ..."""
    return f"{alloc}+prefetch" if prefetch == "on" else alloc


def figure_points(
    inner_axis=INNER_AXIS, outer_axis=OUTER_AXIS, fixed_outer=FIXED_OUTER, fixed_inners=FIXED_INNERS
) -> list:
    """The (inner, outer) pairs the figures need, sorted, each once."""
    points = {(inner, fixed_outer) for inner in inner_axis}
    points |= {(inner, outer) for inner in fixed_inners for outer in outer_axis}
    return sorted(points)


def parse_points(text: str) -> list:
    """Every 'DAXPY' record of the program's output, as Points."""
    points = []
    for r in records(text, "DAXPY"):
        require(r, ["alloc", "prefetch", "size", "inner", "outer", *METRICS], "DAXPY")
        points.append(
            Point(
                alloc=r["alloc"],
                prefetch=r["prefetch"],
                size=int(r["size"]),
                inner=int(r["inner"]),
                outer=int(r["outer"]),
                values={m: float(r[m]) for m in METRICS},
                sample=int(r.get("sample", 1)),
            )
        )
    return points


def perf_var_name(metric: str, inner: int, outer: int) -> str:
    return f"{metric}_i{inner}_o{outer}"


def parse_perf_var(name: str):
    """'kernel_us_i4_o8' -> ('kernel_us', 4, 8); None for other names."""
    match = _PERF_VAR.match(name)
    return (match["metric"], int(match["inner"]), int(match["outer"])) if match else None


#: The metrics made of every kernel of a point (each reads x and y and writes
#: y), and of one kernel (their mean): what bounds a point's time from below.
_KERNEL_COUNTS = {"kernel_us": "all", "gpu_kernel_us": "all", "total_us": "all", "per_kernel_us": "one"}


def point_floor_us(
    figure: str, rows: int, data_size: int, hbm_bps: float | None, kernel_floor_us: float
) -> float | None:
    """The physical floor of a point's time in microseconds: its kernels, each
    at least a kernel's launch and completion (`kernel_floor_us`, the kernel
    kind's) and at least its three passes over rows x data_size bytes at HBM's
    bandwidth. The host's touch has none known; None for other names.

    A DAXPY time a hundred times too short (1.5 us for 16 kernels) is above
    the kind's 1 us, but far below 16 kernels' 16 us: only the point knows."""
    parsed = parse_perf_var(figure)
    if not parsed or parsed[0] not in _KERNEL_COUNTS:
        return None
    metric, inner, outer = parsed
    per_kernel = max(kernel_floor_us, 3 * rows * data_size / hbm_bps * 1e6 if hbm_bps else 0.0)
    return per_kernel * (1 if _KERNEL_COUNTS[metric] == "one" else inner * outer)


def _case(label: str) -> tuple:
    alloc, _, rest = label.partition("+")
    return alloc, "on" if rest == "prefetch" else "off"


def _names(metric) -> tuple:
    return (metric,) if isinstance(metric, str) else tuple(metric)


def _value(point: Point, metric) -> float:
    return sum(point.values[m] for m in _names(metric))


def crossover(points, candidate: str, baseline: str, outer: int = FIXED_OUTER, metric="kernel_us") -> dict:
    """Per data size, the smallest inner count from which `candidate` stays
    faster than `baseline` at every larger inner measured, at this `outer`.

    None where the candidate is not faster at the largest inner measured (no
    crossover); the smallest inner measured where it is faster throughout.
    A win followed by a loss does not count: the crossover is where the
    candidate overtakes for good. `metric` is a metric name or a tuple of
    them, summed (e.g. ("kernel_us", "touch_us")). Sizes that either case
    lacks, and points without the metric, are left out.
    """
    series = {}
    for label in (candidate, baseline):
        alloc, prefetch = _case(label)
        series[label] = {
            (p.size, p.inner): _value(p, metric)
            for p in points
            if p.alloc == alloc and p.prefetch == prefetch and p.outer == outer and set(_names(metric)) <= set(p.values)
        }
    result = {}
    for size in sorted({s for s, _ in series[candidate]} & {s for s, _ in series[baseline]}):
        inners = sorted(i for s, i in series[candidate] if s == size and (size, i) in series[baseline])
        found = None
        for inner in reversed(inners):
            if series[candidate][(size, inner)] < series[baseline][(size, inner)]:
                found = inner
            else:
                break
        result[size] = found
    return result


def crossovers(points, outer: int = FIXED_OUTER, metric="kernel_us") -> dict:
    """:func:`crossover` for every comparison of COMPARISONS: {'managed vs system': {size: inner}}."""
    return {f"{c} vs {b}": crossover(points, c, b, outer, metric) for c, b in COMPARISONS}


def curve_figures(lines: list[str], figures: dict) -> dict:
    """The figures of a kept curve (its lines), beside the run's logged `figures`."""
    # Each point's metrics, the median of its measurements.
    points = parse_points("\n".join(lines))
    return median_figures(
        ((perf_var_name(m, p.inner, p.outer), p.values[m]) for p in points for m in LOGGED_METRICS), "us"
    )


#: What reads each test's kept curve back as figures (reports/curves.py).
CURVE_FIGURES = {"daxpy": curve_figures}


# ------------------------------------------------------------ in the report --

NOTE = (
    "the paper's figures 1 to 8 (Gayatri, Gott, Deslippe, PMBS 2019) with explicit cudaMalloc + cudaMemcpy "
    "added; system memory runs only where the node has ATS or HMM. Variables are <metric>_i<inner>_o<outer>, "
    "in µs."
)
#: A few anchor points of the study for the report's table; the figures show them all.
TABLE_VARIABLES = ["kernel_us_i1_o4", "kernel_us_i4_o4", "kernel_us_i16_o4", "touch_us_i4_o4", "total_us_i4_o4"]
TABLE_CAPTION = "Median per case (anchor points; the figures show every point)."
CROSSOVER_CAPTION = (
    "The smallest inner (consecutive kernels, outer = 4) from which the first case's kernel time stays below "
    "the second's at every larger inner (experiments.daxpy.crossovers); '—': never within inner 1 to 16; "
    "'not run': a case without records."
)
