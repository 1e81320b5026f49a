"""Who else used the host's CPUs and memory while a check's program ran:
what tells a busy host from a slow one, where NVML sees nothing.

A neighbour that streams memory with the CPUs has no context on any GPU:
NVML does not list it (systems/gpu_use.py), yet it shares the host's memory
and root complex with every host-side path the suite measures. The watch
(systems/watch.py) reads /proc before the program starts, every
`gpu_use.USE_PERIOD` seconds while it runs, and once after: each process's
CPU time (utime + stime of /proc/PID/stat, all its threads) and its resident
memory. A process that used `HOST_CPUS` CPUs or more on average over the run
(its CPU time over the run's seconds) is another's load on the host, one
record each in the suite's grammar (experiments/records.py), the name last
(a command name may hold spaces):

    HostUse: pid=1234 cpu_s=12.3 cpus=3.9 rss_mib=2048 seen=10 samples=10 name=stream

Not another's: the watch itself and what it started (the program, its ranks
and their children: the watch's descendants), the processes that carry the
case's token (the other ranks of the same launch, gpu_use.CASE_TOKEN), the
watch's ancestors (the job's shell, ReFrame, the nightly: the suite's own
work, its pages drawn during a rerun included) and the kernel's threads
(their work is on everyone's behalf, the suite's page faults included). A
process is told the program's or another's when first seen, while its parents
still live; one that ends mid-read, or whose entries vanish, is read no more,
never a failure of the case.

The memory controllers' own traffic (every process's, the program's
included) is read where the host exposes them: Intel's uncore IMC PMUs
(/sys/bus/event_source/devices/uncore_imc*) through `perf stat`, one
``HostMemory`` record of the node's read and write GB/s; where it does not
(virtual machines, as a rule), the record says so once per run, and CPU time
stands in.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass

from . import gpu_use

#: Another process's load that shares the host side with the measurement: at
#: least half a CPU on average over the run. A node's daemons (the driver's
#: persistence daemon, the scheduler's, a monitoring agent) stay far below
#: it; a neighbour streaming memory or copying data keeps one CPU or more busy.
HOST_CPUS = 0.5

#: /proc/PID/stat's flags bit of a kernel thread (PF_KTHREAD, include/linux/sched.h).
PF_KTHREAD = 0x00200000

#: The uncore PMUs of Intel's memory controllers, and their read and write CAS counts (64 bytes each;
#: perf scales them to MiB).
IMC_PMUS = "/sys/bus/event_source/devices/uncore_imc*"
IMC_EVENTS = "uncore_imc/cas_count_read/,uncore_imc/cas_count_write/"

#: The processes a fake node's host shows (tests/fakegpu/site/pynvml.py sets it when the watch loads it:
#: the test machine's own load, pytest's other workers, is none of the fake node's); None: every one.
ONLY: set[int] | None = None

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass
class Stat:
    """The fields of /proc/PID/stat the watch reads."""

    pid: int
    name: str
    parent: int
    flags: int
    ticks: int  # utime + stime
    start: int  # starttime, in ticks since boot: a pid used again is another process
    rss_pages: int


def read_stat(pid: int, proc: str = "/proc") -> Stat | None:
    """One process's /proc/PID/stat, or None where it ended (or reads as no stat)."""
    try:
        with open(f"{proc}/{pid}/stat") as stream:
            text = stream.read()
        # pid (comm) state ppid ...: comm may hold spaces and parentheses; after it, fields 3 on.
        name = gpu_use.printable(text[text.index("(") + 1 : text.rindex(")")])
        rest = text[text.rindex(")") + 2 :].split()
        return Stat(pid, name, int(rest[1]), int(rest[6]), int(rest[11]) + int(rest[12]), int(rest[19]), int(rest[21]))
    except (OSError, ValueError, IndexError):
        return None


def pids(proc: str = "/proc") -> list[int]:
    try:
        return [int(name) for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        return []


def ancestors(pid: int, proc: str = "/proc") -> set[int]:
    """`pid`'s parents, up to init."""
    found = set()
    stat = read_stat(pid, proc)
    while stat is not None and stat.parent > 0 and stat.parent not in found:
        found.add(stat.parent)
        stat = read_stat(stat.parent, proc)
    return found


@dataclass
class Other:
    """Another's process on the host over a run: its CPU ticks when first and last seen, its most memory."""

    pid: int
    name: str
    first: int
    last: int
    rss_pages: int = 0
    seen: int = 0

    def cpu_s(self) -> float:
        return (self.last - self.first) / _TICK


class HostUse:
    """The host's other processes over one run, read from `proc`: the watch
    (`me`) and its descendants, its ancestors, the case's token's carriers and
    kernel threads are not another's."""

    def __init__(self, proc: str = "/proc", me: int | None = None, token: str | None = None, only=None):
        self.proc, self.token = proc, token
        self.me = os.getpid() if me is None else me
        self.suite = ancestors(self.me, proc)
        #: The processes looked at (ONLY where not given), None for every one.
        self.only = ONLY if only is None else only
        self.samples = 0
        self.span: tuple[float, float] | None = None  # the first reading's time and the last's
        self.others: dict[tuple[int, int], Other] = {}
        self.own: set[tuple[int, int]] = set()

    def is_own(self, stat: Stat) -> bool:
        """Whether the process is the suite's, the program's or the kernel's (not another's)."""
        return (
            stat.pid == self.me
            or stat.pid in self.suite
            or bool(stat.flags & PF_KTHREAD)
            or stat.parent == 2  # kthreadd's children: kernel threads, where the flag is not read
            or gpu_use.descends(stat.pid, self.me, self.proc)
            or gpu_use.carries(stat.pid, self.token, self.proc)
        )

    def sample(self) -> None:
        """One reading of every process; the first is the run's start (a process first seen later
        started during the run: its whole CPU time is the run's)."""
        first = self.samples == 0
        now = time.monotonic()
        self.span = (self.span[0] if self.span else now, now)
        for pid in pids(self.proc):
            if self.only is not None and pid not in self.only:
                continue
            stat = read_stat(pid, self.proc)
            if stat is None:
                continue  # ended between the listing and the reading
            key = (pid, stat.start)
            if key in self.own:
                continue
            other = self.others.get(key)
            if other is None:
                if self.is_own(stat):
                    self.own.add(key)
                    continue
                other = self.others[key] = Other(pid, stat.name, first=stat.ticks if first else 0, last=stat.ticks)
            other.last = max(other.last, stat.ticks)
            other.rss_pages = max(other.rss_pages, stat.rss_pages)
            other.seen += 1
        self.samples += 1

    def seconds(self) -> float:
        """From the first reading to the last: what the CPU times were counted over."""
        return self.span[1] - self.span[0] if self.span else 0.0

    def contenders(self, seconds: float) -> list[Other]:
        """The processes that used HOST_CPUS or more over the run's `seconds`."""
        if seconds <= 0:
            return []
        return sorted((o for o in self.others.values() if o.cpu_s() / seconds >= HOST_CPUS), key=lambda o: o.pid)

    def record_lines(self, seconds: float | None = None) -> list[str]:
        """The HostUse records of the run (`seconds`: from the first reading to the last, unless given)."""
        seconds = self.seconds() if seconds is None else seconds
        return [
            f"HostUse: pid={o.pid} cpu_s={o.cpu_s():.1f} cpus={o.cpu_s() / seconds:.2f} "
            f"rss_mib={o.rss_pages * _PAGE / 2**20:.0f} seen={o.seen} samples={self.samples} name={o.name}"
            for o in self.contenders(seconds)
        ]


class MemoryCounters:
    """The memory controllers' traffic over the run, through `perf stat` where
    the host has uncore IMC PMUs; `why_not` says why not elsewhere."""

    def __init__(self, pmus: str = IMC_PMUS, perf: str | None = None):
        self.process: subprocess.Popen | None = None
        self.why_not = ""
        perf = perf or shutil.which("perf")
        if not glob.glob(pmus):
            self.why_not = "no memory controller counters (no uncore_imc PMU: a virtual machine, as like as not)"
        elif perf is None:
            self.why_not = "no perf to read the memory controllers' counters"
        else:
            self.command = [perf, "stat", "-a", "-x", ",", "-e", IMC_EVENTS]

    def start(self) -> None:
        if self.why_not:
            return
        try:
            self.process = subprocess.Popen(
                self.command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
            )
        except OSError as err:
            self.why_not = f"perf could not start ({err})"

    def stop(self, seconds: float) -> str:
        """The HostMemory record."""
        if self.process is not None:
            try:
                self.process.send_signal(signal.SIGINT)
                _, err = self.process.communicate(timeout=5)
                traffic = perf_traffic(err)
                if traffic is not None and seconds > 0:
                    read, write = (b / seconds / 1e9 for b in traffic)
                    return f"HostMemory: source=perf read_gbs={read:.2f} write_gbs={write:.2f}"
                said = (err.strip().splitlines() or ["?"])[-1]
                self.why_not = f"perf read no memory controller counters ({said})"
            except (OSError, subprocess.TimeoutExpired) as err:
                self.process.kill()
                self.why_not = f"perf did not answer ({err})"
        return f"HostMemory: source=none reason={self.why_not}: CPU time stands in"


def perf_traffic(text: str) -> tuple[float, float] | None:
    """Bytes read and written from `perf stat -x ,`'s output (value,unit,event,...; MiB as perf scales
    the CAS counts), each summed over the controllers; None where it counted neither."""
    found = {"read": 0.0, "write": 0.0}
    counted = False
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) < 3:
            continue
        for way in found:
            if f"cas_count_{way}" in parts[2]:
                try:
                    value = float(parts[0])
                except ValueError:  # <not counted>, <not supported>
                    continue
                found[way] += value * (2**20 if parts[1] == "MiB" else 64)
                counted = True
    return (found["read"], found["write"]) if counted else None


class HostWatch:
    """The host's other processes (HostUse) and its memory controllers
    (MemoryCounters) over one run, read by a thread of its own: a failure
    of it must not stop the watch of the GPUs, nor fail the case."""

    def __init__(self, proc: str = "/proc", token: str | None = None, only=None, pmus: str = IMC_PMUS):
        self.use = HostUse(proc, token=token, only=only)
        self.memory = MemoryCounters(pmus)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _read(self) -> None:
        try:
            self.use.sample()
        except Exception:  # who else used the host is a finding's context, never a fault
            pass

    def start(self) -> None:
        """The run's first reading (before the program starts), then one every period."""
        self._read()
        self.memory.start()
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(gpu_use.USE_PERIOD):
            self._read()

    def stop(self, seconds: float) -> list[str]:
        """The run's records, after one last reading."""
        self._stop.set()
        self._thread.join()
        self._read()
        try:
            return [self.memory.stop(seconds), *self.use.record_lines()]
        except Exception as err:
            return [f"HostMemory: source=none reason=the host could not be read ({err})"]
