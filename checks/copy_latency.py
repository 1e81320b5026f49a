"""Small-copy latency between host and device, the reason GDRCopy exists.

A cudaMemcpy costs microseconds however few bytes it moves (GDRCopy's README:
"a cudaMemcpy can incur in a 6-7us overhead"). src/copy_latency times, for
sizes 1 B to 16 MiB and both directions: cudaMemcpy from pageable and from
pinned memory, cudaMemcpyAsync plus cudaStreamSynchronize, a kernel that reads
or writes mapped pinned memory (zero-copy), and, where the build has GDRCopy
and the node has gdrdrv, GDRCopy's CPU mapping of GPU memory. Every case's
data is verified by the program before it is timed.

The perflog has the headline latencies: the median of each method and
direction at a word, a page, 64 KiB and 1 MiB (``lat_us_<method>_<direction>_<size>``,
e.g. ``lat_us_pinned_h2d_4096``), each the median of its `blocks` block
medians, which are its samples. The whole curve, every size, is kept beside
the perflog (``copy_latency.curves``, checks/suite/curves.py); the reports
read it back as the same names, with the crossovers computed from it:
``crossover_<direction>_<b>_over_<a>`` is the smallest size from which method
b stays faster than method a at every larger size, for each pair where a is
faster at the smallest size and b at the largest (e.g.
``crossover_h2d_pinned_over_zerocopy``: where cudaMemcpy from pinned memory
overtakes the zero-copy kernel).
"""

from __future__ import annotations

import itertools

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, variable

from checks.suite.base import GpuCheck
from checks.suite.settings import Count, Decimal, Device, Real, Size, Unreadable, Whole, size_bytes
from experiments import budget
from experiments.copy_latency import (
    BASE_METHODS,
    DIRECTIONS,
    GDRCOPY_METHOD,
    HEADLINE_SIZES,
    copy_size,
    parse_block_medians,
    parse_latencies,
    parse_skipped,
    parse_verified,
    perf_name,
)
from experiments.records import parsed_output, read_output
from systems import data


@sn.deferrable
def block_medians(stdout: str, method: str, direction: str, size: int) -> list:
    """A headline latency's samples: its block medians, from the job's output."""
    found = parsed_output(stdout, parse_block_medians).get((method, direction, size))
    if not found:
        raise sn.SanityError(f"no block medians for {method} {direction} {size} B")
    return found


@rfm.simple_test
class copy_latency(GpuCheck):
    descr = "Host-device copy latency, 1 B to 16 MiB: cudaMemcpy (pageable, pinned), async, zero-copy, GDRCopy"
    tags = {"latency", "gdrcopy"}

    #: Largest copy; sizes are the powers of two from 1 B up to it.
    max_size = variable(str, value="16M")

    #: Timed samples per case (at most; a case stops after `case_seconds`
    #: once it has 10), and the shortest sample: copies shorter than that
    #: are timed in back-to-back batches.
    reps = variable(Whole, int, Unreadable, value=100)
    case_seconds = variable(Decimal, float, Unreadable, value=0.5)
    sample_us = variable(Decimal, float, Unreadable, value=5.0)

    #: CUDA device to measure; the process runs on its NUMA node.
    device = variable(Whole, int, Unreadable, value=0)

    def gpu_devices(self) -> list[int]:
        return [self.device]

    #: Consecutive blocks of each case's timings whose medians are the
    #: samples of the headline latencies.
    blocks = variable(Whole, int, Unreadable, value=5)

    case_variables = ("device",)

    #: What each may be. Every case (method, direction, size) stops after
    #: `case_seconds` once it has its first samples: their sum is held to
    #: `budget_seconds`, so that the check ends in minutes.
    settings = {
        "max_size": Size(1, 1 << 30),
        "reps": Count(10, 100_000),
        "case_seconds": Real(0.01, 10.0),
        "sample_us": Real(0.0, 1e5),
        "device": Device(),
        "blocks": Count(1, 10),
    }
    budget_seconds = 900.0

    def settings_problems(self) -> list[str]:
        try:
            sizes = size_bytes(self.max_size).bit_length()
        except ValueError:
            return []  # max_size itself is named
        cases = len(self.measured_methods()) * len(DIRECTIONS) * sizes
        # blocks <= reps needs no check: their ranges (at most 10, at least 10) keep it.
        if cases * self.case_seconds > self.budget_seconds:
            return [
                f"case_seconds={self.case_seconds:g} x {cases} cases is {cases * self.case_seconds:.0f} s, "
                f"over the check's {self.budget_seconds:.0f} s"
            ]
        return []

    #: The methods measured: those every GPU node has, and GDRCopy's where
    #: the partition declares (or detection finds) gdrdrv and the build has
    #: the GDRCopy paths (the environment's -DGPU_MEMPATHS_WITH_GDRCOPY=ON).
    methods = variable(typ.List[str], value=[])

    curve_tags = ("Latency",)

    @run_after("setup")
    def set_resources(self):
        # All of the node's cores: under srun a single-CPU task could not be
        # moved to the GPU's NUMA node.
        cpu = self.node["cpu"]
        self.num_cpus_per_task = cpu["sockets"] * cpu["cores_per_socket"]

    def measured_methods(self) -> list[str]:
        gdrcopy = "gdrdrv" in self.current_partition.features and self.build.has_gdrcopy
        return BASE_METHODS + ([GDRCOPY_METHOD] if gdrcopy else [])

    @run_after("setup")
    def choose_methods(self):
        self.methods = self.measured_methods()

    #: A small copy's submission and completion, at most.
    COPY_S = 20e-6

    @classmethod
    def floor_us_of(cls, figure: str, case: dict, node: dict) -> float | None:
        # Every method's bytes cross the host link: a copy takes at least its bytes at the link's
        # limit (16.6 us for 1 MiB on PCIe Gen5 x16), far above the path's 0.5 us once it is large.
        floor = super().floor_us_of(figure, case, node)
        size, link = copy_size(figure), data.speed_of_light(node)["host_link"]
        if not size or not link:
            return floor
        return max(floor or 0.0, size / link * 1e6)

    def expected_seconds(self) -> float:
        # Every method, direction and size: `reps` copies, or `case_seconds` where those take longer.
        link = data.speed_of_light(self.node)["host_link"]
        sizes = [1 << i for i in range(size_bytes(self.max_size).bit_length())]
        per_direction = sum(
            min(self.case_seconds, self.reps * (self.COPY_S + budget.transfer_s(size, link))) for size in sizes
        )
        return budget.START_S + len(self.measured_methods()) * len(DIRECTIONS) * per_direction

    def headline_sizes(self) -> list[int]:
        """The headline sizes the sweep reaches."""
        return [size for size in HEADLINE_SIZES if size <= size_bytes(self.max_size)]

    @run_before("run")
    def set_options(self):
        self.executable_opts = [
            "--device", str(self.device),
            "--methods", ",".join(self.methods),
            "--directions", ",".join(DIRECTIONS),
            "--max-size", self.max_size,
            "--reps", str(self.reps),
            "--case-seconds", f"{self.case_seconds:g}",
            "--sample-us", f"{self.sample_us:g}",
            "--blocks", str(self.blocks),
        ]  # fmt: skip
        if "numa" in self.current_partition.features:
            self.executable_opts += ["--numa-node", str(self.gpu_numa_node(self.device))]

    def verified(self):
        return sn.all(
            [
                sn.assert_not_found(r"^error:|CUDA error", self.stderr),
                sn.assert_found(r"^Data verified: \d+ cases", self.stdout),
                _complete_curves(self.stdout, self.methods, DIRECTIONS, self.blocks),
            ]
        )

    @run_after("setup")
    def set_perf_variables(self):
        perf = {}
        for method in self.measured_methods():
            for direction in DIRECTIONS:
                for size in self.headline_sizes():
                    samples = block_medians(self.stdout, method, direction, size)
                    perf.update(self.headline(perf_name(method, direction, size), samples, "us", self.blocks))
        self.perf_variables = perf


@sn.deferrable
def _complete_curves(stdout: str, methods: list, directions: list, blocks: int | None = None) -> bool:
    """Every method asked for has a line for every direction and the same
    sizes, with its block medians at the headline sizes, and the program
    verified every case it timed. A leg the program skips fails: GDRCopy's
    is asked for only where the node has gdrdrv and the build GDRCopy."""
    text = read_output(stdout)
    curves = parse_latencies(text)
    for method, reason in parse_skipped(text).items():
        raise sn.SanityError(f"the {method} leg was skipped: {reason}")
    sizes = None
    for method in methods:
        for direction in directions:
            curve = curves.get((method, direction))
            sn.evaluate(sn.assert_true(curve, msg=f"no latency for {method} {direction}"))
            sizes = sizes or sorted(curve)
            sn.evaluate(sn.assert_eq(sorted(curve), sizes, msg=f"{method} {direction}: sizes {{0}} instead of {{1}}"))
    medians = parse_block_medians(text)
    for method, direction, size in itertools.product(methods, directions, HEADLINE_SIZES if blocks else []):
        if size in (sizes or []) and len(medians.get((method, direction, size), ())) != blocks:
            raise sn.SanityError(f"{method} {direction} {size} B: not {blocks} block medians (the headline's samples)")
    cases = sum(len(c) for c in curves.values())
    sn.evaluate(sn.assert_eq(parse_verified(text), cases, msg="{0} cases verified, {1} timed"))
    return True
