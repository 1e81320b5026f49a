"""README's first section run as written on a fresh clone without a GPU:
every command of its shell blocks exits 0 and leaves `git status` clean.
The installation lines (apt-get, git clone) are the test's own setup, and
`./suite test --quick` is this test suite itself (CI runs it)."""

import json
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
SETUP = ("apt-get", "sudo apt-get", "git clone", "./suite test")


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
        if command == "./suite run":
            assert_readme_shows(done.stdout)
        status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True).stdout
        assert status == "", f"{command} left the clone unclean:\n{status}"
        # ReFrame keeps its results database and reports in the checkout, not in ~/.reframe (rfmconfig/settings.py).
        assert not (tmp_path / "home" / ".reframe").exists(), f"{command} wrote ReFrame's files into the home directory"


def readme_output() -> list[str]:
    """The lines of the output README shows for `./suite run` (the block after "It ends like this"), '...'
    left out."""
    text = (REPO / "README.md").read_text()
    block = re.search(r"ends like this:\n\n```\n(.*?)```", text, re.DOTALL)[1]
    return [line for line in block.splitlines() if line.strip() and line.strip() != "..."]


def assert_readme_shows(stdout: str) -> None:
    """Each count README's output block states is what `./suite run` printed: its lines of the suite's and
    ReFrame's counts verbatim (colours aside); a measured value's line by its name and unit alone."""
    printed = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in stdout.splitlines()]
    for line in readme_output():
        if line.startswith("P: "):  # a measured value: this machine's own
            name, unit = line.split(":")[1].strip(), line.split()[-1]
            assert any(p.startswith(f"P: {name}:") and p.endswith(unit) for p in printed), line
        else:  # README's '...' within a line stands for what it leaves out of a list
            pattern = re.compile(".*".join(map(re.escape, line.split("..."))))
            found = any(pattern.fullmatch(p) for p in printed)
            assert found, f"README shows {line!r}; ./suite run printed:\n" + "\n".join(printed[-8:])


# --- the second section: your site ---------------------------------------------------------------


def your_site_commands() -> list[str]:
    """The commands README's second section ("Your site") shows inline, each on one line."""
    text = (REPO / "README.md").read_text()
    start = text.index("\n## Your site")
    section = text[start : text.index("\n## ", start + 4)]
    return [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", section) if "./suite " in span]


def test_the_second_section_shows_a_sites_first_nights_acceptance_power_and_cron():
    commands = your_site_commands()
    assert "./suite nightly --system <name>" in commands
    assert any(c.startswith("./suite accept STAMP STAMP STAMP") for c in commands)
    assert any(c.startswith("./suite power") for c in commands)
    assert any(c.startswith("15 2 * * * cd /path/to/gpu-mempaths && ./suite nightly") for c in commands)


@pytest.mark.long
def test_every_command_of_the_second_section_runs_as_written_on_a_fake_node(tmp_path_factory):
    """README's second section on a node of one fake H100 (tests/test_fake_gpu.py's:
    a fake NVML and CUDA driver, the programs fakes that print the real ones'
    output), its sources the fakes: a dry run, three first nights (exit 3),
    their acceptance, the power table, and the cron line's night (exit 0, so
    nothing notified); the clone stays clean but for the references that
    `accept --write-references` writes for the site to commit. Not run: `./suite test` (these
    tests) and a partition's night, which needs Slurm (tests/test_ci_slurm.py)."""
    from test_fake_gpu import fake_node_env, make_repo

    root = tmp_path_factory.mktemp("site")
    repo = make_repo(root)
    shutil.rmtree(repo / "src")
    shutil.copytree(repo / "tests" / "fakegpu" / "src", repo / "src")  # the fake node builds the fakes
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "the fake programs as the sources"], check=True)
    base = {**os.environ, **fake_node_env(repo), "GPU_MEMPATHS_VENV": sys.prefix, "HOME": str(root / "home")}
    base["PYTHONPATH"] = base["PYTHONPATH"].split(os.pathsep)[0]  # the fake NVML; ./suite adds the checkout
    stamps: list[str] = []

    def run(command: str, seed: int = 0) -> subprocess.CompletedProcess:
        if command[0].isdigit():  # a crontab line: what cron runs follows its five time fields
            command = command.split(None, 5)[5]
        written = command.replace("<name>", "fakegpu").replace("<partition>", "default")
        written = written.replace("/path/to/gpu-mempaths", str(repo))
        written = written.replace("STAMP STAMP STAMP", " ".join(stamps))
        env = {**base, "GPU_MEMPATHS_FAKE_SEED": str(seed)}  # a node started for each night: its own noise
        if command.startswith("./suite health"):  # a Slurm node that runs no job now (the tier asks squeue)
            stub = root / "slurm-bin" / "squeue"
            stub.parent.mkdir(exist_ok=True)
            stub.write_text("#!/bin/sh\nexit 0\n")
            stub.chmod(0o755)
            env["PATH"] = f"{stub.parent}{os.pathsep}{env['PATH']}"
        script = f'notify() {{ echo notified "$1"; }}\n{written}'  # the cron line's notify, named
        done = subprocess.run(script, shell=True, cwd=repo, env=env, capture_output=True, text=True, timeout=900)
        status = subprocess.run([*git, "status", "--porcelain"], capture_output=True, text=True).stdout
        # What --write-references is for: the kind's references, in the system's data, for the site to commit.
        written = [line for line in status.splitlines() if not line[3:].startswith("systems/references/")]
        assert not written, f"{command} left the clone unclean:\n{status}"
        assert "--write-references" in command or not status, f"{command} changed the references:\n{status}"
        if status:  # committed, as README says
            subprocess.run([*git, "commit", "-qam", "the accepted references"], check=True)
        return done

    def said(done: subprocess.CompletedProcess) -> str:
        return (done.stdout + done.stderr)[-3000:]

    commands = your_site_commands()
    for command in commands:
        if command.startswith("./suite test") or "--nodes" in command:
            continue
        if command == "./suite nightly --system <name>":
            for seed in (1, 2, 3):  # the first nights, each on a node of its own
                done = run(command, seed)
                assert done.returncode == 3 and "no-baseline" in done.stdout + done.stderr, said(done)
                stamps.append(_newest_stamp(repo))
            continue
        done = run(command, seed=4)
        if command.startswith("15 2"):  # cron: the next night, judged against the three, nothing to notify
            assert done.returncode == 0 and "notified" not in done.stdout and "exit 0" in said(done), said(done)
        else:
            assert done.returncode == 0, said(done)
    assert len(stamps) == 3


def _newest_stamp(repo: Path) -> str:
    """The stamp of the newest night of the fake node (its run.json's), as `accept` takes it."""
    newest = max((repo / "results" / "nightly" / "fakegpu").glob("*/run.json"), key=lambda p: p.stat().st_mtime)
    return json.loads(newest.read_text())["stamp"]
