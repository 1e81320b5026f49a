"""Host memory bandwidth per NUMA node (numa_alloc_onnode, read and write).

The reference point for the Unified Memory reprex's NUMA-local baseline and
for the DAXPY study's TouchOnCPU: what one node's CPUs get from their own
memory. It needs no GPU, so it is also what CI runs for real through Slurm.
"""

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, run_before, sanity_function, variable

from checks.suite.base import SuiteCheck
from checks.suite.references import references_for

_SUMMARY = r"^Node (?P<node>\d+) (?P<op>read|write): (?P<bw>\S+) GiB/s \(median of (?P<runs>\d+) runs\)"


@rfm.simple_test
class HostMemoryBandwidth(SuiteCheck):
    descr = "Host memory bandwidth of each NUMA node, threads bound to the node"
    program = "host_bw"
    tags = {"host", "cpu"}

    #: Buffer per NUMA node (K/M/G suffixes): far beyond the last-level cache.
    buffer_size = variable(str, value="1G")

    #: Timed runs per node and operation; the median is reported.
    runs = variable(int, value=5)

    @run_after("setup")
    def set_resources(self):
        cpu = self.node["cpu"]
        self.num_cpus_per_task = cpu["sockets"] * cpu["cores_per_socket"]

    @run_before("run")
    def set_options(self):
        self.executable_opts = [
            "--nodes",
            ",".join(str(n) for n in self.numa_nodes()),
            "--size",
            self.buffer_size,
            "--runs",
            str(self.runs),
            "--op",
            "read,write",
        ]

    def numa_nodes(self) -> list:
        return self.node["numa_nodes"]

    @sanity_function
    def every_node_measured(self):
        found = sn.extractall(_SUMMARY, self.stdout, ["node", "op"])
        expected = {(str(n), op) for n in self.numa_nodes() for op in ("read", "write")}
        return sn.all(
            [
                sn.assert_not_found(r"^error:", self.stderr),
                sn.assert_eq(sn.count(found), len(expected)),
                sn.assert_eq({tuple(f) for f in found}, expected),
            ]
        )

    @run_before("performance")
    def set_perf_variables(self):
        # The medians are what references judge; every run is logged too, so
        # that comparisons between nightly runs have samples to test.
        cases = [(n, op) for n in self.numa_nodes() for op in ("read", "write")]
        self.perf_variables = {f"{op}_bw_node{n}": self.node_bandwidth(n, op) for n, op in cases}
        for n, op in cases:
            for run in range(1, self.runs + 1):
                self.perf_variables[f"{op}_bw_node{n}_run{run}"] = self.run_bandwidth(n, op, run)
        self.reference = references_for(self)

    def run_bandwidth(self, node: int, op: str, run: int):
        pattern = rf"^Node {node} {op} run {run}: (?P<bw>\S+) GiB/s"
        return sn.make_performance_function(sn.extractsingle(pattern, self.stdout, "bw", float), "GiB/s")

    def node_bandwidth(self, node: int, op: str):
        pattern = rf"^Node {node} {op}: (?P<bw>\S+) GiB/s \(median"
        return sn.make_performance_function(sn.extractsingle(pattern, self.stdout, "bw", float), "GiB/s")
