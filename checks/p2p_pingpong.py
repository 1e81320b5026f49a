"""The NVBit seed's P2P ping-pong (src/p2p_pingpong): its persistent kernel,
64 MiB of int between two GPUs, 10000 iterations; variants baseline, manual (an empty
__noinline__ call around each access) and nvbit (the baseline under the
NVBit tool that the partition's ``nvbit_tool`` names; skipped elsewhere).
Every job runs the baseline first, so each variant's slowdown is measured
against a baseline of the same run. Bandwidth is the seed's: size * ITERS /
time / 2^30 (its "GB/s" are GiB/s: 64 MiB x 10000 / 1.99599 s = 313.128).
Each variant runs `samples` times; a variant's slowdown sample k is its k-th
time over the baseline's k-th. The baseline has no slowdown: it would be its
own time over itself.
"""

from __future__ import annotations

import os
import shlex

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, variable

from checks.suite.base import MultiGpuCheck, median
from checks.suite.settings import Count, SettingError, Size, Unreadable, Whole, size_bytes
from experiments import budget
from experiments.p2p_pingpong import (
    GiB,
    parse_pingpong_samples,
)
from experiments.records import parsed_output
from systems import data


@sn.deferrable
def pingpong_values(stdout: str, variant: str, field: str) -> list:
    """Each sample's time (field 'time', s) or bandwidth ('bw', GiB/s) of one
    variant, in sample order, read from the job's output when evaluated."""
    samples = parsed_output(stdout, parse_pingpong_samples).get(variant, [])
    return [time if field == "time" else bw for time, bw in samples]


@sn.deferrable
def ratios(numerators, denominators) -> list:
    """Sample k over sample k: a variant's time over the baseline's of the same job."""
    numerators, denominators = list(numerators), list(denominators)
    if len(numerators) != len(denominators):
        raise sn.SanityError(f"{len(numerators)} samples against {len(denominators)} of the baseline")
    return [a / b for a, b in zip(numerators, denominators)]


@rfm.simple_test
class p2p_pingpong(MultiGpuCheck):
    descr = "P2P ping-pong persistent kernel between two GPUs: baseline, manually and NVBit-instrumented"
    tags = {"multigpu", "nvlink", "nvbit"}
    time_limit = "10m"
    num_gpus_per_node = 2

    variant = parameter(["baseline", "manual", "nvbit"])

    #: The seed's 64 MB (of int) and ITERS.
    size = variable(str, value="64M")
    iters = variable(Whole, int, Unreadable, value=10000)
    nvbit_tool = variable(str, value="", loggable=True)

    #: Timed runs of each variant: the samples of its figures.
    samples = variable(Whole, int, Unreadable, value=5)

    case_variables = ("size", "iters")

    #: What each may be. Every iteration is a round trip over the peer
    #: link (microseconds): at most 10^6 of them per sample and 2x10^6 in
    #: all keep a variant within seconds to a minute.
    #: One int per thread of 256-thread blocks: a multiple of 1 KiB, under 2^31 ints.
    settings = {
        "size": Size(4 << 10, (8 << 30) - 1024, words=1024),
        "iters": Count(1, 1_000_000),
        "samples": Count(1, 20),
    }

    def settings_problems(self) -> list[str]:
        moved = 2 * size_bytes(self.size) * self.iters * self.samples  # each iteration moves the array both ways
        if moved > 64 << 40:
            return [f"size x iters x samples moves {moved / 2**40:.0f} TiB, over the 64 TiB a run may (the program's)"]
        if self.iters * self.samples > 2_000_000:
            return [f"iters x samples = {self.iters * self.samples} round trips, over the 2000000 a run may make"]
        return []

    @run_after("setup")
    def skip_without_nvbit(self):
        if self.variant != "nvbit":
            return
        # -S p2p_pingpong.nvbit_tool=PATH (a tool tried before it goes into the system's data) or the partition's.
        tool = self.nvbit_tool or self.current_partition.extras.get("nvbit_tool")
        system = self.current_partition.fullname.split(":")[0]
        self.skip_if(
            not tool,
            f"no NVBit installation for {self.current_partition.fullname}: name the empty-call tool (.so) "
            f"with nvbit_tool in systems/{system}.yaml (or -S p2p_pingpong.nvbit_tool=PATH)",
        )
        if not (os.path.isabs(tool) and os.path.isfile(tool)):  # named but not there: a mistake, never a skip
            raise SettingError(
                f"{type(self).variant_name()}: nvbit_tool={tool!r} must be an existing file's absolute path"
            )
        self.nvbit_tool = tool

    #: One round trip's launch and flags across the link, besides the array's bytes.
    ROUND_TRIP_S = 5e-6

    def expected_seconds(self) -> float:
        # Each iteration moves the array both ways; the baseline runs beside each other variant.
        peer = data.peer_bandwidth(self.node, 0, 1)
        trip = self.ROUND_TRIP_S + budget.transfer_s(2 * size_bytes(self.size), 2 * peer if peer else None)
        return budget.START_S + len(self.variants()) * self.samples * self.iters * trip

    #: The fewest samples a sized-down case keeps.
    MIN_SAMPLES = 3

    def size_down(self, budget_s: float) -> str:
        # Fewer samples of the same round trips (iters and size make the case).
        each = (self.expected_seconds() - budget.START_S) / self.samples
        fits = budget.fewer(self.samples, self.MIN_SAMPLES, budget.START_S, each, budget_s)
        if fits is None:
            return ""
        was, self.samples = self.samples, fits
        return f"samples {was} -> {fits}"

    def variants(self) -> list:
        return ["baseline"] + ([] if self.variant == "baseline" else [self.variant])

    @run_before("run")
    def set_options(self):
        self.executable_opts = [
            "--variants", ",".join(self.variants()),
            "--size", self.size,
            "--iters", str(self.iters),
            "--samples", str(self.samples),
        ]  # fmt: skip
        if self.variant == "nvbit":
            self.executable_opts += ["--nvbit-tool", shlex.quote(self.nvbit_tool)]  # a path, into a job script

    def verified(self):
        return sn.all(
            [
                sn.assert_not_found(r"^error:|CUDA error", self.stderr),
                sn.assert_not_found(r"^Skipped:", self.stdout),
                *(
                    sn.assert_found(rf"^Verified: variant={v} samples={self.samples} ", self.stdout)
                    for v in self.variants()
                ),
                *(
                    sn.assert_eq(sn.count(sn.findall(rf"^PingPong: variant={v} ", self.stdout)), self.samples)
                    for v in self.variants()
                ),
            ]
        )

    #: The unit of the figures :meth:`limit_of` bounds.
    limit_unit = "GiB/s"

    @classmethod
    def limit_of(cls, figure: str, case: dict, node: dict) -> float | None:
        # Each iteration's data crosses the pair's link, half of them each
        # way, overlapping across threads: at most both directions' rate.
        peer = data.peer_bandwidth(node, 0, 1)
        return 2 * peer / GiB if peer and figure in ("bandwidth", "baseline_bandwidth") else None

    @run_before("performance")
    def set_perf_variables(self):
        # At the performance stage, not setup: the samples are final once the budget has sized the case.
        times = pingpong_values(self.stdout, self.variant, "time")
        perf = {
            **self.headline("bandwidth", pingpong_values(self.stdout, self.variant, "bw"), "GiB/s", self.samples),
            "time": sn.make_performance_function(median(times), "s"),
        }
        if self.variant != "baseline":
            # Sample k's slowdown: its time over the baseline's k-th, of the same job.
            base = pingpong_values(self.stdout, "baseline", "time")
            perf.update(self.headline("slowdown", ratios(times, base), "x", self.samples))
            perf["baseline_bandwidth"] = sn.make_performance_function(
                median(pingpong_values(self.stdout, "baseline", "bw")), "GiB/s"
            )
        self.perf_variables = perf
