"""Node health: run first, alone with `-t health`, on every node of a partition
with `--distribute`. Compares what NVML reads on the node with what is
expected of it (systems/health.py): the system's data for a declared system,
the node facts of the accepted run for a system described at run time; and
names the GPU and the field of every mismatch and of every error the GPUs
have counted.
"""

import os
import re
import shlex
import sys

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from checks.suite.build import REPO
from checks.suite.placement import Placement
from checks.suite.settings import Count, SiteSettings, Unreadable, Whole
from experiments.roots import PERFLOGS


@rfm.simple_test
class node_health(rfm.RunOnlyRegressionTest, Placement, SiteSettings):
    descr = "GPUs, links, versions, NUMA affinity, modes and error counters against what is expected of the node"
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    maintainers = ["gpu-mempaths"]
    tags = {"health"}
    num_tasks = 1
    num_tasks_per_node = 1
    # The Python running ReFrame has nvidia-ml-py; the node reads NVML with it.
    executable = sys.executable
    time_limit = "5m"

    #: The accepted run's record, whose node facts a system described at run
    #: time is held to; '' for the system's perflogs/<system>/accepted.json.
    accepted = variable(str, value="")

    #: Where to write this node's facts (node-<hostname>.json), for an
    #: acceptance of the run; '' writes none.
    facts_dir = variable(str, value="")

    #: Nodes to check in one job, one health program on each (jsrun -r 1,
    #: srun one task a node): every node of an allocation, also where ReFrame
    #: cannot list a scheduler's nodes for --distribute (LSF).
    nodes = variable(Whole, int, Unreadable, value=1)

    settings = {"nodes": Count(1, 100_000)}

    @run_after("setup")
    def one_task_a_node(self):
        self.num_tasks = self.nodes
        self.num_tasks_per_node = 1

    @run_after("setup")
    def ask_for_every_gpu(self):
        # Launchers that confine a task to what it asked for (jsrun's
        # resource sets, srun's steps) would hide the GPUs it is to judge.
        self.num_gpus_per_node = self.current_partition.extras["node"]["gpus"]["count"] or None

    @run_before("run")
    def set_options(self):
        system = self.current_system.name
        accepted = self.accepted or os.path.join(PERFLOGS, system, "accepted.json")
        self.executable_opts = [
            "-m", "systems.health",
            "--system", system,
            "--partition", self.current_partition.name,
            "--accepted", shlex.quote(accepted),
        ]  # fmt: skip
        if self.nodes > 1:  # each node's lines named, as they interleave
            self.executable_opts.append("--name-host")
        if self.facts_dir:
            # Named by the program on the node it runs on (under jsrun the
            # script's own $(hostname) is the launch node's).
            self.executable_opts += ["--facts-dir", shlex.quote(self.facts_dir)]
        self.env_vars["PYTHONPATH"] = REPO + os.pathsep + "$PYTHONPATH"

    @run_before("run", always_last=True)
    def one_set_a_node(self):
        if self.nodes > 1 and hasattr(type(self.job.launcher), "rs_per_host"):  # the suite's jsrun
            self.job.launcher.rs_per_host = 1

    @sanity_function
    def healthy(self):
        return sn.all(
            [
                _no_failures(self.stdout),
                sn.assert_eq(
                    sn.count(sn.findall(_SUMMARY, self.stdout)),
                    self.nodes,
                    msg=f"{{0}} of {self.nodes} node(s) reported health",
                ),
            ]
        )


#: A node's health summary, with its host's name where many report at once.
_SUMMARY = r"^(?:[\w.-]+: )?Health: [1-9]\d* checks, 0 failures"


@sn.deferrable
def _no_failures(stdout: str) -> bool:
    """Every FAIL line of the health program in the message, GPU and field named."""
    with open(stdout) as stream:
        failures = [line.strip() for line in stream if re.match(r"(?:[\w.-]+: )?FAIL ", line)]
    if failures:
        raise SanityError("; ".join(failures))
    return True
