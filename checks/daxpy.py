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

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, run_after, run_before, variable

from checks.suite.base import GpuCheck
from checks.suite.settings import Count, Each, ReadSetting, Unreadable, Whole
from experiments import budget
from experiments.daxpy import (
    DATA_SIZES,
    FIXED_INNERS,
    FIXED_OUTER,
    HEADLINE_METRICS,
    HEADLINE_POINTS,
    INNER_AXIS,
    OUTER_AXIS,
    POINT_PAIR_RECORD,
    POINT_RECORD,
    ROWS,
    figure_points,
    parse_points,
    perf_var_name,
    point_floor_us,
)
from experiments.paths import kind_min_us
from systems import data


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
    rows = variable(Whole, int, Unreadable, value=ROWS)
    #: The inner counts swept at `fixed_outer`, and the outer counts swept
    #: at each of `fixed_inners` (the paper's figures).
    inner_axis = variable(typ.List[Whole], typ.List[int], typ.List[ReadSetting], value=INNER_AXIS)
    outer_axis = variable(typ.List[Whole], typ.List[int], typ.List[ReadSetting], value=OUTER_AXIS)
    fixed_outer = variable(Whole, int, Unreadable, value=FIXED_OUTER)
    fixed_inners = variable(typ.List[Whole], typ.List[int], typ.List[ReadSetting], value=FIXED_INNERS)

    #: Measurements of each headline point: the samples of its figures.
    samples = variable(Whole, int, Unreadable, value=5)

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

    @classmethod
    def floor_us_of(cls, figure: str, case: dict, node: dict) -> float | None:
        # Its kernels' count and bytes, whatever its path (migration on demand too): a kernel's 1 us
        # alone passes a time a hundred times too short.
        if "rows" not in case or "data_size" not in case:
            return super().floor_us_of(figure, case, node)
        hbm = data.speed_of_light(node)["hbm"]
        found = point_floor_us(figure, int(case["rows"]), int(case["data_size"]), hbm, kind_min_us("kernel"))
        return found or super().floor_us_of(figure, case, node)

    def points(self) -> list:
        return figure_points(self.inner_axis, self.outer_axis, self.fixed_outer, self.fixed_inners)

    def measured_points(self) -> list:
        """What the program runs: every point once, then the headline points again."""
        again = [p for p in HEADLINE_POINTS if p in self.points()] * (self.samples - 1)
        return self.points() + again

    def expected_seconds(self) -> float:
        # Per point: x and y fresh on the host, y migrated there and back each
        # outer iteration (managed without prefetch: by faults), the kernels.
        link = data.speed_of_light(self.node)["host_link"]
        share = budget.MIGRATION_OF_LINK if self.allocator != "explicit" and self.prefetch == "off" else budget.REACHED
        array = self.rows * self.data_size
        total = budget.START_S
        for inner, outer in self.measured_points():
            total += budget.first_touch_s(2 * array) + (1 + outer) * budget.transfer_s(2 * array, link, share)
            total += (2 + inner * outer) * budget.LAUNCH_S
        return total

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
        found = sn.extractall(POINT_PAIR_RECORD, self.stdout, [1, 2], int)
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
        lines = sn.extractall(POINT_RECORD, self.stdout, 1)
        perf = {}
        for inner, outer in HEADLINE_POINTS:
            if (inner, outer) not in self.points():
                continue
            for metric in HEADLINE_METRICS:
                samples = _point_samples(lines, inner, outer, metric)
                perf.update(self.headline(perf_var_name(metric, inner, outer), samples, "us", self.samples))
        self.perf_variables = perf

    curve_tags = ("DAXPY",)
