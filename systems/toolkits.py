"""CUDA runtimes and toolkits as ReFrame environments, for comparing a CUDA upgrade.

A program built with CUDA X.Y's nvcc links libcudart.so.X, and runs against
any X.* runtime the loader finds (CUDA minor-version compatibility): building
once and running under two runtimes changes the runtime alone. On systems
described at run time, every CUDA runtime installed from NVIDIA's wheels in a
folder of ``$GPU_MEMPATHS_CUDA_RUNTIMES`` (``:``-separated; ``pip install
--target DIR nvidia-cuda-runtime==13.5.37``) whose major version is an
environment's nvcc's gives that environment a twin, ``<name>-rt<X>_<Y>``: the
same compilers, that runtime first on ``LD_LIBRARY_PATH`` (``gnu-rt13_5``:
ReFrame's names have no dots). Each builds the
suite once (the build fixture is per environment) and runs every check; the
records carry the environment, the runtime and the compiler, and
``./suite report compare --by cuda_runtime_version`` says what changed.

A CUDA release whose nvcc the node lacks (CUDA 12.9 beside the system's 13.0:
PyPI has no nvcc before 13) comes as a toolkit folder in
``$GPU_MEMPATHS_CUDA_TOOLKITS`` (``systems/cuda-wheels-toolkit DIR 12.9``
makes one from NVIDIA's wheels). Each gives the environment
``clang-cuda<X>_<Y>``: the suite compiled by clang's CUDA front end against
that toolkit (src/cmake/ClangCuda.cmake), its libcudart first on
``LD_LIBRARY_PATH``; this changes the compiler and the runtime together, and a
toolkit folder naming the system's own CUDA (/usr/local/cuda) gives the same
compiler with the newer release, to tell the two apart. Where the node has no
clang, a toolkit folder may hold the suite already built with it elsewhere
(``cmake --install <build> --prefix DIR/gpu-mempaths``): the environment then
runs that installation instead of building.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from typing import Any

RUNTIMES_VARIABLE = "GPU_MEMPATHS_CUDA_RUNTIMES"

_DIST_INFO = re.compile(r"^nvidia_cuda_runtime(?:_cu\d+)?-(?P<version>\d+\.\d+(?:\.\d+)*)\.dist-info$")


@dataclass(frozen=True)
class Runtime:
    """A CUDA runtime from NVIDIA's wheel: its version and libcudart's folder."""

    version: str  # '13.5.37'
    lib: str

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def release(self) -> str:
        """'13.5': the version a program's cudaRuntimeGetVersion gives (13050)."""
        return ".".join(self.version.split(".")[:2])


def runtimes_found(paths: str | None = None) -> list[Runtime]:
    """The runtimes installed in the folders of `paths` (default
    $GPU_MEMPATHS_CUDA_RUNTIMES), each where its libcudart.so.<major> is."""
    folders = (os.environ.get(RUNTIMES_VARIABLE, "") if paths is None else paths).split(os.pathsep)
    found = []
    for folder in filter(None, folders):
        for info in sorted(glob.glob(os.path.join(folder, "nvidia_cuda_runtime*.dist-info"))):
            match = _DIST_INFO.match(os.path.basename(info))
            if not match:
                continue
            major = match["version"].split(".")[0]
            # The wheels of CUDA 13 on put it in nvidia/cu<major>/lib, CUDA 12's in nvidia/cuda_runtime/lib.
            for lib in (
                os.path.join(folder, "nvidia", f"cu{major}", "lib"),
                os.path.join(folder, "nvidia", "cuda_runtime", "lib"),
            ):
                if os.path.isfile(os.path.join(lib, f"libcudart.so.{major}")):
                    found.append(Runtime(match["version"], os.path.abspath(lib)))
                    break
    return found


@cache
def nvcc_release(nvcc: str) -> str | None:
    """'13.0': the CUDA release of an nvcc (from ``nvcc --version``), or None."""
    try:
        text = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"release (\d+\.\d+)", text)
    return found[1] if found else None


def runtime_environments(env: dict[str, Any], release: str | None, runtimes: list[Runtime]) -> list[dict[str, Any]]:
    """The twins of a ReFrame environment whose nvcc is CUDA `release`: one per
    runtime of the same major version and another release."""
    if not release:
        return []
    twins, releases = [], {release}
    for runtime in runtimes:
        # One twin per release: the first folder named that has it.
        if runtime.major != int(release.split(".")[0]) or runtime.release in releases:
            continue
        releases.add(runtime.release)
        twin = {**env, "name": f"{env['name']}-rt{runtime.release.replace('.', '_')}"}
        path = f"{runtime.lib}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"  # no empty entry (the cwd) when unset
        twin["env_vars"] = [*env.get("env_vars", []), ["LD_LIBRARY_PATH", path]]
        twin["extras"] = {**env.get("extras", {}), "cuda_runtime": runtime.release, "cuda_runtime_lib": runtime.lib}
        twins.append(twin)
    return twins


TWIN_SUFFIX = re.compile(r"-rt\d+_\d+$")


def base_environment(name: str) -> str:
    """'gnu' of 'gnu-rt13_5': the environment a twin was made from."""
    return TWIN_SUFFIX.sub("", name)


def with_runtime_twins(rfm_envs: list[dict[str, Any]], partitions: list[dict[str, Any]], runtimes: list[Runtime]):
    """Add each environment's runtime twins to the environments and to every
    partition that has the environment; the environments' own runtime is the
    toolkit's release of their nvcc."""
    twins_of = {}
    for env in list(rfm_envs):
        release = nvcc_release(env["nvcc"]) if env.get("nvcc") and runtimes else None
        twins = runtime_environments(env, release, runtimes)
        twins_of[env["name"]] = [t["name"] for t in twins]
        rfm_envs += twins
    for part in partitions:
        part["environs"] = [name for base in part["environs"] for name in (base, *twins_of.get(base, []))]


# ----------------------------------------------- toolkits compiled by clang --

TOOLKITS_VARIABLE = "GPU_MEMPATHS_CUDA_TOOLKITS"
CLANG_VARIABLE = "GPU_MEMPATHS_CLANG"
#: Where a toolkit folder holds the suite built with it elsewhere.
INSTALLED_SUITE = "gpu-mempaths"

_CUDART_VERSION = re.compile(r"^#define CUDART_VERSION +(\d+)", re.M)


@dataclass(frozen=True)
class Toolkit:
    """A CUDA toolkit clang compiles against: its release and its folder."""

    release: str  # '12.9'
    root: str

    @property
    def lib(self) -> str:
        """The folder of its libcudart (lib64, or lib)."""
        major = self.release.split(".")[0]
        found = [d for d in ("lib64", "lib") if os.path.exists(os.path.join(self.root, d, f"libcudart.so.{major}"))]
        return os.path.join(self.root, found[0] if found else "lib64")

    @property
    def installed(self) -> str | None:
        """The suite built with this toolkit and installed in its folder, if it is there."""
        prefix = os.path.join(self.root, INSTALLED_SUITE)
        return prefix if os.path.isdir(os.path.join(prefix, "bin")) else None


def toolkit_release(root: str) -> str | None:
    """'12.9': a toolkit's release from its cuda_runtime_api.h, or None where it has none."""
    try:
        with open(os.path.join(root, "include", "cuda_runtime_api.h")) as stream:
            found = _CUDART_VERSION.search(stream.read())
    except OSError:
        return None
    return f"{int(found[1]) // 1000}.{int(found[1]) % 1000 // 10}" if found else None


def toolkits_found(paths: str | None = None) -> list[Toolkit]:
    """The toolkits in the folders of `paths` (default $GPU_MEMPATHS_CUDA_TOOLKITS)."""
    folders = (os.environ.get(TOOLKITS_VARIABLE, "") if paths is None else paths).split(os.pathsep)
    found = []
    for folder in filter(None, folders):
        release = toolkit_release(folder)
        if release is None:
            raise ValueError(f"{TOOLKITS_VARIABLE}: {folder} is not a CUDA toolkit (no include/cuda_runtime_api.h)")
        found.append(Toolkit(release, os.path.abspath(folder)))
    return found


def cuda_clang() -> str | None:
    """The clang++ that compiles CUDA: $GPU_MEMPATHS_CLANG, else the newest
    clang++-<N> on PATH (Hopper needs clang 16 or newer), else None."""
    named = os.environ.get(CLANG_VARIABLE)
    if named:
        return shutil.which(named)
    for version in range(30, 15, -1):
        found = shutil.which(f"clang++-{version}")
        if found:
            return found
    return None


def toolkit_environment(toolkit: Toolkit, clang: str | None) -> dict[str, Any] | None:
    """The environment that builds (or, installed, runs) the suite with a
    toolkit; None where there is neither a clang nor an installation."""
    extras: dict[str, Any] = {"cmake_options": [], "spack_specs": [], "cuda_runtime": toolkit.release}
    env: dict[str, Any] = {"name": f"clang-cuda{toolkit.release.replace('.', '_')}", "features": ["cuda"], "ftn": ""}
    if toolkit.installed:
        extras["suite_prefix"] = toolkit.installed
    elif clang:
        env["cc"] = re.sub(r"clang\+\+", "clang", os.path.basename(clang))
        env["cxx"] = clang
        extras["cmake_options"] = [f"-DGPU_MEMPATHS_CLANG_CUDA_PATH={toolkit.root}"]
    else:
        return None
    env["extras"] = extras
    env["env_vars"] = [["LD_LIBRARY_PATH", f"{toolkit.lib}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"]]
    return env


def with_toolkit_environments(
    rfm_envs: list[dict[str, Any]], partitions: list[dict[str, Any]], toolkits: list[Toolkit], clang: str | None
) -> None:
    """Add each toolkit's environment, with the system as its target, to the
    environments and to every partition that has a CUDA environment."""
    cuda_envs = {e["name"] for e in rfm_envs if "cuda" in e.get("features", [])}
    systems = rfm_envs[0]["target_systems"] if rfm_envs else []
    for toolkit in toolkits:
        env = toolkit_environment(toolkit, clang)
        if env is None:
            raise ValueError(
                f"{TOOLKITS_VARIABLE}: CUDA {toolkit.release} at {toolkit.root} can be neither built "
                f"(no clang++-<N> on PATH; {CLANG_VARIABLE} names one) nor run (no suite installed in "
                f"{toolkit.root}/{INSTALLED_SUITE})"
            )
        rfm_envs.append({**env, "target_systems": systems})
        for part in partitions:
            if cuda_envs & set(part["environs"]):
                part["environs"].append(env["name"])
