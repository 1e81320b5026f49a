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

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pandas as pd

from experiments.progress import Progress
from reports.figures import copy_latency, daxpy, host_bandwidth, mem_scan, p2p_pingpong, path_matrix, um_bandwidth
from reports.figures.common import Figure, coverage, coverage_text, finite, in_gb_per_s
from reports.figures.generic import generic
from reports.load import CORE

__all__ = ["Figure", "coverage", "coverage_text", "drawing_of", "each_check", "render_all", "render_check"]

_DRAWINGS = {
    m.NAME: m for m in (copy_latency, daxpy, host_bandwidth, mem_scan, p2p_pingpong, path_matrix, um_bandwidth)
}


def drawing_of(test: str) -> ModuleType | None:
    """The module that draws a test's figures and tables, if it has one."""
    return _DRAWINGS.get(test)


def each_check(frame: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame]]:
    """Each check's records, in the checks' order, cut from the table once and without the columns of
    other checks (a check's parameter none of its records has, as the loader leaves out a column no record
    has); one at a time, so that a year's report holds one check's copy beside the table. A year's table
    is a million rows and seventy columns, most of them other checks' and empty: a mask over it costs
    seconds, where one over a check's own columns costs a tenth of that."""
    valued = {c: frame[c].notna().to_numpy(bool) for c in frame.columns if c not in CORE}
    for test, rows in sorted(frame.groupby("test").indices.items()):
        columns = [c for c in frame.columns if c not in valued or valued[c][rows].any()]
        yield str(test), frame[columns].iloc[rows]


def render_all(frame: pd.DataFrame, outdir: Path, generic_for_all: bool = False) -> list[Figure]:
    """Every figure of every check in `frame`, of its finite values; each check's drawn from its own records."""
    outdir.mkdir(parents=True, exist_ok=True)
    frame = finite(frame)
    figures = []
    progress = Progress("report", "checks' figures drawn", frame["test"].nunique())  # a second or so a figure
    for test, records in each_check(frame):
        figures += render_check(test, records, outdir, generic_for_all)
        progress.step()
    return figures


def render_check(test: str, records: pd.DataFrame, outdir: Path, generic_for_all: bool = False) -> list[Figure]:
    """The figures of one check from its finite records (every bandwidth in GB/s): its own drawings, or the
    generic bars."""
    records = in_gb_per_s(records)
    drawing = drawing_of(test)
    special = getattr(drawing, "FIGURES", [])
    figures = []
    for render in special:
        figures += render(records, outdir)
    if getattr(drawing, "GENERIC", True) and (not special or generic_for_all):
        figures += generic(records, outdir, test)
    return figures
