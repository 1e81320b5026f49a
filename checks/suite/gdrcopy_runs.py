"""The repeats of one GDRCopy job: the job script runs a test `repeats` times,
each run after a "Repeat: k of n" line; each run's output is read with
experiments/gdrcopy.py's parsers and checked against what the check asked for (sizes,
tables, allocation function), or an error names the run and the line; the
deferred readers of the checks' figures and curves, and what the checks know
of GDRCopy's versions."""

from __future__ import annotations

import functools
import glob
import os
import re

import reframe.utility.sanity as sn
from reframe.core.exceptions import SanityError

from experiments.gdrcopy import (
    APIPERF_OPS,
    COPYLAT_ROWS,
    CopyLat,
    GdrCopyOutputError,
    parse_alloc_fn,
    parse_apiperf,
    parse_copybw,
    parse_copylat,
    parse_gdrcopy_version,
    repeat_outputs,
)
from experiments.records import read_output


def reads_output(fn):
    """A deferred reader of a job's output whose GDRCopy output errors are
    the check's sanity errors (the parsers, free of ReFrame, raise ValueErrors)."""

    @functools.wraps(fn)
    def read(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except GdrCopyOutputError as error:
            raise SanityError(str(error)) from None

    return sn.deferrable(read)


def runs_of(text: str, test: str, repeats: int) -> list[tuple[int, str]]:
    """Each repeat's output with its first line's number; an error unless
    there are `repeats` of them."""
    runs = repeat_outputs(text)
    if len(runs) != repeats:
        raise GdrCopyOutputError(f"{test}: {len(runs)} runs in the output, {repeats} asked for")
    return runs


def in_run(test: str, k: int, error: GdrCopyOutputError) -> GdrCopyOutputError:
    """The error with the test and run it came from."""
    return GdrCopyOutputError(f"{test} run {k}: {error}")


def copybw_runs(text: str, repeats: int, size: int, offset: int, alloc_fn: str) -> list[dict]:
    """Each repeat's write and read bandwidth in MiB/s, {'write': bw, 'read':
    bw}: one measurement each, of the size and offset asked for, in memory
    from `alloc_fn`; an error naming the run and line otherwise."""
    found = []
    for k, (first, run) in enumerate(runs_of(text, "copybw", repeats), start=1):
        try:
            measures = parse_copybw(run, first)
            fn = parse_alloc_fn(run, first)
        except GdrCopyOutputError as error:
            raise in_run("copybw", k, error) from None
        if fn != alloc_fn:
            raise GdrCopyOutputError(f"copybw run {k}: memory from {fn}, not {alloc_fn}")
        shapes = [(m["direction"], m["size"], m["offset"]) for m in measures]
        if shapes != [("write", size, offset), ("read", size, offset)]:
            raise GdrCopyOutputError(
                f"copybw run {k} (from line {first}): measured (direction, size, offset) {shapes}, "
                f"not a write and a read of {size} B at offset {offset}"
            )
        found.append({m["direction"]: m["bw"] for m in measures})
    return found


def copylat_runs(text: str, repeats: int, rows: list, sizes: list, alloc_fn: str) -> list[CopyLat]:
    """Each repeat's tables: exactly `rows`, each of exactly `sizes`, one
    layout throughout, in memory from `alloc_fn`; an error naming the run
    (and line) otherwise."""
    found = []
    for k, (first, run) in enumerate(runs_of(text, "copylat", repeats), start=1):
        try:
            result, fn = parse_copylat(run, first), parse_alloc_fn(run, first)
        except GdrCopyOutputError as error:
            raise in_run("copylat", k, error) from None
        if fn != alloc_fn:
            raise GdrCopyOutputError(f"copylat run {k}: memory from {fn}, not {alloc_fn}")
        if sorted(result.tables) != sorted(rows):
            raise GdrCopyOutputError(f"copylat run {k} (from line {first}): tables {list(result.tables)}, not {rows}")
        for row, table in result.tables.items():
            missing, extra = sorted(set(sizes) - set(table)), sorted(set(table) - set(sizes))
            if missing or extra:
                raise GdrCopyOutputError(
                    f"copylat run {k} (from line {first}): the {row} table lacks sizes {missing} and has "
                    f"sizes {extra} it should not (1 B doubled to {sizes[-1]} B)"
                )
        if found and result.statistic != found[0].statistic:
            raise GdrCopyOutputError(f"copylat run {k}: {result.statistic}s, run 1 {found[0].statistic}s")
        found.append(result)
    return found


def apiperf_runs(text: str, repeats: int, sizes: list) -> list[dict]:
    """Each repeat's rows, exactly `sizes`; an error naming the run (and
    line) otherwise."""
    found = []
    for k, (first, run) in enumerate(runs_of(text, "apiperf", repeats), start=1):
        try:
            rows = parse_apiperf(run, first)
        except GdrCopyOutputError as error:
            raise in_run("apiperf", k, error) from None
        if sorted(rows) != sizes:
            raise GdrCopyOutputError(
                f"apiperf run {k} (from line {first}): rows for sizes {sorted(rows)}, not {sizes} "
                f"(64 KiB doubled to {sizes[-1]} B)"
            )
        found.append(rows)
    return found


#: GDRCopy installs its library as libgdrapi.so.<major>.<minor>[.<patch>].
_INSTALLED = re.compile(r"libgdrapi\.so\.(\d+\.\d+(?:\.\d+)*)$")


def installed_version(prefix: str | None) -> str:
    """GDRCopy's version ('2.4.4'): the file libgdrapi.so.<major>, under its
    prefix's lib*/ (or a multiarch folder in it, lib/x86_64-linux-gnu), links
    to, as the loader would take it; 'unknown' where there is none yet (a
    build not made, a dry run): the copylat case is then unjudged, not guessed."""
    if not prefix:
        return "unknown"
    for pattern in ("lib*/libgdrapi.so.[0-9]", "lib*/*/libgdrapi.so.[0-9]"):
        for link in sorted(glob.glob(os.path.join(prefix, pattern))):
            found = _INSTALLED.search(os.path.realpath(link))
            if found:
                return found[1]
    return "unknown"


@reads_output
def version_loaded(stdout: str, installed: str) -> bool:
    """The test loaded a libgdrapi with a version, the installed one where known."""
    loaded = parse_gdrcopy_version(read_output(stdout))
    if installed != "unknown" and loaded != installed:
        raise SanityError(f"the test loaded libgdrapi {loaded}, the installation under its prefix is {installed}")
    return True


def copylat_statistic(version: str) -> str:
    """What copylat's first column is: 'average' up to GDRCopy 2.5, 'median' from 2.6."""
    if version == "unknown":
        return "unknown"
    return "median" if [int(x) for x in version.split(".")[:2]] >= [2, 6] else "average"


@reads_output
def copybw_samples(stdout: str, repeats: int, size: int, offset: int, alloc_fn: str, direction: str) -> list:
    return [r[direction] for r in copybw_runs(read_output(stdout), repeats, size, offset, alloc_fn)]


@reads_output
def copylat_samples(stdout: str, repeats: int, rows: list, sizes: list, alloc_fn: str, row: str, size: int) -> list:
    return [r.curve(row)[size] for r in copylat_runs(read_output(stdout), repeats, rows, sizes, alloc_fn)]


@reads_output
def copylat_curve(stdout: str, repeats: int, rows: list, sizes: list, alloc_fn: str) -> list:
    """Every row and size of each repeat, as records (checks/suite/curves.py)."""
    lines = []
    for k, run in enumerate(copylat_runs(read_output(stdout), repeats, rows, sizes, alloc_fn), start=1):
        for row in sorted(run.tables):
            method, direction = COPYLAT_ROWS[row]
            lines += [
                f"CopyLat: repeat={k} method={method} direction={direction} size={size} us={us}"
                for size, us in sorted(run.curve(row).items())
            ]
    return lines


@reads_output
def apiperf_samples(stdout: str, repeats: int, sizes: list, size: int, op: str) -> list:
    return [run[size][op] for run in apiperf_runs(read_output(stdout), repeats, sizes)]


@reads_output
def apiperf_curve(stdout: str, repeats: int, sizes: list) -> list:
    """Every call at every size of each repeat, as records (checks/suite/curves.py)."""
    lines = []
    for k, run in enumerate(apiperf_runs(read_output(stdout), repeats, sizes), start=1):
        lines += [
            f"ApiPerf: repeat={k} size={size} op={op} us={run[size][op]}" for size in sorted(run) for op in APIPERF_OPS
        ]
    return lines
