"""The watch's records of who used each GPU during a run (systems/gpu_use.py
writes them): each watched GPU's traffic and whether the program used it
(``GpuUse``), and every other process seen on it (``Contention``); and of who
else used the host's CPUs (``HostUse``, systems/host_use.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from experiments.records import fields


@dataclass(frozen=True)
class GpuReading:
    """A GpuUse record: one GPU over one run."""

    gpu: int
    own: bool
    samples: int
    pcie_rx_gbs: float = math.nan
    pcie_tx_gbs: float = math.nan
    nvlink_rx_gbs: float = math.nan
    nvlink_tx_gbs: float = math.nan


@dataclass(frozen=True)
class Contender:
    """A Contention record: another's process on one GPU during one run."""

    gpu: int
    pid: int
    name: str
    seen: int
    samples: int
    used_mib: float


@dataclass(frozen=True)
class HostContender:
    """A HostUse record: another's process busy on the host's CPUs during one run."""

    pid: int
    name: str
    cpu_s: float
    cpus: float
    rss_mib: float
    seen: int
    samples: int


def _number(record: dict, key: str) -> float:
    try:
        return float(record[key])
    except (KeyError, ValueError):
        return math.nan


def _records(text: str, tag: str) -> list[dict[str, str]]:
    """The fields of every `tag` record that reads as one: a line cut short, or a process name that
    looks like fields ('x seen=1'), is left out, not the night's judgement."""
    found = []
    for line in text.splitlines():
        if line.startswith(f"{tag}: "):
            try:
                found.append(fields(line[len(tag) + 2 :]))
            except ValueError:
                continue
    return found


def parse(text: str) -> tuple[list[GpuReading], list[Contender]]:
    """The GpuUse and Contention records of a program's output under the watch (those that read)."""
    gpus, others = [], []
    for r in _records(text, "GpuUse"):
        try:
            numbers = (_number(r, k) for k in ("pcie_rx_gbs", "pcie_tx_gbs", "nvlink_rx_gbs", "nvlink_tx_gbs"))
            gpus.append(GpuReading(int(r["gpu"]), r.get("own") == "yes", int(r.get("samples", 0)), *numbers))
        except (KeyError, ValueError):
            continue
    for r in _records(text, "Contention"):
        try:
            counts = int(r["gpu"]), int(r["pid"]), r.get("name", "?"), int(r["seen"]), int(r["samples"])
            others.append(Contender(*counts, _number(r, "used_mib")))
        except (KeyError, ValueError):
            continue
    return gpus, others


def parse_host(text: str) -> list[HostContender]:
    """The HostUse records of a program's output under the watch (those that read)."""
    found = []
    for r in _records(text, "HostUse"):
        try:
            numbers = (_number(r, k) for k in ("cpu_s", "cpus", "rss_mib"))
            found.append(HostContender(int(r["pid"]), r.get("name", "?"), *numbers, int(r["seen"]), int(r["samples"])))
        except (KeyError, ValueError):
            continue
    return found


def process_line(other: dict) -> str:
    """One other process of run.json's contention, as the night says it:
    'pid 4242 (python3, 1.0 GiB) in 12 case(s) of path_matrix, um_bandwidth', or for one on the
    host's CPUs (no GPU), 'pid 77 (stream, 3.9 CPUs, 2.0 GiB resident) in 3 case(s) of host_bandwidth'."""
    tests = ", ".join(other["tests"])
    if other.get("gpu") is None:
        used = f"{other['cpus']:.1f} CPUs, {other['rss_gib']:.1f} GiB resident"
    else:
        used = f"{other['used_gib']:.1f} GiB"
    return f"pid {other['pid']} ({other['name']}, {used}) in {other['cases']} case(s) of {tests}"


def process_place(other: dict) -> str:
    """Where run.json's other process was: 'GPU 5', or 'the host's CPUs' (a HostUse record's)."""
    return "the host's CPUs" if other.get("gpu") is None else f"GPU {other['gpu']}"
