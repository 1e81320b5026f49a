"""systems/spack_externals.py: what `spack external find` found becomes the
system's Spack data (the find itself was run with Spack 1.2 on the CI
machine; its environment is the fixture below)."""

import subprocess

import pytest
import yaml

from systems import spack_externals as se

# `spack -e ENV external find --not-buildable cuda cmake gmake numactl gcc`
# on Debian 12 with CUDA 13 from wheels, /usr/local/bin/nvcc a wrapper script.
FOUND = yaml.safe_load("""
c: {buildable: false}
golang: {buildable: false}
cxx: {buildable: false}
cmake: {externals: [{spec: cmake@3.25.1, prefix: /usr}], buildable: false}
gcc:
  externals:
  - spec: gcc@12.2.0 languages:='c,c++,fortran'
    prefix: /usr
    extra_attributes: {compilers: {c: /usr/bin/gcc, cxx: /usr/bin/g++}}
  buildable: false
cuda:
  externals:
  - {spec: cuda@13.0.88, prefix: /usr/local}
  - {spec: cuda@13.0.88, prefix: /usr/local/cuda}
  buildable: false
gmake: {externals: [{spec: gmake@4.3, prefix: /usr}], buildable: false}
""")


def _roots(*roots):
    return {"is_root": lambda p: p in roots, "version_of": lambda p: "13.0.88", "roots": lambda: list(roots)}


def test_only_found_packages_are_pinned_and_virtuals_are_left_alone():
    packages = se.select_externals(FOUND, **_roots("/usr/local/cuda"))
    assert list(packages) == ["gcc", "cuda", "cmake", "gmake"]  # no c, cxx, golang; numactl not found
    assert all(p["buildable"] is False for p in packages.values())


def test_one_cuda_per_version_at_the_toolkits_root():
    (cuda,) = se.select_externals(FOUND, **_roots("/usr/local/cuda"))["cuda"]["externals"]
    assert cuda == {"spec": "cuda@13.0.88", "prefix": "/usr/local/cuda"}


def test_a_wrapper_prefix_alone_moves_to_a_usual_root_of_the_same_version():
    found = {"cuda": {"externals": [{"spec": "cuda@13.0.88", "prefix": "/usr/local"}]}}
    (cuda,) = se.select_externals(found, **_roots("/opt/cuda-13"))["cuda"]["externals"]
    assert cuda["prefix"] == "/opt/cuda-13"
    other = {**_roots("/opt/cuda-12"), "version_of": lambda p: "12.9.41"}
    (cuda,) = se.select_externals(found, **other)["cuda"]["externals"]
    assert cuda["prefix"] == "/usr/local"  # no root has that version: kept as found


def test_libnuma_from_pkg_config():
    def run(cmd, **kw):
        return subprocess.CompletedProcess(cmd, 0, stdout="/usr\n" if "--variable=prefix" in cmd else "2.0.16\n")

    assert se.libnuma_from_pkg_config(run) == {
        "externals": [{"spec": "numactl@2.0.16", "prefix": "/usr"}],
        "buildable": False,
    }

    def missing(cmd, **kw):
        raise subprocess.CalledProcessError(1, cmd)

    assert se.libnuma_from_pkg_config(missing) is None


def test_the_written_data_is_what_spack_yaml_and_test_systems_expect():
    text = se.spack_data(se.select_externals(FOUND, **_roots("/usr/local/cuda")), [90], "mysite", "node01")
    packages = yaml.safe_load(text)["packages"]
    assert packages["gpu-mempaths"] == {"require": ["cuda_arch=90"]}
    assert packages["gdrcopy"] == {"buildable": False}
    assert "GPU_MEMPATHS_SYSTEM=mysite" in text


def test_architectures_from_option_then_declared_data():
    summit = {"name": "summit", "partitions": [{"cuda_archs": [70]}]}
    assert se.cuda_archs(summit, [80]) == [80]
    assert se.cuda_archs(summit, None) == [70]
    mixed = {"name": "x", "partitions": [{"cuda_archs": [70]}, {"cuda_archs": [90]}]}
    with pytest.raises(se.ExternalsError, match="give --cuda-arch"):
        se.cuda_archs(mixed, None)


@pytest.mark.parametrize(
    "argv, message",
    [(["--system", "nowhere"], "--system nowhere: not one of"), (["--cuda-arch", "sm90"], "--cuda-arch sm90")],
)
def test_bad_options_are_named(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        se.main(argv)
    assert stop.value.code == 2 and message in capsys.readouterr().err


def test_without_spack_it_says_where_to_get_it(capsys):
    assert se.main(["--spack", "/nonexistent/spack"]) == 3
    assert "spack/README.md says how to get Spack" in capsys.readouterr().err
