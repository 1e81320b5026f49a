"""Who else used the GPUs while a check's program ran, and how much traffic
crossed their links: what tells a busy GPU from a slow one.

The watch (systems/watch.py) samples, every `USE_PERIOD` seconds, each
watched GPU's compute processes as NVML lists them, and reads its PCIe and
NVLink byte counters before and after the run. A process that is neither the
program nor one of its descendants (a rank it spawned) is another's: a job
sharing the node, a user's stray process, a neighbour copying through the
same host link. After the run the watch prints, per GPU and per other process,
one record each in the suite's grammar (experiments/records.py):

    GpuUse: gpu=0 own=yes samples=41 pcie_rx_gbs=51.2 pcie_tx_gbs=50.8 nvlink_rx_gbs=0.0 nvlink_tx_gbs=0.0 ...
    Contention: gpu=0 pid=4242 seen=39 samples=41 used_mib=1102 name=python3

`own` says whether the program had a context on the GPU (the GPUs a figure
without a GPU index in its name was measured on); the traffic is the GPU's
whole traffic over the run, the program's own included (its bytes are its
figures), in decimal GB/s: from NVML's byte counters where the driver keeps
them (`traffic=counters`), else the mean of NVML's 20 ms throughput samples
(`sampled`), else absent. Contention is no fault of the GPU: the check
passes, and the nightly's verdict (judge/contention.py) says which of its
findings another process can explain; experiments/gpu_use.py reads the
records back.

The program's own processes are its descendants (ranks it spawned) and
every process whose environment carries the case's token (`CASE_TOKEN`,
which the check sets for its job): the other ranks of the same launch, which
srun or jsrun started beside this one, each under a watch of its own. One
that /proc does not show either ended between NVML's list and the reading
of /proc (the program's own short-lived ranks do) or lives in another PID
namespace (a container): it counts as another's only where NVML listed it
in two readings or more. A process counts as contention only where it was
on the GPU for half the run's readings or more: one that came and went in
a moment did not share the measurement.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: The environment variable whose value names one case's launch: every rank of it carries the same
#: (checks/suite/base.py sets it for the job).
CASE_TOKEN = "GPU_MEMPATHS_CASE_TOKEN"

#: Seconds between readings of the GPUs' processes: each is one NVML call per
#: GPU, and a neighbour that matters lasts seconds.
USE_PERIOD = 0.5

#: NVML's field IDs of the byte counters (nvml.h): PCIe bytes sent and
#: received, NVLink data sent and received (KiB), the GPU's total over its links.
PCIE_TX, PCIE_RX, NVLINK_TX, NVLINK_RX = 197, 198, 138, 139
_COUNTERS = (PCIE_TX, PCIE_RX, NVLINK_TX, NVLINK_RX)
#: NVML's PCIe throughput samples (KB/s over 20 ms): what is read where the counters are not kept.
PCIE_UTIL_TX, PCIE_UTIL_RX = 0, 1


def _parent(pid: int, proc: str) -> int | None:
    try:
        with open(f"{proc}/{pid}/stat") as stream:
            # pid (comm) state ppid ...: comm may hold spaces and parentheses.
            return int(stream.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def descends(pid: int, root: int, proc: str = "/proc") -> bool:
    """Whether `pid` is `root` or one of its descendants."""
    seen = set()
    while pid and pid not in seen:
        if pid == root:
            return True
        seen.add(pid)
        pid = _parent(pid, proc) or 0
    return False


def carries(pid: int, token: str | None, proc: str = "/proc") -> bool:
    """Whether process `pid`'s environment has CASE_TOKEN=`token` (another user's cannot be read: no)."""
    if not token:
        return False
    try:
        with open(f"{proc}/{pid}/environ", "rb") as stream:
            return f"{CASE_TOKEN}={token}".encode() in stream.read().split(b"\0")
    except OSError:
        return False


def process_name(nvml, pid: int, proc: str = "/proc") -> str:
    """A process's command name, from /proc or else NVML; '?' where neither knows it."""
    try:
        with open(f"{proc}/{pid}/comm") as stream:
            return stream.read().strip() or "?"
    except OSError:
        pass
    try:
        name = nvml.nvmlSystemGetProcessName(pid)
        return (name.decode() if isinstance(name, bytes) else str(name)).rsplit("/", 1)[-1] or "?"
    except Exception:  # NVML's NotFound, NoPermission
        return "?"


@dataclass
class Other:
    """Another's process on one GPU: how often it was seen, and its most memory."""

    pid: int
    name: str
    seen: int = 0
    used_mib: float = 0.0
    visible: bool = False  # /proc showed it at least once


@dataclass
class GpuUse:
    """One GPU over a run: its samples, whether the program used it, the
    other processes on it, its byte counters before, and its throughput samples."""

    index: int
    samples: int = 0
    own: bool = False
    others: dict[int, Other] = field(default_factory=dict)
    counters_before: dict[int, int] = field(default_factory=dict)
    pcie_samples: list[tuple[float, float]] = field(default_factory=list)


#: nvmlValueType_t -> the member of nvmlValue_t that holds it. A 32-bit counter
#: read as 64 bits would carry whatever the upper half held.
_VALUE_MEMBER = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


def field_value(v) -> int:
    """One field's value as the driver typed it (unsigned long long where it names no type)."""
    return int(getattr(v.value, _VALUE_MEMBER.get(getattr(v, "valueType", 3), "ullVal")))


def read_counters(nvml, handle) -> dict[int, int]:
    """The byte counters the driver keeps for this GPU ({} where it keeps none)."""
    try:
        values = nvml.nvmlDeviceGetFieldValues(handle, list(_COUNTERS))
    except Exception:
        return {}
    return {v.fieldId: field_value(v) for v in values if v.nvmlReturn == 0}


def sample(nvml, handle, use: GpuUse, root: int | None, proc: str = "/proc", token: str | None = None) -> None:
    """One reading of a GPU's processes (and, without counters, its PCIe
    throughput); the program's own are those descending from `root` and those
    carrying the case's `token` (its other ranks)."""
    try:
        processes = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
    except Exception:  # not supported: no process is known, so none is another's
        return
    use.samples += 1
    for p in processes:
        if (root is not None and descends(p.pid, root, proc)) or carries(p.pid, token, proc):
            use.own = True
            continue
        other = use.others.get(p.pid) or use.others.setdefault(p.pid, Other(p.pid, process_name(nvml, p.pid, proc)))
        other.seen += 1
        other.visible = other.visible or _parent(p.pid, proc) is not None
        other.used_mib = max(other.used_mib, (p.usedGpuMemory or 0) / 2**20)
    if not use.counters_before:
        try:
            tx = nvml.nvmlDeviceGetPcieThroughput(handle, PCIE_UTIL_TX)
            rx = nvml.nvmlDeviceGetPcieThroughput(handle, PCIE_UTIL_RX)
            use.pcie_samples.append((tx * 1e3 / 1e9, rx * 1e3 / 1e9))
        except Exception:
            pass


def traffic(use: GpuUse, after: dict[int, int], seconds: float) -> dict[str, str]:
    """The GPU's traffic over the run, GB/s, as GpuUse's record fields."""
    before = use.counters_before
    if seconds > 0 and all(k in before and k in after for k in (PCIE_TX, PCIE_RX)):
        rates = {
            "pcie_rx_gbs": (after[PCIE_RX] - before[PCIE_RX]) / seconds / 1e9,
            "pcie_tx_gbs": (after[PCIE_TX] - before[PCIE_TX]) / seconds / 1e9,
        }
        for key, counter in (("nvlink_rx_gbs", NVLINK_RX), ("nvlink_tx_gbs", NVLINK_TX)):
            if counter in before and counter in after:
                rates[key] = (after[counter] - before[counter]) * 1024 / seconds / 1e9
        # A counter that went back (reset, or wrapped) says nothing of the run.
        return {**{k: f"{v:.2f}" for k, v in rates.items() if v >= 0}, "traffic": "counters"}
    if use.pcie_samples:
        tx = sum(s[0] for s in use.pcie_samples) / len(use.pcie_samples)
        rx = sum(s[1] for s in use.pcie_samples) / len(use.pcie_samples)
        return {"pcie_rx_gbs": f"{rx:.2f}", "pcie_tx_gbs": f"{tx:.2f}", "traffic": "sampled"}
    return {}


def record_lines(uses: list[GpuUse], after: list[dict[int, int]], seconds: float) -> list[str]:
    """The GpuUse and Contention records of a run."""
    lines = []
    for use, counters in zip(uses, after):
        fields = {"gpu": use.index, "own": "yes" if use.own else "no", "samples": use.samples}
        fields.update(traffic(use, counters, seconds))
        lines.append("GpuUse: " + " ".join(f"{k}={v}" for k, v in fields.items()))
        for other in sorted(use.others.values(), key=lambda o: o.pid):
            if not other.visible and other.seen < 2:
                continue  # gone before /proc was read: one of the program's short-lived ranks, as like as not
            if 2 * other.seen < use.samples:
                continue  # on the GPU for a moment of the run: it did not share the measurement
            lines.append(
                f"Contention: gpu={use.index} pid={other.pid} seen={other.seen} samples={use.samples} "
                f"used_mib={other.used_mib:.0f} name={other.name}"
            )
    return lines
