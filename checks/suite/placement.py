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


def gpus_of_tasks(devices: list[int], tasks: int) -> list[list[int]]:
    """The GPUs each task drives: all `devices` in one task, or one each."""
    if not devices:
        return [[] for _ in range(tasks)]
    if tasks == 1:
        return [list(devices)]
    if tasks != len(devices):
        raise ValueError(f"{tasks} tasks cannot share {len(devices)} GPUs evenly: one task, or one per GPU")
    return [[gpu] for gpu in devices]


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


def remote_numa_node(node: dict, local: int) -> int:
    """A NUMA node away from `local`: on another socket where the node has
    several (the seed's -N 1 for a GPU behind socket 0), else the next one."""
    nodes = node["numa_nodes"]
    others = [n for n in nodes if n != local]
    sockets = node["cpu"]["sockets"]
    if sockets > 1 and len(nodes) % sockets == 0 and local in nodes:
        per_socket = len(nodes) // sockets
        far = [n for n in others if nodes.index(n) // per_socket != nodes.index(local) // per_socket]
        if far:
            return far[0]
    return others[0]


class Placement(rfm.RegressionTestPlugin):
    """The launcher's options from the check's GPUs and the system's data.

    A check says which GPUs it drives (:meth:`gpu_devices`, by default the
    first ``num_gpus_per_node``) and whether its tasks reach each other's
    GPUs (:attr:`tasks_share_gpus`); the launcher is set from that alone, so
    no other hook needs to touch it."""

    #: The tasks reach each other's GPUs (CUDA IPC between ranks): each task
    #: sees every GPU of the job (jsrun: one resource set for all of them).
    tasks_share_gpus = False

    @property
    def placement_node(self) -> dict:
        return self.current_partition.extras["node"]

    def gpu_devices(self) -> list[int]:
        """The GPUs (CUDA indices, PCI bus order) the check's program drives."""
        count = min(self.num_gpus_per_node or 0, self.placement_node["gpus"]["count"])
        return list(range(count))

    def gpus_requested(self) -> int:
        """GPUs to ask the launcher for: through the highest one driven, so
        that its index means the same GPU to the program."""
        devices = self.gpu_devices()
        return max(devices) + 1 if devices else 0

    @run_after("setup")
    def require_account(self):
        # A scheduler that rejects jobs without a project (LSF on Summit)
        # fails the check here, with what to set, not after submission.
        missing = self.current_partition.extras.get("account_missing")
        if missing:
            raise ReframeError(missing)

    @run_before("run")
    def place_tasks(self):
        launcher, node = self.job.launcher, self.placement_node
        settings = dict(self.current_partition.extras.get("launcher_settings", {}))
        gpus = self.gpus_requested()
        if gpus:  # the job's GPUs too (#SBATCH --gpus-per-node, ...)
            self.num_gpus_per_node = gpus
        tasks = gpus_of_tasks(self.gpu_devices(), self.num_tasks_per_node or 1)
        if hasattr(type(launcher), "gpus_per_task"):  # the suite's jsrun
            self._place_jsrun(launcher, node, settings, len(tasks), gpus)
        elif self.current_partition.launcher_type.registered_name == "srun":
            self._place_srun(launcher, node, settings, tasks, gpus)

    def _place_jsrun(self, launcher, node: dict, settings: dict, tasks: int, gpus: int) -> None:
        for name in ("bind_policy", "smpiargs"):
            if name in settings:
                setattr(launcher, name, settings[name])
        # Tasks that share their GPUs share one resource set; the others get one each.
        launcher.tasks_per_rs = tasks if self.tasks_share_gpus else settings.get("tasks_per_rs", 1)
        launcher.gpus_per_task = gpus // tasks if tasks > 1 else gpus
        share = max(1, cores_of(node, gpus) // tasks)
        launcher.cpus_per_task = self.num_cpus_per_task or settings.get("cpus_per_task") or share

    def _place_srun(self, launcher, node: dict, settings: dict, tasks: list[list[int]], gpus: int) -> None:
        resource = self.current_partition.extras.get("gpu_resource")
        if resource and gpus:
            launcher.options.append(resource.format(num_gpus_per_node=gpus))
        numa = numa_of_tasks(node, tasks)
        if settings.get("cpu_bind") == "map_ldom" and numa is not None:
            launcher.options.append("--cpu-bind=map_ldom:" + ",".join(str(n) for n in numa))
