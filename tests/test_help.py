"""./suite's help: every command's, at once, naming itself as the user typed
it, without building or running anything; a command it does not have is a
usage error (exit 3)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: The Python running the tests has what ./suite installs: no installation in a test.
ENV = {**os.environ, "GPU_MEMPATHS_VENV": sys.prefix}


def suite(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / "suite"), *args], capture_output=True, text=True, env=ENV, timeout=60)


def test_the_top_help_lists_every_command_as_suite():
    done = suite("--help")
    assert done.returncode == 0
    for command in ("run", "test", "nightly", "accept", "rejudge", "power", "report", "upgrade", "spack-externals"):
        assert f"./suite {command} " in done.stdout, command
    assert "--nodes all|N|NODE" in done.stdout and "power [--kind KIND]" in done.stdout
    assert "html|night|screenshots|history|grafana" in done.stdout and "python -m commands" not in done.stdout


@pytest.mark.parametrize("command", ["test", "env", "spack-externals"])
def test_a_commands_help_is_its_own_lines_and_builds_nothing(command, tmp_path):
    done = suite(command, "--help")
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.lstrip().startswith("./suite " if command != "env" else 'eval "$(./suite env)"')
    assert "Building" not in done.stdout and not (REPO / "build" / "never").exists()
    assert "./suite nightly" not in done.stdout  # the next command's lines are not its


def test_runs_help_lists_the_systems_and_every_setting_with_its_range():
    done = suite("run", "--help")
    assert done.returncode == 0, done.stderr
    assert "plan:" not in done.stdout  # nothing planned, nothing run
    assert "  summit " in done.stdout and "  hopper-vm " in done.stdout
    assert "  mem_scan:" in done.stdout and "memory_fraction    a number from 0.01 to 0.9" in done.stdout


@pytest.mark.slow  # the command line imports the judges (pandas, SciPy): seconds each
@pytest.mark.parametrize(
    "args, prog",
    [
        (["nightly"], "./suite nightly"),
        (["report", "compare"], "./suite report compare"),
        (["report", "night"], "./suite report night"),
    ],
)
def test_the_python_commands_name_themselves_as_typed(args, prog):
    done = suite(*args, "--help")
    assert done.returncode == 0 and done.stdout.startswith(f"usage: {prog} ")


def test_a_command_the_suite_does_not_have_is_a_usage_error():
    done = suite("nigthly")
    assert done.returncode == 3 and "./suite nightly" in done.stdout
    assert "suite: no command 'nigthly' (did you mean nightly?)" in done.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--runs", "2"], "argument --runs: '2' is not a count of three runs or more"),
        (["--runs", "three"], "argument --runs: 'three' is not a count of three runs or more"),
        (["--runs", "3", "--nights", "0"], "argument --nights: '0' is not a count of one night or more"),
        (["--runs", "3", "--spreads"], "argument --spreads: not allowed with argument --runs"),
    ],
)
def test_a_power_table_that_could_judge_nothing_is_a_usage_error_naming_its_option(args, words):
    done = suite("power", *args)
    assert done.returncode == 3 and words in done.stderr


@pytest.mark.parametrize("command", ["nightly", "accept", "tiers", "report"])
def test_before_the_environment_is_made_a_commands_help_installs_nothing(command, tmp_path):
    """The first `./suite nightly --help` on a fresh clone took 22 s of installs: its summary comes first."""
    env = {**ENV, "GPU_MEMPATHS_VENV": str(tmp_path / "not-yet")}
    done = subprocess.run([str(REPO / "suite"), command, "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0 and done.stdout.lstrip().startswith(f"./suite {command}"), done.stdout + done.stderr
    assert "installing" not in done.stderr and not (tmp_path / "not-yet").exists()
    assert f"./suite {command} --help once the environment is made" in done.stdout
