"""CUDA runtimes as environments (systems/toolkits.py), and the sanity that
holds a program to the runtime its records name (checks/suite/base.py)."""

import re

import pytest
import reframe.utility.sanity as sn

from checks.suite.base import cuda_build_facts, runtime_loaded
from runner.rfm import reframe_command
from systems import toolkits

pytestmark = pytest.mark.slow


def wheel(folder, version: str):
    """A folder as `pip install --target` leaves NVIDIA's runtime wheel of `version`."""
    major = version.split(".")[0]
    name = "nvidia_cuda_runtime" if int(major) >= 13 else f"nvidia_cuda_runtime_cu{major}"
    (folder / f"{name}-{version}.dist-info").mkdir(parents=True)
    lib = folder / "nvidia" / (f"cu{major}" if int(major) >= 13 else "cuda_runtime") / "lib"
    lib.mkdir(parents=True)
    (lib / f"libcudart.so.{major}").write_text("")
    return lib


def test_runtimes_are_found_in_the_folders_named(tmp_path):
    lib135 = wheel(tmp_path / "a", "13.5.37")
    lib129 = wheel(tmp_path / "b", "12.9.79")
    (tmp_path / "c" / "nvidia_cuda_runtime-13.1.80.dist-info").mkdir(parents=True)  # no library: not a runtime
    found = toolkits.runtimes_found(":".join(str(tmp_path / d) for d in "abc"))
    assert found == [toolkits.Runtime("13.5.37", str(lib135)), toolkits.Runtime("12.9.79", str(lib129))]
    assert [(r.major, r.release) for r in found] == [(13, "13.5"), (12, "12.9")]
    assert toolkits.runtimes_found("") == []


def test_each_environment_gets_a_twin_per_runtime_of_its_major_version(tmp_path):
    runtimes = [
        toolkits.Runtime("13.5.37", "/rt/13.5"),
        toolkits.Runtime("13.0.96", "/rt/13.0"),
        toolkits.Runtime("12.9.79", "/rt/12.9"),
    ]
    gnu = {"name": "gnu", "nvcc": "nvcc", "features": ["cuda"], "extras": {"cmake_options": []}}
    (twin,) = toolkits.runtime_environments(gnu, "13.0", runtimes)
    assert twin["name"] == "gnu-rt13_5" and twin["features"] == ["cuda"] and twin["nvcc"] == "nvcc"
    assert twin["env_vars"] == [["LD_LIBRARY_PATH", "/rt/13.5${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"]]
    assert twin["extras"] == {"cmake_options": [], "cuda_runtime": "13.5", "cuda_runtime_lib": "/rt/13.5"}
    assert "env_vars" not in gnu  # the environment itself is left as it is
    assert toolkits.runtime_environments(gnu, None, runtimes) == []
    # One twin per release: the first folder's, however many have it.
    again = [*runtimes, toolkits.Runtime("13.5.40", "/other/13.5")]
    assert [t["extras"]["cuda_runtime_lib"] for t in toolkits.runtime_environments(gnu, "13.0", again)] == ["/rt/13.5"]
    assert toolkits.base_environment("gnu-rt13_5") == "gnu" == toolkits.base_environment("gnu")


def test_partitions_run_every_twin_of_their_environments(monkeypatch):
    monkeypatch.setattr(toolkits, "nvcc_release", lambda nvcc: "13.0")
    envs = [{"name": "gnu", "nvcc": "/usr/local/cuda/bin/nvcc"}, {"name": "host", "cc": "gcc"}]
    partitions = [{"name": "default", "environs": ["gnu", "host"]}, {"name": "cpu", "environs": ["host"]}]
    toolkits.with_runtime_twins(envs, partitions, [toolkits.Runtime("13.5.37", "/rt")])
    assert [e["name"] for e in envs] == ["gnu", "host", "gnu-rt13_5"]
    assert [p["environs"] for p in partitions] == [["gnu", "gnu-rt13_5", "host"], ["host"]]


def test_the_site_configuration_has_the_twins_of_a_detected_machine(tmp_path, monkeypatch):
    from rfmconfig import settings as rfm

    wheel(tmp_path, "13.5.37")
    monkeypatch.setenv(toolkits.RUNTIMES_VARIABLE, str(tmp_path))
    monkeypatch.setattr(toolkits, "nvcc_release", lambda nvcc: "13.0")
    monkeypatch.setattr(rfm.detect, "find_nvcc", lambda name: "/usr/local/cuda/bin/nvcc")
    config = rfm.site_configuration()
    (local,) = [s for s in config["systems"] if s["name"] == "local"]
    assert local["partitions"][0]["environs"] == ["gnu", "gnu-rt13_5"]
    assert "gnu-rt13_5" in [e["name"] for e in config["environments"]]


def test_nvcc_release_reads_nvcc_version(tmp_path):
    nvcc = tmp_path / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    nvcc.chmod(0o755)
    assert toolkits.nvcc_release(str(nvcc)) == "13.0"
    assert toolkits.nvcc_release(str(tmp_path / "none")) is None


def test_the_build_records_its_toolkit_and_compiler(tmp_path):
    assert cuda_build_facts(str(tmp_path)) == ("unknown", "unknown")
    facts = tmp_path / "share" / "gpu-mempaths" / "build-facts.txt"
    facts.parent.mkdir(parents=True)
    facts.write_text("cuda_toolkit=12.9\ncuda_compiler=Clang 22.1.8\n")
    assert cuda_build_facts(str(tmp_path)) == ("12.9", "Clang 22.1.8")


@pytest.mark.parametrize(
    "printed, expected, why",
    [
        ("CUDA: runtime=13050 driver=13000\n", "13.5", None),
        ("CUDA: runtime=13000 driver=13000\n", "13.5", "loaded CUDA runtime 13.0, its environment's is 13.5"),
        ("Device 0: H100\n", "13.0", "no 'CUDA: runtime=' line"),
        ("Device 0: H100\n", "unknown", None),
    ],
)
def test_a_program_must_load_the_runtime_its_records_name(tmp_path, printed, expected, why):
    out = tmp_path / "out"
    out.write_text(printed)
    if why is None:
        assert sn.evaluate(runtime_loaded(str(out), expected))
    else:
        with pytest.raises(sn.SanityError, match=why):
            sn.evaluate(runtime_loaded(str(out), expected))


def test_the_dry_run_builds_once_per_environment_and_runs_each_check_in_each(tmp_path):
    """On this machine (described at run time), a runtime beside its nvcc's
    release gives a second environment: one build each, the check in both,
    that runtime first on its job's LD_LIBRARY_PATH."""

    from systems import detect

    nvcc = detect.find_nvcc("nvcc")
    release = toolkits.nvcc_release(nvcc) if nvcc else None
    if not release:
        pytest.skip("no nvcc on this machine: no CUDA environment to pair a runtime with")
    lib = wheel(tmp_path / "runtimes", f"{release.split('.')[0]}.99.0")
    env = {toolkits.RUNTIMES_VARIABLE: str(tmp_path / "runtimes")}
    result = reframe_local(tmp_path, env, "--dry-run", "-n", "host_bandwidth")
    assert result.returncode == 0, result.stdout + result.stderr
    stage = tmp_path / "stage" / "local" / "default"
    twin = f"gnu-rt{release.split('.')[0]}_99"
    assert sorted(p.parent.name for p in stage.glob("*/SuiteBuild*")) == ["gnu", twin]
    assert sorted(p.parent.name for p in stage.glob("*/host_bandwidth")) == ["gnu", twin]
    script = (stage / twin / "host_bandwidth" / "rfm_job.sh").read_text()
    assert f"export LD_LIBRARY_PATH={lib}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}" in script
    assert "LD_LIBRARY_PATH" not in (stage / "gnu" / "host_bandwidth" / "rfm_job.sh").read_text()


# --- toolkits compiled by clang ------------------------------------------------


def toolkit(folder, release: str = "12.9", installed: bool = False):
    """A folder laid out as a CUDA toolkit of `release` (systems/cuda-wheels-toolkit's layout)."""
    major, minor = (int(n) for n in release.split("."))
    (folder / "include").mkdir(parents=True)
    (folder / "include" / "cuda_runtime_api.h").write_text(f"#define CUDART_VERSION {major * 1000 + minor * 10}\n")
    (folder / "lib64").mkdir()
    (folder / "lib64" / f"libcudart.so.{major}").write_text("")
    if installed:
        (folder / toolkits.INSTALLED_SUITE / "bin").mkdir(parents=True)
    return folder


def test_toolkits_are_found_with_their_release_and_a_folder_that_is_none_is_an_error(tmp_path):
    a, b = toolkit(tmp_path / "a", "12.9"), toolkit(tmp_path / "b", "13.0")
    assert toolkits.toolkits_found(f"{a}:{b}") == [toolkits.Toolkit("12.9", str(a)), toolkits.Toolkit("13.0", str(b))]
    assert toolkits.Toolkit("12.9", str(a)).lib == str(a / "lib64")
    with pytest.raises(ValueError, match=f"GPU_MEMPATHS_CUDA_TOOLKITS: {tmp_path / 'c'} is not a CUDA toolkit"):
        toolkits.toolkits_found(str(tmp_path / "c"))


def test_a_toolkit_is_built_by_clang_or_run_as_installed(tmp_path):
    built = toolkits.Toolkit("12.9", str(toolkit(tmp_path / "a")))
    env = toolkits.toolkit_environment(built, "/usr/bin/clang++-22")
    assert env["name"] == "clang-cuda12_9" and env["features"] == ["cuda"]
    assert (env["cc"], env["cxx"]) == ("clang-22", "/usr/bin/clang++-22")
    assert env["extras"]["cmake_options"] == [f"-DGPU_MEMPATHS_CLANG_CUDA_PATH={built.root}"]
    assert env["extras"]["cuda_runtime"] == "12.9" and "suite_prefix" not in env["extras"]
    assert env["env_vars"] == [["LD_LIBRARY_PATH", f"{built.lib}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"]]
    assert toolkits.toolkit_environment(built, None) is None
    installed = toolkits.Toolkit("12.9", str(toolkit(tmp_path / "b", installed=True)))
    env = toolkits.toolkit_environment(installed, None)
    assert env["extras"]["suite_prefix"] == f"{installed.root}/gpu-mempaths" and "cxx" not in env


def test_partitions_with_a_cuda_environment_get_each_toolkit(tmp_path):
    envs = [{"name": "gnu", "features": ["cuda"], "target_systems": ["local"]}, {"name": "host", "features": []}]
    partitions = [{"name": "gpu", "environs": ["gnu", "host"]}, {"name": "cpu", "environs": ["host"]}]
    found = [toolkits.Toolkit("12.9", str(toolkit(tmp_path / "a")))]
    toolkits.with_toolkit_environments(envs, partitions, found, "clang++-22")
    assert envs[-1]["name"] == "clang-cuda12_9" and envs[-1]["target_systems"] == ["local"]
    assert [p["environs"] for p in partitions] == [["gnu", "host", "clang-cuda12_9"], ["host"]]
    with pytest.raises(ValueError, match="CUDA 12.9 at .* can be neither built .* nor run"):
        toolkits.with_toolkit_environments(envs, partitions, found, None)


def test_the_clang_is_the_one_named_or_the_newest_on_path(tmp_path, monkeypatch):
    for name in ("clang++-17", "clang++-22", "clang++"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(toolkits.CLANG_VARIABLE, raising=False)
    assert toolkits.cuda_clang() == str(tmp_path / "clang++-22")
    monkeypatch.setenv(toolkits.CLANG_VARIABLE, "clang++-17")
    assert toolkits.cuda_clang() == str(tmp_path / "clang++-17")


def reframe_local(tmp_path, env: dict, *options: str):
    """ReFrame on this machine (the 'local' system) with the suite's checks."""
    import os
    import subprocess

    cmd = reframe_command("local", "--prefix", str(tmp_path), "--perflogdir", str(tmp_path / "perflogs"), *options)
    return subprocess.run(cmd, cwd=tmp_path, env={**os.environ, **env}, capture_output=True, text=True, timeout=600)


def test_an_installed_suite_is_used_as_it_is(tmp_path):
    folder = toolkit(tmp_path / "tk", installed=True)
    result = reframe_local(
        tmp_path, {toolkits.TOOLKITS_VARIABLE: str(folder)}, "--dry-run", "-n", "host_bandwidth", "-p", "clang-cuda12_9"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (script,) = (tmp_path / "stage" / "local" / "default" / "clang-cuda12_9").glob("SuiteBuild*/rfm_build.sh")
    assert f"ln -sfn {folder}/gpu-mempaths/bin bin" in script.read_text()


@pytest.mark.parametrize("caller", ["upgrade's side", "nightly -- -p"])
def test_a_run_measured_as_nights_runs_the_cases_of_its_own_environment_alone(tmp_path, caller):
    """Measured on four H200s (2026-11-28): with --mode nightly beside -p,
    every side's run ran all three environments' cases, three times the time.
    `./suite nightly -- -p ENV` passes its -p the same way."""
    from runner.nightly import as_nights
    from runner.upgrade import side_options

    folders = [toolkit(tmp_path / r, r, installed=True) for r in ("12.9", "13.0")]
    env = {toolkits.TOOLKITS_VARIABLE: ":".join(map(str, folders))}
    if caller == "upgrade's side":
        options = side_options(["clang-cuda12_9"], "-n", "host_bandwidth")
    else:
        options = as_nights("-p", "clang-cuda12_9", "-n", "host_bandwidth")
    result = reframe_local(tmp_path, env, *options, "-lC")
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.findall(r"- host_bandwidth .*@local:default\+(\S+)", result.stdout) == ["clang-cuda12_9"]


@pytest.mark.long
def test_a_wheel_toolkit_builds_the_suite_with_clang(tmp_path):
    """The CUDA 12.9 toolkit CI makes from NVIDIA's wheels (.ci/volta-compile),
    built by clang for real: every program, linked to that toolkit's runtime."""
    import os
    import subprocess

    root = os.environ.get("GPU_MEMPATHS_TEST_TOOLKIT")
    if not root or not toolkits.cuda_clang():
        pytest.skip("GPU_MEMPATHS_TEST_TOOLKIT names no toolkit, or no clang++-<N>: CI sets both")
    result = reframe_local(
        tmp_path,
        {toolkits.TOOLKITS_VARIABLE: root},
        "-r",
        "-n",
        "host_bandwidth",
        "-p",
        "clang-cuda",
        "-S",
        "host_bandwidth.buffer_size=64M",
        "-S",
        "SuiteBuild.cuda_programs=always",  # CI has no GPU: built to try the toolkit
        "--keep-stage-files",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    release = toolkits.toolkit_release(root)
    (stage,) = (tmp_path / "stage" / "local" / "default").glob(f"clang-cuda{release.replace('.', '_')}/SuiteBuild*")
    facts = (stage / "share" / "gpu-mempaths" / "build-facts.txt").read_text()
    assert f"cuda_toolkit={release}\ncuda_compiler=Clang " in facts
    linked = subprocess.run(["ldd", str(stage / "bin" / "daxpy")], capture_output=True, text=True).stdout
    library = f"libcudart.so.{release.split('.')[0]}"
    assert any(f"{library} => {r}/lib64/{library}" in linked for r in (root, os.path.realpath(root))), linked
