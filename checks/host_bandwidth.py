"""Host memory bandwidth per NUMA node (numa_alloc_onnode, read and write).

The reference point for the Unified Memory reprex's NUMA-local baseline and
for the DAXPY study's TouchOnCPU: what one node's CPUs get from their own
memory. It needs no GPU, so it is also what CI runs for real through Slurm.
Each node's read and write bandwidth is a headline figure whose samples are
the program's timed runs.
"""

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, run_before, variable

from checks.suite.base import SuiteCheck

_SUMMARY = r"^Node (?P<node>\d+) (?P<op>read|write): (?P<bw>\S+) GiB/s \(median of (?P<runs>\d+) runs\)"
OPS = ("read", "write")


@rfm.simple_test
class host_bandwidth(SuiteCheck):
    descr = "Host memory bandwidth of each NUMA node, threads bound to the node"
    tags = {"host", "cpu"}

    #: Buffer per NUMA node (K/M/G suffixes): far beyond the last-level cache.
    buffer_size = variable(str, value="1G")

    #: Timed runs per node and operation: the samples of each figure.
    runs = variable(int, value=5)

    case_variables = ("buffer_size",)

    @run_after("setup")
    def set_resources(self):
        cpu = self.node["cpu"]
        self.num_cpus_per_task = cpu["sockets"] * cpu["cores_per_socket"]

    def numa_nodes(self) -> list:
        return self.node["numa_nodes"]

    @run_before("run")
    def set_options(self):
        self.executable_opts = [
            "--nodes", ",".join(str(n) for n in self.numa_nodes()),
            "--size", self.buffer_size,
            "--runs", str(self.runs),
            "--op", ",".join(OPS),
        ]  # fmt: skip

    def verified(self):
        found = sn.extractall(_SUMMARY, self.stdout, ["node", "op"])
        expected = {(str(n), op) for n in self.numa_nodes() for op in OPS}
        return sn.all([
            sn.assert_not_found(r"^error:", self.stderr),
            sn.assert_eq(sn.count(found), len(expected)),
            sn.assert_eq({tuple(f) for f in found}, expected),
        ])  # fmt: skip

    def run_bandwidths(self, node: int, op: str):
        return sn.extractall(rf"^Node {node} {op} run \d+: (?P<bw>\S+) GiB/s", self.stdout, "bw", float)

    @run_before("performance")
    def set_perf_variables(self):
        perf = {}
        for node in self.numa_nodes():
            for op in OPS:
                perf.update(self.headline(f"{op}_bw_node{node}", self.run_bandwidths(node, op), "GiB/s", self.runs))
        self.perf_variables = perf
