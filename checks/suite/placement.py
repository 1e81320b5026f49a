"""Where a check's tasks run on the node, from the system's data: the GPUs
each task is given, the CPUs beside them, and the account a job is charged
to. Every check that touches a GPU asks the launcher for the GPUs it uses,
so that a launcher that confines tasks to what they asked for (jsrun's
resource sets, srun's steps) shows them those GPUs:

- jsrun: one resource set per ``tasks_per_rs`` tasks, ``-g`` the task's
  GPUs, ``-c`` the CPU cores of their share of the node (7 of 42 per V100
  on Summit) unless the check asks for more, ``--bind packed:<cores>``;
- srun: the partition's GPU option (``gpu_resource``) for the step too, and
  with ``cpu_bind: map_ldom`` each task bound to its GPUs' NUMA node.

Tasks take the node's GPUs in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID):
one task with every GPU the check uses, or one GPU per task.
"""

from __future__ import annotations

import reframe as rfm
from reframe.core.builtins import run_after, run_before
from reframe.core.exceptions import ReframeError


def gpus_of_tasks(gpus: int, tasks: int) -> list[list[int]]:
    """The GPUs of each task: all `gpus` in one task, or one GPU per task."""
    if gpus == 0:
        return [[] for _ in range(tasks)]
    if tasks == 1:
        return [list(range(gpus))]
    if tasks != gpus:
        raise ValueError(f"{tasks} tasks cannot share {gpus} GPUs evenly: one task, or one per GPU")
    return [[gpu] for gpu in range(gpus)]


def cores_of(node: dict, gpus: int) -> int:
    """The CPU cores that go with `gpus` of the node's GPUs (all of them for
    a check that uses no GPU)."""
    cpu = node["cpu"]
    cores = cpu["sockets"] * cpu["cores_per_socket"]
    count = node["gpus"]["count"]
    if gpus == 0 or count == 0:
        return cores
    return max(1, cores * min(gpus, count) // count)


def numa_of_tasks(node: dict, tasks: list[list[int]]) -> list[int] | None:
    """Each task's NUMA node (that of all its GPUs), or None where a task's
    GPUs span several or their affinity is unknown."""
    affinity = node["gpus"].get("numa_affinity")
    if not affinity or not all(tasks):
        return None
    found = []
    for gpus in tasks:
        nodes = {affinity[g] for g in gpus if g < len(affinity)}
        if len(nodes) != 1:
            return None
        found.append(nodes.pop())
    return found


def account_missing(extras: dict) -> str | None:
    return extras.get("account_missing")


class Placement(rfm.RegressionTestPlugin):
    """The launcher's options from the check's GPUs and the system's data."""

    @property
    def placement_node(self) -> dict:
        return self.current_partition.extras["node"]

    def gpus_used(self) -> int:
        return min(self.num_gpus_per_node or 0, self.placement_node["gpus"]["count"])

    @run_after("setup")
    def require_account(self):
        # A scheduler that rejects jobs without a project (LSF on Summit)
        # fails the check here, with what to set, not after submission.
        missing = account_missing(self.current_partition.extras)
        if missing:
            raise ReframeError(missing)

    @run_before("run")
    def place_tasks(self):
        launcher, node = self.job.launcher, self.placement_node
        settings = dict(self.current_partition.extras.get("launcher_settings", {}))
        tasks = gpus_of_tasks(self.gpus_used(), self.num_tasks_per_node or 1)
        if hasattr(type(launcher), "gpus_per_task"):  # the suite's jsrun
            for name, value in settings.items():
                if hasattr(type(launcher), name):
                    setattr(launcher, name, value)
            launcher.gpus_per_task = len(tasks[0])
            launcher.cpus_per_task = self.num_cpus_per_task or max(1, cores_of(node, self.gpus_used()) // len(tasks))
            return
        if self.current_partition.launcher_type.registered_name != "srun":
            return
        resource = self.current_partition.extras.get("gpu_resource")
        if resource and self.gpus_used():
            launcher.options.append(resource.format(num_gpus_per_node=self.gpus_used()))
        numa = numa_of_tasks(node, tasks)
        if settings.get("cpu_bind") == "map_ldom" and numa is not None:
            launcher.options.append("--cpu-bind=map_ldom:" + ",".join(str(n) for n in numa))
