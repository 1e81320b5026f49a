"""The suite's own faults planted in nights of the fake node (tests/test_fake_gpu.py's):
a missing tool, a night stopped by SIGTERM during its checks, two nightlies at
once. Each ends as "not judged" (exit 3) with its cause named and nothing in
drain.txt, and the healthy night beside them is whole and judged as before."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_fake_gpu import fake_node_env, make_repo

from reports.load import load

pytestmark = pytest.mark.slow

#: One check besides health: the shortest night that builds, measures and is judged.
CHECKS = ["-n", "host_bandwidth"]


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return make_repo(tmp_path_factory.mktemp("fakegpu-faults"))


def start(repo: Path, seed: int = 5, env: dict | None = None) -> subprocess.Popen:
    """A nightly of the fake node, started (its own session: ReFrame and its jobs killed with it at the end)."""
    environ = {
        **os.environ,
        **fake_node_env(repo),
        "HOME": str(repo.parent / "home"),
        "GPU_MEMPATHS_FAKE_SEED": str(seed),
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    sources = repo / "tests" / "fakegpu" / "src"
    cmd = [sys.executable, "-m", "commands", "nightly", "--system", "fakegpu", "--no-report", "--", *CHECKS]
    cmd += ["-S", f"SuiteBuild.sourcesdir={sources}"]
    return subprocess.Popen(
        cmd, cwd=repo, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


def finish(process: subprocess.Popen, until: str | tuple[str, ...] = (), then=None) -> tuple[int, str]:
    """Its exit status and output, read to its end (`then()` called once lines have held each of `until`, in
    order); killed, session and all, after 5 minutes."""
    deadline = threading.Timer(300, os.killpg, (process.pid, signal.SIGKILL))
    deadline.start()
    output = []
    waiting = [until] if isinstance(until, str) else list(until)
    try:
        for line in process.stdout:
            output.append(line)
            if waiting and waiting[0] in line:
                waiting.pop(0)
                if not waiting:
                    then()
        return process.wait(), "".join(output)
    finally:
        deadline.cancel()
        process.stdout.close()


def nights(repo: Path) -> dict[str, dict]:
    return {
        p.parent.name: json.loads(p.read_text()) for p in (repo / "results" / "nightly" / "fakegpu").glob("*/run.json")
    }


def test_a_missing_cmake_is_named_before_anything_runs_and_drains_nothing(repo, tmp_path):
    bare = tmp_path / "bin"  # a PATH with the compilers and without CMake
    bare.mkdir()
    for tool in ("gcc", "g++", "cc", "git"):
        found = subprocess.run(["which", tool], capture_output=True, text=True).stdout.strip()
        if found:
            (bare / tool).symlink_to(found)
    before = set(nights(repo))
    status, output = finish(start(repo, env={"PATH": str(bare)}))
    assert status == 3, output
    last = output.strip().splitlines()[-1]
    assert "the suite could not run, not the node's fault, nothing drained: cmake is not on PATH" in last
    ((folder, run),) = {k: v for k, v in nights(repo).items() if k not in before}.items()
    assert run["unjudged_reasons"] == ["suite-error"] and run["drain"] == [] and run["state"] == "done"
    assert (repo / "results" / "nightly" / "fakegpu" / folder / "drain.txt").read_text() == ""
    assert "DRAIN" not in output


def test_a_night_stopped_during_its_checks_a_second_nightly_and_the_healthy_night_after(repo):
    # 1. SIGTERM while ReFrame runs the checks: ReFrame stopped with its jobs, the night saved as stopped.
    before = set(nights(repo))
    first = start(repo, seed=6, env={"GPU_MEMPATHS_FAKE_TAKES_S": "60"})  # still measuring when stopped
    status, output = finish(first, until="] host_bandwidth", then=lambda: first.send_signal(signal.SIGTERM))
    assert status == 3, output
    assert "nightly: stopped by SIGTERM during checks: not judged (exit 3), nothing drained" in output
    ((stopped_folder, stopped),) = {k: v for k, v in nights(repo).items() if k not in before}.items()
    assert stopped["state"] == "stopped" and stopped["stopped"]["during"] == "checks" and "exit" not in stopped
    assert not (repo / "results" / "nightly" / "fakegpu" / stopped_folder / "drain.txt").exists()
    time.sleep(1)
    with pytest.raises(ProcessLookupError):  # nothing of its session is left running: no job outlives it
        os.killpg(first.pid, 0)

    # 2. The next night, and a second nightly started while it runs: refused, naming the first.
    healthy = start(repo, seed=7, env={"GPU_MEMPATHS_FAKE_TAKES_S": "3"})
    second = {}

    def crowd():
        status, output = finish(start(repo, seed=8))
        second.update(status=status, output=output)

    status, output = finish(healthy, until="nightly: plan", then=crowd)
    assert second["status"] == 3, second["output"]
    assert "another command holds this checkout's lock on this node" in second["output"]
    assert "nightly --system fakegpu" in second["output"]  # the holder's command

    # 3. The healthy night is whole and judged as a first night is: not judged for want of a baseline
    #    alone, no suite error, nothing drained, its records read back whole.
    assert status == 3, output
    assert "SUITE ERROR" not in output and "DRAIN" not in output
    (healthy_run,) = [r for k, r in nights(repo).items() if k not in before and k != stopped_folder]
    assert healthy_run["state"] == "done" and healthy_run["unjudged_reasons"] == ["no-baseline"]
    assert healthy_run["drain"] == [] and healthy_run["checks"] == "pass"
    loaded = load([repo / "perflogs" / "fakegpu"], warn=None)
    assert not loaded.issues, loaded.issues
    assert (loaded.frame["test"] == "host_bandwidth").sum() > 0

    # 4. The stopped night is no finished night: accept refuses it by name.
    accepted = subprocess.run(
        [sys.executable, "-m", "commands", "accept", stopped["stamp"], healthy_run["stamp"], "--system", "fakegpu"],
        cwd=repo,
        env={**os.environ, **fake_node_env(repo)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert accepted.returncode == 3
    assert f"a night that did not end is no baseline: {stopped['stamp']} (stopped by SIGTERM" in accepted.stderr
    assert not (repo / "perflogs" / "fakegpu" / "accepted.json").exists()


PAGE = 4096  # a tmpfs gives a file its space a page at a time


@pytest.fixture
def small_disk(repo):
    """perflogs/fakegpu on a file system of 1 MB (a tmpfs: root may mount one), holding the fake node's
    host_bandwidth perflog as the nights before left it, cut to whole lines just short of a page, and
    filled to the brim but for the two pages health and the build take: the night's first host_bandwidth
    line crosses into a page the disk no longer has, and is cut."""
    logs = repo / "perflogs" / "fakegpu"
    earlier = (logs / "default" / "host_bandwidth.log").read_text().splitlines(keepends=True)
    kept = []
    for line in earlier:
        if sum(map(len, kept)) + len(line) > PAGE - 40:
            break
        kept.append(line)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(logs)], capture_output=True)
    if mounted.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"CI runs as root and mounts a tmpfs: {mounted.stderr.decode()}")
        pytest.skip("no tmpfs can be mounted here (not root)")
    try:
        (logs / "default").mkdir()
        (logs / "default" / "host_bandwidth.log").write_text("".join(kept))
        stat = os.statvfs(logs)
        (logs / "filler").write_bytes(b"\0" * (stat.f_bavail * stat.f_frsize - 2 * PAGE))
        yield logs
    finally:
        subprocess.run(["umount", str(logs)], check=True)


def test_a_perflog_disk_that_fills_is_named_and_the_next_night_loses_no_line(repo, small_disk):
    before = set(nights(repo))
    # The preflight would refuse a disk this small: it is let through, to fill while ReFrame writes.
    status, output = finish(start(repo, seed=9, env={"GPU_MEMPATHS_MIN_FREE_MB": "0"}))
    assert status == 3, output
    assert "SUITE ERROR host_bandwidth: " in output and "measurements reached" in output
    assert "the suite failed, not the node, nothing drained: host_bandwidth:" in output.strip().splitlines()[-1]
    (full,) = [r for k, r in nights(repo).items() if k not in before]
    assert full["drain"] == [] and "suite-error" in full["unjudged_reasons"]
    cut = (small_disk / "default" / "host_bandwidth.log").read_bytes()
    assert not cut.endswith(b"\n")  # the line the disk cut

    # Space again: the next night closes the cut line first, and every line of its own is whole.
    (small_disk / "filler").unlink()
    before = set(nights(repo))
    status, output = finish(start(repo, seed=10, env={"GPU_MEMPATHS_MIN_FREE_MB": "0"}))
    assert status == 3 and "ended in a cut line" in output and "SUITE ERROR" not in output, output
    (healthy,) = [r for k, r in nights(repo).items() if k not in before]
    assert healthy["unjudged_reasons"] == ["no-baseline"] and healthy["drain"] == []
    loaded = load([small_disk], warn=None)
    assert len(loaded.issues) == 1  # the one fragment the full disk left, skipped and named
    tonight = loaded.frame[loaded.frame["time"] >= healthy["start"]]
    assert (tonight["test"] == "host_bandwidth").sum() == 12  # read and write bandwidth, 5 samples each


def test_a_damaged_accepted_json_is_named_and_drains_nothing(repo):
    accepted = repo / "perflogs" / "fakegpu" / "accepted.json"
    accepted.parent.mkdir(parents=True, exist_ok=True)
    kept = accepted.read_text() if accepted.exists() else None
    accepted.write_text('{"system": "fakegpu", "kinds": {')  # cut by a full disk or an editor
    try:
        before = set(nights(repo))
        status, output = finish(start(repo, seed=11))
    finally:
        accepted.write_text(kept) if kept is not None else accepted.unlink()
    assert status == 3, output
    assert f"{accepted}: damaged (not JSON" in output.strip().splitlines()[-1]
    assert "DRAIN" not in output and "FAILED" not in output
    (run,) = [r for k, r in nights(repo).items() if k not in before]
    # Measured all the same (its records kept, to judge once the file is mended), judged against nothing.
    assert run["unjudged_reasons"][0] == "suite-error" and run["drain"] == [] and run["checks"] == "pass"


def test_a_night_stopped_in_its_rerun_or_by_ctrl_c_keeps_its_window_and_the_next_is_judged(repo):
    """Four short nights accepted, then host memory at half speed: stopped by SIGTERM while its rerun
    measures, and by SIGINT (Ctrl-C) before its checks; each saved as stopped with the step it was in, the
    rerun's window kept; the next such night is judged as ever (exit 2, host memory drained)."""
    stamps = []
    for seed in (20, 21, 22, 23):
        status, output = finish(start(repo, seed=seed))
        assert status == 3 and "no-baseline" in output, output
        stamps.append(re.search(r"accept runs with ./suite accept (\S+)", output)[1])
    environ = {**os.environ, **fake_node_env(repo)}
    accepted = subprocess.run(
        [sys.executable, "-m", "commands", "accept", *stamps, "--system", "fakegpu"],
        cwd=repo, env=environ, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert accepted.returncode == 0, accepted.stderr
    slow = {"GPU_MEMPATHS_FAKE_SLOWDOWN": "host_bandwidth=0.5"}

    before = set(nights(repo))
    night = start(repo, seed=24, env={**slow, "GPU_MEMPATHS_FAKE_TAKES_S": "5"})  # the rerun still measuring
    status, output = finish(
        night, until=("rerunning", "] host_bandwidth"), then=lambda: night.send_signal(signal.SIGTERM)
    )
    assert status == 3 and "stopped by SIGTERM during the rerun" in output, output
    (stopped,) = [r for k, r in nights(repo).items() if k not in before]
    assert stopped["state"] == "stopped" and stopped["rerun"]["cut"] == "stopped during the rerun"

    before = set(nights(repo))
    night = start(repo, seed=25, env=slow)
    status, output = finish(night, until="nightly: plan", then=lambda: night.send_signal(signal.SIGINT))
    assert status == 3 and "stopped by SIGINT during checks" in output, output
    (interrupted,) = [r for k, r in nights(repo).items() if k not in before]
    assert interrupted["state"] == "stopped" and "Traceback" not in output

    status, output = finish(start(repo, seed=26, env=slow))
    assert status == 2 and "DRAIN" in output and "host memory read" in output, output


def test_a_night_killed_outright_reads_as_incomplete_and_holds_no_lock(repo):
    """SIGKILL to the night's whole session (the OOM killer, a scheduler's kill): nothing can be saved, so
    run.json still says running and the step it was in; the lock goes with the process; the next night runs."""
    before = set(nights(repo))
    night = start(repo, seed=30, env={"GPU_MEMPATHS_FAKE_TAKES_S": "60"})
    status, _ = finish(night, until="] host_bandwidth", then=lambda: os.killpg(night.pid, signal.SIGKILL))
    assert status == -signal.SIGKILL
    (killed,) = [r for k, r in nights(repo).items() if k not in before]
    assert killed["state"] == "running" and killed["phase"] == "checks"
    status, output = finish(start(repo, seed=31))
    assert status in (0, 2, 3) and "holds this checkout's lock" not in output and "SUITE ERROR" not in output, output
    finished = "from reports.runs import finished_runs; print([r['stamp'] for r in finished_runs('fakegpu')])"
    listed = subprocess.run(
        [sys.executable, "-c", finished], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    assert killed["stamp"] not in listed
