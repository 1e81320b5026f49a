"""Runs a program and watches the node's GPUs while it runs.

    python -m systems.watch [--allow REASONS] [--period S] -- PROGRAM [ARGS...]

A measurement is only as good as the GPU it ran on. Before the program
starts and after it ends, the watch reads each GPU's error counters
(systems/gpu_readings.py's read_counters); while it runs, each GPU's clock event
reasons every `period` seconds. A fault is a PCIe replay or an uncorrected
ECC error counted during the run, a row remapping or page retirement that
became pending or failed, or a clock event reason other than idle (and the
`--allow`ed ones, from the system's health data). Prints a line per fault
and a summary the checks' sanity reads:

    Watch: FAIL GMP-313 gpu0 pcie_replays: 3 during the run
    Watch: FAIL GMP-326 gpu0 clock_events: hw_thermal_slowdown during the run
    Watch: 1 GPU(s) watched for 12.3 s, 2 fault(s)

and exits with the program's status. A GPU that NVML cannot read is a fault:
a measurement nobody watched is not passed as a healthy one.

It also says who else used each GPU during the run and how much traffic
crossed its links (systems/gpu_use.py): ``GpuUse`` and ``Contention``
records before the summary, which are no fault (the nightly's verdict reads
them: a busy GPU is not a slow one). Who else used the host's CPUs, and the
memory controllers' traffic where the host counts it (systems/host_use.py):
``HostMemory`` and ``HostUse`` records after them, NVML or not.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time

from . import gpu_use, host_use
from .finding_codes import code_of
from .gpu_readings import as_str, read_counters, visible_gpus

#: NVML's clock event reason bits, by the name the watch prints and --allow takes.
CLOCK_EVENTS = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}


def reason_names(mask: int) -> list[str]:
    return [name for name, bit in CLOCK_EVENTS.items() if mask & bit] or ([f"0x{mask:x}"] if mask else [])


def allowed_mask(names: list[str]) -> int:
    """Idle is always allowed; other reasons only where a system names them."""
    mask = CLOCK_EVENTS["gpu_idle"]
    for name in names:
        if name not in CLOCK_EVENTS:
            raise ValueError(f"--allow: unknown clock event reason {name!r} (known: {', '.join(CLOCK_EVENTS)})")
        mask |= CLOCK_EVENTS[name]
    return mask


def _code(field: str) -> str:
    """The catalogue's code of a node fact's fault (systems/findings/codes.yaml), as health's FAIL lines give it."""
    return code_of("health", field).code


def counter_faults(index: int, before: dict, after: dict) -> list[str]:
    """What the counters say happened to one GPU during the run."""
    found = []
    for field in ("pcie_replays", "ecc_uncorrected"):
        if before.get(field) is not None and after.get(field) is not None and after[field] > before[field]:
            found.append(f"{_code(field)} gpu{index} {field}: {after[field] - before[field]} during the run")
    for field in ("remap_pending", "remap_failure", "retired_pending"):
        if after.get(field) and not before.get(field):
            found.append(f"{_code(field)} gpu{index} {field}: became true during the run")
    return found


class Watch:
    """The GPUs CUDA sees, their counters before, and their clock event reasons while the program runs."""

    def __init__(self, nvml, allowed: int, period: float, visible: str | None, token: str | None = None):
        self.nvml, self.allowed, self.period = nvml, allowed, period
        every = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        uuids = [as_str(nvml.nvmlDeviceGetUUID(h)) for h in every]
        self.handles = [every[i] for i in visible_gpus(uuids, visible)]
        self.before = [read_counters(nvml, h) for h in self.handles]
        self.seen = [0] * len(self.handles)
        self.unreadable: dict[int, str] = {}
        #: Who used each GPU: the program's processes descend from `root` (set once it started) or carry
        #: the case's token (its other ranks, under watches of their own).
        self.uses = [
            gpu_use.GpuUse(i, counters_before=gpu_use.read_counters(nvml, h)) for i, h in enumerate(self.handles)
        ]
        self.root: int | None = None
        self.token = token
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        # Apart from the clock events': its NVML calls may take tens of milliseconds where the
        # driver keeps no byte counters, and a failure of it must not stop the faults' watch.
        self._use_thread = threading.Thread(target=self._sample_use, daemon=True)

    def _sample_use(self) -> None:
        while not self._stop.is_set():
            if self.root is not None:
                for handle, use in zip(self.handles, self.uses):
                    try:
                        gpu_use.sample(self.nvml, handle, use, self.root, token=self.token)
                    except Exception:  # who else used the GPU is a finding's context, never a fault
                        pass
            self._stop.wait(gpu_use.USE_PERIOD)

    def _sample(self) -> None:
        while True:
            for i, handle in enumerate(self.handles):
                if i in self.unreadable:
                    continue
                try:
                    self.seen[i] |= self.nvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
                except Exception as err:  # NVML's NotSupported and friends
                    self.unreadable[i] = f"gpu{i} clock_events: unreadable ({err})"
            if self._stop.wait(self.period):
                return

    def start(self) -> None:
        self._thread.start()
        self._use_thread.start()

    def stop(self) -> list[str]:
        """Every fault during the run, as lines."""
        self._stop.set()
        self._thread.join()
        self._use_thread.join()
        found = [self.unreadable[i] for i in sorted(self.unreadable)]
        for i, handle in enumerate(self.handles):
            found += counter_faults(i, self.before[i], read_counters(self.nvml, handle))
            extra = self.seen[i] & ~self.allowed
            if extra:
                names = ",".join(reason_names(extra))
                found.append(f"{_code('clock_events')} gpu{i} clock_events: {names} during the run")
        return found

    def use_lines(self, seconds: float) -> list[str]:
        """Who used each GPU during the run and its traffic (systems/gpu_use.py), once stopped; one
        last reading of the processes first, so that a run shorter than the period is read once."""
        for handle, use in zip(self.handles, self.uses):
            if use.samples == 0 and self.root is not None:
                gpu_use.sample(self.nvml, handle, use, self.root, token=self.token)
        after = [gpu_use.read_counters(self.nvml, h) for h in self.handles]
        return gpu_use.record_lines(self.uses, after, seconds)


def run(argv: list[str], nvml=None, environ=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m systems.watch", description=__doc__.splitlines()[0])
    parser.add_argument("--allow", default="none", help="clock event reasons that are no fault, besides idle (list)")
    parser.add_argument("--period", type=float, default=0.05, help="seconds between clock event readings")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no program to run (after --)")
    allowed = allowed_mask([] if args.allow in ("", "none") else args.allow.split(","))
    environ = os.environ if environ is None else environ

    watch, problem = None, ""
    try:
        if nvml is None:
            import pynvml as nvml
        nvml.nvmlInit()
        watch = Watch(
            nvml, allowed, args.period, environ.get("CUDA_VISIBLE_DEVICES"), token=environ.get(gpu_use.CASE_TOKEN)
        )
        watch.start()
    except Exception as err:  # no NVML, no driver: the run is not watched, and says so
        problem = f"no GPU watched: NVML could not be read ({err})"

    host = host_use.HostWatch(token=environ.get(gpu_use.CASE_TOKEN))
    host.start()  # its first reading before the program starts: who was already busy

    # A check's time limit ends the job with SIGTERM: pass it on to the program
    # (or, before it started, start it no more), then report.
    child, received = None, []

    def forward(signum, _frame):
        received.append(signum)
        if child is not None:
            child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, forward)
    start = time.monotonic()
    try:
        child = subprocess.Popen(command)
    except OSError:
        host.stop(time.monotonic() - start)  # its counters (perf, system-wide) never outlive the watch
        raise
    if watch is not None:
        watch.root = child.pid
    if received:
        child.send_signal(received[0])
    status = child.wait()
    elapsed = time.monotonic() - start
    host_lines = host.stop(elapsed)  # at once: the GPUs' last readings are not the program's run

    found = watch.stop() if watch else [problem]
    for line in watch.use_lines(elapsed) if watch else []:
        print(line)
    for line in host_lines:
        print(line)
    gpus = len(watch.handles) if watch else 0
    if watch is not None and gpus == 0:
        found.append("no GPU watched: CUDA_VISIBLE_DEVICES leaves none of the GPUs NVML sees")
    for line in found:
        print(f"Watch: FAIL {line}")
    print(f"Watch: {gpus} GPU(s) watched for {elapsed:.1f} s, {len(found)} fault(s)", flush=True)
    if watch is not None:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
