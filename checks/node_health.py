"""Node health: run first, alone with `-t health`, on every node of a partition
with `--distribute`. Compares what NVML reads on the node with what the
system's data declares (systems/health.py) and names the GPU and the field of
every mismatch.
"""

import os
import sys

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_before, sanity_function

from checks.suite.build import REPO


@rfm.simple_test
class NodeHealth(rfm.RunOnlyRegressionTest):
    descr = "GPUs, links, versions, NUMA affinity and modes against the system's data"
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    maintainers = ["gpu-mempaths"]
    tags = {"health"}
    num_tasks = 1
    num_tasks_per_node = 1
    # The Python running ReFrame has nvidia-ml-py; the node reads NVML with it.
    executable = sys.executable
    time_limit = "5m"

    @run_before("run")
    def set_options(self):
        self.executable_opts = [
            "-m", "systems.health",
            "--system", self.current_system.name,
            "--partition", self.current_partition.name,
        ]  # fmt: skip
        self.env_vars["PYTHONPATH"] = REPO + os.pathsep + "$PYTHONPATH"

    @sanity_function
    def healthy(self):
        return sn.all([
            sn.assert_found(r"^Health: [1-9]\d* checks, 0 failures", self.stdout),
            sn.assert_not_found(r"^FAIL ", self.stdout),
        ])  # fmt: skip
