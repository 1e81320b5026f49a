"""The DAXPY inner/outer-loop study (Gayatri, Gott, Deslippe, PMBS 2019) as a check.

y(i,j) += a*x(i,j) over 100 rows of M doubles, one warp per row; `inner`
consecutive kernels between host round trips of y, `outer` round trips, each
ending in a TouchOnCPU. One case per allocator (system through ATS or HMM,
managed, explicit cudaMalloc + cudaMemcpy), prefetch (cudaMemPrefetchAsync of
y both ways, as in the paper's listing 7) and data size (bytes per thread
block); each case runs every point of the paper's figures in one process:

- inner = 1..16 at outer = 4 (figures 3, 4 and 8, and the crossover below);
- outer = 1, 2, 4, 8, 16 at inner = 4 (figures 1, 5, 6, 7) and 7 (figure 2).

The perflog has the headline figures: kernel and total time at inner 4 and 7
(outer 4), each the median of `samples` measurements of its point, which are
its samples. Every point of the case is kept beside the perflog, record for
record (``daxpy.curves``, checks/suite/curves.py), and read back by the
reports as ``<metric>_i<inner>_o<outer>`` (e.g. ``kernel_us_i4_o8``), the
names the perflog carried before (:func:`parse_perf_var`;
reports/figures/daxpy.py). The case's parameters, the data size among them,
are in the test's display name. ReFrame has no multi-dimensional performance
variable, and inner and outer as test parameters would make the points of a
case 24 jobs, each paying the build's and the launcher's costs: one job per
case runs them all.

Beyond the paper: :func:`crossover` gives, per data size, the smallest inner
count from which managed memory (with or without prefetch) stays faster than
system memory, the paper's "6-to-8" on Summit, and the same against explicit
copies. It needs several cases, which are separate jobs, so it is computed
from the perflogs, not as a performance variable: the report does it
(reports/figures/daxpy.py, ``./suite report html``), from the median of each
point over its executions.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, run_after, run_before, variable

from checks.suite.base import GpuCheck
from checks.suite.curves import median_figures
from checks.suite.records import records, require
from checks.suite.settings import Count, Each, Whole

#: Rows N: thread blocks per kernel. The paper's text does not give it; the
#: authors' published driver script runs ``axpy.ex 100 M`` (see the report).
ROWS = 100

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

#: The paper's one number for a crossover: managed memory overtakes ATS after
#: 6 to 8 consecutive kernels at outer = 4 without prefetch (figures 3b-3d,
#: Summit). Its figures' timings are not in its text, so none is a reference.
PAPER_CROSSOVER = {"system": "summit", "candidate": "managed", "baseline": "system", "inner": (6, 8)}

#: The comparisons a report shows: (candidate, baseline).
COMPARISONS = [
    ("managed", "system"),
    ("managed+prefetch", "system+prefetch"),
    ("managed", "explicit"),
    ("managed+prefetch", "explicit"),
]

# 'DAXPY:' records (checks/suite/records.py); outputs from before the colon read alike.
_POINT = r"^DAXPY:? (.*)$"
_POINT_PAIR = r"^DAXPY:? .* inner=(\d+) outer=(\d+) "
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


def _case(label: str) -> tuple:
    alloc, _, rest = label.partition("+")
    return alloc, "on" if rest == "prefetch" else "off"


def _value(point: Point, metric) -> float:
    names = (metric,) if isinstance(metric, str) else tuple(metric)
    return sum(point.values[m] for m in names)


def crossover(points, candidate: str, baseline: str, outer: int = FIXED_OUTER, metric="kernel_us") -> dict:
    """Per data size, the smallest inner count from which `candidate` stays
    faster than `baseline` at every larger inner measured, at this `outer`.

    None where the candidate is not faster at the largest inner measured (no
    crossover); the smallest inner measured where it is faster throughout.
    A win followed by a loss does not count: the crossover is where the
    candidate overtakes for good. `metric` is a metric name or a tuple of
    them, summed (e.g. ("kernel_us", "touch_us")). Sizes that either case
    lacks are left out.
    """
    series = {}
    for label in (candidate, baseline):
        alloc, prefetch = _case(label)
        series[label] = {
            (p.size, p.inner): _value(p, metric)
            for p in points
            if p.alloc == alloc and p.prefetch == prefetch and p.outer == outer
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


@sn.deferrable
def _pairs(found) -> list:
    return sorted(tuple(f) for f in found)


@sn.deferrable
def _point_samples(lines, inner, outer, metric) -> list:
    """Every measurement of one point's metric, in sample order."""
    points = [
        p for p in parse_points("\n".join(f"DAXPY {line}" for line in lines)) if (p.inner, p.outer) == (inner, outer)
    ]
    if not points:
        raise sn.SanityError(f"no DAXPY line for inner={inner} outer={outer}")
    return [p.values[metric] for p in sorted(points, key=lambda p: p.sample)]


@rfm.simple_test
class daxpy(GpuCheck):
    descr = "DAXPY inner/outer-loop study: system (ATS/HMM), managed and explicit memory, with and without prefetch"
    tags = {"daxpy", "um", "paper"}

    allocator = parameter(["system", "managed", "explicit"])
    prefetch = parameter(["off", "on"])
    #: Bytes each thread block touches: M * sizeof(double).
    data_size = parameter(DATA_SIZES)
    time_limit = "10m"

    #: Rows N, one thread block each.
    rows = variable(Whole, int, value=ROWS)
    #: The inner counts swept at `fixed_outer`, and the outer counts swept
    #: at each of `fixed_inners` (the paper's figures).
    inner_axis = variable(typ.List[Whole], typ.List[int], value=INNER_AXIS)
    outer_axis = variable(typ.List[Whole], typ.List[int], value=OUTER_AXIS)
    fixed_outer = variable(Whole, int, value=FIXED_OUTER)
    fixed_inners = variable(typ.List[Whole], typ.List[int], value=FIXED_INNERS)

    #: Measurements of each headline point: the samples of its figures.
    samples = variable(Whole, int, value=5)

    case_variables = ("rows",)

    #: What each may be. A point runs inner x outer kernels over rows x
    #: data_size bytes, `samples` times: the bounds keep the sweep (about 30
    #: points) within the check's ten minutes at the slowest path measured
    #: (managed memory migrating on demand).
    settings = {
        "rows": Count(1, 10_000),
        "inner_axis": Each(Count(1, 64)),
        "outer_axis": Each(Count(1, 64)),
        "fixed_outer": Count(1, 64),
        "fixed_inners": Each(Count(1, 64), most=8),
        "samples": Count(1, 20),
    }

    @run_after("init")
    def drop_meaningless_cases(self):
        self.skip_if(
            self.allocator == "explicit" and self.prefetch == "on",
            "prefetching is for system and managed memory; explicit copies move y themselves",
        )

    @run_after("setup")
    def skip_without_system_allocator(self):
        if self.allocator != "system":
            return
        feats = self.current_partition.features
        self.skip_if(
            "ats" not in feats and "hmm" not in feats,
            f"system memory needs ATS or HMM; {self.current_partition.fullname} has neither "
            f"(addressing: {self.node.get('addressing', 'unknown')})",
        )

    def points(self) -> list:
        return figure_points(self.inner_axis, self.outer_axis, self.fixed_outer, self.fixed_inners)

    def measured_points(self) -> list:
        """What the program runs: every point once, then the headline points again."""
        again = [p for p in HEADLINE_POINTS if p in self.points()] * (self.samples - 1)
        return self.points() + again

    @run_before("run")
    def set_options(self):
        self.executable_opts = [
            "--alloc", self.allocator,
            "--prefetch", self.prefetch,
            "--size", str(self.data_size),
            "--rows", str(self.rows),
            "--pairs", ",".join(f"{i}x{o}" for i, o in self.measured_points()),
            "--numa-node", str(self.gpu_numa_node()),
        ]  # fmt: skip

    def verified(self):
        expected = self.measured_points()
        found = sn.extractall(_POINT_PAIR, self.stdout, [1, 2], int)
        return sn.all(
            [
                sn.assert_not_found(r"^error:", self.stderr),
                sn.assert_eq(sn.count(found), len(expected)),
                sn.assert_eq(_pairs(found), sorted(expected)),
                sn.assert_found(rf"^Verified: {len(expected)} points", self.stdout),
            ]
        )

    @run_after("setup")
    def set_perf_variables(self):
        lines = sn.extractall(_POINT, self.stdout, 1)
        perf = {}
        for inner, outer in HEADLINE_POINTS:
            if (inner, outer) not in self.points():
                continue
            for metric in HEADLINE_METRICS:
                samples = _point_samples(lines, inner, outer, metric)
                perf.update(self.headline(perf_var_name(metric, inner, outer), samples, "us", self.samples))
        self.perf_variables = perf

    curve_tags = ("DAXPY",)

    @classmethod
    def curve_figures(cls, lines: list[str], figures: dict) -> dict:
        # Each point's metrics, the median of its measurements.
        points = parse_points("\n".join(lines))
        return median_figures(
            ((perf_var_name(m, p.inner, p.outer), p.values[m]) for p in points for m in LOGGED_METRICS), "us"
        )
