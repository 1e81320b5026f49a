"""The jsrun launcher's command lines (resource sets), the whole-node LSF
scheduler's preamble, and how tasks are placed from the system's data."""

from types import SimpleNamespace

import pytest

from rfmconfig.launchers import JsrunLauncher


def _job(num_tasks=1, num_cpus_per_task=None):
    return SimpleNamespace(num_tasks=num_tasks, num_cpus_per_task=num_cpus_per_task)


def test_defaults_one_task_one_resource_set():
    assert JsrunLauncher().command(_job()) == ["jsrun", "-n", "1", "-a", "1", "-c", "1", "-g", "0"]


def test_one_gpu_and_seven_cores_per_task_as_on_summit():
    launcher = JsrunLauncher()
    launcher.gpus_per_task = 1
    launcher.bind_policy = "packed:{cpus_per_task}"
    launcher.smpiargs = "off"
    cmd = launcher.command(_job(num_tasks=6, num_cpus_per_task=7))
    assert " ".join(cmd) == 'jsrun -n 6 -a 1 -c 7 -g 1 --bind packed:7 --smpiargs="off"'


def test_several_tasks_share_a_resource_set():
    launcher = JsrunLauncher()
    launcher.tasks_per_rs = 3
    launcher.gpus_per_task = 1
    launcher.cpus_per_task = 2
    cmd = launcher.command(_job(num_tasks=6, num_cpus_per_task=7))
    assert cmd == ["jsrun", "-n", "2", "-a", "3", "-c", "6", "-g", "3"]


def test_partial_last_resource_set_rounds_up():
    launcher = JsrunLauncher()
    launcher.tasks_per_rs = 4
    assert launcher.command(_job(num_tasks=6))[1:3] == ["-n", "2"]


@pytest.mark.parametrize("extra", [["--latency_priority", "gpu-cpu"]])
def test_extra_options_come_last(extra):
    launcher = JsrunLauncher()
    launcher.extra_options = extra
    assert launcher.command(_job())[-2:] == extra


def test_registered_under_its_name():
    from reframe.core.backends import getlauncher

    assert getlauncher("jsrun") is JsrunLauncher


def test_whole_node_lsf_leaves_placement_to_jsrun():
    from reframe.core.backends import getscheduler

    from rfmconfig.launchers import LsfNodesScheduler

    assert getscheduler("lsf-nnodes") is LsfNodesScheduler
    scheduler = LsfNodesScheduler.__new__(LsfNodesScheduler)
    scheduler._prefix, scheduler._sched_access_in_submit = "#BSUB", False
    job = SimpleNamespace(
        name="rfm_x",
        stdout="o",
        stderr="e",
        num_tasks=6,
        num_tasks_per_node=6,
        num_cpus_per_task=7,
        time_limit=600,
        sched_access=["-P ABC123"],
        options=[],
        cli_options=[],
        exclusive_access=True,
    )
    assert scheduler.emit_preamble(job) == [
        "#BSUB -J rfm_x",
        "#BSUB -o o",
        "#BSUB -e e",
        "#BSUB -nnodes 1",
        "#BSUB -W 10",
        "#BSUB -P ABC123",
    ]
    # Without a per-node count ReFrame's LSF writes "-n <tasks>": whole nodes still.
    job.num_tasks, job.num_tasks_per_node = 6, None
    assert scheduler.emit_preamble(job)[3] == "#BSUB -nnodes 1"
    job.num_tasks, job.num_tasks_per_node = 12, 6
    assert "#BSUB -nnodes 2" in scheduler.emit_preamble(job)


# --- placement from the system's data ---------------------------------------

from checks.suite.placement import cores_of, gpus_of_tasks, numa_of_tasks  # noqa: E402
from systems import load_all  # noqa: E402


def _node(system):
    return load_all()[system]["partitions"][0]["node"]


def test_tasks_take_all_gpus_or_one_each():
    assert gpus_of_tasks([], 1) == [[]]
    assert gpus_of_tasks([0, 1], 1) == [[0, 1]]
    assert gpus_of_tasks([3], 1) == [[3]]  # a check driving GPU 3 alone
    assert gpus_of_tasks(list(range(6)), 6) == [[0], [1], [2], [3], [4], [5]]
    with pytest.raises(ValueError, match="4 tasks cannot share 6 GPUs"):
        gpus_of_tasks(list(range(6)), 4)


def test_a_gpus_share_of_the_cores():
    summit = _node("summit")
    assert [cores_of(summit, g) for g in (0, 1, 2, 6)] == [42, 7, 14, 42]
    assert cores_of(_node("dgx-a100"), 1) == 16


def test_a_task_is_bound_where_its_gpus_are():
    dgx = _node("dgx-a100")
    assert numa_of_tasks(dgx, [[0]]) == [3]
    assert numa_of_tasks(dgx, [[0, 1]]) == [3]
    assert numa_of_tasks(dgx, [[g] for g in range(8)]) == [3, 3, 1, 1, 7, 7, 5, 5]
    assert numa_of_tasks(dgx, [list(range(8))]) is None  # spans NUMA nodes
    assert numa_of_tasks(dgx, [[]]) is None  # no GPU: no GPU's node
