"""Figures and tables from the tidy table (reports.load); one module per
experiment (reports/figures/<name>.py, the experiment's own name), what they
share in common.py.

An experiment's module may declare, besides its drawing:
- ``FIGURES``: the functions ``(frame, outdir) -> [Figure]`` that draw its figures;
- ``GENERIC = False``: no generic bar charts for it, even on request (its
  figures and table show every variable);
- ``table(frame)``: its own table, instead of the medians per case;
- ``sections(frame)``: ``[(heading, table, caption)]`` shown before its figures.
What the report says of it (its note, its table's caption and variables)
is the experiment's own: experiments/<name>.py. Every other check gets the
generic figure, one bar chart per performance variable, so a new check
renders without code here. Every figure names the systems, nodes, GPUs,
drivers and CUDA versions it covers in its footer.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pandas as pd

from experiments.progress import Progress
from reports.figures import copy_latency, daxpy, host_bandwidth, mem_scan, p2p_pingpong, path_matrix, um_bandwidth
from reports.figures.common import Figure, coverage, coverage_text, finite
from reports.figures.generic import generic

__all__ = ["Figure", "coverage", "coverage_text", "drawing_of", "render_all"]

_DRAWINGS = {
    m.NAME: m for m in (copy_latency, daxpy, host_bandwidth, mem_scan, p2p_pingpong, path_matrix, um_bandwidth)
}


def drawing_of(test: str) -> ModuleType | None:
    """The module that draws a test's figures and tables, if it has one."""
    return _DRAWINGS.get(test)


def render_all(frame: pd.DataFrame, outdir: Path, generic_for_all: bool = False) -> list[Figure]:
    """Every figure of every check in `frame`, of its finite values."""
    outdir.mkdir(parents=True, exist_ok=True)
    frame = finite(frame)
    figures = []
    tests = sorted(frame["test"].dropna().unique())
    progress = Progress("report", "checks' figures drawn", len(tests))  # a second or so a figure, dozens a check
    for test in tests:
        drawing = drawing_of(test)
        special = getattr(drawing, "FIGURES", [])
        for render in special:
            figures += render(frame, outdir)
        if getattr(drawing, "GENERIC", True) and (not special or generic_for_all):
            figures += generic(frame, outdir, test)
        progress.step()
    return figures
