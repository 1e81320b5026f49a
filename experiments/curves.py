"""A case's curves as kept beside its perflog (checks/suite/curves.py writes
them, reports/curves.py reads them back): the file's columns, which output
lines are curve records, and how a curve's points read as figures."""

from __future__ import annotations

import statistics

from experiments.records import records

CURVE_SUFFIX = ".curves"
CURVE_COLUMNS = ("job_completion_time", "display_name", "jobid", "record")


def curve_lines(text: str, tags) -> list[str]:
    """The lines of a program's output that are records of these tags."""
    starts = tuple(f"{tag}: " for tag in tags)
    return [line.rstrip() for line in text.splitlines() if line.startswith(starts)]


def median_figures(named_values, unit: str) -> dict:
    """{figure: (median, unit)} from (figure, value) pairs: a curve's points
    measured more than once (repeats, samples) read as one figure each."""
    by_name: dict = {}
    for name, value in named_values:
        by_name.setdefault(name, []).append(value)
    return {name: (statistics.median(values), unit) for name, values in by_name.items()}


def record_medians(lines: list[str], tag: str, name, field: str = "us", unit: str = "us") -> dict:
    """:func:`median_figures` of the `tag` records among curve lines, each
    named by `name(record)` and valued by its `field`."""
    found = records("\n".join(lines), tag)
    return median_figures(((name(r), float(r[field])) for r in found), unit)
