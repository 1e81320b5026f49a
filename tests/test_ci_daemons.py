""".ci/slurm/daemons.sh, which start.sh and stop.sh share: a daemon still
between fork and exec is starting, not dead (CI once failed on that race)."""

import subprocess
from pathlib import Path

DAEMONS = Path(__file__).resolve().parent.parent / ".ci" / "slurm" / "daemons.sh"


def _bash(script: str, tmp_path: Path) -> subprocess.CompletedProcess:
    (tmp_path / "pids").mkdir(exist_ok=True)
    (tmp_path / "log").mkdir(exist_ok=True)
    prelude = f"set -euo pipefail; PIDDIR={tmp_path}/pids; LOGDIR={tmp_path}/log; . {DAEMONS}\n"
    return subprocess.run(["bash", "-c", prelude + script], capture_output=True, text=True, timeout=30)


def _fake_daemon(tmp_path: Path) -> Path:
    """`fakedaemon` is sleep under another name, so its comm says fakedaemon."""
    daemon = tmp_path / "fakedaemon"
    daemon.symlink_to(Path("/bin/sleep"))
    return daemon


def test_a_daemon_slow_to_exec_is_alive_once_launched(tmp_path):
    daemon = _fake_daemon(tmp_path)
    # The child stays bash for 0.5 s before it execs the daemon.
    result = _bash(
        f"launch fakedaemon bash -c 'sleep 0.5; exec {daemon} 30'\n"
        "alive fakedaemon && echo alive\n"
        'kill "$(pid_of fakedaemon)"\n',
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "alive"


def test_a_daemon_that_ends_at_once_is_not_alive(tmp_path):
    result = _bash("launch fakedaemon false\nalive fakedaemon || echo dead\n", tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "dead"


def test_a_stale_pid_file_naming_another_process_is_not_alive(tmp_path):
    result = _bash('echo $$ > "$PIDDIR/fakedaemon.pid"\nalive fakedaemon || echo dead\n', tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "dead"
