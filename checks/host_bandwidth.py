"""Host memory bandwidth per NUMA node (numa_alloc_onnode, read and write).

The reference point for the Unified Memory reprex's NUMA-local baseline and
for the DAXPY study's TouchOnCPU: what one node's CPUs get from their own
memory. It needs no GPU, so it is also what CI runs for real through Slurm.
Each node's read and write bandwidth is a headline figure whose samples are
the program's timed runs.
"""

import itertools

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, run_before, variable

from checks.suite.base import SuiteCheck
from checks.suite.settings import Count, Size, Unreadable, Whole, size_bytes
from experiments import budget
from experiments.host_bandwidth import (
    OPS,
)
from experiments.records import parsed_output, records, require
from systems import data


@sn.deferrable
def measured(stdout: str, tag: str) -> list:
    """The (node, op) of every `tag` record ('Bandwidth': each node and op measured)."""
    return [(r["node"], r["op"]) for r in parsed_output(stdout, records, tag) if {"node", "op"} <= r.keys()]


@sn.deferrable
def _as_set(items) -> set:
    return set(items)


@sn.deferrable
def run_bandwidths(stdout: str, node: int, op: str) -> list:
    """Each timed run's GiB/s of one node and operation, in run order."""
    runs = parsed_output(stdout, records, "Run")
    return [float(require(r, ["gibs"], "Run")["gibs"]) for r in runs if (r.get("node"), r.get("op")) == (str(node), op)]


@rfm.simple_test
class host_bandwidth(SuiteCheck):
    descr = "Host memory bandwidth of each NUMA node, threads bound to the node"
    tags = {"host", "cpu"}
    case_variables = ("buffer_size",)

    #: Buffer per NUMA node (K/M/G suffixes): far beyond the last-level cache.
    buffer_size = variable(str, value="1G")

    #: Timed runs per node and operation: the samples of each figure.
    runs = variable(Whole, int, Unreadable, value=5)

    #: What each may be: at most 50 passes over 64 GiB per node and
    #: operation, minutes at the tens of GB/s of one socket's memory.
    settings = {"buffer_size": Size(1 << 20, 64 << 30), "runs": Count(1, 50)}

    #: The unit of the figures :meth:`limit_of` bounds.
    limit_unit = "GiB/s"

    @classmethod
    def limit_of(cls, figure: str, case: dict, node: dict) -> float | None:
        # One socket's memory channels at their peak: a NUMA node is within a socket.
        limit = data.speed_of_light(node)["host_memory"]
        return limit / 2**30 if limit else None

    @run_after("setup")
    def set_resources(self):
        cpu = self.node["cpu"]
        self.num_cpus_per_task = cpu["sockets"] * cpu["cores_per_socket"]

    def numa_nodes(self) -> list:
        return self.node["numa_nodes"]

    #: What one socket's memory reads or writes, at least (tens of GB/s).
    HOST_MEMORY_BPS = 20e9

    def expected_seconds(self) -> float:
        nbytes = size_bytes(self.buffer_size)
        per_node = budget.first_touch_s(nbytes) + len(OPS) * self.runs * nbytes / self.HOST_MEMORY_BPS
        return budget.START_S + len(self.numa_nodes()) * per_node

    @run_before("run")
    def set_options(self):
        self.executable_opts = [
            "--nodes", ",".join(str(n) for n in self.numa_nodes()),
            "--size", self.buffer_size,
            "--runs", str(self.runs),
            "--op", ",".join(OPS),
        ]  # fmt: skip

    def verified(self):
        found = measured(self.stdout, "Bandwidth")
        expected = {(str(n), op) for n in self.numa_nodes() for op in OPS}
        return sn.all(
            [
                sn.assert_not_found(r"^error:", self.stderr),
                sn.assert_eq(sn.count(found), len(expected)),
                sn.assert_eq(_as_set(found), expected),
                # Every timed run, the samples of the figures (a figure ReFrame
                # cannot evaluate is skipped with a warning, not failed).
                *(
                    sn.assert_eq(
                        sn.len(run_bandwidths(self.stdout, n, op)),
                        self.runs,
                        msg=f"node {n} {op}: {{0}} Run records, {{1}} expected",
                    )
                    for n in self.numa_nodes()
                    for op in OPS
                ),
            ]
        )

    @run_after("setup")
    def set_perf_variables(self):
        self.perf_variables = {}
        for node, op in itertools.product(self.numa_nodes(), OPS):
            samples = run_bandwidths(self.stdout, node, op)
            self.perf_variables.update(self.headline(f"{op}_bw_node{node}", samples, "GiB/s", self.runs))
