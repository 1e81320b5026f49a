"""CUDA runtimes as environments (systems/toolkits.py), and the sanity that
holds a program to the runtime its records name (checks/suite/base.py)."""

import pytest
import reframe.utility.sanity as sn

from checks.suite.base import cuda_build_facts, runtime_loaded
from systems import toolkits


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
    runtimes = [toolkits.Runtime("13.5.37", "/rt/13.5"), toolkits.Runtime("13.0.96", "/rt/13.0"),
                toolkits.Runtime("12.9.79", "/rt/12.9")]  # fmt: skip
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
    from systems import rfm

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
    record = tmp_path / "build" / "CMakeFiles" / "3.31.6" / "CMakeCUDACompiler.cmake"
    record.parent.mkdir(parents=True)
    record.write_text('set(CMAKE_CUDA_COMPILER_ID "NVIDIA")\nset(CMAKE_CUDA_COMPILER_VERSION "13.0.88")\n'
                      'set(CMAKE_CUDA_COMPILER_TOOLKIT_VERSION "13.0.88")\n')  # fmt: skip
    assert cuda_build_facts(str(tmp_path)) == ("13.0", "NVIDIA 13.0.88")


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
    import os
    import subprocess
    import sys
    from pathlib import Path

    from systems import detect

    nvcc = detect.find_nvcc("nvcc")
    release = toolkits.nvcc_release(nvcc) if nvcc else None
    if not release:
        pytest.skip("no nvcc on this machine: no CUDA environment to pair a runtime with")
    lib = wheel(tmp_path / "runtimes", f"{release.split('.')[0]}.99.0")
    repo = Path(__file__).resolve().parent.parent
    env = {**os.environ, toolkits.RUNTIMES_VARIABLE: str(tmp_path / "runtimes")}
    cmd = [sys.executable, "-c", "import sys; from reframe.frontend.cli import main; sys.exit(main())",
           "-C", str(repo / "reframe_settings.py"), "-c", str(repo / "checks"), "--system", "local",
           "--prefix", str(tmp_path), "--perflogdir", str(tmp_path / "perflogs"), "--dry-run",
           "-n", "host_bandwidth"]  # fmt: skip
    result = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    stage = tmp_path / "stage" / "local" / "default"
    twin = f"gnu-rt{release.split('.')[0]}_99"
    assert sorted(p.parent.name for p in stage.glob("*/SuiteBuild*")) == ["gnu", twin]
    assert sorted(p.parent.name for p in stage.glob("*/host_bandwidth")) == ["gnu", twin]
    script = (stage / twin / "host_bandwidth" / "rfm_job.sh").read_text()
    assert f"export LD_LIBRARY_PATH={lib}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}" in script
    assert "LD_LIBRARY_PATH" not in (stage / "gnu" / "host_bandwidth" / "rfm_job.sh").read_text()
