"""Who else used the GPUs while a check's program ran, and how much traffic
crossed their links: what tells a busy GPU from a slow one.

The watch (systems/watch.py) samples, every `USE_PERIOD` seconds, each
watched GPU's compute processes as NVML lists them with its PCIe
throughput, and reads its NVLink byte counters before and after the run. A process that is neither the
program nor one of its descendants (a rank it spawned) is another's: a job
sharing the node, a user's stray process, a neighbour copying through the
same host link. After the run the watch prints, per GPU and per other process,
one record each in the suite's grammar (experiments/records.py):

    GpuUse: gpu=0 own=yes samples=41 pcie_rx_gbs=51.2 pcie_tx_gbs=50.8 nvlink_rx_gbs=0.0 nvlink_tx_gbs=0.0 ...
    Contention: gpu=0 pid=4242 seen=39 samples=41 used_mib=1102 name=python3

`own` says whether the program had a context on the GPU (the GPUs a figure
without a GPU index in its name was measured on); the traffic is the GPU's
whole traffic over the run, the program's own included (its bytes are its
figures), in decimal GB/s: PCIe as the mean of NVML's 20 ms throughput
samples, NVLink from its byte counters summed over the GPU's links, each
absent where the driver keeps none. NVML's PCIe byte counters are not read:
they are 32 bits wide (valueType 1 on four H200s, driver 580), so at the
50 GB/s of a PCIe Gen5 x16 link they wrap every tenth of a second, and a
difference over a run says nothing. The NVLink counters are kept per link
(the field's scope is the link; scope 0 alone is one of eighteen links). Contention is no fault of the GPU: the check
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

#: NVML's field IDs of the NVLink byte counters (nvml.h): data sent and
#: received, KiB, one counter per link (the field value's scopeId).
NVLINK_TX, NVLINK_RX = 138, 139
#: The most links NVML numbers on one GPU (NVML_NVLINK_MAX_LINKS); a link the
#: GPU lacks answers an error and adds nothing.
NVLINK_MAX_LINKS = 18
_NVLINK_FIELDS = [(f, link) for f in (NVLINK_TX, NVLINK_RX) for link in range(NVLINK_MAX_LINKS)]
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


def printable(name: str) -> str:
    """Another's process name as a record may carry it: every character that
    is not printable (a newline, a tab, an escape) made '?'. Anyone names
    their process: one named 'x\nWatch: FAIL ...' must not write a line of
    the watch's own into the check's output."""
    return "".join(c if c.isprintable() else "?" for c in name.strip()) or "?"


def process_name(nvml, pid: int, proc: str = "/proc") -> str:
    """A process's command name, from /proc or else NVML (printable); '?' where neither knows it."""
    try:
        with open(f"{proc}/{pid}/comm") as stream:
            return printable(stream.read())
    except OSError:
        pass
    try:
        name = nvml.nvmlSystemGetProcessName(pid)
        return printable((name.decode(errors="replace") if isinstance(name, bytes) else str(name)).rsplit("/", 1)[-1])
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
    """The GPU's NVLink byte counters (KiB), each summed over its links ({} where it keeps none)."""
    try:
        values = nvml.nvmlDeviceGetFieldValues(handle, _NVLINK_FIELDS)
    except Exception:
        return {}
    totals: dict[int, int] = {}
    for v in values:
        if v.nvmlReturn == 0:
            totals[v.fieldId] = totals.get(v.fieldId, 0) + field_value(v)
    return totals


def sample(nvml, handle, use: GpuUse, root: int | None, proc: str = "/proc", token: str | None = None) -> None:
    """One reading of a GPU's processes and its PCIe throughput; the program's
    own are those descending from `root` and those carrying the case's `token`
    (its other ranks)."""
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
    try:
        tx = nvml.nvmlDeviceGetPcieThroughput(handle, PCIE_UTIL_TX)
        rx = nvml.nvmlDeviceGetPcieThroughput(handle, PCIE_UTIL_RX)
        use.pcie_samples.append((tx * 1e3 / 1e9, rx * 1e3 / 1e9))
    except Exception:
        pass


def traffic(use: GpuUse, after: dict[int, int], seconds: float) -> dict[str, str]:
    """The GPU's traffic over the run, GB/s, as GpuUse's record fields."""
    rates = {}
    if use.pcie_samples:
        rates["pcie_rx_gbs"] = sum(s[1] for s in use.pcie_samples) / len(use.pcie_samples)
        rates["pcie_tx_gbs"] = sum(s[0] for s in use.pcie_samples) / len(use.pcie_samples)
    before = use.counters_before
    for key, counter in (("nvlink_rx_gbs", NVLINK_RX), ("nvlink_tx_gbs", NVLINK_TX)):
        if seconds > 0 and counter in before and counter in after:
            rates[key] = (after[counter] - before[counter]) * 1024 / seconds / 1e9
    # A counter that went back (reset, or wrapped) says nothing of the run.
    return {k: f"{v:.2f}" for k, v in rates.items() if v >= 0}


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
