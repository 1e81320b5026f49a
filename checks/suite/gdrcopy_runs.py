"""The repeats of one GDRCopy job: the job script runs a test `repeats` times,
each run after a "Repeat: k of n" line; each run's output is read with
gdrcopy_output's parsers and checked against what the check asked for (sizes,
tables, allocation function), or an error names the run and the line."""

from __future__ import annotations

from .gdrcopy_output import (
    CopyLat,
    GdrCopyOutputError,
    parse_alloc_fn,
    parse_apiperf,
    parse_copybw,
    parse_copylat,
    repeat_outputs,
)


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
