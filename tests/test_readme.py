"""README's first section run as written on a fresh clone without a GPU:
every command of its shell blocks exits 0 and leaves `git status` clean.
The installation lines (apt-get, git clone) are the test's own setup, and
`./suite test --quick` is this test suite itself (CI runs it)."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
#: Not run here: the machine's setup, and the tests themselves.
SETUP = ("sudo apt-get", "git clone", "./suite test")


def first_section_commands() -> list[str]:
    """The commands of the shell blocks of README's first section (up to its second heading)."""
    text = (REPO / "README.md").read_text()
    start = text.index("\n## ")
    section = text[start : text.index("\n## ", start + 4)]
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.DOTALL):
        for line in block.splitlines():
            command = line.split("#", 1)[0].strip()
            if command and not command.startswith(SETUP):
                commands.append(command)
    return commands


def test_the_first_section_has_the_commands_a_newcomer_runs():
    commands = first_section_commands()
    assert commands[0] == "./suite run" and any("--dry-run" in c for c in commands)


def test_every_command_of_the_first_section_runs_on_a_fresh_clone_and_leaves_it_clean(tmp_path):
    clone = tmp_path / "gpu-mempaths"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    env = {**os.environ, "GPU_MEMPATHS_VENV": sys.prefix, "HOME": str(tmp_path / "home"), "GPU_MEMPATHS_ACCOUNT": ""}
    for command in first_section_commands():
        if "--system summit" in command and not (os.environ.get("LMOD_CMD") or shutil.which("module")):
            continue  # summit names its modules through Lmod; CI installs it
        done = subprocess.run(command, shell=True, cwd=clone, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{command}: exit {done.returncode}\n{(done.stdout + done.stderr)[-3000:]}"
        assert done.stdout.rstrip().splitlines()[-1].startswith("suite: "), (
            f"{command} did not say where its output went"
        )
        status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True).stdout
        assert status == "", f"{command} left the clone unclean:\n{status}"
        # ReFrame keeps its results database and reports in the checkout, not in ~/.reframe (rfmconfig/settings.py).
        assert not (tmp_path / "home" / ".reframe").exists(), f"{command} wrote ReFrame's files into the home directory"
