"""The health tier (runner/healthcheck.py): the node's facts in seconds, one line for a drain reason, never
past its limit, nothing judged while a job holds the node; and for real as Slurm's HealthCheckProgram on a
Slurm of two nodes on this host (as CI has): a fault planted on one node's fake GPU drains that node with the
suite's reason, the other is left alone, and the node is resumed once the fault is gone."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from test_fake_gpu import FAKE_SYSTEM

from runner import healthcheck
from systems.health import kind_of

REPO = Path(__file__).resolve().parent.parent
SLURM = REPO / ".ci" / "slurm"


@pytest.fixture(scope="module")
def fake_node(tmp_path_factory) -> dict:
    """The fake GPU's environment (its NVML, its CUDA driver built here) and a systems folder with its system."""
    root = tmp_path_factory.mktemp("fake-node")
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler for the fake CUDA driver")
    (root / "libcuda").mkdir()
    source = REPO / "tests" / "fakegpu" / "libcuda" / "libcuda.c"
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-o", str(root / "libcuda" / "libcuda.so.1"), str(source)])
    (root / "systems").mkdir()
    (root / "systems" / "fakegpu.yaml").write_text(yaml.safe_dump(FAKE_SYSTEM, sort_keys=False))
    env = {
        "PYTHONPATH": f"{REPO / 'tests' / 'fakegpu' / 'site'}{os.pathsep}{REPO}",
        "LD_LIBRARY_PATH": str(root / "libcuda"),
        "GPU_MEMPATHS_FAKE_PYTHON": sys.executable,
        "GPU_MEMPATHS_DATA": str(root / "data"),
    }
    # The fake node accepted as it is: its facts, read by health itself, its kind's accepted node.
    facts = root / "facts"
    read = [sys.executable, "-m", "systems.health", "--system", "fakegpu", "--partition", "default"]
    read += ["--systems-dir", str(root / "systems"), "--facts-dir", str(facts)]
    subprocess.run(read, cwd=REPO, env={**os.environ, **env}, capture_output=True, check=True, timeout=120)
    [node] = [json.loads(path.read_text()) for path in facts.glob("node-*.json")]
    accepted = root / "data" / "perflogs" / "fakegpu" / "accepted.json"
    accepted.parent.mkdir(parents=True)
    baseline = {"accepted": "2026-12-01T00:00:00", "runs": [], "node": {"default": node}}
    accepted.write_text(json.dumps({"system": "fakegpu", "kinds": {kind_of(node): baseline}}))
    return {"root": root, "env": env}


def health(fake_node, *options, facts_only: bool = True, **env) -> subprocess.CompletedProcess:
    """The tier on the fake node, where no scheduler is to be asked (no squeue on its PATH); its facts alone
    unless `facts_only` is False (no night has run here: nothing to measure with)."""
    command = [sys.executable, "-m", "runner.healthcheck", "--system", "fakegpu", "--partition", "default"]
    command += ["--systems-dir", str(fake_node["root"] / "systems"), *options]
    command += ["--facts-only"] if facts_only else []
    environ = {**os.environ, **fake_node["env"], "PATH": str(fake_node["root"] / "libcuda"), **env}
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=environ, timeout=120)


def test_a_healthy_node_passes_and_a_fault_ends_in_one_line_fit_for_a_drain_reason(fake_node):
    started = time.monotonic()
    ok = health(fake_node)
    assert ok.returncode == 0 and ok.stdout.splitlines()[-1].startswith("gpu-mempaths health: ok"), ok.stdout
    assert time.monotonic() - started < 30  # the whole command, start-up included (on the fake node)
    bad = health(fake_node, GPU_MEMPATHS_FAKE_GPU="ecc_uncorrected=3,retired_pending=1")
    last = bad.stdout.splitlines()[-1]
    assert bad.returncode == 1 and last == (
        "gpu-mempaths GMP-320 health: gpu0 ecc_uncorrected: expected 0, found 3 (+1 more)"
    ), bad.stdout


def test_measuring_without_a_nights_build_is_not_judged_and_names_what_to_run(fake_node):
    """The facts pass; the measurements need a night's build (none has run here): the suite's gap, never the
    node's failure, and the node is neither drained nor resumed."""
    unmeasured = health(fake_node, "--act", facts_only=False)
    assert unmeasured.returncode == 3, unmeasured.stdout + unmeasured.stderr
    last = unmeasured.stdout.splitlines()[-1]
    assert last.startswith("gpu-mempaths GMP-407 health: not judged: no night's build of fakegpu on a node of"), last
    assert last.endswith("run ./suite nightly on this system first") and "act: " not in unmeasured.stdout


def test_facts_that_cannot_be_read_are_the_suites_failure_not_the_nodes(fake_node):
    broken = health(fake_node, GPU_MEMPATHS_FAKE_GPU="remapped_rows=not-a-number")  # the facts' reader raises
    assert broken.returncode == 3, broken.stdout
    assert broken.stdout.startswith(
        "gpu-mempaths GMP-407 health: not judged: the node's facts could not be read (exit 1)"
    ), broken.stdout


def test_past_its_limit_it_stops_and_judges_nothing(fake_node):
    slow = health(fake_node, "--limit-s", "0.05")
    assert slow.returncode == 3 and "not judged: the facts took longer than the 0.05 s of its limit" in slow.stdout


def test_while_a_job_holds_the_node_it_judges_nothing_and_says_contended(monkeypatch, capsys):
    monkeypatch.setattr(healthcheck, "jobs_on", lambda node, timeout_s: ["4242"])
    monkeypatch.setattr(healthcheck, "read_facts", lambda *a: pytest.fail("judged while a job held the node"))
    assert healthcheck.main(["--system", "fakegpu", "--partition", "default"]) == 0
    assert "CONTENDED: job(s) 4242 on" in capsys.readouterr().out


def test_a_scheduler_that_does_not_answer_is_not_judged_never_a_node_judged_under_a_job(monkeypatch, capsys):
    def silent(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], healthcheck.SQUEUE_S)

    monkeypatch.setattr(healthcheck.shutil, "which", lambda name: "/usr/bin/squeue")
    monkeypatch.setattr(healthcheck.subprocess, "run", silent)
    monkeypatch.setattr(healthcheck, "read_facts", lambda *a: pytest.fail("judged while a job may hold the node"))
    assert healthcheck.main(["--system", "fakegpu", "--partition", "default"]) == 3
    assert "GMP-407 health: not judged: squeue did not answer whether a job holds" in capsys.readouterr().out


def test_an_error_of_the_tier_itself_is_not_judged_never_a_failed_node(monkeypatch, capsys):
    monkeypatch.setattr(healthcheck, "jobs_on", lambda node, timeout_s: [])
    monkeypatch.setattr(healthcheck, "read_facts", lambda *a: 1 / 0)
    assert healthcheck.main(["--system", "fakegpu", "--partition", "default"]) == 3
    assert "not judged: ZeroDivisionError" in capsys.readouterr().out


def test_without_an_accepted_node_a_clean_node_is_not_judged_and_a_faulty_one_fails(fake_node, tmp_path):
    """Nothing accepted: no fault is no pass (exit 3, never resumed); an error its GPUs counted (an
    uncorrected ECC error) is the node's: exit 1, its line, its run kept, as with a baseline."""
    data = str(tmp_path / "no-accepted-runs")
    ok = health(fake_node, "--act", GPU_MEMPATHS_DATA=data)
    assert "nothing to judge the node's facts against" in ok.stdout
    assert ok.returncode == 3 and "no accepted node to hold the facts to" in ok.stdout and "act: runs" not in ok.stdout
    bad = health(fake_node, GPU_MEMPATHS_DATA=data, GPU_MEMPATHS_FAKE_GPU="ecc_uncorrected=3")
    assert bad.returncode == 1 and bad.stdout.splitlines()[-1] == (
        "gpu-mempaths GMP-320 health: gpu0 ecc_uncorrected: expected 0, found 3"
    ), bad.stdout
    [kept] = (tmp_path / "no-accepted-runs" / "results" / "health").rglob("run.json")
    assert json.loads(kept.read_text())["exit"] == 1
    # A clock held down (HW slowdown, 0x8) is a fault too, but no error counted: without an accepted node it
    # may be the reading, not the node: no pass, no drain.
    slowed = health(fake_node, GPU_MEMPATHS_DATA=data, GPU_MEMPATHS_FAKE_GPU="clock_events=9")
    assert "FAIL GMP-326 gpu0 clock_events" in slowed.stdout and slowed.returncode == 3, slowed.stdout
    missing = health(fake_node, "--accepted", str(tmp_path / "none.json"))
    assert missing.returncode == 3 and f"--accepted {tmp_path / 'none.json'}: no such file" in missing.stdout


def test_a_damaged_tier_catalogue_is_the_suites_failure_never_a_failed_node(monkeypatch, capsys, tmp_path):
    """A catalogue that cannot be read ended in a traceback, exit 1: a failed node to NHC and an epilog."""
    from systems import tiers

    broken = tmp_path / "catalogue.yaml"
    broken.write_text("tiers: [")
    monkeypatch.setattr(healthcheck, "tier_named", lambda name: tiers.catalogue.__wrapped__(broken))
    assert healthcheck.main(["--system", "fakegpu", "--partition", "default"]) == 3
    assert "GMP-407 health: not judged: TierError:" in capsys.readouterr().out


def test_while_another_of_the_suites_commands_holds_the_node_the_facts_are_not_read(monkeypatch, capsys, tmp_path):
    """A cron nightly is no Slurm job: the tier finds it by the node's lock, says CONTENDED, reads nothing."""
    from runner import lock

    monkeypatch.setattr(lock, "RESULTS", tmp_path)
    monkeypatch.setattr(healthcheck, "jobs_on", lambda node, timeout_s: [])
    monkeypatch.setattr(healthcheck, "read_facts", lambda *a: pytest.fail("judged while a nightly held the node"))
    with lock.held("./suite nightly --system fakegpu"):
        assert healthcheck.main(["--system", "fakegpu", "--partition", "default", "--facts-only"]) == 0
    assert "CONTENDED: pid" in capsys.readouterr().out


def test_the_job_whose_epilog_it_is_does_not_hold_the_node(monkeypatch):
    listed = subprocess.CompletedProcess([], 0, stdout="77\n78\n", stderr="")  # %A: each array task's own id
    monkeypatch.setattr(healthcheck.shutil, "which", lambda name: "/usr/bin/squeue")
    monkeypatch.setattr(healthcheck.subprocess, "run", lambda *a, **k: listed)
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    assert healthcheck.jobs_on("ci1") == ["78"]


def reasons(conf: str) -> dict[str, str]:
    out = subprocess.run(
        ["sinfo", "-R", "-h", "-N", "-o", "%N|%E"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "SLURM_CONF": conf},
    ).stdout
    return dict(line.split("|", 1) for line in out.splitlines())


def until(what, seconds: float = 90):
    """`what()` once it is true, within `seconds` (Slurm runs the health check every few seconds)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        found = what()
        if found:
            return found
        time.sleep(1)
    return what()


@pytest.mark.slow  # starts a Slurm whose slurmd run the health tier every 3 s
def test_slurms_health_check_drains_the_faulty_node_leaves_the_rest_and_resumes_it(fake_node, tmp_path):
    if shutil.which("slurmctld") is None or os.geteuid() != 0:
        pytest.skip("needs root and Slurm (apt-get install slurmctld slurmd slurm-client munge), as CI has")
    rundir = tmp_path / "slurm"
    conf = rundir / "slurm.conf"
    faults = tmp_path / "faults"
    faults.mkdir()
    # What a site writes: a program without arguments (Slurm gives it none), its environment its own.
    program = tmp_path / "gpu-mempaths-health"
    exports = {**fake_node["env"], "SLURM_CONF": str(conf)}
    program.write_text(
        "#!/bin/sh\n"
        + "".join(f"export {k}='{v}'\n" for k, v in exports.items())
        + f'export GPU_MEMPATHS_FAKE_GPU="$(cat {faults}/$SLURMD_NODENAME 2>/dev/null)"\n'
        + f"cd {REPO} && exec {sys.executable} -m runner.healthcheck --system fakegpu --partition default "
        + f"--systems-dir {fake_node['root'] / 'systems'} --facts-only --act "
        + f">>{tmp_path}/health-$SLURMD_NODENAME.log 2>&1\n"
    )
    program.chmod(0o755)
    env = {**os.environ, "SLURM_CI_NODES": "2", "SLURM_CI_PORT": "7617", "SLURM_CI_HEALTH": str(program)}
    env["SLURM_CI_HEALTH_INTERVAL"] = "3"
    try:
        subprocess.run(["bash", str(SLURM / "start.sh"), str(rundir)], check=True, timeout=120, env=env)
        admin = ["scontrol", "update", "nodename=ci1", "state=drain", "reason=admin: firmware"]
        subprocess.run(admin, env={**env, "SLURM_CONF": str(conf)}, check=True)
        (faults / "ci2").write_text("ecc_uncorrected=3")
        drained = until(lambda: reasons(str(conf)).get("ci2", "").startswith("gpu-mempaths "))
        logs = "".join(p.read_text() for p in tmp_path.glob("health-*.log"))
        assert drained, logs
        now = reasons(str(conf))
        assert now["ci2"] == "gpu-mempaths GMP-320 health: gpu0 ecc_uncorrected: expected 0, found 3", logs
        assert now["ci1"] == "admin: firmware"  # healthy, but someone else drained it: left alone
        (faults / "ci2").unlink()
        assert until(lambda: "ci2" not in reasons(str(conf))), "ci2 not resumed once its fault was gone"
        assert reasons(str(conf)) == {"ci1": "admin: firmware"}
    finally:
        subprocess.run(["bash", str(SLURM / "stop.sh"), str(rundir)], check=False, timeout=120)


def test_a_judged_node_keeps_its_verdict_when_the_suite_cannot_act_on_it(fake_node):
    """--act where the scheduler cannot be asked (no sinfo here): the node was judged, failed, and says so
    (exit 1, its reason line); the act not done is the suite's error beside it, never a 'not judged' that
    hides the fault nor a traceback."""
    bad = health(fake_node, "--act", GPU_MEMPATHS_FAKE_GPU="ecc_uncorrected=3")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert bad.stdout.splitlines()[-1].startswith("gpu-mempaths GMP-320 health: gpu0 ecc_uncorrected")
    assert "gpu-mempaths health: SUITE ERROR: act: not done: " in bad.stderr and "Traceback" not in bad.stderr


def test_nvmls_python_module_missing_is_the_suites_failure_never_the_nodes(fake_node, tmp_path):
    """The suite's Python without nvidia-ml-py read as 'no GPU' and failed the node (exit 1; with --act,
    drained every node up to the breaker's cap): not judged, naming the module."""
    missing = tmp_path / "no-nvml"
    missing.mkdir()
    (missing / "pynvml.py").write_text("raise ImportError('nvidia-ml-py is not installed here')\n")
    done = health(fake_node, PYTHONPATH=f"{missing}{os.pathsep}{REPO}")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "GMP-407 health: not judged: nvidia-ml-py is not installed in the suite's Python" in done.stdout
