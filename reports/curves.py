"""The curves kept beside a perflog (checks/suite/curves.py), read back as
the figures the perflogs of earlier runs carried: every size, segment or
point, through the experiment's ``curve_figures`` (experiments/<name>.py), with the node facts and case
of the run's perflog lines."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import experiments
from experiments.curves import CURVE_COLUMNS
from reports.issue import Issue
from reports.names import split_display_name


def _curve_reader(test: str):
    """What reads a test's curves back as figures (experiments/<name>.py)."""
    return experiments.curve_figures(test)


def curve_runs(
    path: Path, issues: list[Issue], text: str | None = None, start: int = 1, as_lines: bool = False
) -> dict[tuple[str, str, str], tuple[int, list[str]]]:
    """{(completion time, display name, job id): (first line number, records)} of a curves file, or of its
    lines from line `start` on (`text`: theirs; the header is line 1); with `as_lines`, the lines whole (as
    they are kept waiting for their run's perflog lines), not their records."""
    runs: dict = {}
    lines = (path.read_bytes().decode("utf-8", errors="replace") if text is None else text).splitlines()
    if start == 1:
        if not lines or tuple(lines[0].split("|")) != CURVE_COLUMNS:
            issues.append(Issue(str(path), 1, "unreadable", f"no curves header ({'|'.join(CURVE_COLUMNS)})"))
            return runs
        lines, start = lines[1:], 2
    for number, line in enumerate(lines, start=start):
        fields = line.split("|")
        if len(fields) != len(CURVE_COLUMNS):
            issues.append(Issue(str(path), number, "malformed", f"{len(fields)} fields, not {len(CURVE_COLUMNS)}"))
            continue
        when, display_name, jobid, record = fields
        runs.setdefault((when, display_name, jobid), (number, []))[1].append(line if as_lines else record)
    return runs


def curve_records(derived: Iterable[tuple[dict, list[tuple[str, object, str]]]]) -> list[dict]:
    """The records of runs' derived figures (derived_figures), each its run's template with its figure."""
    return [
        {**template, "perf_var": name, "perf_value": value, "perf_unit": unit}
        for template, figures in derived
        for name, value, unit in figures
    ]


def derived_figures(
    path: Path,
    logged: list[dict],
    issues: list[Issue],
    whole: bool = True,
    text: str | None = None,
    start: int = 1,
) -> Iterator[tuple[dict, list[tuple[str, object, str]]]]:
    """The figures a curves file gives (its lines from `start` on, `text`, where given) to the runs its
    records belong to (`logged`: the records of the perflogs beside it), those a run's perflog has not: each
    run's first perflog record as the template of their records (no reference, no bounds, the curve's
    first line number) and, in name order, (name, value, unit); a run's template is read once, however
    many figures. A run without perflog lines is an issue where `logged` is the whole folder's (`whole`),
    not one file's."""
    # The job id tells apart runs of one test in two environments that end in the same second.
    by_run: dict = {}
    for record in logged:
        key = (record.get("job_completion_time"), record.get("display_name"), str(record.get("jobid")))
        by_run.setdefault(key, []).append(record)
    for (when, display_name, jobid), (number, lines) in curve_runs(path, issues, text, start).items():
        run = by_run.get((when, display_name, jobid))
        if not run:
            if whole:
                issues.append(Issue(str(path), number, "unmatched", f"no perflog line of {display_name} at {when}"))
            continue
        figures = {r["perf_var"]: r["perf_value"] for r in run}
        try:
            derived = _curve_reader(split_display_name(display_name)[0])(lines, figures)
        except (ValueError, KeyError, ImportError, AttributeError) as err:
            issues.append(Issue(str(path), number, "malformed", f"the curve of {display_name} at {when}: {err}"))
            continue
        found = [(name, value, unit) for name, (value, unit) in sorted(derived.items()) if name not in figures]
        if found:
            blank = {"perf_ref": None, "perf_lower_thres": None, "perf_upper_thres": None, "__line": number}
            yield {**run[0], **blank}, found
