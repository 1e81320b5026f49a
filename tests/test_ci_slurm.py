"""The suite's CPU checks, run for real through a one-node Slurm cluster on
localhost (.ci/slurm), as the `ci-slurm` system: submission with sbatch,
launch with srun, polling with squeue, and perflogs written.

Needs Slurm and munge installed (.ci/run installs them) and root, as CI has;
elsewhere it is skipped with that reason.
"""

import csv
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from runner.rfm import reframe_command

REPO = Path(__file__).resolve().parent.parent
SLURM = REPO / ".ci" / "slurm"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("slurmctld") is None or os.geteuid() != 0,
        reason="needs root and Slurm (apt-get install slurmctld slurmd slurm-client munge), as CI has",
    ),
]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    rundir = tmp_path_factory.mktemp("slurm")
    try:
        # A failed start may leave some daemons up: stop them either way.
        subprocess.run(["bash", str(SLURM / "start.sh"), str(rundir)], check=True, timeout=120)
        yield {**os.environ, "SLURM_CONF": str(rundir / "slurm.conf")}
    finally:
        subprocess.run(["bash", str(SLURM / "stop.sh"), str(rundir)], check=False, timeout=120)


@pytest.fixture(scope="module")
def run(slurm, tmp_path_factory):
    prefix = tmp_path_factory.mktemp("rfm")
    cmd = reframe_command(
        "ci-slurm",
        "--prefix",
        str(prefix),
        "--perflogdir",
        str(prefix / "perflogs"),
        "-S",
        "host_bandwidth.buffer_size=256M",
        "-S",
        "host_bandwidth.runs=3",
        "-r",
    )
    result = subprocess.run(cmd, cwd=prefix, env=slurm, capture_output=True, text=True, timeout=900)
    return prefix, result


def test_suite_passes_through_slurm(run):
    _, result = run
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert "[  PASSED  ]" in result.stdout.replace("\x1b[32m", "").replace("\x1b[0m", "")


def test_host_bandwidth_ran_as_a_slurm_job(run):
    prefix, _ = run
    job = next((prefix / "output" / "ci-slurm" / "cpu" / "gnu").glob("host_bandwidth*/rfm_job.sh")).read_text()
    assert "#SBATCH --partition=cpu" in job
    assert any(line.startswith("srun ") and "bin/host_bandwidth" in line for line in job.splitlines())


def test_perflog_has_every_numa_node(run):
    prefix, _ = run
    perflog = prefix / "perflogs" / "ci-slurm" / "cpu" / "host_bandwidth.log"
    rows = list(csv.DictReader(perflog.open(), delimiter="|"))
    variables = {row["perf_var"]: float(row["perf_value"]) for row in rows}
    assert {"read_bw_node0", "write_bw_node0"} <= variables.keys()
    assert all(value > 0 for value in variables.values())
    assert {row["system"] for row in rows} == {"ci-slurm"}


def test_gpu_checks_say_why_they_are_skipped(run):
    _, result = run
    skipped = [line for line in result.stdout.splitlines() if "SKIP" in line and "um_bandwidth" in line]
    assert skipped, "the GPU checks should be listed as skipped"
    assert all(
        "no GPU on ci-slurm:cpu" in line or "cannot be touched" in line or "read-mostly" in line for line in skipped
    )


def test_health_runs_on_every_node_of_the_partition(slurm, tmp_path):
    cmd = reframe_command(
        "ci-slurm",
        "--prefix",
        str(tmp_path),
        "--perflogdir",
        str(tmp_path / "perflogs"),
        "-t",
        "health",
        "--distribute=all",
        "-r",
    )
    result = subprocess.run(cmd, cwd=tmp_path, env=slurm, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    node = subprocess.run(["hostname", "-s"], capture_output=True, text=True).stdout.strip()
    jobs = list((tmp_path / "output" / "ci-slurm" / "cpu" / "gnu").glob("node_health*/rfm_job.sh"))
    assert len(jobs) == 1
    script = jobs[0].read_text()
    assert f"#SBATCH --nodelist={node}" in script
    assert "Health: " in (jobs[0].parent / "rfm_job.out").read_text()
