"""A partition's night for real: four Slurm nodes on this one host (.ci/slurm
with SLURM_CI_NODES=4, each its own slurmd), the fake GPU on each, the
partition's nightly through ReFrame's --distribute.

A clean night has nobody to drain; two such nights' nodes are accepted as
the kind's runs; a night with one node's host memory at half speed names that node
alone, its rerun confirming; a night with every node's at 70% is one change of the partition per
host-memory path and names no node.

Needs root and Slurm, as CI has; elsewhere skipped with that reason.
"""

import json
import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest
import yaml
from test_fake_gpu import FAKE_SYSTEM, _exported, fake_node_env, make_repo, victoria  # noqa: F401 (a fixture)

REPO = __import__("pathlib").Path(__file__).resolve().parent.parent
SLURM = REPO / ".ci" / "slurm"
NODES = ["ci1", "ci2", "ci3", "ci4"]
CHECKS = ["-n", "host_bandwidth|node_health", "-S", "host_bandwidth.runs=5"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.long,  # a partition's nights: CI runs ReFrame through Slurm in tests/test_ci_slurm.py
    pytest.mark.skipif(
        shutil.which("slurmctld") is None or os.geteuid() != 0,
        reason="needs root and Slurm (apt-get install slurmctld slurmd slurm-client munge), as CI has",
    ),
]

SYSTEM = {
    **FAKE_SYSTEM,
    "name": "fakeslurm",
    "description": "Four fake-GPU nodes behind a Slurm on localhost (tests/test_partition_slurm.py)",
    "partitions": [
        {
            "name": "gpu",
            "description": "The four fake nodes",
            "scheduler": "squeue",
            "launcher": "srun",
            "access": ["--partition=cpu"],
            "environments": ["gnu"],
            "max_jobs": 16,
            "time_limit": "5m",
        }
    ],
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    rundir = tmp_path_factory.mktemp("slurm4")
    # Its own ports: tests/test_ci_slurm.py's one-node cluster may run beside it.
    env = {**os.environ, "SLURM_CI_NODES": str(len(NODES)), "SLURM_CI_PORT": "7817"}
    try:
        subprocess.run(["bash", str(SLURM / "start.sh"), str(rundir)], check=True, timeout=120, env=env)
        yield str(rundir / "slurm.conf")
    finally:
        subprocess.run(["bash", str(SLURM / "stop.sh"), str(rundir)], check=False, timeout=120)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    copy = make_repo(tmp_path_factory.mktemp("fakeslurm"))
    (copy / "systems" / "fakeslurm.yaml").write_text(yaml.safe_dump(SYSTEM, sort_keys=False))
    return copy


def night(repo, conf, seed, **env):
    """A partition's nightly over the four nodes: its exit status, output and run.json."""
    environ = {
        **os.environ,
        **fake_node_env(repo),
        "HOME": str(repo.parent / "home"),
        "SLURM_CONF": conf,
        "GPU_MEMPATHS_FAKE_SEED": str(seed),
        **env,
    }
    sources = repo / "tests" / "fakegpu" / "src"
    cmd = [sys.executable, "-m", "commands", "nightly", "--system", "fakeslurm", "--nodes", "all"]
    cmd += ["--", *CHECKS, "-S", f"SuiteBuild.sourcesdir={sources}"]
    before = set((repo / "results" / "nightly" / "fakeslurm").glob("*"))
    done = subprocess.run(cmd, cwd=repo, env=environ, capture_output=True, text=True, timeout=420)
    (outdir,) = set((repo / "results" / "nightly" / "fakeslurm").glob("*")) - before
    return done.returncode, done.stdout + done.stderr, outdir


@pytest.fixture(scope="module")
def accepted(repo, cluster):
    runs = []
    for seed in (1, 11):  # two clean nights: one says nothing of how nights differ
        status, output, outdir = night(repo, cluster, seed)
        run = json.loads((outdir / "run.json").read_text())
        assert status == 3, output[-5000:]  # judged against its siblings, nothing accepted yet
        assert run["nodes"] == NODES and run["drain"] == [] and run["counts"]["reported"] == 4, output[-3000:]
        assert "node fault" not in (outdir / "cells.csv").read_text()
        runs.append(run)
    accept = [sys.executable, "-m", "commands", "accept", *(r["stamp"] for r in runs), "--system", "fakeslurm"]
    done = subprocess.run(accept, cwd=repo, env={**os.environ, **fake_node_env(repo)}, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    stamps = [
        r["stamp"]
        for r in json.loads((repo / "perflogs" / "fakeslurm" / "accepted.json").read_text())["kinds"].popitem()[1][
            "runs"
        ]
    ]
    assert stamps == [f"{r['stamp']}@{n}" for r in runs for n in NODES]
    return repo


def test_one_slow_node_is_named_alone(accepted, cluster, victoria):  # noqa: F811 (the fixture imported)
    metrics = {"GPU_MEMPATHS_METRICS_URL": f"{victoria}/api/v1/import"} if victoria else {}
    slow = {"GPU_MEMPATHS_FAKE_SLOWDOWN": "ci3:host_bandwidth=0.5", **metrics}
    status, output, outdir = night(accepted, cluster, 2, **slow)
    run = json.loads((outdir / "run.json").read_text())
    assert status == 2, output[-5000:]
    assert [row["node"] for row in run["drain"]] == ["ci3"]
    assert run["rerun"]["nodes"] == ["ci3"]  # confirmed by measuring ci3 again, its siblings' first values kept
    cells = pd.read_csv(outdir / "cells.csv")
    named = cells[cells["verdict"] == "node fault"]
    assert set(named["node"]) == {"ci3"} and named["confirmed"].all() and (named["rerun_vs_siblings_pct"] < -40).all()
    assert "host memory" in run["drain"][0]["reasons"][0]
    assert run["fleet_changes"] == []
    assert (outdir / "drain.txt").read_text().split("\t")[0] == "ci3"
    assert (outdir / "index.html").exists() and (outdir / "node-ci3.html").exists()
    if victoria:
        _the_dashboard_shows_the_path_across_the_nodes(victoria, run["stamp"])


def test_a_slowdown_of_every_node_is_one_fleet_change(accepted, cluster):
    status, output, outdir = night(accepted, cluster, 3, GPU_MEMPATHS_FAKE_SLOWDOWN="host_bandwidth=0.7")
    run = json.loads((outdir / "run.json").read_text())
    assert status == 2, output[-5000:]
    assert run["drain"] == []
    assert run["fleet_changes"] and all(line.startswith("GMP-221 host memory") for line in run["fleet_changes"])
    assert all("4 of 4 nodes" in line for line in run["fleet_changes"])


def _the_dashboard_shows_the_path_across_the_nodes(url: str, stamp: str) -> None:
    """The Grafana row of a partition's nights, its queries run on the server: every node's deviation on a
    host-memory path (the slow one among them), and the partition's change by path."""
    from reports.grafana import partition_panels

    _, across, fleet = partition_panels(0, 0)
    path = "host memory read, NUMA node 0"
    for panel, least in ((across, 4), (fleet, 1)):
        expr = panel["targets"][0]["expr"].replace("$system", "fakeslurm").replace("$path", path)
        found = _exported(url, expr.replace("}", f',night="{stamp}"}}'), least=least)
        assert len(found) >= least, (panel["title"], found)
    nodes = {
        s["metric"]["node"]: s["values"][-1]
        for s in _exported(
            url, across["targets"][0]["expr"].replace("$system", "fakeslurm").replace("$path", path), least=4
        )
    }
    assert set(nodes) == set(NODES) and min(nodes, key=nodes.get) == "ci3"
