"""The Unified Memory bandwidth reprex as a check.

A kernel of 160 x 128 threads (the seed's launch) reads or writes a buffer in
managed, NUMA-local, pinned or device memory, five times; the first run shows
what migration costs, the median of the others what the steady state is. The
program repeats that whole experiment on fresh allocations (`repeats`), so
each headline figure has one sample per repeat: ``first_run_bw`` (run 1),
``steady_bw`` (the median of runs 2..5) and ``copy_engine_bw`` (the copy
engine's rate over the same link, measured in the same process). The link's
speed of light (systems/) bounds them and says how far each is from the best
this node can do.

Size classes, as the seed's: ``small`` is its 1 GiB on every GPU; ``oversubscribed``
is twice the GPU's memory (the seed's 32 GiB on a 16 GB V100) and runs only where
the system declares managed-memory oversubscription safe.
"""

from __future__ import annotations

import re
import statistics

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, variable
from reframe.core.exceptions import SkipTestError

from checks.suite.base import GpuCheck, median
from checks.suite.records import read_output
from checks.suite.settings import Choice, Count, CountOr, Decimal, Real, Size, Whole
from systems import data, parse_quantity

GiB = 2**30

# Advice only means something for managed memory, so allocator and advice
# are swept together: every managed advice of the seed, and the other
# allocators plain.
MEMORY_CASES = [
    ("managed", "none"),
    ("managed", "accessed-by"),
    ("managed", "read-mostly"),
    ("managed", "preferred-location-cpu"),
    ("numa", "none"),
    ("pinned", "none"),
    ("device", "none"),
]

#: Where the data of each allocator can be when the GPU reads it in the
#: steady state: managed memory may migrate to the GPU, device memory is there.
_RESIDENT_ON_GPU = {"managed", "device"}

_THROUGHPUT = r"^Throughput: (?P<bw>\S+) GiB/s"
_COPY_ENGINE = r"^Copy engine {direction}: \S+ GiB/s \(samples (?P<samples>[0-9.,]+)\)"


def parse_throughputs(text: str) -> list:
    """Every run's throughput, from this program's or the seed's output."""
    return [float(m) for m in re.findall(_THROUGHPUT, text, re.MULTILINE)]


def steady_state(runs: list) -> float:
    """Median of runs 2..N: the first run pays for migration and page faults."""
    if len(runs) < 2:
        raise ValueError("the steady state needs at least two runs")
    return statistics.median(runs[1:])


@sn.deferrable
def per_repeat(throughputs, runs: int, repeats: int, figure) -> list:
    """`figure` (a function of one repeat's runs) for each repeat, in order."""
    values = list(throughputs)
    if len(values) != runs * repeats:
        raise sn.SanityError(f"{len(values)} 'Throughput:' lines for {repeats} repeats of {runs} runs")
    return [figure(values[r * runs : (r + 1) * runs]) for r in range(repeats)]


@sn.deferrable
def floats(text: str) -> list:
    return [float(x) for x in text.split(",")]


@rfm.simple_test
class um_bandwidth(GpuCheck):
    descr = "Unified Memory bandwidth reprex: kernel throughput over managed, NUMA, pinned and device memory"
    tags = {"um", "reprex"}

    memory = parameter(MEMORY_CASES, fmt=lambda m: m[0] if m[1] == "none" else f"{m[0]}+{m[1]}")
    touch_on_host = parameter([False, True], fmt=lambda t: "touch" if t else "notouch")
    op = parameter(["read", "write"])
    size_class = parameter(["small", "oversubscribed"])

    #: Data size of the 'small' class: the seed's "small data".
    small_size = variable(str, value="1G")

    #: Data size of the 'oversubscribed' class, as a multiple of the GPU's memory.
    oversubscription_factor = variable(Decimal, float, value=2.0)

    #: Kernel runs per repeat (the seed's five) and repeats of the whole
    #: experiment on fresh allocations: the samples of each headline figure.
    runs = variable(Whole, int, value=5)
    repeats = variable(Whole, int, value=5)

    #: Copies the copy engine's rate is the median of (after one warm-up).
    copy_engine_samples = 5

    #: The seed's launch: 160 blocks of 128 threads.
    grid = variable(str, value="160")
    block = variable(Whole, int, value=128)

    #: Read kernel loads: 'plain' (the seed's), 'l2-256' (256-byte L2 fetches,
    #: sm_80+) or 'bulk' (bulk copies into shared memory, sm_90+).
    load = variable(str, value="plain")

    case_variables = ("size", "load", "grid", "block")

    #: What each may be. A case moves its data runs x repeats times: at
    #: most 20 x 20 of the 'small' class's at most 64 GiB, minutes at the
    #: slowest path measured (UM migration, 4-8 GiB/s on one H100).
    settings = {
        "small_size": Size(8 << 10, 64 << 30, multiple=(0.001, 0.9)),
        "oversubscription_factor": Real(1.05, 8.0),
        "runs": Count(2, 20),  # the steady state is the median of runs 2..N
        "repeats": Count(1, 20),
        "grid": CountOr(1, 2**31 - 1, ("auto",)),
        "block": Count(32, 1024, step=32),
        "load": Choice(("plain", "l2-256", "bulk")),
    }

    @property
    def allocator(self) -> str:
        return self.memory[0]

    @property
    def advice(self) -> str:
        return self.memory[1]

    @property
    def size(self) -> str:
        """The data size as the program takes it: bytes, or a multiple of GPU memory."""
        return self.small_size if self.size_class == "small" else f"{self.oversubscription_factor:g}x"

    @run_after("init")
    def drop_meaningless_cases(self):
        # Device memory is never on the host, so there is nothing to touch.
        self.skip_if(self.allocator == "device" and self.touch_on_host, "device memory cannot be touched on the host")
        # Each GPU write to a read-duplicated page collapses every copy of it.
        self.skip_if(
            self.advice == "read-mostly" and self.op == "write",
            "read-mostly is advice for data the GPU only reads; GPU writes fault on every duplicated page",
        )

    def oversubscribed_size(self) -> float:
        return self.oversubscription_factor * parse_quantity(self.node["gpus"]["memory"])

    @run_after("setup")
    def skip_what_cannot_run_safely(self):
        feats = self.current_partition.features
        self.skip_if(self.allocator == "numa" and "numa" not in feats, "numa memory needs libnuma, absent here")
        if self.size_class != "oversubscribed":
            return
        self.skip_if(self.allocator == "device", "device memory cannot be oversubscribed")
        self.skip_if(
            self.allocator == "managed" and "oversubscription" not in feats,
            f"{self.current_system.name} does not declare managed-memory oversubscription "
            "(more managed memory than the GPU has free can hang it)",
        )
        host = parse_quantity(self.node["host_memory"])
        self.skip_if(
            self.oversubscribed_size() > 0.8 * host,
            f"{self.oversubscribed_size() / GiB:.0f} GiB does not fit in 80% of the host's {host / GiB:.0f} GiB",
        )

    @run_before("run")
    def set_options(self):
        self.executable_opts = [
            "--alloc", self.allocator,
            "--advise", self.advice,
            "--op", self.op,
            "--size", self.size,
            "--runs", str(self.runs),
            "--repeats", str(self.repeats),
            "--grid", self.grid,
            "--block", str(self.block),
            "--load", self.load,
            "--numa-node", str(self.gpu_numa_node()),
        ]  # fmt: skip
        if self.touch_on_host:
            self.executable_opts.append("--touch-on-host")
        if self.size_class == "oversubscribed" and self.allocator == "managed":
            self.executable_opts.append("--allow-oversubscription")

    def verified(self):
        verified = (
            rf"^Checksums verified: {self.runs * self.repeats} runs"
            if self.op == "read"
            else rf"^Write verified by the host: {self.repeats} repeats"
        )
        return sn.all(
            [
                _advice_accepted(self.stdout, self.advice),
                sn.assert_found(rf"^Running {self.op} kernel", self.stdout),
                sn.assert_eq(sn.count(sn.findall(_THROUGHPUT, self.stdout)), self.runs * self.repeats),
                sn.assert_found(verified, self.stdout),
                sn.assert_found(self.copy_engine_pattern(), self.stdout),
            ]
        )

    def copy_engine_pattern(self) -> str:
        # The copy engine in the direction of this case's data flow.
        return _COPY_ENGINE.format(direction="host-to-device" if self.op == "read" else "device-to-host")

    def throughputs(self):
        return sn.extractall(_THROUGHPUT, self.stdout, "bw", float)

    #: The unit of the figures :meth:`limit_of` bounds.
    limit_unit = "GiB/s"

    @classmethod
    def limit_of(cls, figure: str, case: dict, node: dict) -> float | None:
        # HBM where the data is on the GPU when read, the host link otherwise.
        sol = data.speed_of_light(node)
        allocator = str(case.get("memory", "")).split("+")[0]
        limits = {
            "copy_engine_bw": sol["host_link"],
            "first_run_bw": sol["hbm"] if allocator == "device" else sol["host_link"],
            "steady_bw": sol["hbm"] if allocator in _RESIDENT_ON_GPU else sol["host_link"],
        }
        limit = limits.get(figure)
        return limit / GiB if limit else None

    @run_before("performance")
    def set_perf_variables(self):
        throughputs = self.throughputs()
        first = per_repeat(throughputs, self.runs, self.repeats, lambda runs: runs[0])
        steady = per_repeat(throughputs, self.runs, self.repeats, steady_state)
        copy_engine = floats(sn.extractsingle(self.copy_engine_pattern(), self.stdout, "samples"))
        perf = {
            **self.headline("first_run_bw", first, "GiB/s", self.repeats),
            **self.headline("steady_bw", steady, "GiB/s", self.repeats),
            **self.headline("copy_engine_bw", copy_engine, "GiB/s", self.copy_engine_samples),
        }
        # The curve over runs (migration, then the steady state): each run's median over the repeats.
        for i in range(self.runs):
            runs_i = per_repeat(throughputs, self.runs, self.repeats, lambda runs, i=i: runs[i])
            perf[f"run{i + 1}_bw"] = sn.make_performance_function(median(runs_i), "GiB/s")
        perf["steady_of_copy_engine"] = sn.make_performance_function(median(steady) / median(copy_engine), "fraction")
        # Of the path's own limit: HBM where the data ends up on the GPU, the host link otherwise.
        limit = self.figure_limit("steady_bw")
        if limit:  # a fraction of an unknown limit is not logged
            name = "steady_of_hbm" if self.allocator in _RESIDENT_ON_GPU else "steady_of_link"
            perf[name] = sn.make_performance_function(median(steady) / limit, "fraction")
        self.perf_variables = perf


@sn.deferrable
def _advice_accepted(stdout: str, advice: str) -> bool:
    """The driver took the advice; a driver that rejects it (an unsupported
    feature, not a fault) skips the case with its reason."""
    rejected = re.findall(r"^Advice rejected by the driver: (.*)$", read_output(stdout), re.MULTILINE)
    if rejected:
        raise SkipTestError(f"the driver rejects {advice}: {rejected[0]}")
    return True
