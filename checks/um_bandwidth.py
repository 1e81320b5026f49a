"""The Unified Memory bandwidth reprex as a check.

A kernel of 160 x 128 threads (the seed's launch) reads or writes a buffer in
managed, NUMA-local, pinned or device memory, five times; the first run shows
what migration costs, the median of the others what the steady state is. The
copy engine's bandwidth over the same link, measured in the same process, and
the link's speed of light (systems/) say how far each figure is from the best
this node can do.
"""

import os
import re

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, performance_function, run_after, run_before, sanity_function, variable

from checks.suite.base import GpuCheck
from checks.suite.references import references_for
from systems import parse_quantity

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

_THROUGHPUT = r"^Throughput: (?P<bw>\S+) GiB/s"


def parse_throughputs(text: str) -> list:
    """Every run's throughput, from this program's or the seed's output."""
    return [float(m) for m in re.findall(_THROUGHPUT, text, re.MULTILINE)]


def steady_state(runs: list) -> float:
    """Median of runs 2..N: the first run pays for migration and page faults."""
    rest = sorted(runs[1:])
    if not rest:
        raise ValueError("the steady state needs at least two runs")
    mid = len(rest) // 2
    return rest[mid] if len(rest) % 2 else 0.5 * (rest[mid - 1] + rest[mid])


@rfm.simple_test
class UnifiedMemoryBandwidth(GpuCheck):
    descr = "Unified Memory bandwidth reprex: kernel throughput over managed, NUMA, pinned and device memory"
    program = "um_bw"
    tags = {"um", "reprex"}

    memory = parameter(MEMORY_CASES, fmt=lambda m: m[0] if m[1] == "none" else f"{m[0]}+{m[1]}")
    touch_on_host = parameter([False, True], fmt=lambda t: "touch" if t else "notouch")
    op = parameter(["read", "write"])
    size_class = parameter(["fits", "oversubscribed"])

    #: Data size of the 'fits' class, as a fraction of the GPU's memory.
    fits_fraction = variable(float, value=0.25)

    #: Data size of the 'oversubscribed' class, as a multiple of the GPU's memory.
    oversubscription_factor = variable(float, value=2.0)

    #: Kernel runs per case (the seed's five).
    runs = variable(int, value=5)

    #: The seed's launch: 160 blocks of 128 threads.
    grid = variable(str, value="160")
    block = variable(int, value=128)

    #: Read kernel loads: 'plain' (the seed's), 'l2-256' (256-byte L2 fetches,
    #: sm_80+) or 'bulk' (bulk copies into shared memory, sm_90+).
    load = variable(str, value="plain")

    @property
    def allocator(self) -> str:
        return self.memory[0]

    @property
    def advice(self) -> str:
        return self.memory[1]

    @run_after("init")
    def drop_meaningless_cases(self):
        # Device memory is never on the host, so there is nothing to touch.
        self.skip_if(self.allocator == "device" and self.touch_on_host, "device memory cannot be touched on the host")
        # Each GPU write to a read-duplicated page collapses every copy of it:
        # a 20 GiB buffer then takes many minutes a run, past any nightly budget.
        self.skip_if(
            self.advice == "read-mostly" and self.op == "write",
            "read-mostly is advice for data the GPU only reads; GPU writes fault on every duplicated page",
        )

    def data_size(self) -> float:
        gpu_memory = parse_quantity(self.node["gpus"]["memory"])
        factor = self.fits_fraction if self.size_class == "fits" else self.oversubscription_factor
        return factor * gpu_memory

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
            self.data_size() > 0.8 * host,
            f"{self.data_size() / GiB:.0f} GiB does not fit in 80% of the host's {host / GiB:.0f} GiB",
        )

    @run_before("run")
    def set_options(self):
        factor = self.fits_fraction if self.size_class == "fits" else self.oversubscription_factor
        numa = self.node["gpus"].get("numa_affinity", [self.node["numa_nodes"][0]])[0]
        self.executable_opts = [
            "--alloc", self.allocator,
            "--advise", self.advice,
            "--op", self.op,
            "--size", f"{factor:g}x",
            "--runs", str(self.runs),
            "--grid", self.grid,
            "--block", str(self.block),
            "--load", self.load,
            "--numa-node", str(numa),
        ]  # fmt: skip
        if self.touch_on_host:
            self.executable_opts.append("--touch-on-host")
        if self.size_class == "oversubscribed" and self.allocator == "managed":
            self.executable_opts.append("--allow-oversubscription")

    @run_before("sanity")
    def skip_rejected_advice(self):
        if self.is_dry_run():
            return
        # Hooks run outside the stage directory: name the output by its full path.
        stdout = os.path.join(self.stagedir, self.stdout.evaluate())
        rejected = sn.evaluate(sn.extractall(r"^Advice rejected by the driver: (.*)$", stdout, 1))
        if rejected:
            self.skip(f"the driver rejects {self.advice}: {rejected[0]}")

    @sanity_function
    def verified_runs(self):
        verified = "Checksums verified" if self.op == "read" else "Write verified by the host"
        return sn.all([
            sn.assert_found(rf"^Running {self.op} kernel", self.stdout),
            sn.assert_eq(sn.count(sn.findall(_THROUGHPUT, self.stdout)), self.runs),
            sn.assert_found(verified, self.stdout),
            sn.assert_found(r"^Copy engine host-to-device", self.stdout),
        ])  # fmt: skip

    def throughputs(self) -> list:
        return sn.evaluate(sn.extractall(_THROUGHPUT, self.stdout, "bw", float))

    def copy_engine(self) -> float:
        """The copy engine's rate in the direction of this case's data flow."""
        direction = "host-to-device" if self.op == "read" else "device-to-host"
        return sn.evaluate(sn.extractsingle(rf"^Copy engine {direction}: (\S+) GiB/s", self.stdout, 1, float))

    @performance_function("GiB/s")
    def first_run_bw(self):
        return self.throughputs()[0]

    @performance_function("GiB/s")
    def steady_bw(self):
        return steady_state(self.throughputs())

    @performance_function("GiB/s")
    def copy_engine_bw(self):
        return self.copy_engine()

    @performance_function("fraction")
    def steady_of_copy_engine(self):
        return steady_state(self.throughputs()) / self.copy_engine()

    @performance_function("fraction")
    def steady_of_link(self):
        sol = self.speed_of_light("host_link")
        return steady_state(self.throughputs()) * GiB / sol if sol else 0.0

    @run_before("performance")
    def set_perf_variables(self):
        per_run = {
            f"run{i + 1}_bw": sn.make_performance_function(
                sn.extractsingle(_THROUGHPUT, self.stdout, "bw", float, item=i), "GiB/s"
            )
            for i in range(self.runs)
        }
        self.perf_variables = {
            **per_run,
            "first_run_bw": self.first_run_bw(),
            "steady_bw": self.steady_bw(),
            "copy_engine_bw": self.copy_engine_bw(),
            "steady_of_copy_engine": self.steady_of_copy_engine(),
            "steady_of_link": self.steady_of_link(),
        }
        self.reference = references_for(self)
