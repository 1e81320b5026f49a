"""One build of src/ per partition and environment, shared by every check.

Environments with the 'spack' feature build the repository's Spack
environment (spack.yaml, with the system's externals); those that name an
installation of the suite (extras 'suite_prefix': built elsewhere, e.g. with a
compiler this node lacks) use it as it is; the others configure src/ with
CMake directly. Either way the programs end up in <stage>/bin, and what built
them in <stage>/share/gpu-mempaths/build-facts.txt (src/CMakeLists.txt).
"""

import os
import shlex
import shutil

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_before, sanity_function, variable

from experiments import roots

REPO = str(roots.REPO)

#: Programs every build has, and those that need a CUDA compiler.
HOST_PROGRAMS = ["host_bandwidth"]
CUDA_PROGRAMS = ["um_bandwidth", "daxpy", "copy_latency", "mem_scan", "p2p_pingpong", "path_matrix"]
CUDA_PROGRAMS_WHEN = ("where-gpus", "always", "never")


class SuiteBuild(rfm.CompileOnlyRegressionTest):
    """Builds every program of src/ once; run-only checks take it as a fixture."""

    descr = "Build the suite's programs (CMake, or Spack where the environment says so)"
    build_system = "CMake"
    sourcesdir = os.path.join(REPO, "src")
    maintainers = ["gpu-mempaths"]
    tags = {"build"}

    #: Parallel build jobs: by default one per core this process may run
    #: on where ReFrame builds (ReFrame builds where it runs), up to 32: src/ has fewer
    #: translation units than that. A site's login node may want fewer
    #: (-S SuiteBuild.build_jobs=N).
    build_jobs = variable(int, value=min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 4, 32))

    #: When the CUDA programs are built: 'where-gpus' (a partition whose node
    #: has GPUs: on one without, every GPU check is skipped, and building them
    #: took two minutes for nothing), 'always' (a toolkit tried on a build
    #: host without a GPU), or 'never'. Not logged: a new perflog column
    #: would make ReFrame start the build's perflog anew.
    cuda_programs = variable(str, value="where-gpus", loggable=False)

    @property
    def uses_spack(self) -> bool:
        return "spack" in self.current_environ.features

    @property
    def installed_prefix(self) -> str | None:
        return self.current_environ.extras.get("suite_prefix")

    @property
    def has_cuda(self) -> bool:
        if self.cuda_programs not in CUDA_PROGRAMS_WHEN:
            raise ValueError(f"SuiteBuild.cuda_programs={self.cuda_programs!r}: expected one of {CUDA_PROGRAMS_WHEN}")
        if "cuda" not in self.current_environ.features or self.cuda_programs == "never":
            return False
        gpus = self.current_partition.extras.get("node", {}).get("gpus", {}).get("count", 1)
        return self.cuda_programs == "always" or gpus > 0

    @property
    def has_gdrcopy(self) -> bool:
        """Whether the build has the GDRCopy paths: the environment's CMake
        option -DGPU_MEMPATHS_WITH_GDRCOPY=ON, or Spack's +gdrcopy."""
        extras = self.current_environ.extras
        return "-DGPU_MEMPATHS_WITH_GDRCOPY=ON" in extras.get("cmake_options", []) or any(
            "+gdrcopy" in spec for spec in extras.get("spack_specs", [])
        )

    def cuda_archs(self) -> list:
        return self.current_partition.extras.get("cuda_archs", [])

    @run_before("compile")
    def configure_build(self):
        if self.uses_spack:
            self._configure_spack()
        elif self.installed_prefix:
            self._use_installation(self.installed_prefix)
        else:
            self._configure_cmake()

    def _configure_cmake(self):
        archs = ";".join(str(a) for a in self.cuda_archs())
        self.build_system.builddir = "build"
        self.build_system.max_concurrency = self.build_jobs
        self.build_system.config_opts = [
            "-DCMAKE_BUILD_TYPE=Release",
            f'-DGPU_MEMPATHS_CUDA_ARCHS="{archs}"',
            f"-DGPU_MEMPATHS_HOST_ONLY={'OFF' if self.has_cuda else 'ON'}",
            *self.current_environ.extras.get("cmake_options", []),
        ]
        self.postbuild_cmds = [f"cmake --install build --prefix {shlex.quote(self.stagedir)}"]

    def _use_installation(self, prefix: str):
        self.build_system = "CustomBuild"
        self.sourcesdir = None
        self.build_system.commands = [f"ln -sfn {shlex.quote(os.path.join(prefix, d))} {d}" for d in ("bin", "share")]

    def _configure_spack(self):
        # A fresh environment in the stage, made from the repository's
        # manifest; the system's externals come in through GPU_MEMPATHS_SYSTEM,
        # its GPU architectures through the spec.
        archs = ",".join(str(a) for a in self.cuda_archs())
        self.build_system = "Spack"
        self.sourcesdir = None
        self.build_system.env_create_opts = [os.path.join(REPO, "spack.yaml")]
        self.build_system.specs = [
            " ".join([f"gpu-mempaths cuda_arch={archs}", *self.current_environ.extras.get("spack_specs", [])])
        ]
        # Spack would otherwise leave a link to its build directory in the checkout.
        self.build_system.config_opts = [f"config:develop_stage_link:{self.stagedir}/spack-build"]
        self.build_system.install_opts = ["--fail-fast"]
        self.env_vars["GPU_MEMPATHS_ROOT"] = REPO
        self.env_vars["GPU_MEMPATHS_SYSTEM"] = self.current_system.name
        self.postbuild_cmds = [
            f'ln -sfn "$(spack -e rfm_spack_env location -i gpu-mempaths)/{d}" {d}' for d in ("bin", "share")
        ]

    def programs(self) -> list:
        return HOST_PROGRAMS + (CUDA_PROGRAMS if self.has_cuda else [])

    @sanity_function
    def validate_build(self):
        return sn.all(
            sn.assert_true(os.path.isfile(os.path.join(self.stagedir, "bin", p)), msg=f"{p} was not built")
            for p in self.programs()
        )


# --------------------------------------------------- GDRCopy's installation --


def gdrcopy_source(partition, environ) -> tuple:
    """Where this partition and environment take GDRCopy's tests from:
    ('prefix', <installation>) from the system's data, or on a detected node
    from PATH; ('spack', '') in Spack environments; ('none', <why not>)."""
    prefix = partition.extras.get("gdrcopy_prefix")
    if prefix:
        return "prefix", prefix
    if "spack" in environ.features:
        return "spack", ""
    if partition.extras.get("detected"):
        for name in ("gdrcopy_copylat", "copylat"):
            found = shutil.which(name)
            if found:
                return "prefix", os.path.dirname(os.path.dirname(os.path.realpath(found)))
    system = partition.fullname.split(":")[0]
    return "none", (
        f"no GDRCopy installation for {partition.fullname}+{environ.name}: name one with gdrcopy_prefix in "
        f"systems/{system}.yaml, or use an environment with the 'spack' feature"
    )


def gdrdrv_absent(partition) -> str | None:
    """Why GDRCopy cannot run on this partition, or None when it can."""
    if partition.extras["node"]["gpus"]["count"] == 0:
        why = "; ".join(partition.extras.get("detection_notes", [])) or "the partition declares no GPU"
        return f"no GPU on {partition.fullname}: {why}"
    if "gdrdrv" not in partition.features:
        how = "/dev/gdrdrv is absent" if partition.extras.get("detected") else "the system's data says gdrdrv: false"
        return f"no gdrdrv on {partition.fullname} ({how}): GDRCopy maps GPU memory through that kernel module"
    return None


class GdrCopyBuild(rfm.CompileOnlyRegressionTest):
    """GDRCopy's library and tests from Spack's gdrcopy package, for Spack
    environments of partitions with gdrdrv and no installation named in the
    system's data. Anywhere else there is nothing to build: the build script
    only says where GDRCopy comes from, or why it is not needed."""

    descr = "GDRCopy's library and tests (Spack's gdrcopy), where the checks need them"
    build_system = "Spack"
    sourcesdir = None
    maintainers = ["gpu-mempaths"]
    tags = {"build", "gdrcopy"}

    #: The spec to install, e.g. 'gdrcopy@2.4.4' to choose the version.
    spec = variable(str, value="gdrcopy")

    @property
    def builds(self) -> bool:
        kind, _ = gdrcopy_source(self.current_partition, self.current_environ)
        return kind == "spack" and gdrdrv_absent(self.current_partition) is None

    def prefix(self) -> str | None:
        """GDRCopy's installation for the checks, or None where there is none."""
        kind, where = gdrcopy_source(self.current_partition, self.current_environ)
        if kind == "prefix":
            return where
        return os.path.join(self.stagedir, "gdrcopy") if kind == "spack" else None

    @run_before("compile")
    def configure_build(self):
        if not self.builds:
            kind, where = gdrcopy_source(self.current_partition, self.current_environ)
            why = gdrdrv_absent(self.current_partition) or (
                f"GDRCopy from {where} (the system's data)" if kind == "prefix" else where
            )
            self.build_system = "CustomBuild"
            self.build_system.commands = [f"echo {shlex.quote('nothing to build: ' + why)}"]
            return
        self.build_system.env_create_opts = [os.path.join(REPO, "spack", "gdrcopy.yaml")]
        self.build_system.specs = [self.spec]
        self.build_system.install_opts = ["--fail-fast"]
        self.env_vars["GPU_MEMPATHS_ROOT"] = REPO
        self.env_vars["GPU_MEMPATHS_SYSTEM"] = self.current_system.name
        self.postbuild_cmds = ['ln -sfn "$(spack -e rfm_spack_env location -i gdrcopy)" gdrcopy']

    @sanity_function
    def validate_build(self):
        if not self.builds:
            return sn.assert_true(True)
        bindir = os.path.join(self.stagedir, "gdrcopy", "bin")
        return sn.assert_true(
            any(os.path.isfile(os.path.join(bindir, n)) for n in ("gdrcopy_sanity", "sanity")),
            msg=f"no GDRCopy tests in {bindir}",
        )
