"""The jsrun launcher's command lines (resource sets)."""

from types import SimpleNamespace

import pytest

from systems.launchers import JsrunLauncher


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
