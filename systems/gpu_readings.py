"""What NVML says of each GPU: model, links (PCIe as trained under load and
the replays that load counted, NVLink links, their generation and what each
leads to), NUMA node, modes, clock event reasons and error counters.
systems/detect.py describes the node from these readings, systems/health.py
judges them, systems/watch.py reads the counters."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol


class LinkLoader(Protocol):
    """What the readings need of the CUDA driver (systems/detect.py's CudaDriver):
    a copy that loads a GPU's link while it is read."""

    def load_link(self, bus_id: str, nbytes: int = ..., settle_s: float = ...) -> AbstractContextManager: ...


def or_default(call, default=None):
    try:
        return call()
    except Exception:  # NVML raises NVMLError_NotSupported and friends
        return default


def _gpu_numa(nvml, handle, sysfs: Path) -> int | None:
    numa = or_default(lambda: nvml.nvmlDeviceGetNumaNodeId(handle))
    if numa is not None and numa >= 0:
        return numa
    bus_id = or_default(lambda: nvml.nvmlDeviceGetPciInfo(handle).busId)
    if isinstance(bus_id, bytes):
        bus_id = bus_id.decode()
    if bus_id:
        path = sysfs / "bus/pci/devices" / bus_id.lower()[-12:] / "numa_node"
        value = or_default(lambda: int(path.read_text()))
        if value is not None and value >= 0:
            return value
    return None


# nvmlDeviceGetNvLinkVersion answers with NVML's version enum, not the
# generation: 1.0, 2.0, 2.2, 3.0, 3.1, 4.0, 5.0 are 1 to 7 (an H200 says 6).
_NVML_NVLINK_GENERATION = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5}


# nvmlDeviceGetNvLinkRemoteDeviceType: what the far end of a link is.
_NVLINK_REMOTE = {0: "gpu", 1: "cpu", 2: "switch"}  # GPU, IBM NPU (POWER9), NVSwitch


def _nvlinks(nvml, handle) -> tuple[int, int | None, dict[str, int] | None]:
    """Active NVLink links of one GPU, their generation, and how many lead to
    a GPU, a CPU or a switch (None where NVML cannot say)."""
    active, version, remotes = 0, None, {}
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        state = or_default(lambda link=link: nvml.nvmlDeviceGetNvLinkState(handle, link))
        if state == getattr(nvml, "NVML_FEATURE_ENABLED", 1):
            active += 1
            version = version or or_default(lambda link=link: nvml.nvmlDeviceGetNvLinkVersion(handle, link))
            remote = _NVLINK_REMOTE.get(
                or_default(lambda link=link: nvml.nvmlDeviceGetNvLinkRemoteDeviceType(handle, link))
            )
            remotes[remote] = remotes.get(remote, 0) + 1
    known = None if (None in remotes or not active) else remotes
    return active, _NVML_NVLINK_GENERATION.get(version, version), known


def hbm_bandwidth(nvml, handle) -> str | None:
    clock = or_default(lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM))
    width = or_default(lambda: nvml.nvmlDeviceGetMemoryBusWidth(handle))
    if not clock or not width:
        return None
    return f"{clock * 1e6 * 2 * width / 8 / 1e9:.1f} GB/s"  # double data rate


def as_str(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def visible_gpus(uuids: list[str], setting: str | None) -> list[int]:
    """NVML's indices of the GPUs CUDA sees under CUDA_VISIBLE_DEVICES =
    `setting` (None: unset), in CUDA's order. As CUDA does, the list stops at
    the first item that names no GPU (an index, or a unique prefix of a UUID)."""
    if setting is None:
        return list(range(len(uuids)))
    seen: list[int] = []
    for item in (i.strip() for i in setting.split(",")):
        if item.isdigit() and int(item) < len(uuids):
            index = int(item)
        elif item.startswith("GPU-") and sum(u.startswith(item) for u in uuids) == 1:
            index = next(i for i, u in enumerate(uuids) if u.startswith(item))
        else:
            break
        if index in seen:
            break
        seen.append(index)
    return seen


def _pcie_current(nvml, handle) -> list:
    return [
        or_default(lambda: nvml.nvmlDeviceGetCurrPcieLinkGeneration(handle)),
        or_default(lambda: nvml.nvmlDeviceGetCurrPcieLinkWidth(handle)),
    ]


def _replays(nvml, handle) -> int | None:
    """PCIe replays since the driver loaded: a link retransmitting what arrived corrupted."""
    return or_default(lambda: nvml.nvmlDeviceGetPcieReplayCounter(handle))


def _under_load(nvml, cuda: LinkLoader | None, handle) -> dict[str, Any]:
    """The link's generation and width while a copy loads it (None and why
    not), and how many PCIe replays that load counted. A replay count at rest
    may be old and harmless; one that grows while the link is loaded is a
    faulty link now."""
    if cuda is None:
        return _not_loaded("not read under load (no CUDA driver, or not asked for)")
    bus_id = as_str(or_default(lambda: nvml.nvmlDeviceGetPciInfo(handle).busId, ""))
    before = _replays(nvml, handle)
    try:
        with cuda.load_link(bus_id):
            trained = _pcie_current(nvml, handle)
    except Exception as err:  # a driver that cannot copy: say so, do not guess
        return _not_loaded(f"the link could not be loaded: {err}")
    after = _replays(nvml, handle)
    grew = None if before is None or after is None else after - before
    return {"pcie_trained": trained, "pcie_trained_unknown": "", "pcie_replays_under_load": grew}


def _not_loaded(why: str) -> dict[str, Any]:
    return {"pcie_trained": None, "pcie_trained_unknown": why, "pcie_replays_under_load": None}


def read_counters(nvml, handle) -> dict[str, Any]:
    """A GPU's error counters and states, None where NVML does not say:
    PCIe replays and uncorrected ECC errors (volatile: since the driver
    loaded), row remapping pending or failed (Ampere and later), pages
    pending retirement (before Ampere)."""
    enabled = getattr(nvml, "NVML_FEATURE_ENABLED", 1)
    uncorrected = getattr(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    volatile = getattr(nvml, "NVML_VOLATILE_ECC", 0)
    remap = or_default(lambda: nvml.nvmlDeviceGetRemappedRows(handle))
    retired = or_default(lambda: nvml.nvmlDeviceGetRetiredPagesPendingStatus(handle))
    return {
        "pcie_replays": _replays(nvml, handle),
        "ecc_uncorrected": or_default(lambda: nvml.nvmlDeviceGetTotalEccErrors(handle, uncorrected, volatile)),
        "remap_pending": None if remap is None else bool(remap[2]),
        "remap_failure": None if remap is None else bool(remap[3]),
        "retired_pending": None if retired is None else retired == enabled,
    }


def gpu_readings(nvml, cuda: LinkLoader | None, index: int, handle, sysfs: Path) -> dict[str, Any]:
    """What the node health checks compare with a system's data or an accepted node, per GPU."""
    links, version, remotes = _nvlinks(nvml, handle)
    enabled = getattr(nvml, "NVML_FEATURE_ENABLED", 1)
    ecc = or_default(lambda: nvml.nvmlDeviceGetEccMode(handle))
    loaded = _under_load(nvml, cuda, handle)
    return {
        "index": index,
        "model": as_str(nvml.nvmlDeviceGetName(handle)),
        "uuid": as_str(or_default(lambda: nvml.nvmlDeviceGetUUID(handle), "")),
        "pcie_max": [
            or_default(lambda: nvml.nvmlDeviceGetMaxPcieLinkGeneration(handle)),
            or_default(lambda: nvml.nvmlDeviceGetMaxPcieLinkWidth(handle)),
        ],
        "pcie_current": _pcie_current(nvml, handle),
        **loaded,
        "nvlinks": links,
        "nvlink_version": version,
        "nvlink_remotes": remotes,
        "numa": _gpu_numa(nvml, handle, sysfs),
        "persistence_mode": or_default(lambda: nvml.nvmlDeviceGetPersistenceMode(handle) == enabled),
        "ecc": None if ecc is None else ecc[0] == enabled,  # (current, pending)
        # At rest, after the load: a GPU that is not working has no reason
        # to slow its clocks but idling (and those its system allows).
        "clock_events": or_default(lambda: nvml.nvmlDeviceGetCurrentClocksEventReasons(handle)),
        "counters": read_counters(nvml, handle),
    }
