"""The nightly verdict end to end, through ReFrame, on a machine without a GPU.

A copy of the repository gets a system whose node is described at run time
through a fake NVML (tests/fakegpu/site/pynvml.py: one H100) and a fake CUDA
driver (tests/fakegpu/libcuda: health loads the link through it) and whose
programs are fakes that print the real programs' output with a small noise
(tests/fakegpu/src/fake_program.py). On it: four nightly runs on "separately
started nodes" (other noise seeds) exit 3, since nothing is accepted yet;
they are accepted, with references from their spread; a fifth run exits 0
with every headline figure judged; a run with host memory at half speed
exits 2, its rerun confirming, and flags exactly the host memory paths; a GPU
that counted an uncorrected ECC error fails health (1); a GPU throttled only
while the checks' programs run (health, at rest, passes it) fails the checks
it ran (1).
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
import yaml

from runner.rfm import reframe_command

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
FAKE_MODEL = "NVIDIA H100 80GB HBM3 (fake)"  # tests/fakegpu/site/pynvml.py

FAKE_SYSTEM = {
    "name": "fakegpu",
    "description": "One H100 that NVML and the programs only pretend to have (tests/test_fake_gpu.py)",
    "hostnames": [],
    "detect": True,
    # No CUDA compiler is used: the fake build installs scripts ('true' keeps the cuda feature).
    "environments": [{"name": "gnu", "cc": "gcc", "cxx": "g++", "nvcc": "true", "features": ["cuda"]}],
    "partitions": [
        {
            "name": "default",
            "description": "The fake node",
            "scheduler": "local",
            "launcher": "local",
            "environments": ["gnu"],
            "max_jobs": 4,
        }
    ],
}

#: The checks a nightly of the fake node runs (the multi-GPU ones skip on one GPU): every experiment of
#: one GPU, with the cases that give each of its paths its figures (Unified Memory without the host's
#: touch, DAXPY at its largest size), not every point of their sweeps: 23 cases, not 41.
CHECKS = [
    "-n",
    "host_bandwidth|um_bandwidth%.*%touch_on_host=notouch|daxpy%.*%data_size=800000|copy_latency|path_matrix"
    "|node_health",
]


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return make_repo(tmp_path_factory.mktemp("fakegpu"))


def make_repo(root: Path) -> Path:
    """A copy of the repository under `root` with the fake system, and the fake CUDA driver beside it."""
    copy = root / "repo"
    ignore = shutil.ignore_patterns(
        ".git", ".venv", "build", "stage", "output", "perflogs", "nightly", "h100", "__pycache__", "*.log"
    )
    shutil.copytree(REPO, copy, ignore=ignore)
    (copy / "perflogs").mkdir()
    (copy / "systems" / "fakegpu.yaml").write_text(yaml.safe_dump(FAKE_SYSTEM, sort_keys=False))
    (root / "home").mkdir()
    # The fake CUDA driver, built where no real one is found first (the fake node's library path).
    (root / "libcuda").mkdir()
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler for the fake CUDA driver")
    source = copy / "tests" / "fakegpu" / "libcuda" / "libcuda.c"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O1", "-o", str(root / "libcuda" / "libcuda.so.1"), str(source)], check=True
    )
    # A checkout of its own, so that what runs write can be told from what git tracks.
    git = ["git", "-C", str(copy), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "checkout"], check=True)
    return copy


def git_status(repo: Path) -> set[str]:
    result = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True)
    return set(result.stdout.splitlines())


@pytest.fixture(scope="module")
def first_night(repo):
    """The node's first night, its records sent to an endpoint where nothing
    listens (they are all in its perflogs still: the first accepted run)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{probe.getsockname()[1]}/api/v1/import"  # nothing listens once closed
    before = git_status(repo)
    return (*nightly(repo, 99, GPU_MEMPATHS_METRICS_URL=down), down, before)


def test_a_run_a_dry_run_and_a_nightly_leave_the_checkout_clean(repo, first_night):
    """Perflogs, nightly results and ReFrame's files go where git ignores them."""
    before = first_night[-1]
    environ = {**os.environ, **fake_node_env(repo), "HOME": str(repo.parent / "home")}
    sources = repo / "tests" / "fakegpu" / "src"
    for mode in ("--dry-run", "-r"):
        cmd = reframe_command(
            "fakegpu",
            mode,
            "-n",
            "host_bandwidth",
            "-S",
            f"SuiteBuild.sourcesdir={sources}",
            settings="reframe_settings.py",
            checks="checks",
        )
        result = subprocess.run(cmd, cwd=repo, env=environ, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert git_status(repo) == before


def fake_node_env(repo: Path) -> dict[str, str]:
    """The fake NVML and the fake CUDA driver first in the node's paths, and
    the fake programs run by this Python (tests/fakegpu/src/CMakeLists.txt)."""
    libraries = os.environ.get("LD_LIBRARY_PATH")
    return {
        "PYTHONPATH": f"{repo / 'tests' / 'fakegpu' / 'site'}{os.pathsep}{repo}",
        "LD_LIBRARY_PATH": str(repo.parent / "libcuda") + (f"{os.pathsep}{libraries}" if libraries else ""),
        "GPU_MEMPATHS_FAKE_PYTHON": sys.executable,
    }


def nightly(
    repo: Path,
    seed: int,
    *options: str,
    until: str | None = None,
    checks: list[str] = CHECKS,
    system: str = "fakegpu",
    **env,
) -> tuple[int, str, Path]:
    """One nightly run of the fake node (`options` its own, `env` the fake's);
    its exit status, output and results folder. With `until`, the file
    GPU_MEMPATHS_FAKE_SLOWDOWN_WHILE names is removed once the nightly prints
    that text: a load that passes then."""
    environ = {
        **os.environ,
        **fake_node_env(repo),
        "HOME": str(repo.parent / "home"),  # ReFrame's results database
        "GPU_MEMPATHS_FAKE_SEED": str(seed),
        **env,
    }
    before = set((repo / "results" / "nightly" / system).glob("*"))
    sources = repo / "tests" / "fakegpu" / "src"
    cmd = [
        sys.executable,
        "-m",
        "commands",
        "nightly",
        "--system",
        system,
        "--no-report",
        *options,
        "--",
        *checks,
        "-S",
        f"SuiteBuild.sourcesdir={sources}",
    ]
    with subprocess.Popen(
        cmd, cwd=repo, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    ) as process:
        # Read line by line (for `until`), yet never wait past 10 minutes for a nightly that hangs: kill its
        # whole session, ReFrame and its jobs too, which hold the output open.
        deadline = threading.Timer(600, os.killpg, (process.pid, signal.SIGKILL))
        deadline.start()
        output = []
        try:
            for line in process.stdout:
                output.append(line)
                if until and until in line:
                    Path(environ["GPU_MEMPATHS_FAKE_SLOWDOWN_WHILE"]).unlink()
            status = process.wait()
        finally:
            deadline.cancel()
    (outdir,) = set((repo / "results" / "nightly" / system).glob("*")) - before
    return status, "".join(output), outdir


def accept(repo: Path, *stamps: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, **fake_node_env(repo)}
    cmd = [sys.executable, "-m", "commands", "accept", *stamps, "--system", "fakegpu", "--write-references"]
    return subprocess.run(cmd, cwd=repo, env=environ, capture_output=True, text=True, timeout=120)


def stamp(outdir: Path) -> str:
    return json.loads((outdir / "run.json").read_text())["stamp"]


@pytest.fixture(scope="module")
def accepted(repo, first_night):
    """Four runs, not judged (nothing accepted), then accepted with references:
    the first night and three more. Four: host memory is a kind of two paths,
    too few to lend each other a prior, and three runs alone cannot bound a
    fourth (judge/verdict.py)."""
    runs = [first_night[:3], *(nightly(repo, seed) for seed in (1, 2, 3))]
    for status, output, _ in runs:
        assert status == 3, output[-4000:]
        assert "no accepted run of fakegpu" in output
    result = accept(repo, *(stamp(outdir) for _, _, outdir in runs))
    assert result.returncode == 0, result.stdout + result.stderr
    return repo


@pytest.fixture(scope="module")
def unchanged_night(accepted, victoria):
    """A night that changed nothing, its records sent to VictoriaMetrics where it is installed."""
    metrics = {"GPU_MEMPATHS_METRICS_URL": f"{victoria}/api/v1/import"} if victoria else {}
    return nightly(accepted, 4, **metrics)


def test_unchanged_node_passes_with_every_figure_judged(unchanged_night):
    status, output, outdir = unchanged_night
    assert status == 0, output[-4000:]
    table = pd.read_csv(outdir / "compare.csv")
    judged = table[table["verdict"] != "yardstick"]  # the reprex's copy engine: judged as the path matrix's
    assert (judged["verdict"] == "pass").all(), judged[judged["verdict"] != "pass"].to_string()
    assert set(table.loc[table["verdict"] == "yardstick", "figure"]) == {"copy_engine_bw"}
    assert {"host_bandwidth", "um_bandwidth", "daxpy", "copy_latency", "path_matrix"} <= set(table["test"])
    assert " 0 moved" in output and "0 not judged" in output and "confirming" not in output
    run = json.loads((outdir / "run.json").read_text())
    assert run["exit"] == 0 and run["counts"]["moved"] == 0 and run["unjudged_reasons"] == []
    assert set(pd.read_csv(outdir / "paths.csv")["verdict"]) <= {"pass", "yardstick"}


def health_tier(repo: Path, seed: int, *options: str, **env) -> tuple[subprocess.CompletedProcess, dict]:
    """The health tier on the fake node (its facts, then its cases measured again from the latest night's
    build), with the whole command's time and its run.json."""
    command = [sys.executable, "-m", "runner.healthcheck", "--system", "fakegpu", "--partition", "default", *options]
    # A Slurm that runs no job on the node (the tier asks squeue before it measures).
    squeue = repo.parent / "slurm-bin" / "squeue"
    squeue.parent.mkdir(exist_ok=True)
    squeue.write_text("#!/bin/sh\nexit 0\n")
    squeue.chmod(0o755)
    environ = {**os.environ, **fake_node_env(repo), "HOME": str(repo.parent / "home"), **env}
    environ.update(GPU_MEMPATHS_FAKE_SEED=str(seed), PATH=f"{squeue.parent}{os.pathsep}{os.environ['PATH']}")
    before = set((repo / "results" / "health").rglob("run.json"))
    done = subprocess.run(command, cwd=repo, env=environ, capture_output=True, text=True, timeout=300)
    (kept,) = set((repo / "results" / "health").rglob("run.json")) - before
    return done, json.loads(kept.read_text())


def test_the_health_tier_measures_its_cases_again_and_judges_them_against_the_accepted_runs(accepted):
    """The tier's cases (the host link by copy engine, latency) measured again from the latest night's
    build, judged by the nightly's verdict against the accepted runs: as accepted, exit 0; with GPU 0's
    host link at half speed, its paths moved, confirmed by a rerun, one line fit for a drain reason with
    the finding's code; the nights' perflogs untouched (a night's history is nights alone)."""
    perflogs = {p: p.read_bytes() for p in (accepted / "perflogs" / "fakegpu").rglob("*.log")}
    # A limit no busy CI machine reaches: the fake's programs are Python; the tier's own limit is timed on a GPU.
    ok, run = health_tier(accepted, 31, "--limit-s", "240")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.splitlines()[-1].startswith("gpu-mempaths health: ok ("), ok.stdout
    assert "path(s) judged against the accepted runs, 0 flagged" in ok.stdout
    assert run["tier"] == "health" and run["exit"] == 0 and run["build_of"] and run["accepted_runs"]
    judged = {path for path, v in run["paths"].items() if v["verdict"] == "pass"}
    assert any(path.startswith("host link h2d of GPU 0") for path in judged), run["paths"]
    assert any(path.startswith("GPU memory") for path in judged), run["paths"]
    assert not any(path.startswith("host memory") for path in run["paths"])  # host_bandwidth is not the tier's
    slow, run = health_tier(accepted, 32, "--limit-s", "240", GPU_MEMPATHS_FAKE_SLOWDOWN="path_matrix.gpu0=0.5")
    assert slow.returncode == 2, slow.stdout + slow.stderr
    last = slow.stdout.splitlines()[-1]
    assert last.startswith("gpu-mempaths GMP-101 health: moved against the accepted runs: host link"), last
    assert "rerun" in run and run["exit"] == 2 and run["drain"][0].startswith("GMP-101 moved against")
    run_dir = next((accepted / "results" / "health").rglob(run["stamp"].replace(":", "")))
    assert "GMP-101" in (run_dir / "verdict.xml").read_text()
    # The same slow link with another process on GPU 0: contended, never drained, and said so on its last
    # line (which read 'something moved: something moved' on one H100 with a neighbour).
    with subprocess.Popen(["sleep", "600"]) as neighbour:
        try:
            busy, run = health_tier(
                accepted,
                33,
                "--limit-s",
                "240",
                GPU_MEMPATHS_FAKE_SLOWDOWN="path_matrix.gpu0=0.5",
                GPU_MEMPATHS_FAKE_PROCESSES=f"0={neighbour.pid}",
            )
        finally:
            neighbour.kill()
    # Exit 0 as with a job on the node: NHC and an epilog drain on anything else.
    assert busy.returncode == 0 and run["exit"] == 0 and run["drain"] == [] and run["not_drained"], busy.stdout
    last = busy.stdout.splitlines()[-1]
    assert last.startswith("gpu-mempaths GMP-216 health: CONTENDED, not drained: moved against the accepted"), last
    # A GPU throttled under the cases' load alone: every case fails, the node's fault (exit 1), where 'none
    # passed' used to read as the suite's failure (exit 3), which NHC and an epilog pass.
    hot, run = health_tier(accepted, 34, "--limit-s", "240", GPU_MEMPATHS_FAKE_GPU_RUNNING="clock_events=64")
    assert hot.returncode == 1 and run["exit"] == 1, hot.stdout + hot.stderr
    assert "FAILED" in hot.stdout and "clock_events" in hot.stdout + json.dumps(run), hot.stdout
    assert {p: p.read_bytes() for p in (accepted / "perflogs" / "fakegpu").rglob("*.log")} == perflogs


def test_curves_are_kept_beside_the_perflogs_and_read_back_whole(accepted):
    """The perflog has each case's headline figures; every other size and
    point of the sweep is in the curves beside it (checks/suite/curves.py),
    which the reports read back with the run's node facts."""
    from experiments.copy_latency import HEADLINE_SIZES
    from reports.load import load

    folder = accepted / "perflogs" / "fakegpu" / "default"
    assert (folder / "copy_latency.curves").is_file() and (folder / "daxpy.curves").is_file()
    frame = load(folder, warn=None).frame
    latency = frame[(frame["test"] == "copy_latency") & frame["sample"].isna()]
    logged, kept = (latency[latency["source"].str.endswith(suffix)] for suffix in (".log", ".curves"))
    sizes = lambda rows: set(rows["figure"].str.extract(r"^lat_us_\w+_(\d+)$")[0].dropna().astype(int))  # noqa: E731
    assert sizes(logged) == set(HEADLINE_SIZES)
    assert sizes(kept) == {2**k for k in range(25)} - set(HEADLINE_SIZES)
    assert (kept["gpu_model"] == FAKE_MODEL).all() and set(kept["time"]) == set(logged["time"])


def test_the_perflogs_keep_the_committed_columns(accepted):
    """A run writes each check's perflog with the columns of the committed
    one: a column more (a loggable variable not left out of the perflogs)
    makes ReFrame start every perflog of every site anew, the old one set
    aside as NAME.log.h0. The loader reads those too (by their own header),
    but a column is added on purpose, once, as the fingerprint `code` was
    (experiments/code.py), and the committed perflogs then carry it."""
    folder = accepted / "perflogs" / "fakegpu" / "default"
    committed = REPO / "perflogs" / "hopper-vm" / "default"
    checked = 0
    for log in sorted(folder.glob("*.log")):
        if (committed / log.name).exists() and not log.name.startswith(("SuiteBuild", "node_health")):
            assert log.read_text().splitlines()[0] == (committed / log.name).open().readline().rstrip("\n"), log.name
            checked += 1
    assert checked >= 4 and not list(folder.glob("*.h[0-9]*"))


def test_half_speed_host_memory_is_flagged_and_nothing_else(accepted):
    # Measured again a second later too, as on a host shared with other tenants: still slow, still moved.
    status, output, outdir = nightly(
        accepted, 5, "--confirm-later", "1", GPU_MEMPATHS_FAKE_SLOWDOWN="host_bandwidth=0.5"
    )
    assert status == 2, output[-4000:]
    paths = pd.read_csv(outdir / "paths.csv")
    flagged = paths[paths["verdict"] != "pass"].set_index("path")
    assert set(flagged.index) - {"host link d2h of GPU 0, ce", "host link h2d of GPU 0, ce"} == {
        "host memory read, NUMA node 0",
        "host memory write, NUMA node 0",
    }
    assert (flagged.loc[flagged["verdict"] == "moved", "change_pct"] < -40).all()
    assert (flagged.loc[flagged["verdict"] == "moved", "rerun_change_pct"] < -40).all()  # the rerun confirmed it
    assert "nightly: confirming host memory read, NUMA node 0, host memory write, NUMA node 0" in output
    assert re.search(r"MOVED host memory read, NUMA node 0: \+(49\.\d|50\.\d)% worse \(1 of 1 figures agree", output)
    assert (flagged.loc[flagged["verdict"] == "moved", "later_change_pct"] < -40).all()
    assert "later" in json.loads((outdir / "run.json").read_text())


def test_half_speed_host_memory_on_another_host_is_not_judged_and_drains_nothing(accepted):
    """The accepted runs' host made another (its CPU and memory size, as a
    node moved to other hardware would find them): the same half-speed
    host memory says first that the host differs, exits 3 ('other-host'),
    asks to accept the host or investigate, and leaves drain.txt empty."""
    path = accepted / "perflogs" / "fakegpu" / "accepted.json"
    kept = path.read_text()
    record = json.loads(kept)
    [baseline] = record["kinds"].values()
    machine = baseline["node"]["default"]["machine"]
    machine["cpu"]["model"], machine["memory"]["size_gib"] = "Other CPU 9000", machine["memory"]["size_gib"] * 2
    path.write_text(json.dumps(record))
    try:
        # A drill: its slow host memory stays out of the history later nights' changes are judged over.
        status, output, outdir = nightly(
            accepted, 12, "--drill", "host memory at half speed", GPU_MEMPATHS_FAKE_SLOWDOWN="host_bandwidth=0.5"
        )
    finally:
        path.write_text(kept)
    assert status == 3, output[-4000:]
    run = json.loads((outdir / "run.json").read_text())
    assert run["unjudged_reasons"] == ["other-host"] and run["drain"] == [], run
    assert run["host_differs"].startswith("the host differs from the accepted nodes': CPU ")
    assert " against Other CPU 9000; memory " in run["host_differs"]
    assert (outdir / "drain.txt").read_text() == ""
    assert run["paths"]["host memory read, NUMA node 0"]["verdict"] == "moved"
    said = "nightly: NOTE the host differs from the accepted nodes'"
    assert output.index(said) < output.index("nightly: plan"), output[-4000:]  # once health recorded the host
    assert "MOVED host memory read" in output[output.rindex(said) :]  # and first among the verdict's lines
    assert "NOT JUDGED (other-host)" in output and "DRAIN" not in output


@pytest.mark.long
def test_a_night_of_a_few_checks_is_rerun_from_its_own_build(accepted):
    """A night of checks that all pass (no case skipped to hold the build's
    stage) still reruns what it flagged: the build's stage outlives the run,
    which its rerun restores the build from."""
    status, output, outdir = nightly(
        accepted,
        6,
        "--confirm-later",
        "0",
        "--drill",
        "host memory at half speed",  # no night of the later tests' history
        checks=["-n", "host_bandwidth|node_health"],
        GPU_MEMPATHS_FAKE_SLOWDOWN="host_bandwidth=0.5",
    )
    assert status == 2 and "FAILED" not in output, output[-4000:]
    assert "nightly: confirming host memory read, NUMA node 0, host memory write, NUMA node 0" in output
    assert (outdir / "rerun-report.json").exists() and "rerun" in json.loads((outdir / "run.json").read_text())


@pytest.mark.long
def test_a_load_that_outlasts_the_rerun_but_passes_before_the_later_measure_is_transient(accepted, tmp_path):
    """Another tenant streaming host memory through the run and its rerun, gone
    by the time a shared host's later confirmation measures it: exit 0, the
    paths listed as transient with all three runs' changes."""
    load = tmp_path / "tenant"
    load.touch()
    status, output, outdir = nightly(
        accepted,
        8,
        "--confirm-later",
        "2",
        until="measuring them again in 2 s",
        GPU_MEMPATHS_FAKE_SLOWDOWN="host_bandwidth=0.5",
        GPU_MEMPATHS_FAKE_SLOWDOWN_WHILE=str(load),
    )
    assert status == 0, output[-4000:]
    paths = pd.read_csv(outdir / "paths.csv").set_index("path")
    memory = paths.loc[["host memory read, NUMA node 0", "host memory write, NUMA node 0"]]
    assert (memory["verdict"] == "transient").all() and (memory["rerun_change_pct"] < -40).all()
    assert (memory["later_change_pct"].abs() < 5).all()
    assert "TRANSIENT host memory read, NUMA node 0" in output and "gone when measured again later" in output


def test_an_uncorrected_ecc_error_fails_health(accepted):
    status, output, _ = nightly(accepted, 6, GPU_MEMPATHS_FAKE_GPU="ecc_uncorrected=2")
    assert status == 1, output[-4000:]
    assert "no performance checks on an unhealthy node" in output


@pytest.mark.long
def test_a_gpu_throttled_during_the_run_fails_the_checks(accepted):
    # HW thermal slowdown under the checks' load only: at rest, health passes the GPU.
    status, output, outdir = nightly(accepted, 7, GPU_MEMPATHS_FAKE_GPU_RUNNING="clock_events=64")
    assert status == 1, output[-4000:]
    job_outputs = "".join(p.read_text() for p in (outdir / "stage").rglob("rfm_job.out"))  # the night's own stage
    assert "Watch: FAIL GMP-326 gpu0 clock_events: hw_thermal_slowdown during the run" in job_outputs


def test_accepted_references_bound_rates_by_physics_and_tolerate_the_spread(accepted):
    entries = yaml.safe_load((accepted / "systems" / "references" / "um_bandwidth.yaml").read_text())
    written = [e for e in entries if e["where"].get("gpu_model") == FAKE_MODEL and "size" in e["case"]]
    assert written
    for entry in written:
        for figure, (_, lower, upper, unit) in entry["values"].items():
            assert unit == "GiB/s" and upper is None and -0.9 <= lower <= -0.03, (figure, lower)
    kinds = json.loads((accepted / "perflogs" / "fakegpu" / "accepted.json").read_text())["kinds"]
    (accepted_record,) = kinds.values()
    assert list(kinds) == [f"1 x {FAKE_MODEL}"] and len(accepted_record["runs"]) == 4
    assert accepted_record["node"]["default"]["gpus"][0]["model"] == FAKE_MODEL


def test_the_two_gpu_checks_never_run_on_one_gpu(repo):
    """mem_scan and p2p_pingpong print "Skipped" and exit 0 on one GPU: the
    checks must skip such a node themselves, with the reason, and run nothing."""
    environ = {**os.environ, **fake_node_env(repo)}
    cmd = reframe_command(
        "fakegpu",
        "--dry-run",
        "-n",
        "mem_scan|p2p_pingpong",
        "--prefix",
        str(repo.parent / "dry"),
        settings="reframe_settings.py",
        checks="checks",
    )
    result = subprocess.run(cmd, cwd=repo, env=environ, capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "has 1 GPU(s): this check needs two or more" in output
    assert not list((repo.parent / "dry").rglob("rfm_job.sh")), "a job script was written for a skipped check"


@pytest.mark.long
def test_one_slow_path_is_flagged_under_its_own_name_and_nothing_else(accepted):
    """The path matrix's cells are figures of their own: one cell at 60% (the
    copy engines' device-to-host copies to the GPU's NUMA node, a path the
    path matrix alone measures) is the one figure flagged, and its path with
    it; every other cell passes."""

    logged = (accepted / "perflogs" / "fakegpu" / "default" / "path_matrix.log").read_text()
    (cell,) = sorted(set(re.findall(r"\|(gpu0_d2h_numa0_ce|gpu0_d2h_unbound_ce)\|", logged)))
    status, output, outdir = nightly(accepted, 6, GPU_MEMPATHS_FAKE_SLOWDOWN=f"path_matrix.{cell}=0.6")
    assert status == 2, output[-4000:]
    table = pd.read_csv(outdir / "compare.csv")
    flagged = table[table["verdict"] == "moved"]
    assert list(flagged["figure"]) == [cell], flagged.to_string()
    assert (table[table["test"] == "path_matrix"]["verdict"] != "unjudged").all()
    assert re.search(r"MOVED host link d2h of GPU 0, ce: ", output), output[-4000:]


@pytest.mark.long
def test_one_figure_of_a_path_many_figures_measure_flags_it_naming_the_case(accepted):
    """The SMs' device-to-host cell at 60%, where the reprex's figures of the
    same path hold: the path's median does not move, but the one case that
    did, moved again in the rerun, flags the path, named with its case."""
    logged = (accepted / "perflogs" / "fakegpu" / "default" / "path_matrix.log").read_text()
    (cell,) = sorted(set(re.findall(r"\|(gpu0_d2h_numa0_sm|gpu0_d2h_unbound_sm)\|", logged)))
    status, output, outdir = nightly(accepted, 7, GPU_MEMPATHS_FAKE_SLOWDOWN=f"path_matrix.{cell}=0.6")
    assert status == 2, output[-4000:]
    paths = pd.read_csv(outdir / "paths.csv").set_index("path")
    row = paths.loc["host link d2h of GPU 0, sm"]
    assert row["verdict"] == "moved" and abs(row["change_pct"]) < row["floor_pct"] and "figures" in row["flagged_by"]
    assert re.search(rf"a case moved: path_matrix paths=host-sm size=\S+ {cell} -40\.\d%", row["reason"])


@pytest.mark.long
def test_a_driver_upgrade_judges_the_nights_under_the_new_driver_and_names_both(accepted):
    """The fake NVML reports another driver, under which host memory runs at
    70%: the nightly's records carry the new driver, and `./suite upgrade
    driver` judges that night against the accepted runs of the old one."""
    status, output, _ = nightly(
        accepted, 8, GPU_MEMPATHS_FAKE_DRIVER="590.48.01", GPU_MEMPATHS_FAKE_SLOWDOWN="host_bandwidth=0.7"
    )
    assert status == 2, output[-4000:]
    environ = {**os.environ, **fake_node_env(accepted)}
    cmd = [sys.executable, "-m", "commands", "upgrade", "driver", "--system", "fakegpu"]
    upgrade = subprocess.run(cmd, cwd=accepted, env=environ, capture_output=True, text=True, timeout=120)
    assert upgrade.returncode == 2, upgrade.stdout + upgrade.stderr
    assert re.search(r"driver 580\.159\.04 \(4 accepted runs\) -> 590\.48\.01 \(1 night\(s\)", upgrade.stdout)
    [paths] = (accepted / "results" / "upgrades").glob("fakegpu-driver-580.159.04-to-590.48.01-paths.csv")
    moved = pd.read_csv(paths).set_index("path").query("verdict == 'moved'")
    assert {"host memory read, NUMA node 0", "host memory write, NUMA node 0"} <= set(moved.index)
    assert set(moved.index) <= {
        "host memory read, NUMA node 0",
        "host memory write, NUMA node 0",
        "host link d2h of GPU 0, ce",
        "host link h2d of GPU 0, ce",
    }
    assert (moved.loc[moved.index.str.startswith("host memory"), "change_pct"] < -25).all()


# --- records to VictoriaMetrics (experiments/metrics.py) ---------------------


@pytest.fixture(scope="module")
def victoria(tmp_path_factory):
    """VictoriaMetrics from Debian's package, on a free port of localhost."""
    binary = shutil.which("victoria-metrics")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("CI installs victoria-metrics (.ci/run)")
        yield None
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    storage = tmp_path_factory.mktemp("victoria")
    server = subprocess.Popen(
        [binary, f"-storageDataPath={storage}", f"-httpListenAddr=127.0.0.1:{port}", "-retentionPeriod=100y"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1) as answer:
                if answer.status == 200:
                    break
        except OSError:
            time.sleep(0.2)
    yield url
    server.terminate()
    server.wait(timeout=30)


def _exported(url: str, match: str, least: int = 1) -> list[dict]:
    """The series matching `match`, once the server has made them readable."""
    query = urllib.parse.urlencode({"match[]": match})
    found: list[dict] = []
    for _ in range(50):
        urllib.request.urlopen(f"{url}/internal/force_flush", timeout=5).close()
        with urllib.request.urlopen(f"{url}/api/v1/export?{query}", timeout=10) as answer:
            found = [json.loads(line) for line in answer.read().decode().splitlines() if line.strip()]
        if len(found) >= least:
            break
        time.sleep(0.2)
    return found


def _night_records(repo: Path, outdir: Path) -> pd.DataFrame:
    """The night's perflog lines (not the figures the reports read back from its curves)."""
    from judge.select import run_rows
    from reports.load import load

    frame = load([repo / "perflogs" / "fakegpu"], warn=None).frame
    night = frame[run_rows(frame, "fakegpu", [json.loads((outdir / "run.json").read_text())])]
    return night[night["source"].astype(str).str.endswith(".log")]


def test_every_record_and_the_verdict_reach_victoria_metrics(accepted, victoria, unchanged_night):
    if victoria is None:
        pytest.skip("victoria-metrics is not installed (Debian's victoria-metrics)")
    status, output, outdir = unchanged_night
    assert status == 0, output[-4000:]
    night, logged = stamp(outdir), _night_records(accepted, outdir)
    series = _exported(victoria, f'{{__name__="gpu_mempaths_figure",night="{night}"}}', least=len(logged))
    sent = {
        (s["metric"]["test"], s["metric"]["case"], s["metric"]["figure"], s["metric"]["sample"]): s["values"]
        for s in series
    }
    expected = {
        (r.test, r.case, r.figure, "median" if pd.isna(r.sample) else str(int(r.sample))): [r.value]
        for r in logged.itertuples()
    }
    assert sent.keys() == expected.keys()
    assert all(sent[k] == pytest.approx(v, rel=1e-9) for k, v in expected.items())
    labels = series[0]["metric"]
    assert labels["gpu_model"] == FAKE_MODEL and labels["system"] == "fakegpu" and labels["night"] == night
    assert {"driver_version", "cuda_runtime_version", "node", "path", "unit"} <= labels.keys()
    paths = pd.read_csv(outdir / "paths.csv")
    verdicts = _exported(victoria, f'{{__name__="gpu_mempaths_path_verdict",night="{night}"}}', least=len(paths))
    assert {v["metric"]["path"]: v["metric"]["verdict"] for v in verdicts} == dict(zip(paths["path"], paths["verdict"]))
    (exit_status,) = _exported(victoria, f'{{__name__="gpu_mempaths_night_exit",night="{night}"}}')
    assert exit_status["values"] == [0] and exit_status["metric"]["meaning"] == "as accepted"
    # The dashboard's every panel finds its path's nights (no Grafana here: its queries, run on the server).
    from reports.grafana import dashboard, partition_panels

    board = dashboard("fakegpu", paths[["path", "kind"]])
    now = time.time()
    partitions = {p["title"] for p in partition_panels(0, 0)}  # a partition's nights: tests/test_partition_slurm.py
    for panel in (p for p in board["panels"] if p["type"] == "timeseries" and p["title"] not in partitions):
        expr = panel["targets"][0]["expr"].replace("$system", "fakegpu")
        query = urllib.parse.urlencode({"query": expr, "start": now - 7200, "end": now + 600, "step": "30s"})
        with urllib.request.urlopen(f"{victoria}/api/v1/query_range?{query}", timeout=10) as answer:
            result = json.loads(answer.read())["data"]["result"]
        assert result, f"no nights for the panel {panel['title']}"


def test_a_server_that_is_down_loses_no_record_and_is_named(repo, first_night):
    status, output, outdir, down, _ = first_night
    assert status == 3, output[-4000:]  # nothing accepted yet: not judged, as without an endpoint
    # ReFrame tries the server when it starts and leaves the handler out, naming it.
    host_port = down.split("/")[2]
    assert f"httpjson: could not connect to server {host_port}" in output
    assert len(_night_records(repo, outdir)) > 0


def test_a_first_night_holds_every_figure_to_a_physical_bound(repo, first_night):
    """Nothing is accepted on the fake node's first night, so no reference
    has a value; yet every rate it judges has its limit and every time its
    floor from the node's facts (experiments/references.py's bounds alone),
    which ReFrame held them to: a figure beyond one fails its check (exit 1)."""
    from judge import verdict
    from judge.select import run_rows
    from reports.load import load
    from systems.detect import _cpu

    frame = load(repo / "perflogs" / "fakegpu", warn=None).frame
    run = json.loads((first_night[2] / "run.json").read_text())
    values = verdict.attach_paths(
        verdict.run_values(frame, {"first": run_rows(frame, "fakegpu", [run])}, physical=True)
    )
    units = values["unit"].map(verdict.direction).notna() & (values["unit"] != "fraction")
    judged = values[values["path"].fillna("").ne("") & units & (values["unit"] != "x")]
    unbounded = judged[judged["bound"].isna()]
    assert run.get("unbounded_paths", []) == verdict.unbounded_paths(judged)  # the night names them
    if "memory_bandwidth" not in _cpu(Path("/sys")):  # a CPU systems/cpus/memory.yaml does not list: host memory's
        unbounded = unbounded[unbounded["test"] != "host_bandwidth"]
    assert len(judged) >= 90 and unbounded.empty, unbounded[["test", "case", "figure"]].to_string()
