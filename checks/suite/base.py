"""Base classes of the run-only checks: the shared build, node facts for the
perflog, launcher defaults from the system's data, and the GPU skip rule."""

import glob
import os
import re

import reframe as rfm
from reframe.core.builtins import fixture, run_after, run_before, variable

from .build import SuiteBuild


def cuda_toolkit_version(build_stagedir: str) -> str:
    """'12.8': the CUDA toolkit a CMake build of src/ configured, from CMake's
    record of its CUDA compiler; 'unknown' where there is none."""
    pattern = os.path.join(build_stagedir, "build", "CMakeFiles", "*", "CMakeCUDACompiler.cmake")
    for path in sorted(glob.glob(pattern)):
        with open(path) as stream:
            found = re.search(r'CMAKE_CUDA_COMPILER_TOOLKIT_VERSION "(\d+)\.(\d+)', stream.read())
        if found:
            return f"{found[1]}.{found[2]}"
    return "unknown"


class NodeFacts(rfm.RegressionTestPlugin):
    """The node a check runs on, as every perflog line carries it (see
    systems/rfm.py) and as references are matched on (checks/suite/references.py),
    and the launch defaults the system's data gives."""

    gpu_model = variable(str, value="none", loggable=True)
    gpu_count = variable(int, value=0, loggable=True)
    driver_version = variable(str, value="unknown", loggable=True)
    cuda_version = variable(str, value="unknown", loggable=True)
    host_link = variable(str, value="unknown", loggable=True)

    @property
    def node(self) -> dict:
        return self.current_partition.extras["node"]

    def speed_of_light(self, link: str):
        """A link's limit per direction in bytes per second, or None."""
        return self.current_partition.extras["speed_of_light"].get(link)

    @run_after("setup")
    def describe_node(self):
        node = self.node
        info = self.current_partition.extras.get("node_info", {})
        self.gpu_model = node["gpus"].get("model", "none")
        self.gpu_count = node["gpus"]["count"]
        self.driver_version = info.get("driver_version", "unknown")
        self.cuda_version = info.get("cuda_driver_version", "unknown")
        link = node["host_link"]
        self.host_link = " ".join(
            str(part)
            for part in (
                link["type"],
                f"gen{link['generation']}" if "generation" in link else None,
                f"x{link['width']}" if "width" in link else None,
            )
            if part
        )

    @run_before("run")
    def apply_launcher_settings(self):
        # Launcher defaults come from the system's data; only launchers that
        # declare a setting (the suite's jsrun) take it.
        launcher = self.job.launcher
        for name, value in self.current_partition.extras.get("launcher_settings", {}).items():
            if hasattr(type(launcher), name):
                setattr(launcher, name, value)
        if hasattr(type(launcher), "gpus_per_task") and self.num_gpus_per_node:
            launcher.gpus_per_task = self.num_gpus_per_node // max(1, self.num_tasks_per_node or 1)


class SuiteCheck(rfm.RunOnlyRegressionTest, NodeFacts):
    """A run of one of the suite's programs, built once by :class:`SuiteBuild`."""

    build = fixture(SuiteBuild, scope="environment")
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    maintainers = ["gpu-mempaths"]
    num_tasks = 1
    num_tasks_per_node = 1
    exclusive_access = True

    #: The program of src/ this check runs.
    program = variable(str)

    #: The CUDA toolkit the programs were built with, whose runtime (libcudart)
    #: they link: 'none' for host-only builds, 'unknown' where the build left
    #: no record of it (Spack builds, dry runs).
    cuda_runtime_version = variable(str, value="unknown", loggable=True)

    @run_after("setup")
    def describe_build(self):
        self.cuda_runtime_version = cuda_toolkit_version(self.build.stagedir) if self.build.has_cuda else "none"

    @run_after("setup")
    def set_executable(self):
        self.executable = os.path.join(self.build.stagedir, "bin", self.program)


class GpuCheck(SuiteCheck):
    """A check that needs a GPU and a CUDA build; skipped with the reason
    where the node has none, rather than silently left out."""

    valid_systems = ["+gpu", "+detected"]
    valid_prog_environs = ["+cuda"]
    num_gpus_per_node = 1

    @run_after("setup")
    def skip_without_gpu(self):
        extras = self.current_partition.extras
        reasons = "; ".join(extras.get("detection_notes", [])) or "the partition declares no GPU"
        self.skip_if(extras["node"]["gpus"]["count"] == 0, f"no GPU on {self.current_partition.fullname}: {reasons}")
