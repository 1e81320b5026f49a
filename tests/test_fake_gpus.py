"""A node of eight GPUs, one of them slow, through ReFrame on the fake GPU.

The fake NVML shows eight H100s joined through NVSwitch
(GPU_MEMPATHS_FAKE_GPUS=8) and the fake path_matrix measures every GPU's
host link, all of them at once, every ordered pair and the latencies
(tests/fakegpu/src/fake_program.py). A first night on such a node has no
baseline of its kind: each GPU held against its siblings of the same run
still names the one whose host link is slow (the nightly's rerun confirming
it), and nothing of the seven others; a night with nothing slow names no GPU.
A module of its own, so that it runs beside tests/test_fake_gpu.py.
"""

import json
import subprocess

import pandas as pd
import pytest
import yaml
from test_fake_gpu import FAKE_SYSTEM, make_repo, nightly

from reports.html import verdict_section
from runner import nightly as the_nightly
from runner.pages import night_table

pytestmark = pytest.mark.slow

EIGHT = {**FAKE_SYSTEM, "name": "fakegpu8", "description": "Eight H100s through NVSwitch, pretended (tests/)"}
CHECKS = ["-n", "path_matrix|node_health"]
SLOW_GPU = 5


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    copy = make_repo(tmp_path_factory.mktemp("fakegpus"))
    (copy / "systems" / "fakegpu8.yaml").write_text(yaml.safe_dump(EIGHT, sort_keys=False))
    return copy


def eight_gpu_night(repo, seed: int, **env):
    return nightly(
        repo, seed, "--confirm-later", "0", checks=CHECKS, system="fakegpu8", GPU_MEMPATHS_FAKE_GPUS="8", **env
    )


@pytest.mark.long
def test_one_slow_gpu_of_eight_is_named_by_its_siblings_on_a_first_night(repo):
    status, output, outdir = eight_gpu_night(repo, 11, GPU_MEMPATHS_FAKE_SLOWDOWN=f"path_matrix.gpu{SLOW_GPU}=0.6")
    run = json.loads((outdir / "run.json").read_text())
    assert status == 2 and run["unjudged_reasons"] == ["no-baseline"], output[-4000:]
    assert run["kind"] == "8 x NVIDIA H100 80GB HBM3 (fake)" and "rerun" in run  # confirmed by its rerun
    found = pd.read_csv(outdir / "siblings.csv")
    lagging = set(found.loc[found["verdict"] == "lagging", "path"])
    own = {
        f"host link {d} of GPU {SLOW_GPU}{at_once}, {e}"
        for d in ("h2d", "d2h")
        for e in ("ce", "sm")
        for at_once in ("", " with all GPUs at once")
    }
    assert own | {f"host link latency of GPU {SLOW_GPU}, SM loads"} <= lagging
    assert all(f"GPU {SLOW_GPU}" in path for path in lagging)
    assert (found.loc[found["verdict"] == "lagging", "vs_siblings_pct"].between(-45, -35)).sum() >= len(own)
    others = found[~found["path"].str.contains(f"GPU {SLOW_GPU}")]
    assert len(others) > 300 and (others["verdict"] == "pass").all()  # the 42 pairs without it among them
    assert f"LAGGING behind its siblings: host link h2d of GPU {SLOW_GPU}, ce" in output
    # Nobody else used GPU 5: its lag is its own, and the node is to be drained for it.
    assert run["contention"] == {"processes": [], "paths": {}} and run["not_drained"] == []
    assert any(f"host link h2d of GPU {SLOW_GPU}, ce" in reason for reason in run["drain"])
    assert (outdir / "drain.txt").read_text().split("\t")[1].startswith("GMP-201 behind its siblings")
    assert "no later measure" not in output


def test_a_slow_gpu_that_another_process_used_is_contended_not_drained(repo):
    """A neighbour on GPU 5 (a process of the test's own, which the fake NVML lists on GPU 5 while the checks
    run), GPU 5 as slow as above."""
    with subprocess.Popen(["sleep", "600"]) as neighbour:
        try:
            status, output, outdir = eight_gpu_night(
                repo,
                13,
                GPU_MEMPATHS_FAKE_SLOWDOWN=f"path_matrix.gpu{SLOW_GPU}=0.6",
                GPU_MEMPATHS_FAKE_PROCESSES=f"{SLOW_GPU}={neighbour.pid}",
            )
        finally:
            neighbour.kill()
    run = json.loads((outdir / "run.json").read_text())
    assert status == 2, output[-4000:]  # the GPU is behind tonight: not as accepted, but not a fault to drain
    [seen] = run["contention"]["processes"]
    assert (seen["gpu"], seen["pid"], seen["name"], seen["tests"]) == (
        SLOW_GPU,
        neighbour.pid,
        "sleep",
        ["path_matrix"],
    )
    who = f"pid {neighbour.pid} (sleep, 1.0 GiB) on GPU {SLOW_GPU}"
    found = night_table(outdir / "siblings.csv")  # as the night's page reads it back
    lagging = found[found["verdict"] == "lagging"]
    assert len(lagging) >= 8 and lagging["contended_by"].str.startswith(who).all()
    assert (found.loc[found["verdict"] == "pass", "contended_by"] == "").all()
    assert run["drain"] == [] and (outdir / "drain.txt").read_text() == ""
    assert len(run["not_drained"]) == len(lagging) and "GPU 5's PCIe 48.0 GB/s in, 48.0 out" in run["not_drained"][0]
    assert f"CONTENDED, not drained: {who}" in output and "ANOTHER PROCESS on GPU 5" in output
    assert "another process used through it: no later measure" in output  # its load is seen: nothing to wait for
    _, lags, findings, step = the_nightly.explained(run, None, found)
    page = "".join(
        verdict_section(run, None, [], lags=lags, found=findings, step=step)
    )  # the night's page opens with it
    assert "Contended, not drained" in page and f"pid {neighbour.pid} (sleep, 1.0 GiB)" in page
    assert "another process on its GPUs (not drained)" in page and "Next step: rerun" in page


@pytest.mark.long
def test_eight_gpus_with_nothing_slow_name_no_gpu(repo):
    status, output, outdir = eight_gpu_night(repo, 12)
    assert status == 3, output[-4000:]  # nothing accepted of this kind: not judged, and nothing behind
    found = pd.read_csv(outdir / "siblings.csv")
    assert (found["verdict"] == "pass").all() and "rerun" not in json.loads((outdir / "run.json").read_text())
    assert "nightly: plan: 8 case(s)" in output  # the eight GPUs' path matrices, planned before they run
