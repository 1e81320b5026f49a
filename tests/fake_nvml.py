"""A stand-in for pynvml that replays recorded readings of a node, and
whose GPUs can be made to misbehave (a link trained down, errors counted,
clocks throttled) to test what the health checks and the watch make of it."""

import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace


class NVMLError(Exception):
    pass


@dataclass
class FakeGpu:
    name: str = "NVIDIA H100 80GB HBM3"
    memory: int = 85520809984
    cc: tuple = (9, 0)
    numa: int = 0
    bus_id: str = "00000000:01:00.0"
    mem_clock: int = 2619
    bus_width: int = 5120
    pcie_max: tuple = (5, 16)
    pcie_current: tuple = (1, 16)  # idle links train down
    pcie_loaded: tuple = (5, 16)  # ... and up again under a copy
    nvlinks: list = field(default_factory=list)  # NVLink versions of the active links
    # NVML's device type at the far end of each active link (0 GPU, 1 IBM NPU,
    # 2 NVSwitch); None: the query is not supported.
    nvlink_remotes: list | None = None
    nvlinks_down: tuple = ()  # links NVML reports inactive (a brick down)
    uuid: str = "GPU-0"
    persistence: int = 1
    ecc: tuple = (1, 1)
    replays: int = 1  # PCIe replays since the driver loaded
    replays_under_load: int = 0  # ... and how many more each load of the link counts (a faulty link)
    ecc_uncorrected: int = 0  # volatile: since the driver loaded
    remapped_rows: tuple = (0, 0, 0, 0)  # corrected, uncorrected, pending, failure
    retired_pending: int = 0
    clock_events: int = 1  # idle
    loaded: bool = False  # a copy is loading the link (FakeCuda.load_link)
    # Other processes on the GPU: (pid, name, bytes of GPU memory); the children of the
    # process that asks (the watch's program) are listed too, as the program's own.
    others: list = field(default_factory=list)
    list_children: bool = True
    pcie_kbps: tuple = (0, 0)  # PCIe throughput samples, tx and rx (KB/s)
    counters: dict | None = None  # field ID or (ID, link): counter; None: the driver keeps none


class FakeNvml:
    NVML_NVLINK_MAX_LINKS = 18
    NVML_FEATURE_ENABLED = 1
    NVML_CLOCK_MEM = 2

    #: NVML's queries that return one field of the GPU as it is.
    _FIELDS = {
        "nvmlDeviceGetName": "name",
        "nvmlDeviceGetCudaComputeCapability": "cc",
        "nvmlDeviceGetNumaNodeId": "numa",
        "nvmlDeviceGetMemoryBusWidth": "bus_width",
        "nvmlDeviceGetUUID": "uuid",
        "nvmlDeviceGetPersistenceMode": "persistence",
        "nvmlDeviceGetEccMode": "ecc",
        "nvmlDeviceGetPcieReplayCounter": "replays",
        "nvmlDeviceGetRemappedRows": "remapped_rows",
        "nvmlDeviceGetRetiredPagesPendingStatus": "retired_pending",
        "nvmlDeviceGetCurrentClocksEventReasons": "clock_events",
    }

    def __init__(self, gpus, driver="580.159.04", cuda=13000, fail_init=None):
        self.gpus = gpus
        self.driver = driver
        self.cuda = cuda
        self.fail_init = fail_init

    def __getattr__(self, name):
        if name in FakeNvml._FIELDS:
            return lambda g: getattr(g, FakeNvml._FIELDS[name])
        raise AttributeError(name)

    def nvmlInit(self):
        if self.fail_init:
            raise NVMLError(self.fail_init)

    def nvmlShutdown(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self):
        return self.cuda

    def nvmlSystemGetProcessName(self, pid):
        for gpu in self.gpus:
            for other, name, _ in gpu.others:
                if other == pid:
                    return name
        raise NVMLError("Not Found")

    def nvmlDeviceGetComputeRunningProcesses(self, g):
        mine = _children(os.getpid()) if g.list_children else []  # the program and its ranks
        listed = [(pid, used) for pid in mine for used in (512 << 20,)] + [(pid, used) for pid, _, used in g.others]
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in listed]

    def nvmlDeviceGetPcieThroughput(self, g, counter):
        return g.pcie_kbps[counter]

    def nvmlDeviceGetFieldValues(self, g, field_ids):
        """As pynvml's: each field an ID or (ID, scope); counters are keyed so (scope 0: the ID alone)."""
        if g.counters is None:
            raise NVMLError("Not Supported")
        values = []
        for f in field_ids:
            fid, scope = f if isinstance(f, tuple) else (f, 0)
            key = (fid, scope) if (fid, scope) in g.counters else fid if scope == 0 else None
            found = key is not None and key in g.counters
            value = SimpleNamespace(ullVal=g.counters[key] if found else 0)
            values.append(SimpleNamespace(fieldId=fid, scopeId=scope, nvmlReturn=0 if found else 3, value=value))
        return values

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return self.gpus[i]

    def nvmlDeviceGetMemoryInfo(self, g):
        return SimpleNamespace(total=g.memory)

    def nvmlDeviceGetPciInfo(self, g):
        return SimpleNamespace(busId=g.bus_id)

    def nvmlDeviceGetMaxClockInfo(self, g, clock):
        return g.mem_clock

    def nvmlDeviceGetMaxPcieLinkGeneration(self, g):
        return g.pcie_max[0]

    def nvmlDeviceGetMaxPcieLinkWidth(self, g):
        return g.pcie_max[1]

    def nvmlDeviceGetCurrPcieLinkGeneration(self, g):
        return (g.pcie_loaded if g.loaded else g.pcie_current)[0]

    def nvmlDeviceGetCurrPcieLinkWidth(self, g):
        return (g.pcie_loaded if g.loaded else g.pcie_current)[1]

    def nvmlDeviceGetNvLinkState(self, g, link):
        if not g.nvlinks:
            raise NVMLError("Not Supported")
        return 1 if link < len(g.nvlinks) and link not in g.nvlinks_down else 0

    def nvmlDeviceGetNvLinkVersion(self, g, link):
        return g.nvlinks[link]

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, g, link):
        if g.nvlink_remotes is None:
            raise NVMLError("Not Supported")
        return g.nvlink_remotes[link]

    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0

    def nvmlDeviceGetTotalEccErrors(self, g, error_type, counter_type):
        assert (error_type, counter_type) == (1, 0), "the health checks read uncorrected volatile errors"
        return g.ecc_uncorrected


def _children(pid: int) -> list[int]:
    """The descendants of `pid` (its children, their children, ...), from /proc."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stream:
                    parents[int(entry)] = int(stream.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    found, frontier = [], [pid]
    while frontier:
        frontier = [p for p, parent in parents.items() if parent in frontier]
        found += frontier
    return found


class FakeCuda:
    """Device attributes 88 (pageable access) and 100 (via host page tables),
    and a copy that loads a GPU's link (which makes the fake GPU train up, and
    count its replays_under_load)."""

    def __init__(self, pageable=0, host_page_tables=0, nvml=None):
        self.values = {88: pageable, 100: host_page_tables}
        self.nvml = nvml

    @contextmanager
    def load_link(self, bus_id):
        gpu = next(g for g in self.nvml.gpus if g.bus_id == bus_id) if self.nvml else None
        if gpu:
            gpu.loaded = True
            gpu.replays += gpu.replays_under_load
        try:
            yield
        finally:
            if gpu:
                gpu.loaded = False

    def attribute(self, device, attribute):
        return self.values[attribute]

    def addressing(self, device):
        from systems.detect import CudaDriver

        return CudaDriver.addressing(self, device)
