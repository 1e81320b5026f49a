"""The watch's records of who used each GPU during a run (systems/gpu_use.py
writes them): each watched GPU's traffic and whether the program used it
(``GpuUse``), and every other process seen on it (``Contention``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from experiments.records import records


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


def parse(text: str) -> tuple[list[GpuReading], list[Contender]]:
    """The GpuUse and Contention records of a program's output under the watch."""
    gpus = [
        GpuReading(
            int(r["gpu"]),
            r.get("own") == "yes",
            int(r.get("samples", 0)),
            *(_number(r, k) for k in ("pcie_rx_gbs", "pcie_tx_gbs", "nvlink_rx_gbs", "nvlink_tx_gbs")),
        )
        for r in records(text, "GpuUse")
    ]
    others = [
        Contender(
            int(r["gpu"]), int(r["pid"]), r.get("name", "?"), int(r["seen"]), int(r["samples"]), _number(r, "used_mib")
        )
        for r in records(text, "Contention")
    ]
    return gpus, others
