"""The watch's records of who used each GPU during a run (systems/gpu_use.py
writes them): each watched GPU's traffic and whether the program used it
(``GpuUse``), and every other process seen on it (``Contention``)."""

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


def process_line(other: dict) -> str:
    """One other process of run.json's contention, as the night says it:
    'pid 4242 (python3, 1.0 GiB) in 12 case(s) of path_matrix, um_bandwidth'."""
    tests = ", ".join(other["tests"])
    return f"pid {other['pid']} ({other['name']}, {other['used_gib']:.1f} GiB) in {other['cases']} case(s) of {tests}"
