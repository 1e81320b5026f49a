"""CUDA runtimes as ReFrame environments, for comparing a CUDA upgrade.

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
"""

from __future__ import annotations

import glob
import os
import re
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
            for lib in (os.path.join(folder, "nvidia", f"cu{major}", "lib"),
                        os.path.join(folder, "nvidia", "cuda_runtime", "lib")):  # fmt: skip
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
