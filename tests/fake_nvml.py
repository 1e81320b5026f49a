"""A stand-in for pynvml that replays recorded readings of a node, and
whose GPUs can be made to misbehave (a link trained down, errors counted,
clocks throttled) to test what the health checks and the watch make of it."""

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
