"""Dry runs of the GDRCopy checks and of copy_latency on a node with gdrdrv.

No declared system has gdrdrv (not DGX OS by default, not our H100 and H200),
so the test declares one in a temporary systems directory: the seed's node
(GDRCopy's README), eight Tesla V100-SXM2-32GB on PCIe Gen3 x16 behind two
sockets, one NUMA node each, GPU 0 behind socket 0. Its partition
'installed' names a GDRCopy installation (gdrcopy_prefix); 'spack-built'
names none, so Spack environments build Spack's gdrcopy and the others skip.
"""

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from runner.rfm import reframe_command

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
SYSTEM = "gdr-seed"

NODE = {
    "cpu": {
        "arch": "broadwell",
        "model": "Intel Xeon E5-2698 v4",
        "sockets": 2,
        "cores_per_socket": 20,
        "threads_per_core": 2,
    },
    "numa_nodes": [0, 1],
    "libnuma": True,
    "host_memory": "512 GiB",
    "gpus": {
        "count": 8,
        "model": "Tesla V100-SXM2-32GB",
        "memory": "32 GiB",
        "compute_capability": "7.0",
        "numa_affinity": [0, 0, 0, 0, 1, 1, 1, 1],
        "hbm_bandwidth": "900 GB/s",
    },
    "host_link": {"type": "pcie", "generation": 3, "width": 16},
    "gpu_link": {"type": "nvlink", "generation": 2, "links_per_gpu": 6},
    "addressing": "none",
    "gdrdrv": True,
}


def _partition(name: str, **extra) -> dict:
    return {
        "name": name,
        "description": f"the seed's node ({name})",
        "scheduler": "slurm",
        "launcher": "srun",
        "access": ["--partition=gpu"],
        "gpu_resource": "--gres=gpu:{num_gpus_per_node}",
        "environments": ["cuda", "spack"],
        "cuda_archs": [70],
        "node": NODE,
        **extra,
    }


def _system() -> dict:
    return {
        "name": SYSTEM,
        "description": "GDRCopy's seed node: 8 Tesla V100-SXM2-32GB, PCIe Gen3 x16, 2 sockets, gdrdrv",
        "hostnames": [],
        "environments": [
            {
                "name": "cuda",
                "cc": "gcc",
                "cxx": "g++",
                "nvcc": "/usr/local/cuda/bin/nvcc",
                "features": ["cuda"],
                "cmake_options": ["-DGPU_MEMPATHS_WITH_GDRCOPY=ON"],
            },
            {"name": "spack", "features": ["cuda", "spack"]},
        ],
        "partitions": [_partition("installed", gdrcopy_prefix="/opt/gdrcopy"), _partition("spack-built")],
    }


@pytest.fixture(scope="module")
def dryrun(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gdrcopy")
    systems = tmp / "systems"
    systems.mkdir()
    (systems / f"{SYSTEM}.yaml").write_text(yaml.safe_dump(_system(), sort_keys=False))
    settings = tmp / "settings.py"
    settings.write_text(
        "import sys\n"
        "from pathlib import Path\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from rfmconfig.settings import site_configuration as _site\n"
        f"site_configuration = _site(Path({str(systems)!r}))\n"
    )
    cmd = reframe_command(
        SYSTEM,
        "--prefix",
        str(tmp),
        "--perflogdir",
        str(tmp / "perflogs"),
        "-n",
        "gdrcopy_|copy_latency",
        "--dry-run",
        settings=settings,
    )
    env = dict(os.environ, RFM_RESOLVE_MODULE_CONFLICTS="n")
    result = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return tmp, result.stdout


def _scripts(tmp: Path, partition: str, environ: str, test: str, name: str = "rfm_job.sh") -> list:
    found = sorted((tmp / "stage" / SYSTEM / partition / environ).glob(f"{test}*/{name}"))
    return [p.read_text() for p in found]


def _srun_lines(tmp: Path, partition: str, environ: str, test: str) -> list:
    return sorted(
        line
        for script in _scripts(tmp, partition, environ, test)
        for line in script.splitlines()
        if line.startswith("srun ")
    )


def _tests_run(tmp: Path, partition: str, environ: str, test: str) -> list:
    """What each job runs under the NVML watch: GDRCopy's test, `repeats` times, and the repeats."""
    found = []
    for line in _srun_lines(tmp, partition, environ, test):
        match = re.fullmatch(
            r"srun --cpus-per-task=40 --gres=gpu:1 \S+ -m systems\.watch --allow none -- "
            r"bash -c 'for repeat in \$\(seq (\d+)\); "
            r'do echo "Repeat: \$repeat of \1"; (.*) \|\| exit \$\?; done\'',
            line,
        )
        assert match, line
        found.append((match[2], int(match[1])))
    return found


def test_gdrcopy_from_the_systems_installation(dryrun):
    tmp, _ = dryrun
    jobs = _scripts(tmp, "installed", "cuda", "gdrcopy_copybw")
    assert jobs
    for job in jobs:
        assert "export LD_LIBRARY_PATH=/opt/gdrcopy/lib64:/opt/gdrcopy/lib:$LD_LIBRARY_PATH" in job
        # GDRCopy 2.4 and later name the test gdrcopy_copybw, older ones copybw.
        assert "export gdrcopy_test=/opt/gdrcopy/bin/gdrcopy_copybw\n" in job
        assert '[ -x "$gdrcopy_test" ] || gdrcopy_test=/opt/gdrcopy/bin/copybw\n' in job
        assert "#SBATCH --gres=gpu:1" in job


def test_copybw_bound_to_the_gpus_node_and_to_the_other_socket(dryrun):
    tmp, _ = dryrun
    # memory=device reaches the test as its allocation function.
    assert _tests_run(tmp, "installed", "cuda", "gdrcopy_copybw") == [
        (f'numactl -N {node} -l "$gdrcopy_test" -d 0 -s {size} -o 0 -c {size} -a cuMemAlloc', 5)
        for node in (0, 1)
        for size in (131072, 65536)
    ]


def test_copylat_apiperf_and_sanity_command_lines(dryrun):
    tmp, _ = dryrun
    assert _tests_run(tmp, "installed", "cuda", "gdrcopy_copylat") == [
        (f'numactl -N {node} -l "$gdrcopy_test" -d 0 -s 16777216 -a cuMemAlloc -c', 5) for node in (0, 1)
    ]
    assert _tests_run(tmp, "installed", "cuda", "gdrcopy_apiperf") == [
        (f'numactl -N {node} -l "$gdrcopy_test" -d 0 -s 1048576', 5) for node in (0, 1)
    ]
    assert _tests_run(tmp, "installed", "cuda", "gdrcopy_sanity") == [
        (f'numactl -N {node} -l "$gdrcopy_test"', 1) for node in (0, 1)
    ]
    for job in _scripts(tmp, "installed", "cuda", "gdrcopy_copylat"):
        assert "export gdrcopy_test=/opt/gdrcopy/bin/gdrcopy_copylat\n" in job


def test_every_job_prints_the_libgdrapi_its_test_loads(dryrun):
    tmp, _ = dryrun
    # GDRCopy's tests print no version: the file name of their libgdrapi gives it.
    line = 'echo "libgdrapi: $(ldd "$gdrcopy_test" | awk \'$1 ~ /^libgdrapi/ {print $3}\' | xargs -r readlink -e)"\n'
    for test in ("gdrcopy_sanity", "gdrcopy_copybw", "gdrcopy_copylat", "gdrcopy_apiperf"):
        jobs = _scripts(tmp, "installed", "cuda", test)
        assert jobs
        for job in jobs:
            assert line in job
            assert job.index(line) < job.index("\nsrun ")


def test_an_installation_named_by_the_system_needs_no_build(dryrun):
    tmp, _ = dryrun
    (build,) = _scripts(tmp, "installed", "spack", "GdrCopyBuild", "rfm_build.sh")
    assert "nothing to build: GDRCopy from /opt/gdrcopy" in build
    assert "spack" not in build.replace("GdrCopyBuild", "")
    for job in _scripts(tmp, "installed", "spack", "gdrcopy_apiperf"):
        assert "export gdrcopy_test=/opt/gdrcopy/bin/gdrcopy_apiperf\n" in job


def test_spack_environments_build_spacks_gdrcopy(dryrun):
    tmp, _ = dryrun
    (build,) = _scripts(tmp, "spack-built", "spack", "GdrCopyBuild", "rfm_build.sh")
    assert f"spack env create -d rfm_spack_env {REPO / 'spack' / 'gdrcopy.yaml'}" in build
    assert f"export GPU_MEMPATHS_ROOT={REPO}" in build
    assert f"export GPU_MEMPATHS_SYSTEM={SYSTEM}" in build
    assert "spack -e rfm_spack_env add gdrcopy\n" in build
    assert "spack -e rfm_spack_env install --fail-fast" in build
    assert 'ln -sfn "$(spack -e rfm_spack_env location -i gdrcopy)" gdrcopy' in build
    jobs = _scripts(tmp, "spack-built", "spack", "gdrcopy_copylat")
    assert jobs
    for job in jobs:
        found = re.search(r"^export gdrcopy_test=(\S+)/GdrCopyBuild_\w+/gdrcopy/bin/gdrcopy_copylat$", job, re.M)
        assert found and found[1] == str(tmp / "stage" / SYSTEM / "spack-built" / "spack")


def test_what_cannot_run_is_skipped_with_the_reason(dryrun):
    tmp, out = dryrun
    assert not _scripts(tmp, "spack-built", "cuda", "gdrcopy_sanity")
    assert "[no GDRCopy installation for gdr-seed:spack-built+cuda: name one with gdrcopy_prefix" in out
    # GDRCopy takes no managed memory, and its tests have no option for it: no such case exists.
    assert "%memory=device" in out
    assert "managed" not in out


def test_small_copy_latency_adds_the_gdrcopy_leg_where_gdrdrv_is_and_the_build_has_it(dryrun):
    tmp, _ = dryrun
    (line,) = _srun_lines(tmp, "installed", "cuda", "copy_latency")
    assert line.startswith("srun --cpus-per-task=40 ")
    assert "bin/copy_latency --device 0 --methods pageable,pinned,async,zerocopy,gdrcopy --directions h2d,d2h" in line
    assert line.endswith("--numa-node 0")
    # The Spack environment builds gpu-mempaths without +gdrcopy: no leg to ask for.
    (line,) = _srun_lines(tmp, "spack-built", "spack", "copy_latency")
    assert "--methods pageable,pinned,async,zerocopy --directions" in line


def test_gdrcopy_prefix_is_an_absolute_path():
    from systems import SystemDataError, validate

    system = _system()
    validate(system, "gdr-seed.yaml")
    system["partitions"][0]["gdrcopy_prefix"] = "opt/gdrcopy"
    with pytest.raises(SystemDataError, match=r"partitions\[0\]\.gdrcopy_prefix: 'opt/gdrcopy' does not match"):
        validate(system, "gdr-seed.yaml")
