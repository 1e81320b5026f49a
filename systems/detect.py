"""Describe the node we run on, in the same form as a system file's ``node``.

GPUs, host link, NVLink and memory come from NVML (nvidia-ml-py); the
addressing mode (ATS, HMM or none) from the CUDA driver's device attributes;
CPUs, NUMA nodes and memory from sysfs. Only the GPUs CUDA sees count
(CUDA_VISIBLE_DEVICES, as a scheduler sets it), numbered as CUDA numbers
them. Nothing here may fail: a machine with no GPU, no driver or no NVML is
described as having no GPU, and the reason is kept in ``notes`` so that
skipped checks can say why.

Per GPU, the readings the health checks judge (systems/health.py) include
the PCIe link as trained while a copy loads it (links train down when idle)
and the error counters of ``read_counters``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import shutil
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .data import parse_yaml
from .gpu_readings import as_str, gpu_readings, hbm_bandwidth, or_default, visible_gpus

# cuda.h: CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS and ..._USES_HOST_PAGE_TABLES
_CU_PAGEABLE_MEMORY_ACCESS = 88
_CU_PAGEABLE_USES_HOST_PAGE_TABLES = 100


@dataclass
class Detected:
    node: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)  # driver and CUDA versions, GPU UUIDs
    notes: list[str] = field(default_factory=list)  # why something could not be detected


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.2f} GiB"


def _cpu(sysfs: Path, cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, Any]:
    cpus = sorted(sysfs.glob("devices/system/cpu/cpu[0-9]*/topology"))
    packages, cores = set(), set()
    for topo in cpus:
        try:
            pkg = (topo / "physical_package_id").read_text().strip()
            core = (topo / "core_id").read_text().strip()
        except OSError:
            continue
        packages.add(pkg)
        cores.add((pkg, core))
    logical = len(cpus) or os.cpu_count() or 1
    sockets = max(1, len(packages))
    physical = max(1, len(cores))
    info = first_cpu(cpuinfo)
    described = {
        "arch": os.uname().machine,
        "model": info.get("model name") or info.get("cpu") or "unknown",  # x86 and POWER spellings
        "sockets": sockets,
        "cores_per_socket": max(1, physical // sockets),
        "threads_per_core": max(1, logical // physical),
    }
    bandwidth = memory_bandwidth_of(info)
    if bandwidth:
        described["memory_bandwidth"] = bandwidth
    return described


def first_cpu(cpuinfo: Path) -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (empty where unreadable)."""
    fields: dict[str, str] = {}
    try:
        text = cpuinfo.read_text()
    except OSError:
        return fields
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


CPUS_FILE = Path(__file__).parent / "cpus" / "memory.yaml"


def memory_bandwidth_of(info: dict[str, str], table: Path = CPUS_FILE) -> str | None:
    """One socket's memory peak for the CPU /proc/cpuinfo describes, as a
    rate ('358.4 GB/s'), from systems/cpus/memory.yaml; None where it is not
    listed. By family and model (x86) or implementer and part (Arm), which a
    hypervisor leaves as they are."""

    facts = {
        "vendor": info.get("vendor_id", ""),
        "family": info.get("cpu family", ""),
        "model": info.get("model", ""),
        "implementer": info.get("CPU implementer", ""),
        "part": info.get("CPU part", ""),
    }
    for entry in (parse_yaml(table.read_text()) or {}).get("cpus", []):
        keys = [k for k in ("vendor", "family", "model", "implementer", "part") if k in entry]
        if keys and all(str(entry[k]).lower() == facts[k].lower() for k in keys):
            return f"{entry['channels'] * entry['mts'] * 8 / 1000:.1f} GB/s"
    return None


def _numa_nodes(sysfs: Path) -> list[int]:
    nodes = []
    for path in sysfs.glob("devices/system/node/node[0-9]*"):
        if any(path.glob("cpu[0-9]*")):  # nodes with CPUs; GPU memory nodes have none
            nodes.append(int(path.name[4:]))
    return sorted(nodes) or [0]


def _host_memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return _gib(int(line.split()[1]) * 1024)
    except OSError:
        pass
    return "0 GiB"


def _no_gpus() -> dict[str, Any]:
    return {"count": 0}


class CudaDriver:
    """The two device attributes NVML does not give, read through libcuda."""

    def __init__(self) -> None:
        self._lib = ctypes.CDLL("libcuda.so.1")
        rc = self._lib.cuInit(0)
        if rc != 0:
            raise OSError(f"cuInit failed with CUDA error {rc}")

    def attribute(self, device: int, attribute: int) -> int:
        value = ctypes.c_int()
        rc = self._lib.cuDeviceGetAttribute(ctypes.byref(value), attribute, device)
        if rc != 0:
            raise OSError(f"cuDeviceGetAttribute({attribute}) failed with CUDA error {rc}")
        return value.value

    def addressing(self, device: int) -> str:
        if not self.attribute(device, _CU_PAGEABLE_MEMORY_ACCESS):
            return "none"
        return "ats" if self.attribute(device, _CU_PAGEABLE_USES_HOST_PAGE_TABLES) else "hmm"

    def _call(self, name: str, *args) -> None:
        rc = getattr(self._lib, name)(*args)
        if rc != 0:
            raise OSError(f"{name} failed with CUDA error {rc}")

    @contextmanager
    def load_link(self, bus_id: str, nbytes: int = 64 << 20, settle_s: float = 0.3):
        """Host-to-device copies on the GPU at `bus_id`, back to back on a
        thread, for as long as the block runs (and `settle_s` before it): a
        PCIe link trains up to its working speed only under load."""
        device, ctx = ctypes.c_int(), ctypes.c_void_p()
        host, dev = ctypes.c_void_p(), ctypes.c_uint64()
        self._call("cuDeviceGetByPCIBusId", ctypes.byref(device), bus_id.encode())
        self._call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), device)
        stop, failed = threading.Event(), []

        def copy() -> None:
            try:
                self._call("cuCtxSetCurrent", ctx)
                while not stop.is_set():  # ctypes lets go of the GIL during each copy
                    self._call("cuMemcpyHtoD_v2", dev, host, ctypes.c_size_t(nbytes))
            except OSError as err:
                failed.append(err)

        try:
            self._call("cuCtxSetCurrent", ctx)
            self._call("cuMemAllocHost_v2", ctypes.byref(host), ctypes.c_size_t(nbytes))
            self._call("cuMemAlloc_v2", ctypes.byref(dev), ctypes.c_size_t(nbytes))
            worker = threading.Thread(target=copy, daemon=True)
            worker.start()
            time.sleep(settle_s)
            if failed:
                raise failed[0]
            yield
            if failed:  # the copies stopped while the link was read: it may have been idle
                raise failed[0]
        finally:
            stop.set()
            if "worker" in locals():
                worker.join()
            if dev.value:
                self._lib.cuMemFree_v2(dev)
            if host.value:
                self._lib.cuMemFreeHost(host)
            self._lib.cuCtxSetCurrent(None)
            self._lib.cuDevicePrimaryCtxRelease(device)


def _describe_nvlinks(node: dict[str, Any], first: dict[str, Any], count: int, notes: list[str]) -> None:
    """The GPU links (and an NVLink host link) from GPU 0's NVLink links."""
    remotes = first["nvlink_remotes"]
    if not remotes:
        remotes = {"gpu": first["nvlinks"]}
        notes.append("NVML does not say what each NVLink link leads to: all taken as links to peers")
    generation = {"generation": first["nvlink_version"]} if first["nvlink_version"] else {}
    if not first["nvlink_version"]:
        notes.append("NVLink generation unknown: NVML gave no version, so no NVLink limit")
    if remotes.get("cpu"):
        node["host_link"] = {"type": "nvlink", "links": remotes["cpu"], **generation}
    if count < 2:
        return
    if remotes.get("switch"):
        node["gpu_link"] = {"type": "nvswitch", "links_per_gpu": remotes["switch"], **generation}
    elif remotes.get("gpu") and count == 2:
        node["gpu_link"] = {"type": "nvlink", "links_per_peer": remotes["gpu"], **generation}
    elif remotes.get("gpu"):
        # Which peer each link joins is not read: no pair's limit is known.
        node["gpu_link"] = {"type": "nvlink", "links_per_gpu": remotes["gpu"], **generation}
        notes.append(f"{remotes['gpu']} NVLink links to peers, pairs not read: no limit for one pair")
    else:
        node["gpu_link"] = {"type": "pcie"}


def _visible_handles(nvml, detected: Detected) -> list:
    """NVML's handles of the GPUs CUDA sees (CUDA_VISIBLE_DEVICES), in CUDA's order."""
    count = nvml.nvmlDeviceGetCount()
    if count == 0:
        detected.notes.append("NVML reports no GPU")
        return []
    every = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    setting = os.environ.get("CUDA_VISIBLE_DEVICES")
    visible = visible_gpus([as_str(or_default(lambda h=h: nvml.nvmlDeviceGetUUID(h), "")) for h in every], setting)
    if not visible:
        detected.notes.append(f"CUDA_VISIBLE_DEVICES={setting!r} leaves none of the {count} GPU(s) NVML sees")
    elif len(visible) < count:
        detected.notes.append(f"{len(visible)} of {count} GPUs visible (CUDA_VISIBLE_DEVICES={setting!r})")
    return [every[i] for i in visible]


def _gpus_of(nvml, handle, readings: list, node: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """The node's GPUs as GPU 0 describes them, with every GPU's NUMA node."""
    major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
    models = {r["model"] for r in readings}
    if len(models) > 1:
        notes.append(f"mixed GPU models {sorted(models)}: described as GPU 0")
    gpus: dict[str, Any] = {
        "count": len(readings),
        "model": readings[0]["model"],
        "memory": _gib(nvml.nvmlDeviceGetMemoryInfo(handle).total),
        "compute_capability": f"{major}.{minor}",
    }
    affinity = [r["numa"] for r in readings]
    if all(a is not None for a in affinity):
        gpus["numa_affinity"] = affinity
        node["numa_nodes"] = sorted(set(node["numa_nodes"]) | set(affinity))
    # Unknown values are left out, with the reason, never made up: a check
    # then logs no fraction of that limit and bounds no reference by it.
    hbm = hbm_bandwidth(nvml, handle)
    if hbm:
        gpus["hbm_bandwidth"] = hbm
    else:
        notes.append("HBM bandwidth unknown: NVML gave no memory clock or bus width")
    return gpus


def _describe_links(node: dict[str, Any], first: dict[str, Any], count: int, notes: list[str]) -> None:
    # The maximum link the GPU and its slot can train to: the current one
    # drops at idle to save power, so it says nothing about the limit.
    gen, width = first["pcie_max"]
    if gen and width:
        node["host_link"] = {"type": "pcie", "generation": gen, "width": width}
    else:
        notes.append("PCIe link unknown: NVML gave no generation or width")
    if first["nvlinks"]:
        _describe_nvlinks(node, first, count, notes)
    elif count > 1:
        # Peers meet through the PCIe fabric: its limit is the host link's (systems.data.speed_of_light).
        node["gpu_link"] = {"type": "pcie"}


def _describe_gpus(nvml, cuda: CudaDriver | None, sysfs: Path, detected: Detected, load_links: bool) -> None:
    node = detected.node
    handles = _visible_handles(nvml, detected)
    if not handles:
        return
    # Every per-GPU value is read once; the node's description is GPU 0's.
    readings = [gpu_readings(nvml, cuda if load_links else None, i, h, sysfs) for i, h in enumerate(handles)]
    detected.info["gpus"] = readings
    node["gpus"] = _gpus_of(nvml, handles[0], readings, node, detected.notes)
    _describe_links(node, readings[0], len(handles), detected.notes)
    if cuda is not None:
        node["addressing"] = cuda.addressing(0)
    else:
        detected.notes.append("addressing mode unknown: no CUDA driver, assumed none")


def _versions(nvml, info: dict[str, Any]) -> None:
    info["driver_version"] = as_str(or_default(nvml.nvmlSystemGetDriverVersion, ""))
    cuda = or_default(nvml.nvmlSystemGetCudaDriverVersion)
    if cuda:
        info["cuda_driver_version"] = f"{cuda // 1000}.{cuda % 1000 // 10}"


def nvidia_hardware(dev: Path = Path("/dev"), sysfs: Path = Path("/sys")) -> list[str]:
    """What says, without NVML, that this node has NVIDIA GPUs: the driver's
    device files, and NVIDIA's display and 3D controllers on PCI (by class:
    a Grace CPU's own PCIe bridges are NVIDIA's too, and no GPU)."""
    found = [str(path) for path in sorted(dev.glob("nvidia[0-9]*"))]
    for device in sorted(sysfs.glob("bus/pci/devices/*")):
        vendor = or_default(lambda d=device: (d / "vendor").read_text().strip().lower())
        klass = or_default(lambda d=device: (d / "class").read_text().strip().lower(), "")
        if vendor == "0x10de" and klass.startswith("0x03"):  # PCI class 03: display controller
            found.append(f"PCI {device.name}")
    return found


def _without_nvml(detected: Detected, why: str, dev: Path, sysfs: Path) -> Detected:
    """No GPU described, the reason kept, and whether NVIDIA hardware is
    there all the same (health fails such a node: its GPUs went unread)."""
    detected.node["gpus"] = _no_gpus()
    detected.info.pop("gpus", None)  # a query that failed half way read some
    detected.notes.append(f"no GPU detected: {why}")
    detected.info["nvml_error"] = why
    detected.info["nvidia_hardware"] = nvidia_hardware(dev, sysfs)
    return detected


def detect_node(
    nvml=None,
    cuda_factory=CudaDriver,
    sysfs: Path = Path("/sys"),
    load_links: bool = False,
    dev: Path = Path("/dev"),
) -> Detected:
    """Describe this node; `nvml`, `cuda_factory` and the `sysfs` and `dev`
    roots are injectable for tests. With `load_links`, each GPU's PCIe link
    is also read while a copy loads it (what the health checks judge; it
    takes a fraction of a second a GPU)."""
    node: dict[str, Any] = {
        "cpu": _cpu(sysfs),
        "numa_nodes": _numa_nodes(sysfs),
        "libnuma": ctypes.util.find_library("numa") is not None,
        "host_memory": _host_memory(),
        "gpus": _no_gpus(),
        "host_link": {"type": "none"},  # until a GPU says otherwise
        "addressing": "none",
        "gdrdrv": (dev / "gdrdrv").exists(),
        "managed_oversubscription": False,  # never assumed: it can hang a GPU
    }
    detected = Detected(node)
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            return _without_nvml(detected, "nvidia-ml-py is not installed", dev, sysfs)
    try:
        nvml.nvmlInit()
    except Exception as err:
        return _without_nvml(detected, f"NVML could not start ({err})", dev, sysfs)
    try:
        _versions(nvml, detected.info)
        try:
            cuda = cuda_factory()
        except OSError as err:
            cuda = None
            detected.notes.append(f"CUDA driver unavailable: {err}")
        _describe_gpus(nvml, cuda, sysfs, detected, load_links)
    except Exception as err:
        _without_nvml(detected, f"NVML query failed ({err})", dev, sysfs)
    finally:
        or_default(nvml.nvmlShutdown)
    return detected


def find_nvcc(name: str) -> str | None:
    """nvcc on PATH, else in the usual toolkit prefix."""
    found = shutil.which(name)
    if found:
        return found
    for prefix in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if prefix and (Path(prefix) / "bin" / "nvcc").is_file():
            return str(Path(prefix) / "bin" / "nvcc")
    return None


def cuda_archs_of(node: dict[str, Any]) -> list[int]:
    cc = node["gpus"].get("compute_capability")
    return [int(re.sub(r"\.", "", cc))] if cc else []
