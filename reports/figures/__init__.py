"""Figures from the tidy table (reports.load), written as PNG; one module per
experiment (reports/figures/<name>.py), what they share in common.py.

Checks with a figure of their own: the Unified Memory reprex (every run's
throughput per case, and the steady state against the host link's speed of
light and the copy engine), the host bandwidth per NUMA node, the DAXPY
study, the small-copy latency curves, the multi-GPU random-access scan
against its speed of light, and the path matrix's heat maps. Every other check gets the generic figure: one bar
chart per performance variable, so a new check renders without code here
(NO_GENERIC lists the checks that get none: their tables say it all). Every figure names the systems, nodes,
GPUs, drivers and CUDA versions it covers in its footer.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .common import Figure, coverage, coverage_text
from .copy_latency import LATENCY_TEST, latency_crossovers, latency_curves, latency_figure
from .daxpy import DAXPY_TEST, daxpy_crossover_table, daxpy_figures
from .generic import generic
from .host_bandwidth import HOST_TEST, host_numa
from .mem_scan import PINGPONG_TEST, SCAN_TEST, scan_figure, scan_speed_of_light
from .path_matrix import PATH_TEST, path_heat_maps
from .um_bandwidth import UM_TEST, um_per_run, um_steady

__all__ = [
    "DAXPY_TEST",
    "HOST_TEST",
    "LATENCY_TEST",
    "PINGPONG_TEST",
    "SCAN_TEST",
    "UM_TEST",
    "Figure",
    "coverage",
    "coverage_text",
    "daxpy_crossover_table",
    "latency_crossovers",
    "latency_curves",
    "render_all",
    "scan_speed_of_light",
]

#: Checks with figures of their own; the others get the generic one.
SPECIAL = {
    UM_TEST: [um_per_run, um_steady],
    HOST_TEST: [host_numa],
    DAXPY_TEST: [daxpy_figures],
    LATENCY_TEST: [latency_figure],
    SCAN_TEST: [scan_figure],
    PATH_TEST: [path_heat_maps],
}

#: Checks whose figures show every performance variable: no generic figure even on request
#: (it would be hundreds of bars, one per point of a curve), or whose table says it all.
NO_GENERIC = {DAXPY_TEST, LATENCY_TEST, SCAN_TEST, PINGPONG_TEST, PATH_TEST}


def render_all(frame: pd.DataFrame, outdir: Path, generic_for_all: bool = False) -> list[Figure]:
    outdir.mkdir(parents=True, exist_ok=True)
    figures = []
    for test in sorted(frame["test"].dropna().unique()):
        special = SPECIAL.get(test, [])
        for render in special:
            figures += render(frame, outdir)
        if test not in NO_GENERIC and (not special or generic_for_all):
            figures += generic(frame, outdir, test)
    return figures
