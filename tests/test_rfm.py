"""ReFrame as the suite starts it writes nothing outside the checkout: not the
log of its first steps (rfm-*.log in the temporary directory), not its results
database or run reports (the home directory's .reframe)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments import roots
from rfmconfig.settings import site_configuration
from runner.rfm import reframe_command

REPO = Path(__file__).resolve().parent.parent


def _list_checks(cmd: list[str], home: Path, tmp: Path, checks: Path) -> None:
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp)}
    done = subprocess.run(
        [*cmd, "-C", str(REPO / "reframe_settings.py"), "-c", str(checks), "--system", "local", "-l"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_the_suites_reframe_leaves_no_log_in_the_temporary_directory(tmp_path):
    home, tmp, checks = (tmp_path / d for d in ("home", "tmp", "checks"))
    for d in (home, tmp, checks):
        d.mkdir()
    _list_checks([sys.executable, "-m", "runner.rfm"], home, tmp, checks)
    assert list(tmp.iterdir()) == [] and list(home.iterdir()) == []
    # ReFrame started plainly leaves its first steps' log there: the test would see it.
    _list_checks([str(Path(sys.executable).parent / "reframe")], home, tmp, checks)
    assert [p.name[:4] for p in tmp.iterdir()] == ["rfm-"]


def test_the_commands_start_reframe_the_same_way():
    cmd = reframe_command("local", "-l")
    assert cmd[:2] == [sys.executable, "-c"] and "rmtree" in cmd[2]


def test_the_results_database_and_run_reports_are_kept_in_the_checkout():
    config = site_configuration()
    [storage] = config["storage"]
    assert Path(storage["sqlite_db_file"]).parent == roots.REFRAME
    assert all(Path(g["report_file"]).is_relative_to(roots.REFRAME) for g in config["general"])
    assert roots.REFRAME.is_relative_to(REPO)
    ignored = subprocess.run(["git", "check-ignore", "-q", str(roots.REFRAME / "results.db")], cwd=REPO)
    assert ignored.returncode == 0
