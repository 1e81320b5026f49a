"""A stand-in for nvidia-ml-py on a machine without a GPU (tests/test_fake_gpu.py):
one H100 on PCIe Gen5 under a name of its own, from tests/fake_nvml.py, or
GPU_MEMPATHS_FAKE_GPUS of them (two joined by 18 NVLinks, more through NVSwitch). GPU_MEMPATHS_FAKE_GPU
('field=value,...') changes the GPU's readings, to inject a fault; GPU_MEMPATHS_FAKE_GPU_RUNNING
changes them only for the watch (systems/watch.py), as a GPU that misbehaves only while a
check's program loads it, not at rest when health reads it; GPU_MEMPATHS_FAKE_PROCESSES
('GPU=PID:NAME,...') puts another's process on GPUs while the checks' programs run, and
GPU_MEMPATHS_FAKE_DRIVER, the driver it reports. The watch's reading of the host's
processes (systems/host_use.py) sees only those GPU_MEMPATHS_FAKE_HOST_PIDS names ('PID,...'; none
by default): the test machine's own load, pytest's other workers, is none of the fake node's. The link
trains up while the fake CUDA driver (tests/fakegpu/libcuda) copies to the GPU, as health's load makes it."""

import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from fake_nvml import FakeGpu, FakeNvml  # noqa: E402

#: Not the real H100's name: references of machines described at run time
#: match by GPU model, and the real one's are committed.
NAME = "NVIDIA H100 80GB HBM3 (fake)"


def _watching() -> bool:
    """Whether the watch loaded this module (python -m systems.watch): a check's program is running."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == "systems.watch"


def _gpu(index: int = 0, count: int = 1) -> FakeGpu:
    gpu = FakeGpu(name=NAME, uuid=f"GPU-{index}", bus_id=f"00000000:{index + 1:02x}:00.0")
    if count > 1:  # NVLink4, 18 links: to the one peer, or to the NVSwitches
        gpu.nvlinks, gpu.nvlink_remotes = [4] * 18, [0 if count == 2 else 2] * 18
    changes = os.environ.get("GPU_MEMPATHS_FAKE_GPU", "")
    if _watching():
        changes += "," + os.environ.get("GPU_MEMPATHS_FAKE_GPU_RUNNING", "")
    for item in filter(None, changes.split(",")):
        name, _, value = item.partition("=")
        setattr(gpu, name, type(getattr(gpu, name))(int(value)))
    if _watching():
        for item in filter(None, os.environ.get("GPU_MEMPATHS_FAKE_PROCESSES", "").split(",")):
            where, _, process = item.partition("=")
            pid, _, name = process.partition(":")
            if int(where) == index:
                gpu.others.append((int(pid), name or "neighbour", 1 << 30))
                gpu.pcie_kbps = (48_000_000, 48_000_000)  # the neighbour's copies, both ways
    return gpu


def _host_seen() -> None:
    """The processes the watch's host reading sees: GPU_MEMPATHS_FAKE_HOST_PIDS's alone."""
    host_use = sys.modules.get("systems.host_use")
    if _watching() and host_use is not None:
        host_use.ONLY = {int(p) for p in filter(None, os.environ.get("GPU_MEMPATHS_FAKE_HOST_PIDS", "").split(","))}


_host_seen()


def _link_loaded() -> bool:
    """Whether the fake CUDA driver is copying to the GPU (CudaDriver.load_link)."""
    try:
        return bool(ctypes.c_int.in_dll(ctypes.CDLL("libcuda.so.1"), "fake_link_loaded").value)
    except (OSError, ValueError):  # no fake driver on the library path: the link idles
        return False


class _Node(FakeNvml):
    def nvmlDeviceGetCurrPcieLinkGeneration(self, g):
        g.loaded = _link_loaded()
        return super().nvmlDeviceGetCurrPcieLinkGeneration(g)

    def nvmlDeviceGetCurrPcieLinkWidth(self, g):
        g.loaded = _link_loaded()
        return super().nvmlDeviceGetCurrPcieLinkWidth(g)


_count = int(os.environ.get("GPU_MEMPATHS_FAKE_GPUS", "1"))
#: GPU_MEMPATHS_FAKE_DRIVER: the driver the node reports (a driver upgrade), else fake_nvml's.
_nvml = _Node(
    [_gpu(i, _count) for i in range(_count)],
    **({"driver": os.environ["GPU_MEMPATHS_FAKE_DRIVER"]} if os.environ.get("GPU_MEMPATHS_FAKE_DRIVER") else {}),
)


def __getattr__(name):
    return getattr(_nvml, name)
