"""A partition's night under LSF for real, minus LSF: `bsub` runs the job
over the nodes here, and `jsrun -n 4 -r 1` starts its four tasks each in a
UTS namespace of its own, under its own host name (as four nodes would),
so that each task's ReFrame, on its local scheduler, logs its own node.
One node's host memory at half speed: that node alone is named.

Needs root (unshare --uts), as CI has; elsewhere skipped with that reason.
"""

import json
import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest
import yaml
from test_fake_gpu import FAKE_SYSTEM, fake_node_env, make_repo

HOSTS = ["h1", "h2", "h3", "h4"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.long,  # a partition's nights: CI runs ReFrame through Slurm in tests/test_ci_slurm.py
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare, as CI has"
    ),
]

SYSTEM = {
    **FAKE_SYSTEM,
    "name": "fakelsf",
    "description": "Four fake-GPU nodes behind a pretend LSF (tests/test_partition_lsf.py)",
    "partitions": [
        {
            "name": "batch",
            "description": "The four fake nodes",
            "scheduler": "lsf-nnodes",
            "launcher": "local",
            "environments": ["gnu"],
            "max_jobs": 4,
        }
    ],
}

#: LSF as the runner uses it: bsub runs the job at once on the hosts it asks for (-m), else on all four, named
#: in LSB_MCPU_HOSTS (the launch node first) as LSF does.
BSUB = f"""#!/bin/bash
cat > "$TMPDIR/job.sh"
hosts=$(sed -n 's/^#BSUB -m "\\(.*\\)"/\\1/p' "$TMPDIR/job.sh")
export LSB_MCPU_HOSTS="batch1 1 $(for h in ${{hosts:-{" ".join(HOSTS)}}}; do printf '%s 42 ' $h; done)"
bash "$TMPDIR/job.sh" >> "$TMPDIR/job.out" 2>&1
echo "Job <4242> is submitted to default queue <batch>."
"""
BWAIT = "#!/bin/bash\nexit 0\n"
#: jsrun -n N ... CMD: N tasks at once, the k-th on the job's k-th host, in a UTS namespace of its own.
JSRUN = """#!/bin/bash
n=1
while [[ $# -gt 0 && $1 == -* ]]; do
    case $1 in -n) n=$2; shift 2 ;; -r|-a|-c|-g|--bind) shift 2 ;; *) shift ;; esac
done
hosts=($(echo "$LSB_MCPU_HOSTS" | awk '{for (i = 3; i <= NF; i += 2) print $i}'))
for ((k = 0; k < n; k++)); do
    export GPU_MEMPATHS_FAKE_NODE=${hosts[k]}
    unshare --uts bash -c 'hostname "$GPU_MEMPATHS_FAKE_NODE" && exec "$@"' jsrun "$@" &
done
wait
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    copy = make_repo(tmp_path_factory.mktemp("fakelsf"))
    (copy / "systems" / "fakelsf.yaml").write_text(yaml.safe_dump(SYSTEM, sort_keys=False))
    shims = copy.parent / "bin"
    shims.mkdir()
    for name, text in {"bsub": BSUB, "bwait": BWAIT, "jsrun": JSRUN}.items():
        (shims / name).write_text(text)
        (shims / name).chmod(0o755)
    return copy


def test_one_job_over_four_nodes_names_the_slow_one(repo):
    tmp = repo.parent / "lsf"
    tmp.mkdir()
    environ = {
        **os.environ,
        **fake_node_env(repo),
        "PATH": f"{repo.parent / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "TMPDIR": str(tmp),
        "HOME": str(repo.parent / "home"),
        "GPU_MEMPATHS_VENV": sys.prefix,  # the job's ./suite runs this Python's venv, as a site's would
        "GPU_MEMPATHS_FAKE_SEED": "5",
        "GPU_MEMPATHS_FAKE_SLOWDOWN": "h2:host_bandwidth=0.5",
    }
    sources = repo / "tests" / "fakegpu" / "src"
    cmd = [sys.executable, "-m", "commands", "nightly", "--system", "fakelsf", "--nodes", "4"]
    cmd += [
        "--",
        "-n",
        "host_bandwidth|node_health",
        "-S",
        "host_bandwidth.runs=5",
        "-S",
        f"SuiteBuild.sourcesdir={sources}",
    ]
    done = subprocess.run(cmd, cwd=repo, env=environ, capture_output=True, text=True, timeout=420)
    output = done.stdout + done.stderr
    job = (tmp / "job.out").read_text() if (tmp / "job.out").exists() else "(no job output)"
    (outdir,) = (repo / "results" / "nightly" / "fakelsf").glob("*")
    run = json.loads((outdir / "run.json").read_text())
    assert done.returncode == 2, output[-4000:] + job[-4000:]
    assert "#BSUB -nnodes 4" in (outdir / "partition-job.sh").read_text()
    assert run["nodes"] == HOSTS and run["counts"]["reported"] == 4
    assert [row["node"] for row in run["drain"]] == ["h2"] and "host memory" in run["drain"][0]["reasons"][0]
    assert sorted(p.name for p in (repo / "perflogs" / "fakelsf" / "nodes").iterdir()) == HOSTS
    cells = pd.read_csv(outdir / "cells.csv")
    named = cells[cells["verdict"] == "node fault"]
    assert named["confirmed"].all() and (named["rerun_vs_siblings_pct"] < -40).all()  # the second job, on h2 alone
