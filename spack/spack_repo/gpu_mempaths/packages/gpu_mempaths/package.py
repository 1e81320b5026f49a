# Recipe for the suite's own CUDA programs (src/ of this repository).
#
# There is no release to download: spack.yaml at the repository root declares
# the package as a `develop` spec whose path is the checkout, so Spack builds
# the working tree as it is. A plain `spack install gpu-mempaths` outside that
# environment has nothing to fetch and fails on purpose.

from spack.package import *
from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.builtin.build_systems.cuda import CudaPackage


class GpuMempaths(CMakePackage, CudaPackage):
    """The CUDA programs of the gpu-mempaths ReFrame suite: benchmarks of the
    memory paths between CPUs and GPUs (host memory, Unified Memory, pinned
    and device memory, peer and GPUDirect copies)."""

    # Only ever built from a checkout (see spack.yaml's `develop:` section).
    version("main")

    # CMakeLists.txt lives in src/, not at the repository root.
    root_cmakelists_dir = "src"

    variant(
        "numa",
        default=True,
        description="Require libnuma (GPU_MEMPATHS_REQUIRE_NUMA) for NUMA-node placement",
    )
    variant(
        "gdrcopy",
        default=False,
        description="Build the GPUDirect RDMA copy paths against gdrcopy (needs gdrdrv)",
    )

    # The suite is CUDA code throughout: the CUDA variant of CudaPackage is
    # switched on and must stay on; cuda_arch picks GPU_MEMPATHS_CUDA_ARCHS.
    variant("cuda", default=True, description="Build with CUDA (always on)")
    conflicts("~cuda", msg="gpu-mempaths is CUDA code: it cannot be built without CUDA")
    conflicts(
        "cuda_arch=none",
        when="+cuda",
        msg="set the GPU architecture(s), e.g. gpu-mempaths cuda_arch=80 "
        "(the ReFrame build takes them from the system's cuda_archs)",
    )

    depends_on("cxx", type="build")
    depends_on("cmake@3.18:", type="build")
    depends_on("cuda@11:", when="+cuda")
    depends_on("numactl", when="+numa")
    depends_on("gdrcopy", when="+gdrcopy")

    def cmake_args(self):
        spec = self.spec
        archs = [a for a in spec.variants["cuda_arch"].value if a != "none"]
        args = [
            self.define("GPU_MEMPATHS_CUDA_ARCHS", ";".join(archs)),
            self.define("CMAKE_CUDA_COMPILER", spec["cuda"].prefix.bin.nvcc),
            self.define("CUDAToolkit_ROOT", spec["cuda"].prefix),
            self.define_from_variant("GPU_MEMPATHS_REQUIRE_NUMA", "numa"),
            self.define_from_variant("GPU_MEMPATHS_WITH_GDRCOPY", "gdrcopy"),
        ]
        # gdrcopy and numactl are found through CMAKE_PREFIX_PATH, which the
        # CMake builder's standard arguments already fill with the prefixes of
        # all link dependencies (system prefixes such as /usr are left out:
        # CMake searches those anyway).
        return args
