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
is twice the GPU's memory (the seed's 32 GiB on a 16 GB V100). The seed's point
there is migration under oversubscription: managed memory that cannot stay on
the GPU thrashes, unless advice keeps it on the host. So the class is managed
memory's alone, and runs only where the system declares managed-memory
oversubscription safe; NUMA-local and pinned memory are never migrated, and
their rate is the same at any size (the seed: 1 to 120 GiB), which the small
class measures. An oversubscribed case moves its data runs x repeats times:
sized down to fewer repeats where that is over the case budget.
"""

from __future__ import annotations

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, variable
from reframe.core.exceptions import SkipTestError

from checks.suite.base import GpuCheck, median, parser_sanity
from checks.suite.settings import Choice, Count, CountOr, Decimal, Real, Size, Unreadable, Whole, size_bytes
from experiments import budget
from experiments.records import parsed_output
from experiments.um_bandwidth import (
    MEMORY_CASES,
    RESIDENT_ON_GPU,
    GiB,
    Output,
    parse_output,
    steady_state,
)
from systems import data, parse_quantity


@sn.deferrable
@parser_sanity
def output_of(stdout: str) -> Output:
    """The program's records (experiments/um_bandwidth.py parses them)."""
    return parsed_output(stdout, parse_output)


@sn.deferrable
@parser_sanity
def per_repeat(output: Output, runs: int, repeats: int, figure) -> list:
    """`figure` (a function of one repeat's runs) for each repeat, in order."""
    return [figure(runs_of) for runs_of in output.per_repeat(repeats, runs)]


@sn.deferrable
@parser_sanity
def copy_engine_samples(output: Output, op: str) -> list:
    return list(output.copy_engine_samples(op))


@sn.deferrable
@parser_sanity
def measured_as_asked(output: Output, op: str, runs: int, repeats: int, advice: str) -> bool:
    """The driver took the advice (a driver that rejects it, an unsupported
    feature and not a fault, skips the case with its reason); the kernel ran
    the op, every run and repeat, each verified; the copy engine measured."""
    if output.advice_rejected:
        raise SkipTestError(f"the driver rejects {advice}: {output.advice_rejected}")
    if output.op != op:
        raise sn.SanityError(f"the kernel ran {output.op!r}, not {op!r}")
    wanted = {"kernel": op, **({"runs": str(runs * repeats)} if op == "read" else {"repeats": str(repeats)})}
    if output.verified != wanted:
        raise sn.SanityError(f"Verified record {output.verified}, not {wanted}")
    output.per_repeat(repeats, runs)  # every run of every repeat, once
    output.copy_engine_samples(op)
    return True


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
    oversubscription_factor = variable(Decimal, float, Unreadable, value=2.0)

    #: Kernel runs per repeat (the seed's five) and repeats of the whole
    #: experiment on fresh allocations: the samples of each headline figure.
    runs = variable(Whole, int, Unreadable, value=5)
    repeats = variable(Whole, int, Unreadable, value=5)

    #: Copies the copy engine's rate is the median of, each way (after one
    #: warm-up): the program takes it as an option and prints it in its record.
    #: Not logged: its samples are (copy_engine_bw.sN), and a new perflog
    #: column would make ReFrame start every perflog anew.
    copy_engine_samples = variable(Whole, int, Unreadable, value=5, loggable=False)

    #: The seed's launch: 160 blocks of 128 threads.
    grid = variable(str, value="160")
    block = variable(Whole, int, Unreadable, value=128)

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
        "copy_engine_samples": Count(1, 100),
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

    @run_after("init")
    def oversubscribe_managed_memory_only(self):
        self.skip_if(
            self.size_class == "oversubscribed" and self.allocator != "managed",
            f"{self.allocator} memory is never migrated: its rate at any size is the small class's "
            "(oversubscription is managed memory's experiment)",
        )

    def oversubscribed_size(self) -> float:
        return self.oversubscription_factor * parse_quantity(self.node["gpus"]["memory"])

    def data_bytes(self) -> float:
        if self.size_class == "oversubscribed":
            return self.oversubscribed_size()
        return float(size_bytes(self.small_size))

    def run_seconds(self) -> list[float]:
        """Each kernel run's expected seconds, by where the data is when it runs."""
        nbytes, sol = self.data_bytes(), data.speed_of_light(self.node)
        link, hbm = sol["host_link"], sol["hbm"]
        migrate = budget.transfer_s(nbytes, link, budget.MIGRATION_OF_LINK)
        if self.allocator == "device":
            return [budget.transfer_s(nbytes, hbm)] * self.runs
        if self.allocator != "managed" or self.advice == "accessed-by":
            return [budget.transfer_s(nbytes, link)] * self.runs
        if self.advice == "preferred-location-cpu":
            return [migrate] + [budget.transfer_s(nbytes, link)] * (self.runs - 1)
        if self.touch_on_host and self.advice == "read-mostly":
            return [budget.transfer_s(nbytes, link, budget.DUPLICATE_INVALIDATION_OF_LINK)] * self.runs
        if self.touch_on_host:
            return [migrate] * self.runs
        return [migrate] + [budget.transfer_s(nbytes, hbm)] * (self.runs - 1)

    def repeat_seconds(self) -> float:
        """One repeat: a fresh allocation filled (and pinned) on the host, its runs."""
        nbytes = self.data_bytes()
        host = 0.0 if self.allocator == "device" else budget.first_touch_s(nbytes)
        pinned = budget.first_touch_s(nbytes) if self.allocator in ("numa", "pinned") else 0.0
        return host + pinned + sum(self.run_seconds())

    def expected_seconds(self) -> float:
        copies = min(self.data_bytes(), GiB)
        link = data.speed_of_light(self.node)["host_link"]
        copy_engine = budget.first_touch_s(copies) + 12 * budget.transfer_s(copies, link)
        return budget.START_S + copy_engine + self.repeats * self.repeat_seconds()

    #: The fewest repeats a sized-down case keeps: three samples of each figure.
    MIN_REPEATS = 3

    def size_down(self, budget_s: float) -> str:
        each = self.repeat_seconds()
        fixed = self.expected_seconds() - self.repeats * each
        fits = budget.fewer(self.repeats, self.MIN_REPEATS, fixed, each, budget_s)
        if fits is None:
            return ""
        was, self.repeats = self.repeats, fits
        return f"repeats {was} -> {fits}"

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
            "--copy-engine-samples", str(self.copy_engine_samples),
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
        output = self.output()
        return sn.all([
            measured_as_asked(output, self.op, self.runs, self.repeats, self.advice),
            sn.assert_eq(sn.len(copy_engine_samples(output, self.op)), self.copy_engine_samples),
        ])  # fmt: skip

    def output(self):
        return output_of(self.stdout)

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
            "steady_bw": sol["hbm"] if allocator in RESIDENT_ON_GPU else sol["host_link"],
        }
        limit = limits.get(figure)
        return limit / GiB if limit else None

    @run_before("performance")
    def set_perf_variables(self):
        output = self.output()
        first = per_repeat(output, self.runs, self.repeats, lambda runs: runs[0])
        steady = per_repeat(output, self.runs, self.repeats, steady_state)
        copy_engine = copy_engine_samples(output, self.op)
        perf = {
            **self.headline("first_run_bw", first, "GiB/s", self.repeats),
            **self.headline("steady_bw", steady, "GiB/s", self.repeats),
            **self.headline("copy_engine_bw", copy_engine, "GiB/s", self.copy_engine_samples),
        }
        # The curve over runs (migration, then the steady state): each run's median over the repeats.
        for i in range(self.runs):
            runs_i = per_repeat(output, self.runs, self.repeats, lambda runs, i=i: runs[i])
            perf[f"run{i + 1}_bw"] = sn.make_performance_function(median(runs_i), "GiB/s")
        perf["steady_of_copy_engine"] = sn.make_performance_function(median(steady) / median(copy_engine), "fraction")
        # Of the path's own limit: HBM where the data ends up on the GPU, the host link otherwise.
        limit = self.figure_limit("steady_bw")
        if limit:  # a fraction of an unknown limit is not logged
            name = "steady_of_hbm" if self.allocator in RESIDENT_ON_GPU else "steady_of_link"
            perf[name] = sn.make_performance_function(median(steady) / limit, "fraction")
        self.perf_variables = perf
