"""Small-copy latency between host and device, the reason GDRCopy exists.

A cudaMemcpy costs microseconds however few bytes it moves (GDRCopy's README:
"a cudaMemcpy can incur in a 6-7us overhead"). src/copy_latency times, for
sizes 1 B to 16 MiB and both directions: cudaMemcpy from pageable and from
pinned memory, cudaMemcpyAsync plus cudaStreamSynchronize, a kernel that reads
or writes mapped pinned memory (zero-copy), and, where the build has GDRCopy
and the node has gdrdrv, GDRCopy's CPU mapping of GPU memory. Every case's
data is verified by the program before it is timed.

The whole curve lands in the perflog, one performance variable per method,
direction and size: ``lat_us_<method>_<direction>_<size>``, the median in
microseconds (e.g. ``lat_us_pinned_h2d_4096``). So do the crossovers,
computed here from the medians: ``crossover_<direction>_<b>_over_<a>`` is the
smallest size from which method b stays faster than method a at every larger
size, for each pair where a is faster at the smallest size and b at the
largest (e.g. ``crossover_h2d_pinned_over_zerocopy``: where cudaMemcpy from
pinned memory overtakes the zero-copy kernel).
"""

from __future__ import annotations

import os
import re

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, variable

from checks.suite.base import GpuCheck
from checks.suite.records import numbers, records, require

#: Methods that every node with a GPU has; GDRCopy's is added where the
#: partition declares (or detection finds) gdrdrv.
BASE_METHODS = ["pageable", "pinned", "async", "zerocopy"]
GDRCOPY_METHOD = "gdrcopy"
DIRECTIONS = ["h2d", "d2h"]


#: The sizes whose latencies are headline figures: a word, a page, 64 KiB, 1 MiB.
HEADLINE_SIZES = [8, 4096, 65536, 1048576]
_VERIFIED = re.compile(r"^Data verified: (?P<cases>\d+) cases", re.MULTILINE)


def _latency_records(text: str) -> list:
    names = ["method", "direction", "size", "median_us", "min_us"]
    return [require(r, names, "Latency") for r in records(text, "Latency")]


def parse_latencies(text: str, statistic: str = "median") -> dict:
    """{(method, direction): {size: microseconds}} from the program's output;
    `statistic` is 'median' or 'min'."""
    curves: dict = {}
    for r in _latency_records(text):
        curves.setdefault((r["method"], r["direction"]), {})[int(r["size"])] = float(r[f"{statistic}_us"])
    return curves


def parse_block_medians(text: str) -> dict:
    """{(method, direction, size): [block medians in microseconds]} from the program's output."""
    return {
        (r["method"], r["direction"], int(r["size"])): list(numbers(r["block_medians_us"]))
        for r in _latency_records(text)
        if r.get("block_medians_us")
    }


def parse_skipped(text: str) -> dict:
    """{method: reason} for the legs the program could not run."""
    return {r["method"]: r.get("reason", "").strip() for r in records(text, "Skipped") if "method" in r}


def parse_verified(text: str) -> int:
    """How many cases the program verified (0 when it did not finish)."""
    m = _VERIFIED.search(text)
    return int(m["cases"]) if m else 0


def crossover(a: dict, b: dict) -> int | None:
    """The smallest size from which `b` is faster than `a` at that size and
    at every larger one, where `a` leads at the smallest common size; None
    when `a` does not lead at the start or `b` does not lead at the end.

    Curves are {size: latency}; only sizes both have are compared, so a
    crossover is always a measured size (the first of b's lasting lead).
    """
    sizes = sorted(set(a) & set(b))
    if len(sizes) < 2 or not a[sizes[0]] < b[sizes[0]] or not b[sizes[-1]] < a[sizes[-1]]:
        return None
    first = sizes[-1]
    for size in reversed(sizes):
        if not b[size] < a[size]:
            break
        first = size
    return first


def crossovers(curves: dict) -> dict:
    """{'crossover_<dir>_<b>_over_<a>': size} for every direction and ordered
    pair of methods whose curves cross (see :func:`crossover`)."""
    found = {}
    for direction in DIRECTIONS:
        methods = sorted(m for (m, d) in curves if d == direction)
        for a in methods:
            for b in methods:
                if a == b:
                    continue
                size = crossover(curves[(a, direction)], curves[(b, direction)])
                if size is not None:
                    found[f"crossover_{direction}_{b}_over_{a}"] = size
    return found


def perf_name(method: str, direction: str, size: int) -> str:
    return f"lat_us_{method}_{direction}_{size}"


@rfm.simple_test
class copy_latency(GpuCheck):
    descr = "Host-device copy latency, 1 B to 16 MiB: cudaMemcpy (pageable, pinned), async, zero-copy, GDRCopy"
    tags = {"latency", "gdrcopy"}

    #: Largest copy; sizes are the powers of two from 1 B up to it.
    max_size = variable(str, value="16M")

    #: Timed samples per case (at most; a case stops after `case_seconds`
    #: once it has 10), and the shortest sample: copies shorter than that
    #: are timed in back-to-back batches.
    reps = variable(int, value=100)
    case_seconds = variable(float, value=0.5)
    sample_us = variable(float, value=5.0)

    #: CUDA device to measure; the process runs on its NUMA node.
    device = variable(int, value=0)

    def gpu_devices(self) -> list[int]:
        return [self.device]

    #: Consecutive blocks of each case's timings whose medians are the
    #: samples of the headline latencies.
    blocks = variable(int, value=5)

    case_variables = ("device",)

    #: The methods asked for (set before the run) and, for the perflog's
    #: readers, the legs the program could not run, with the reason.
    methods = variable(typ.List[str], value=[])
    skipped_legs = variable(str, value="", loggable=True)

    @run_after("setup")
    def set_resources(self):
        # All of the node's cores: under srun a single-CPU task could not be
        # moved to the GPU's NUMA node.
        cpu = self.node["cpu"]
        self.num_cpus_per_task = cpu["sockets"] * cpu["cores_per_socket"]

    @run_before("run")
    def set_options(self):
        self.methods = BASE_METHODS + ([GDRCOPY_METHOD] if "gdrdrv" in self.current_partition.features else [])
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

    def _output(self) -> str:
        # Hooks run outside the stage directory: read the output by its full path.
        with open(os.path.join(self.stagedir, self.stdout.evaluate())) as stream:
            return stream.read()

    def verified(self):
        return sn.all([
            sn.assert_not_found(r"^error:|CUDA error", self.stderr),
            sn.assert_found(r"^Data verified: \d+ cases", self.stdout),
            _complete_curves(self.stdout, self.methods, DIRECTIONS),
        ])  # fmt: skip

    @run_before("performance")
    def set_perf_variables(self):
        if self.is_dry_run():
            return
        text = self._output()
        self.skipped_legs = "; ".join(f"{m}: {r}" for m, r in parse_skipped(text).items())
        curves, blocks = parse_latencies(text), parse_block_medians(text)
        perf = {}
        for (method, direction), curve in sorted(curves.items()):
            for size, us in sorted(curve.items()):
                name = perf_name(method, direction, size)
                if size in HEADLINE_SIZES:
                    perf.update(self.headline(name, sn.defer(blocks[(method, direction, size)]), "us", self.blocks))
                else:
                    perf[name] = sn.make_performance_function(sn.defer(us), "us")
        for name, size in crossovers(curves).items():
            perf[name] = sn.make_performance_function(sn.defer(size), "B")
        self.perf_variables = perf


@sn.deferrable
def _complete_curves(stdout: str, methods: list, directions: list) -> bool:
    """Every requested method has a line for every direction and the same
    sizes, or says why it was skipped (only GDRCopy's may be); and the
    program verified every case it timed."""
    with open(stdout) as stream:
        text = stream.read()
    curves = parse_latencies(text)
    skipped = parse_skipped(text)
    for method in skipped:
        sn.evaluate(sn.assert_eq(method, GDRCOPY_METHOD, msg=f"the {method} leg was skipped: {skipped[method]}"))
    measured = [m for m in methods if m not in skipped]
    sizes = None
    for method in measured:
        for direction in directions:
            curve = curves.get((method, direction))
            sn.evaluate(sn.assert_true(curve, msg=f"no latency for {method} {direction}"))
            sizes = sizes or sorted(curve)
            sn.evaluate(sn.assert_eq(sorted(curve), sizes, msg=f"{method} {direction}: sizes {{0}} instead of {{1}}"))
    cases = sum(len(c) for c in curves.values())
    sn.evaluate(sn.assert_eq(parse_verified(text), cases, msg="{0} cases verified, {1} timed"))
    return True
