"""GDRCopy's test programs' output, read strictly: every measurement line and
every row of every table as GDRCopy's printf formats of 2.3 to 2.6 write it
(tests/copybw.cpp, copylat.cpp, apiperf.cpp of NVIDIA/gdrcopy), every figure
a finite number, or an error that quotes the line and its number in the
job's output. checks/gdrcopy.py turns these into the checks' figures (its
readers raise these as sanity errors); free of ReFrame."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from experiments.curves import record_medians

NAME = "gdrcopy"
#: The tests of GDRCopy's own programs, each a check of checks/gdrcopy.py.
TESTS = ("gdrcopy_sanity", "gdrcopy_copybw", "gdrcopy_copylat", "gdrcopy_apiperf")


class GdrCopyOutputError(ValueError):
    """A GDRCopy test's output that does not read as its printf formats
    write it; the message quotes the line."""


def named_line(number: int, line: str) -> str:
    """How errors name a line: its number in the job's output, and the line
    as printed (tabs and all)."""
    return f"line {number}: {line!r}"


#: Unsigned: every figure GDRCopy prints is a time or a rate.
_NUMBER = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def finite(text: str, at: str, what: str) -> float:
    """`text` as a finite unsigned number, or an error naming the line:
    GDRCopy prints '-nan' or 'inf' for a figure it could not time (copybw -r
    0), and a negative time or rate is no measurement."""
    if _NUMBER.fullmatch(text):
        value = float(text)
        if math.isfinite(value):
            return value
    raise GdrCopyOutputError(f"{at}: {what} {text!r} is not a finite unsigned number")


_REPEAT = re.compile(r"^Repeat: \d+ of \d+$")


def repeat_outputs(text: str) -> list[tuple[int, str]]:
    """The output of each repeat of a test (after its "Repeat: k of n" line),
    in order, with the number of its first line in the whole output."""
    runs: list[tuple[int, list]] = []
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        if _REPEAT.match(line.rstrip("\n")):
            runs.append((number + 1, []))
        elif runs:
            runs[-1][1].append(line)
    return [(first, "".join(lines)) for first, lines in runs]


def split_repeats(text: str) -> list[str]:
    """The output of each repeat of a test, in order."""
    return [run for _, run in repeat_outputs(text)]


# ---- sanity

_LIBCHECK = re.compile(r"Checks: (?P<checks>\d+), Failures: (?P<failures>\d+), Errors: (?P<errors>\d+)")
_TESTSUITE = re.compile(
    r"^Total: (?P<total>\d+), Passed: (?P<passed>\d+), Failed: (?P<failed>\d+), Waived: (?P<waived>\d+)", re.MULTILINE
)


def parse_sanity(text: str) -> dict | None:
    """GDRCopy sanity's summary: libcheck's "Checks: N, Failures: F, Errors: E"
    (GDRCopy up to 2.3) or its own test suite's "Total: N, Passed: P, Failed:
    F, Waived: W" (2.4 on), as a dict of ints; None when there is none."""
    found = _LIBCHECK.search(text) or _TESTSUITE.search(text)
    return {k: int(v) for k, v in found.groupdict().items()} if found else None


def sanity_failure(summary: dict | None) -> str | None:
    """Why a sanity summary is not a pass (at least one test, none failed,
    no errors), or None when it is one."""
    if summary is None:
        return "no summary line (Checks: N, Failures: F, Errors: E) in the output"
    if "checks" in summary:
        if summary["checks"] == 0:
            return "libcheck ran no test (Checks: 0)"
        if summary["failures"] or summary["errors"]:
            return f"{summary['failures']} failures and {summary['errors']} errors in {summary['checks']} checks"
        return None
    if summary["total"] == 0 or summary["passed"] == 0:
        return f"no test passed (Total: {summary['total']}, Passed: {summary['passed']})"
    if summary["failed"]:
        return f"{summary['failed']} of {summary['total']} tests failed"
    return None


# ---- version and allocation

#: The job prints the libgdrapi that GDRCopy's test loads (ldd, symlinks
#: resolved): GDRCopy installs it as libgdrapi.so.<major>.<minor>.
LIBGDRAPI_LINE = "libgdrapi: "
_LIBGDRAPI_VERSION = re.compile(r"/libgdrapi\.so\.(?P<version>\d+\.\d+(?:\.\d+)*)$")


def parse_gdrcopy_version(text: str) -> str:
    """GDRCopy's version ('2.6') from the job's "libgdrapi: <path>" line."""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith(LIBGDRAPI_LINE):
            found = _LIBGDRAPI_VERSION.search(line)
            if not found:
                raise GdrCopyOutputError(
                    f"{named_line(number, line)}: no GDRCopy version: the test's libgdrapi is not "
                    "<dir>/libgdrapi.so.<major>.<minor> (ldd could not find it?)"
                )
            return found["version"]
    raise GdrCopyOutputError(f"no {LIBGDRAPI_LINE!r} line before the test's output: GDRCopy's version is unknown")


_ALLOC_FN = re.compile(r"^gpu alloc fn: (?P<fn>.*)$")


def parse_alloc_fn(text: str, first: int = 1) -> str:
    """The allocation function one run of copybw or copylat names in its
    "gpu alloc fn: " line (GDRCopy 2.3 on)."""
    found = [(n, line) for n, line in enumerate(text.splitlines(), start=first) if _ALLOC_FN.match(line)]
    if len(found) != 1:
        lines = "; ".join(named_line(n, line) for n, line in found) or "none"
        raise GdrCopyOutputError(
            f"{len(found)} 'gpu alloc fn: ' lines in the run from line {first}, 1 expected: {lines}"
        )
    return _ALLOC_FN.match(found[0][1])["fn"]


# ---- copybw

_COPYBW_TEST = re.compile(
    r"^(?P<direction>writ|read)ing test, size=(?P<size>\d+) offset=(?P<offset>\d+) num_iters=(?P<iters>\d+)$"
)
_COPYBW_BW = re.compile(
    r"^(?P<direction>write|read) BW: (?P<value>[-+]?(?:[0-9.]+(?:[eE][-+]?\d+)?|nan|inf))(?P<unit>.*)$"
)

#: What copybw prints after each bandwidth, and what it stands for.
COPYBW_UNIT = "MB/s"
BANDWIDTH_UNIT = "MiB/s"


def _copybw_test(number: int, line: str) -> dict:
    found = _COPYBW_TEST.match(line)
    if not found:
        raise GdrCopyOutputError(
            f"{named_line(number, line)}: not copybw's '<writing|reading> test, size=<B> offset=<B> num_iters=<n>'"
        )
    direction = "write" if found["direction"] == "writ" else "read"
    return {
        "direction": direction,
        "size": int(found["size"]),
        "offset": int(found["offset"]),
        "iters": int(found["iters"]),
    }


def _copybw_bandwidth(number: int, line: str, test: dict | None) -> float:
    at = named_line(number, line)
    found = _COPYBW_BW.match(line)
    if not found:
        raise GdrCopyOutputError(f"{at}: not copybw's '<write|read> BW: <number>{COPYBW_UNIT}'")
    if test is None or test["direction"] != found["direction"]:
        test_line = "writing test" if found["direction"] == "write" else "reading test"
        raise GdrCopyOutputError(f"{at}: no '{test_line}, ...' line right before it")
    if found["unit"] != COPYBW_UNIT:
        raise GdrCopyOutputError(f"{at}: unit {found['unit']!r}, not copybw's {COPYBW_UNIT!r} (2^20 B/s)")
    bw = finite(found["value"], at, f"{found['direction']} bandwidth")
    if bw <= 0:
        raise GdrCopyOutputError(f"{at}: {found['direction']} bandwidth {bw:g} {COPYBW_UNIT}: nothing was copied")
    return bw


def parse_copybw(text: str, first: int = 1) -> list[dict]:
    """copybw's measurements, in order: dicts of direction ('write' or
    'read'), size, offset, iterations and bandwidth ('bw') in MiB/s. Every
    line of a measurement must parse, its bandwidth a positive finite number
    in copybw's MB/s right after its "writing test"/"reading test" line;
    `first` is the number of the text's first line in the job's output."""
    found, test = [], None
    for number, line in enumerate(text.splitlines(), start=first):
        if line.startswith(("writing test", "reading test")):
            test = _copybw_test(number, line)
        elif line.startswith(("write BW", "read BW")):
            bw = _copybw_bandwidth(number, line, test)  # raises where `test` is None
            found.append({**test, "bw": bw})
            test = None
        else:
            test = None
    return found


# ---- copylat

#: copylat's rows as the suite's (method, direction), so that their perflog
#: names read like copy_latency's: lat_us_gdrcopy_h2d_8.
COPYLAT_ROWS = {
    "gdr_copy_to_mapping": ("gdrcopy", "h2d"),
    "gdr_copy_from_mapping": ("gdrcopy", "d2h"),
    "cuMemcpy_H2D": ("cumemcpy", "h2d"),
    "cuMemcpy_D2H": ("cumemcpy", "d2h"),
}

#: copylat's headline sizes (8 B to 1 MiB): a sample per repeat in the perflog.
COPYLAT_SIZES = [8, 4096, 65536, 1048576]

#: copylat's table layouts, by the columns after "Test  Size(B)" (blanks
#: collapsed): the statistics of its columns, the first one logged.
COPYLAT_LAYOUTS = {
    "Avg.Time(us)": ("average",),  # GDRCopy up to 2.5
    "Median Time(us) Min. Time(us)": ("median", "min"),  # 2.6 on, of 100 batches
}

_COPYLAT_HEADER = re.compile(r"^Test\s+Size\(B\)\s+(?P<columns>.*\S)\s*$")
# A table ends at a blank line (cout << endl), the last one at "unmapping buffer".
_COPYLAT_TABLE_END = re.compile(r"^(?:\s*|unmapping buffer)$")
# A line outside the tables that would be a row: a header GDRCopy changed.
_COPYLAT_STRAY_ROW = re.compile(r"^(?:gdr_copy_\w+|cuMemcpy_\w+)\s+\d")
_GPU_PAGE_SIZE = 65536


@dataclass
class CopyLat:
    """One run of copylat: the statistic of its first column ('average' or
    'median') and its tables, {row: {size: {statistic: microseconds}}}."""

    statistic: str
    tables: dict

    def curve(self, row: str, column: str | None = None) -> dict:
        """{size: us} of one row, in its first column or the one named."""
        return {size: values[column or self.statistic] for size, values in self.tables[row].items()}


def copylat_sizes(buffer_size: int) -> list[int]:
    """copylat's sizes: 1 B doubled up to its buffer, rounded up to a GPU page."""
    rounded = -(-buffer_size // _GPU_PAGE_SIZE) * _GPU_PAGE_SIZE
    return [1 << k for k in range(rounded.bit_length()) if 1 << k <= rounded]


def _copylat_layout(number: int, line: str, columns: str) -> tuple:
    layout = COPYLAT_LAYOUTS.get(" ".join(columns.split()))
    if layout is None:
        known = " or ".join(repr(k) for k in COPYLAT_LAYOUTS)
        raise GdrCopyOutputError(
            f"{named_line(number, line)}: unknown copylat layout: columns {columns!r}, not {known}"
        )
    return layout


def _copylat_row(number: int, line: str, layout: tuple) -> tuple[str, int, dict]:
    """A row (name, size, {statistic: us}) in GDRCopy's printf
    "%s \t %8zu \t %11.4f[ \t %11.4f]\n"; an error naming the line otherwise."""
    at, fields = named_line(number, line), line.split()
    if len(fields) != 2 + len(layout) or not fields[1].isdigit():
        raise GdrCopyOutputError(
            f"{at}: not a copylat row '<test> <size> {' '.join(f'<{s}>' for s in layout)}' of this table's layout"
        )
    if fields[0] not in COPYLAT_ROWS:
        raise GdrCopyOutputError(f"{at}: unknown copylat test {fields[0]!r}, not one of {list(COPYLAT_ROWS)}")
    values = {stat: finite(text, at, f"{stat} time") for stat, text in zip(layout, fields[2:])}
    return fields[0], int(fields[1]), values


def parse_copylat(text: str, first: int = 1) -> CopyLat:
    """copylat's tables, rows named as GDRCopy prints them (gdr_copy_to_mapping,
    ..., cuMemcpy_H2D). Every line from a table's header to the blank line
    after it must be a row of the header's layout with finite times, each
    table one test's, each size once; a row outside the tables is an error."""
    tables: dict = {}
    layout, reading, table, header = None, None, None, None
    for number, line in enumerate(text.splitlines(), start=first):
        found = _COPYLAT_HEADER.match(line)
        if found:
            this = _copylat_layout(number, line, found["columns"])
            if layout and this != layout:
                raise GdrCopyOutputError(f"{named_line(number, line)}: a layout other than the first table's {layout}")
            layout, reading, table, header = this, this, None, named_line(number, line)
        elif reading and _COPYLAT_TABLE_END.match(line):
            if table is None:
                raise GdrCopyOutputError(f"{header}: a copylat table with no row")
            reading = None
        elif reading:
            name, size, values = _copylat_row(number, line, layout)
            if table is None:
                if name in tables:
                    raise GdrCopyOutputError(f"{named_line(number, line)}: a second {name} table")
                table, tables[name] = name, {}
            if name != table:
                raise GdrCopyOutputError(f"{named_line(number, line)}: a {name} row in the {table} table")
            if size in tables[name]:
                raise GdrCopyOutputError(f"{named_line(number, line)}: size {size} a second time in the {name} table")
            tables[name][size] = values
        elif _COPYLAT_STRAY_ROW.match(line):
            raise GdrCopyOutputError(
                f"{named_line(number, line)}: a copylat row with no 'Test  Size(B) ...' header before it"
            )
    if reading and table is None:
        raise GdrCopyOutputError(f"{header}: a copylat table with no row")
    return CopyLat(layout[0] if layout else "none", tables)


# ---- apiperf

APIPERF_OPS = ["pin", "map", "get_info", "unmap", "unpin"]

#: apiperf's header, printed before each size's row.
APIPERF_HEADER = ["Size(B)", *(f"{op}.Time(us)" for op in APIPERF_OPS)]


def apiperf_sizes(max_size: int) -> list[int]:
    """The sizes apiperf -s max_size times: 64 KiB (a GPU page) doubled up to
    max_size rounded up to a GPU page."""
    rounded = -(-max_size // _GPU_PAGE_SIZE) * _GPU_PAGE_SIZE
    return [_GPU_PAGE_SIZE << k for k in range(rounded.bit_length()) if _GPU_PAGE_SIZE << k <= rounded]


def _apiperf_header(lines: list, i: int, first: int) -> int:
    """Checks the header at lines[i] (the README shows it wrapped before
    unpin.Time(us)); the index of its last line."""
    columns = lines[i].split()
    while len(columns) < len(APIPERF_HEADER) and i + 1 < len(lines):
        more = lines[i + 1].split()
        if not more or not all(c.endswith(".Time(us)") for c in more):
            break
        columns, i = columns + more, i + 1
    if columns != APIPERF_HEADER:
        raise GdrCopyOutputError(
            f"{named_line(first + i, lines[i])}: unknown apiperf layout: columns {columns}, not {APIPERF_HEADER}"
        )
    return i


def _apiperf_row(number: int, line: str) -> tuple[int, dict]:
    """A row (size, {op: us}) in GDRCopy's printf "%zu\\t%f\\t%f\\t%f\\t%f\\t%f\\n"."""
    at, fields = named_line(number, line), line.split()
    if len(fields) != len(APIPERF_HEADER) or not fields[0].isdigit():
        raise GdrCopyOutputError(f"{at}: not apiperf's row '<size> {' '.join(f'<{op}>' for op in APIPERF_OPS)}'")
    return int(fields[0]), {op: finite(text, at, f"{op} time") for op, text in zip(APIPERF_OPS, fields[1:])}


def parse_apiperf(text: str, first: int = 1) -> dict:
    """apiperf's rows as {size: {pin, map, get_info, unmap, unpin}} in us.
    Each header must be apiperf's and be followed by a row with finite times;
    a row with no header before it (a second row under one header, indented
    or not), or a size twice, is an error."""
    rows: dict = {}
    lines, header, i = text.splitlines(), None, 0
    while i < len(lines):
        number, line = first + i, lines[i]
        if line.strip().startswith("Size(B)"):
            if header:
                raise GdrCopyOutputError(f"{header}: an apiperf header with no row after it")
            header, i = named_line(number, line), _apiperf_header(lines, i, first)
        elif header:
            size, times = _apiperf_row(number, line)
            if size in rows:
                raise GdrCopyOutputError(f"{named_line(number, line)}: size {size} a second time")
            rows[size], header = times, None
        elif line.strip()[:1].isdigit():  # indented or not: a row is never skipped silently
            raise GdrCopyOutputError(
                f"{named_line(number, line)}: an apiperf row with no 'Size(B) ...' header before it "
                "(apiperf prints one before each size's row)"
            )
        i += 1
    if header:
        raise GdrCopyOutputError(f"{header}: an apiperf header with no row after it")
    return rows


def copylat_curve_figures(lines: list[str], figures: dict) -> dict:
    """Each row and size of a kept copylat curve: the median over the repeats."""
    return record_medians(lines, "CopyLat", lambda r: f"lat_us_{r['method']}_{r['direction']}_{r['size']}")


def apiperf_curve_figures(lines: list[str], figures: dict) -> dict:
    """Each operation and size of a kept apiperf curve: the median over the repeats."""
    return record_medians(lines, "ApiPerf", lambda r: f"{r['op']}_us_{r['size']}")


#: What reads each test's kept curve back as figures (reports/curves.py).
CURVE_FIGURES = {"gdrcopy_copylat": copylat_curve_figures, "gdrcopy_apiperf": apiperf_curve_figures}
