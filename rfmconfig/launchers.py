"""What ReFrame does not ship for Summit-class systems (IBM LSF with CSM):
the jsrun launcher, and an LSF scheduler for jobs that ask for whole nodes.

jsrun places work in resource sets: ``-n`` sets, each with ``-a`` tasks,
``-c`` CPUs and ``-g`` GPUs, bound with ``--bind``. One resource set per
`tasks_per_rs` tasks of the job; the GPUs of a set come from the check
(`gpus_per_task`), the defaults of the rest from the system's data.
"""

from __future__ import annotations

import math

import reframe.utility.typecheck as typ
from reframe.core.backends import register_launcher, register_scheduler
from reframe.core.launchers import JobLauncher
from reframe.core.schedulers.lsf import LsfJobScheduler


@register_launcher("jsrun")
class JsrunLauncher(JobLauncher):
    #: Tasks in one resource set (``-a``).
    tasks_per_rs = variable(int, value=1)

    #: CPUs per task; the set gets ``tasks_per_rs`` times this (``-c``).
    #: When unset, the job's ``num_cpus_per_task`` (or 1) is used.
    cpus_per_task = variable(int, type(None), value=None)

    #: GPUs per task; the set gets ``tasks_per_rs`` times this (``-g``).
    gpus_per_task = variable(int, value=0)

    #: ``--bind`` policy, e.g. ``packed:{cpus_per_task}`` (each task bound to
    #: its own CPUs) or ``none``; empty: jsrun's default.
    bind_policy = variable(str, value="")

    #: ``--smpiargs``: ``off`` for programs that do not use Spectrum MPI.
    smpiargs = variable(str, value="")

    #: Extra jsrun options, e.g. ``['--latency_priority', 'gpu-cpu']``.
    extra_options = variable(typ.List[str], value=[])

    #: Resource sets per host (``-r``): 1 spreads the sets one a node (a
    #: program run on every node of the job); None leaves it to jsrun.
    rs_per_host = variable(int, type(None), value=None)

    def __init__(self):
        super().__init__()
        self.tasks_per_rs = 1
        self.cpus_per_task = None
        self.gpus_per_task = 0
        self.bind_policy = ""
        self.smpiargs = ""
        self.extra_options = []
        self.rs_per_host = None

    def command(self, job):
        tasks = job.num_tasks or 1
        cpus = self.cpus_per_task or job.num_cpus_per_task or 1
        cmd = [
            "jsrun",
            "-n",
            str(math.ceil(tasks / self.tasks_per_rs)),
            "-a",
            str(self.tasks_per_rs),
            "-c",
            str(cpus * self.tasks_per_rs),
            "-g",
            str(self.gpus_per_task * self.tasks_per_rs),
        ]
        if self.rs_per_host:
            cmd += ["-r", str(self.rs_per_host)]
        if self.bind_policy:
            cmd += ["--bind", self.bind_policy.format(cpus_per_task=cpus)]
        if self.smpiargs:
            cmd += [f'--smpiargs="{self.smpiargs}"']
        return cmd + list(self.extra_options)


@register_scheduler("lsf-nnodes")
class LsfNodesScheduler(LsfJobScheduler):
    """LSF where jobs ask for whole nodes with ``-nnodes`` (OLCF's Summit).

    A node is the unit LSF gives such a job, and jsrun places the tasks in
    it: ReFrame's per-slot affinity request (``-R "affinity[core(N)]"``) and
    exclusive flag (``-x``) do not belong in the script. OLCF's documented
    scripts carry ``-P``, ``-J``, ``-o``, ``-e``, ``-W`` and ``-nnodes``, which
    this scheduler always writes (never ``-n``, a slot count)."""

    def emit_preamble(self, job):
        dropped = (f'{self._prefix} -R "affinity[', f"{self._prefix} -x", f"{self._prefix} -n ")
        lines = [line for line in super().emit_preamble(job) if not line.startswith(dropped)]
        if not any(line.startswith(f"{self._prefix} -nnodes ") for line in lines):
            # No per-node count: the tasks of one node (every check of the suite's).
            lines.insert(3, f"{self._prefix} -nnodes 1")
        return lines
