"""ReFrame's dry run for the declared systems: the job and build scripts it
generates (LSF and jsrun on summit, Slurm and srun elsewhere, CMake or Spack)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rfmconfig import settings as rfm
from runner.rfm import RUN_REFRAME, reframe_command
from systems import data

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent


#: The project the summit jobs are charged to in these dry runs.
PROJECT = "ABC123"


def _reframe(
    tmp_path: Path, system: str, *extra: str, account: str | None = PROJECT, check: bool = True, lmod: bool = True
):
    env = dict(os.environ)
    if not lmod:
        env.pop("LMOD_CMD", None)
    # Dry runs happen away from the site: modules are named, not resolved.
    env["RFM_RESOLVE_MODULE_CONFLICTS"] = "n"
    env.pop("GPU_MEMPATHS_ACCOUNT", None)
    if account:
        env["GPU_MEMPATHS_ACCOUNT"] = account
    cmd = reframe_command(
        system, "--prefix", str(tmp_path), "--perflogdir", str(tmp_path / "perflogs"), "--dry-run", *extra
    )
    result = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 or not check, result.stdout + result.stderr
    return result


def _script(tmp_path: Path, system: str, partition: str, environ: str, test: str, name: str) -> str:
    matches = sorted((tmp_path / "stage" / system / partition / environ).glob(f"{test}*/{name}"))
    assert matches, f"no {name} for {test} on {system}:{partition}+{environ}"
    return matches[0].read_text()


@pytest.fixture(scope="module")
def summit(tmp_path_factory):
    if not os.environ.get("LMOD_CMD"):
        pytest.skip("Lmod is not set up (summit names its modules through Lmod); CI installs it")
    tmp = tmp_path_factory.mktemp("summit")
    _reframe(tmp, "summit")
    return tmp


@pytest.fixture(scope="module", params=["dgx-a100", "x86-pcie"])
def slurm_system(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(request.param)
    _reframe(tmp, request.param)
    return request.param, tmp


def _bsub(job: str) -> list[str]:
    return [line.removeprefix("#BSUB ") for line in job.splitlines() if line.startswith("#BSUB")]


def _jsrun(job: str) -> dict:
    """The jsrun line's resource-set options, as OLCF's jsrun Quick Start
    Guide and Batch-Script-Examples spell them (-n sets, -a tasks per set,
    -c cores per set, -g GPUs per set, -b/--bind packed:<cores per task>),
    and the program it starts."""
    line = next(ln for ln in job.splitlines() if ln.startswith("jsrun "))
    found = re.match(
        r"^jsrun -n (?P<n>\d+) -a (?P<a>\d+) -c (?P<c>\d+) -g (?P<g>\d+) --bind packed:(?P<bind>\d+) "
        r'--smpiargs="off" (?P<program>.*)$',
        line,
    )
    assert found, f"not a documented jsrun form: {line}"
    return {k: int(v) if v.isdigit() else v for k, v in found.groupdict().items()}


def test_summit_job_header_is_olcfs(summit):
    """OLCF's documented Summit script: -P, -J, -o, -e, -W, -nnodes. Whole
    nodes are what -nnodes gives and jsrun places the tasks: no -n, no
    -R "affinity[...]", no -x."""
    for test in ("host_bandwidth", "um_bandwidth", "mem_scan", "node_health"):
        lines = _bsub(_script(summit, "summit", "batch", "cuda", test, "rfm_job.sh"))
        assert f"-P {PROJECT}" in lines and "-nnodes 1" in lines, lines
        assert {ln.split()[0] for ln in lines} == {"-J", "-o", "-e", "-nnodes", "-W", "-P"}, lines


def test_summit_job_uses_jsrun_with_the_cpu_only_check_on_every_core(summit):
    job = _script(summit, "summit", "batch", "cuda", "host_bandwidth", "rfm_job.sh")
    assert "#BSUB -W 30" in job
    assert "module load cuda/11.7.1" in job
    launch = _jsrun(job)
    assert (launch["n"], launch["a"], launch["c"], launch["g"], launch["bind"]) == (1, 1, 42, 0, 42)
    assert "bin/host_bandwidth --nodes 0,8 " in launch["program"]


def test_summit_one_gpu_check_gets_one_gpu_and_its_seven_cores(summit):
    # OLCF's one-GPU resource set: jsrun -n 1 -a 1 -c 7 -g 1 -b packed:7.
    launch = _jsrun(_script(summit, "summit", "batch", "cuda", "um_bandwidth", "rfm_job.sh"))
    assert (launch["n"], launch["a"], launch["c"], launch["g"], launch["bind"]) == (1, 1, 7, 1, 7)
    assert re.search(r"-m systems\.watch --allow none -- \S+/bin/um_bandwidth ", launch["program"])


def test_summit_six_gpu_checks_get_every_gpu(summit):
    # One process with all six GPUs; six ranks in one resource set (CUDA IPC
    # between them needs every GPU visible to every rank), 7 cores each.
    stage = summit / "stage" / "summit" / "batch" / "cuda"
    shapes = set()
    for path in stage.glob("mem_scan*/rfm_job.sh"):
        launch = _jsrun(path.read_text())
        mode = re.search(r"--modes (\w+)", launch["program"])[1]
        shapes.add((mode, launch["n"], launch["a"], launch["c"], launch["g"], launch["bind"]))
    assert shapes == {
        ("single", 1, 1, 42, 6, 42),
        ("chunked", 1, 1, 42, 6, 42),
        ("multiprocess", 1, 6, 42, 6, 7),
    }


def test_summit_health_sees_every_gpu(summit):
    # Without -g 6 jsrun would hide the GPUs and every healthy node would fail.
    launch = _jsrun(_script(summit, "summit", "batch", "cuda", "node_health", "rfm_job.sh"))
    assert (launch["n"], launch["a"], launch["c"], launch["g"]) == (1, 1, 42, 6)
    assert launch["program"].endswith(
        f"-m systems.health --system summit --partition batch --accepted {REPO}/perflogs/summit/accepted.json"
    )


def test_summit_dry_runs_anywhere_and_says_once_what_a_real_run_needs(tmp_path):
    """No Lmod, no site module, no project: the dry run passes, its job
    scripts show where the project goes, it says once what a real run needs
    and writes no perflog."""
    result = _reframe(tmp_path, "summit", "-n", "node_health|host_bandwidth", account=None, lmod=False)
    out = result.stdout + result.stderr
    assert out.count("set GPU_MEMPATHS_ACCOUNT=<project>") == 1, out[-3000:]
    assert out.count("a real run loads cmake/3.23.2, cuda/11.7.1, gcc/9.3.0, numactl") == 1
    assert "#BSUB -P <project>\n" in _script(tmp_path, "summit", "batch", "cuda", "host_bandwidth", "rfm_job.sh")
    assert not (tmp_path / "perflogs").exists()


def test_summit_without_a_project_fails_a_real_run_at_setup_naming_the_variable(monkeypatch):
    monkeypatch.delenv("GPU_MEMPATHS_ACCOUNT", raising=False)
    monkeypatch.setattr(sys, "argv", ["reframe", "-r"])
    summit = data.load_all()["summit"]
    access, missing = rfm.account_access(summit, summit["partitions"][0])
    assert access == [] and "set GPU_MEMPATHS_ACCOUNT=<project>" in missing and "(-P <project>)" in missing


def test_summit_cmake_build_targets_volta(summit):
    build = _script(summit, "summit", "batch", "cuda", "SuiteBuild", "rfm_build.sh")
    assert '-DGPU_MEMPATHS_CUDA_ARCHS="70"' in build
    assert "-DGPU_MEMPATHS_HOST_ONLY=OFF" in build
    assert "cmake --install build --prefix" in build


def test_summit_spack_build_uses_the_repository_environment(summit):
    build = _script(summit, "summit", "batch", "spack", "SuiteBuild", "rfm_build.sh")
    assert f"spack env create -d rfm_spack_env {REPO / 'spack.yaml'}" in build
    assert "export GPU_MEMPATHS_SYSTEM=summit" in build
    assert f"export GPU_MEMPATHS_ROOT={REPO}" in build
    assert "spack -e rfm_spack_env add gpu-mempaths cuda_arch=70" in build
    assert "spack -e rfm_spack_env install --fail-fast" in build
    assert "spack -e rfm_spack_env location -i gpu-mempaths" in build


def test_slurm_job_uses_sbatch_and_srun(slurm_system):
    system, tmp = slurm_system
    partition = "gpu"
    job = _script(tmp, system, partition, "cuda", "host_bandwidth", "rfm_job.sh")
    access = {"dgx-a100": "dgx", "x86-pcie": "gpu"}[system]
    cores = {"dgx-a100": 128, "x86-pcie": 36}[system]
    assert f"#SBATCH --partition={access}" in job
    assert "#SBATCH --ntasks=1" in job
    assert "#SBATCH --exclusive" in job
    assert f"#SBATCH --account={PROJECT}" in job  # GPU_MEMPATHS_ACCOUNT, where set
    line = next(ln for ln in job.splitlines() if ln.startswith("srun"))
    assert line.startswith(f"srun --cpus-per-task={cores} ")
    assert "bin/host_bandwidth --nodes" in line
    assert not re.search(r"--gpus|--gres", line)  # no GPU asked for a CPU check


#: What each Slurm system's data asks for n GPUs with, and GPU 0's NUMA node.
_GPUS = {"dgx-a100": "--gpus-per-node={}", "x86-pcie": "--gres=gpu:{}"}
_NUMA0 = {"dgx-a100": 3, "x86-pcie": 0}


def test_slurm_one_gpu_check_asks_for_its_gpu_and_binds_to_its_numa_node(slurm_system):
    system, tmp = slurm_system
    job = _script(tmp, system, "gpu", "cuda", "um_bandwidth", "rfm_job.sh")
    gpus = _GPUS[system].format(1)
    assert f"#SBATCH {gpus}\n" in job
    line = _launch_line(job)
    assert line.startswith(f"srun {gpus} --cpu-bind=map_ldom:{_NUMA0[system]} ")


def test_a_check_driving_another_gpu_asks_for_it_and_binds_to_its_numa_node(tmp_path):
    # GPU 3 of a DGX A100 sits on NUMA node 1: the job and the step get GPUs
    # 0-3 (so that index 3 is the same GPU to the program) and the task the
    # CPUs of node 1.
    _reframe(tmp_path, "dgx-a100", "-n", "copy_latency", "-S", "copy_latency.device=3")
    job = _script(tmp_path, "dgx-a100", "gpu", "cuda", "copy_latency", "rfm_job.sh")
    assert "#SBATCH --gpus-per-node=4\n" in job
    line = _launch_line(job)
    assert line.startswith("srun --cpus-per-task=128 --gpus-per-node=4 --cpu-bind=map_ldom:1 ")
    assert "--device 3 " in line and line.endswith("--numa-node 1")


def test_slurm_health_asks_for_every_gpu_of_the_node(slurm_system):
    system, tmp = slurm_system
    count = data.load_all()[system]["partitions"][0]["node"]["gpus"]["count"]
    job = _script(tmp, system, "gpu", "cuda", "node_health", "rfm_job.sh")
    gpus = _GPUS[system].format(count)
    assert f"#SBATCH {gpus}\n" in job
    # The GPUs span NUMA nodes: the one task is not bound to one of them.
    assert _launch_line(job).startswith(f"srun {gpus} {sys.executable} -m systems.health ")


def test_slurm_builds_for_the_partition_architecture(slurm_system):
    system, tmp = slurm_system
    arch = {"dgx-a100": "80", "x86-pcie": "70"}[system]
    build = _script(tmp, system, "gpu", "cuda", "SuiteBuild", "rfm_build.sh")
    assert f'-DGPU_MEMPATHS_CUDA_ARCHS="{arch}"' in build
    assert '-DCMAKE_CUDA_COMPILER="/usr/local/cuda/bin/nvcc"' in build


def test_one_build_per_partition_and_environment(slurm_system):
    system, tmp = slurm_system
    builds = list((tmp / "stage" / system).glob("*/*/SuiteBuild*/rfm_build.sh"))
    assert len(builds) == 2  # cuda and spack, shared by every check


def test_health_check_runs_on_the_node_through_the_launcher(slurm_system):
    system, tmp = slurm_system
    job = _script(tmp, system, "gpu", "cuda", "node_health", "rfm_job.sh")
    line = next(ln for ln in job.splitlines() if ln.startswith("srun"))
    assert f"-m systems.health --system {system} --partition gpu" in line


def test_small_copy_latency_runs_every_leg_but_gdrcopys(slurm_system):
    # Neither system declares gdrdrv: the GDRCopy leg is not asked for, and
    # the GDRCopy checks are skipped with the reason (tests/test_dryrun_gdrcopy.py).
    system, tmp = slurm_system
    job = _script(tmp, system, "gpu", "cuda", "copy_latency", "rfm_job.sh")
    line = next(ln for ln in job.splitlines() if ln.startswith("srun"))
    numa = {"dgx-a100": 3, "x86-pcie": 0}[system]  # GPU 0's NUMA node
    assert "bin/copy_latency --device 0 --methods pageable,pinned,async,zerocopy --directions h2d,d2h" in line
    assert line.endswith(f"--numa-node {numa}")
    assert not list((tmp / "stage" / system / "gpu" / "cuda").glob("gdrcopy_copylat*/rfm_job.sh"))


def _launch_line(job: str) -> str:
    return next(ln for ln in job.splitlines() if ln.startswith("srun"))


def test_multi_gpu_checks_on_the_dgx_a100(tmp_path_factory):
    # 8 GPUs: srun starts 8 ranks of mem_scan for the multiprocess mode, one
    # process for the others; the ping-pong takes two GPUs, one task.
    tmp = tmp_path_factory.mktemp("dgx-a100-multigpu")
    out = _reframe(tmp, "dgx-a100", "-n", "mem_scan|p2p_pingpong").stdout
    stage = tmp / "stage" / "dgx-a100" / "gpu" / "cuda"
    scans = {}
    for path in stage.glob("mem_scan*/rfm_job.sh"):
        job = path.read_text()
        found = re.search(r"bin/mem_scan --modes (\w+) --ops (\w+) ", job)
        scans[found[1], found[2]] = job
    assert sorted(scans) == sorted(
        (m, o) for m in ("single", "chunked", "multiprocess") for o in ("read", "write", "atomic")
    )
    for (mode, _), job in scans.items():
        tasks = 8 if mode == "multiprocess" else 1
        assert f"#SBATCH --ntasks={tasks}\n" in job
        assert "#SBATCH --gpus-per-node=8" in job
        line = _launch_line(job)
        # Every task's GPUs asked for; each of the eight ranks bound to its GPU's NUMA node.
        bind = " --cpu-bind=map_ldom:3,3,1,1,7,7,5,5" if mode == "multiprocess" else ""
        assert line.startswith(f"srun --gpus-per-node=8{bind} ")
        assert "--segments 4,8,16,32,64,128,256,512,1024,2048,4096,8192,16384 --widths 4,8,16 --size 0.5x" in line
        assert "--spawn" not in line
    pingpong = sorted(_launch_line(p.read_text()) for p in stage.glob("p2p_pingpong*/rfm_job.sh"))
    assert [ln.split("bin/p2p_pingpong ")[1] for ln in pingpong] == [
        "--variants baseline --size 64M --iters 10000 --samples 5",
        "--variants baseline,manual --size 64M --iters 10000 --samples 5",
    ]
    # Every GPU program runs under the NVML watch, on the node, after srun.
    assert all(re.search(r"^srun .* -m systems\.watch --allow none -- \S+/bin/p2p_pingpong ", ln) for ln in pingpong)
    for path in stage.glob("p2p_pingpong*/rfm_job.sh"):
        assert "#SBATCH --ntasks=1\n" in path.read_text()
        assert "#SBATCH --gpus-per-node=2" in path.read_text()
    assert "[no NVBit installation for dgx-a100:gpu: name the empty-call tool (.so) with nvbit_tool" in out


def test_the_scans_page_reach_layout_reaches_the_program_only_where_set(tmp_path):
    # The cliff past 256 GiB: the single mode's mapping granularity and a
    # launch's span of every chunk, as the eight-GPU study varies them.
    _reframe(
        tmp_path, "dgx-a100", "-n", "mem_scan", "-S", "mem_scan.map_granularity=64M", "-S", "mem_scan.launch_span=1G"
    )
    stage = tmp_path / "stage" / "dgx-a100" / "gpu" / "cuda"
    lines = [_launch_line(p.read_text()) for p in stage.glob("mem_scan*/rfm_job.sh")]
    # The other modes have no VMM range to map: skipped, with the reason.
    assert len(lines) == 3 and all("--modes single " in ln for ln in lines)
    assert all("--reps 20 --map-granularity 64M --launch-span 1G" in ln for ln in lines)


@pytest.mark.parametrize("system", sorted(data.load_all()))
def test_the_design_cards_command_after_one_setup_step(system, tmp_path):
    """`eval "$(./suite env)"` sets RFM_CONFIG_FILES; then `reframe -c checks
    -r --system NAME` from the repository root finds the suite's configuration
    for every declared system (here as a dry run, one check)."""
    if system == "summit" and not os.environ.get("LMOD_CMD"):
        pytest.skip("Lmod is not set up (summit names its modules through Lmod); CI installs it")
    setup = subprocess.run([str(REPO / "suite"), "env"], capture_output=True, text=True, check=True).stdout
    assert f"export RFM_CONFIG_FILES={REPO / 'reframe_settings.py'}" in setup
    env = {
        **os.environ,
        "RFM_CONFIG_FILES": str(REPO / "reframe_settings.py"),
        "RFM_RESOLVE_MODULE_CONFLICTS": "n",
        "GPU_MEMPATHS_ACCOUNT": PROJECT,
    }
    cmd = [
        sys.executable,
        "-c",
        RUN_REFRAME,
        "-c",
        "checks",
        "--system",
        system,
        "--dry-run",
        "-n",
        "host_bandwidth",
        "--prefix",
        str(tmp_path),
        "--perflogdir",
        str(tmp_path / "perflogs"),
    ]
    result = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "could not find a configuration entry" not in output
    assert list((tmp_path / "stage" / system).rglob("rfm_job.sh")), output[-3000:]


def test_summit_health_names_its_facts_file_on_the_compute_node(tmp_path):
    # Under jsrun the job script runs on the launch node: a $(hostname) there
    # would give every node's facts the launch node's name.
    _reframe(tmp_path, "summit", "-n", "node_health", "-S", "node_health.facts_dir=/facts", lmod=False)
    job = _script(tmp_path, "summit", "batch", "cuda", "node_health", "rfm_job.sh")
    (line,) = [ln for ln in job.splitlines() if ln.startswith("jsrun")]
    assert line.endswith("--facts-dir /facts") and "hostname" not in job


@pytest.mark.parametrize("system", ["summit", "dgx-a100"])
def test_health_on_every_node_of_one_job(system, tmp_path):
    """LSF lists no nodes for --distribute: one job of N nodes runs the health
    program once on each (jsrun -r 1; srun one task a node), each line named by its host."""
    _reframe(tmp_path, system, "-n", "node_health", "-S", "node_health.nodes=4", lmod=False)
    partition = "batch" if system == "summit" else "gpu"
    job = _script(tmp_path, system, partition, "cuda", "node_health", "rfm_job.sh")
    if system == "summit":
        assert "#BSUB -nnodes 4\n" in job
        (line,) = [ln for ln in job.splitlines() if ln.startswith("jsrun")]
        assert line.startswith("jsrun -n 4 -a 1 -c 42 -g 6 -r 1 ")
    else:
        assert "#SBATCH --ntasks=4\n" in job and "#SBATCH --ntasks-per-node=1\n" in job
        line = _launch_line(job)
    assert "-m systems.health " in line and line.endswith("--name-host")


def test_a_node_without_a_gpu_builds_its_host_programs_only(tmp_path):
    """Where the node has no GPU every GPU check is skipped: its CUDA programs
    are not built for two minutes first, unless asked for (a toolkit tried)."""
    from systems.detect import detect_node

    if detect_node().node["gpus"]["count"]:
        pytest.skip("this node has a GPU")
    _reframe(tmp_path, "local", "-n", "host_bandwidth")
    assert "-DGPU_MEMPATHS_HOST_ONLY=ON" in _script(tmp_path, "local", "default", "gnu", "SuiteBuild", "rfm_build.sh")
    again = tmp_path / "always"
    again.mkdir()
    _reframe(again, "local", "-n", "host_bandwidth", "-S", "SuiteBuild.cuda_programs=always")
    assert "-DGPU_MEMPATHS_HOST_ONLY=OFF" in _script(again, "local", "default", "gnu", "SuiteBuild", "rfm_build.sh")


#: A DGX SuperPOD's Slurm as its scontrol and sinfo answer, for the partition's dry run away from it.
SLURM_SHIM = {
    "scontrol": """#!/bin/bash
nodes="dgx001 dgx002 dgx003 dgx004"
case "$*" in
  *partitions*) echo "PartitionName=dgx Default=YES State=UP Nodes=dgx[001-004]"; exit 0 ;;
  *" node "*) nodes=$(echo "${@: -1}" | tr ',' ' ') ;;
esac
for n in $nodes; do
  echo "NodeName=$n Arch=x86_64 State=IDLE Partitions=dgx ActiveFeatures=a100 AvailableFeatures=a100"
done
""",
    "sinfo": "#!/bin/bash\nprintf '%s idle\\n' dgx001 dgx002 dgx003 dgx004\n",
}


def _partition_night(tmp_path: Path, system: str, nodes: str, *reframe: str, env: dict | None = None):
    cmd = [sys.executable, "-m", "commands", "nightly", "--system", system, "--nodes", nodes, "--dry-run"]
    environ = {**os.environ, "RFM_RESOLVE_MODULE_CONFLICTS": "n", "GPU_MEMPATHS_ACCOUNT": PROJECT, **(env or {})}
    return subprocess.run([*cmd, "--", *reframe], cwd=REPO, env=environ, capture_output=True, text=True, timeout=300)


def test_the_dgx_partition_night_distributes_every_check_over_its_nodes(tmp_path):
    """`./suite nightly --nodes all` on the DGX's Slurm: each check once per
    node, pinned to it (ReFrame's --distribute), the nodes as Slurm lists them."""
    shim = tmp_path / "bin"
    shim.mkdir()
    for name, text in SLURM_SHIM.items():
        (shim / name).write_text(text)
        (shim / name).chmod(0o755)
    path = f"{shim}{os.pathsep}{os.environ['PATH']}"
    result = _partition_night(
        tmp_path, "dgx-a100", "all", "--prefix", str(tmp_path), "-n", "host_bandwidth|node_health", env={"PATH": path}
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    scripts = list((tmp_path / "stage" / "dgx-a100" / "gpu").glob("*/*/rfm_job.sh"))
    pinned = {}
    for script in scripts:
        text = script.read_text()
        node = re.search(r"#SBATCH --nodelist=(\S+)", text)
        assert node and "#SBATCH --partition=dgx" in text, text
        pinned.setdefault(node.group(1), set()).add(script.parent.name.split("_")[0])
    assert set(pinned) == {"dgx001", "dgx002", "dgx003", "dgx004"}
    assert all(checks == {"node", "host"} for checks in pinned.values()), pinned


def test_the_summit_partition_night_is_one_job_over_its_nodes():
    """`./suite nightly --nodes 4608` on Summit: one LSF job over 4,608 nodes,
    jsrun starting each node's own health and checks."""
    result = _partition_night(REPO, "summit", "4608", "-S", "um_bandwidth.repeats=3")
    assert result.returncode == 0, result.stdout + result.stderr
    script = result.stdout[result.stdout.index("#!/bin/bash") :]
    assert "#BSUB -nnodes 4608" in script and f"#BSUB -P {PROJECT}" in script
    assert "jsrun -n 4608 -r 1 -a 1" in script
    assert "./suite nightly --system summit --on-node" in script and "um_bandwidth.repeats=3" in script
    assert "GPU_MEMPATHS_ON_NODE=1" in script


def test_a_partition_night_refuses_what_the_partition_cannot_do():
    assert "cannot list its nodes" in _partition_night(REPO, "summit", "all").stderr
    assert "no partition under Slurm or LSF" in _partition_night(REPO, "hopper-vm", "all").stderr
    cmd = [sys.executable, "-m", "commands", "nightly", "--system", "summit", "--nodes", "4", "--drill", "x"]
    refused = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 3 and "--drill and --confirm-later are a node's night's" in refused.stderr


def test_a_slurm_partitions_dry_run_with_the_nodes_named_needs_no_controller(tmp_path):
    """Away from the cluster (no Slurm controller to ask), the named nodes'
    job scripts are written as a real night's would be, each pinned to its node."""
    result = _partition_night(tmp_path, "dgx-a100", "dgx007,dgx008", "--prefix", str(tmp_path), "-n", "host_bandwidth")
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    scripts = list((tmp_path / "stage" / "dgx-a100" / "gpu").glob("*/*/rfm_job.sh"))
    pinned = {}
    for script in scripts:
        node = re.search(r"#SBATCH --nodelist=(\S+)", script.read_text()).group(1)
        pinned.setdefault(node, set()).add(script.parent.name.split("_")[0])
    assert pinned == {"dgx007": {"node", "host"}, "dgx008": {"node", "host"}}  # health and the check, on each node
    assert f"nightly: dry run: {len(scripts)} job script(s) for dgx007, dgx008" in result.stdout


def test_an_nvbit_tool_named_by_the_run_is_used_and_one_that_is_not_there_fails(tmp_path):
    """-S p2p_pingpong.nvbit_tool tries a tool before it goes into the system's data; a path to
    nothing is a mistake the run fails on, not a variant skipped."""
    tool = tmp_path / "empty_call.so"
    tool.write_bytes(b"")
    _reframe(tmp_path, "dgx-a100", "-n", "p2p_pingpong.*nvbit", "-S", f"p2p_pingpong.nvbit_tool={tool}")
    [script] = (tmp_path / "stage" / "dgx-a100" / "gpu" / "cuda").glob("p2p_pingpong*/rfm_job.sh")
    assert f"--variants baseline,nvbit --size 64M --iters 10000 --samples 5 --nvbit-tool {tool}" in script.read_text()
    missing = _reframe(
        tmp_path, "dgx-a100", "-n", "p2p_pingpong.*nvbit", "-S", "p2p_pingpong.nvbit_tool=/no/tool.so", check=False
    )
    assert "nvbit_tool='/no/tool.so' must be an existing file's absolute path" in missing.stdout + missing.stderr


def _valid_shell(root: Path) -> None:
    """bash -n over each script under `root`'s stage: a value the suite put into one (a path, a setting)
    never breaks its syntax."""
    scripts = list(root.glob("stage/**/*.sh"))
    assert len(scripts) > 20
    for script in scripts:
        checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert checked.returncode == 0, f"{script}: {checked.stderr}"


def test_every_slurm_job_and_build_script_is_valid_shell(slurm_system):
    _valid_shell(slurm_system[1])


def test_every_lsf_job_and_build_script_is_valid_shell(summit):
    _valid_shell(summit)


def test_a_setting_a_shell_would_read_never_reaches_a_job_script(tmp_path):
    """The hostile set (tests/test_suite_faults.py) reaches no dry run: refused before ReFrame writes a script."""
    from test_suite_faults import HOSTILE

    for word in HOSTILE[:7]:
        result = subprocess.run(
            [sys.executable, "-m", "checks.suite.options", "-S", f"p2p_pingpong.nvbit_tool={word}"],
            cwd=REPO, capture_output=True, text=True,
        )  # fmt: skip
        assert result.returncode == 3 and "a job script would read as shell" in result.stderr
    assert not list(tmp_path.glob("**/PWNED")) and not (REPO / "PWNED").exists()
