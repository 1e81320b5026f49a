"""GDRCopy's own tests as checks: sanity, copybw, copylat and apiperf.

GDRCopy (NVIDIA's low-latency copy library over GPUDirect RDMA) maps GPU
memory into the CPU's address space through its kernel module gdrdrv. Its
tests are run as they ship, from

- an installation the system's data names (``gdrcopy_prefix`` of the
  partition in systems/<system>.yaml; on a detected node, the one on PATH), or
- the Spack environment's ``gdrcopy`` package, built by :class:`GdrCopyBuild`
  in environments with the 'spack' feature (spack/gdrcopy.yaml, with the
  system's externals).

GDRCopy 2.4 and later install the tests as ``gdrcopy_<test>``, older versions
as ``<test>``; the job script takes whichever the installation has. The checks
need GDRCopy 2.3 or later, whose copybw and copylat take ``-a``.

Each check runs with the process bound to the GPU's own NUMA node
(``placement=local``) and to one on the other socket (``placement=remote``),
as in GDRCopy's "NUMA effects" (``numactl -N <node> -l``), where the node has
more than one NUMA node. Skipped with the reason: nodes without gdrdrv (our
H100 and H200) and the remote placement on one-NUMA-node machines.

Memory: GDRCopy works with regular device memory only, not CUDA managed
memory (its README, "Restrictions and known issues"), and its tests have no
option for it, so the ``memory`` parameter has no managed value. Its value
reaches the program as the allocation function (``-a``): 'device' is
cuMemAlloc's memory (GDRCopy's other choice, cuMemCreate, is VMM device
memory), and sanity checks the test's "gpu alloc fn:" line.

Parsing is strict: every measurement line and every row of every table must
read as GDRCopy's printf formats of 2.3 to 2.6 write it (tests/copybw.cpp,
copylat.cpp, apiperf.cpp of NVIDIA/gdrcopy), with every figure a finite
number, or sanity fails quoting the line and its number in the job's output.

Units: copybw prints "MB/s" but divides bytes per second by 1024 * 1024, so
its bandwidths are logged in MiB/s; copylat's and apiperf's times are in
microseconds (us). copylat prints averages up to GDRCopy 2.5 (Avg.Time(us))
and the median and minimum of 100 batches from 2.6 on (Median Time(us),
Min. Time(us)): its figures are the first column, and every record logs which
statistic that is (``statistic``) and GDRCopy's version (``gdrcopy_version``,
from the file name of the libgdrapi the test loads, libgdrapi.so.<major>.<minor>).
"""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
from dataclasses import dataclass

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import fixture, parameter, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from checks.suite.base import NodeFacts, median
from checks.suite.build import REPO
from systems import data

# ------------------------------------------------------------------ parsing --


class GdrCopyOutputError(SanityError):
    """A GDRCopy test's output that does not read as its printf formats
    write it; the message quotes the line."""


def named_line(number: int, line: str) -> str:
    """How errors name a line: its number in the job's output, and the line
    as printed (tabs and all)."""
    return f"line {number}: {line!r}"


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def finite(text: str, at: str, what: str) -> float:
    """`text` as a finite number, or an error naming the line: GDRCopy prints
    '-nan' or 'inf' for a figure it could not time (copybw -r 0)."""
    if _NUMBER.fullmatch(text):
        value = float(text)
        if math.isfinite(value):
            return value
    raise GdrCopyOutputError(f"{at}: {what} {text!r} is not a finite number")


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
    a row with no header before it, or a size twice, is an error."""
    rows: dict = {}
    lines, header, i = text.splitlines(), None, 0
    while i < len(lines):
        number, line = first + i, lines[i]
        if line.startswith("Size(B)"):
            if header:
                raise GdrCopyOutputError(f"{header}: an apiperf header with no row after it")
            header, i = named_line(number, line), _apiperf_header(lines, i, first)
        elif header:
            size, times = _apiperf_row(number, line)
            if size in rows:
                raise GdrCopyOutputError(f"{named_line(number, line)}: size {size} a second time")
            rows[size], header = times, None
        elif line[:1].isdigit():
            raise GdrCopyOutputError(
                f"{named_line(number, line)}: an apiperf row with no 'Size(B) ...' header before it"
            )
        i += 1
    if header:
        raise GdrCopyOutputError(f"{header}: an apiperf header with no row after it")
    return rows


# ----------------------------------------------------------- installation --


def gdrcopy_source(partition, environ) -> tuple:
    """Where this partition and environment take GDRCopy's tests from:
    ('prefix', <installation>) from the system's data, or on a detected node
    from PATH; ('spack', '') in Spack environments; ('none', <why not>)."""
    prefix = partition.extras.get("gdrcopy_prefix")
    if prefix:
        return "prefix", prefix
    if "spack" in environ.features:
        return "spack", ""
    if partition.extras.get("detected"):
        for name in ("gdrcopy_copylat", "copylat"):
            found = shutil.which(name)
            if found:
                return "prefix", os.path.dirname(os.path.dirname(os.path.realpath(found)))
    system = partition.fullname.split(":")[0]
    return "none", (
        f"no GDRCopy installation for {partition.fullname}+{environ.name}: name one with gdrcopy_prefix in "
        f"systems/{system}.yaml, or use an environment with the 'spack' feature"
    )


def gdrdrv_absent(partition) -> str | None:
    """Why GDRCopy cannot run on this partition, or None when it can."""
    if partition.extras["node"]["gpus"]["count"] == 0:
        why = "; ".join(partition.extras.get("detection_notes", [])) or "the partition declares no GPU"
        return f"no GPU on {partition.fullname}: {why}"
    if "gdrdrv" not in partition.features:
        how = "/dev/gdrdrv is absent" if partition.extras.get("detected") else "the system's data says gdrdrv: false"
        return f"no gdrdrv on {partition.fullname} ({how}): GDRCopy maps GPU memory through that kernel module"
    return None


class GdrCopyBuild(rfm.CompileOnlyRegressionTest):
    """GDRCopy's library and tests from Spack's gdrcopy package, for Spack
    environments of partitions with gdrdrv and no installation named in the
    system's data. Anywhere else there is nothing to build: the build script
    only says where GDRCopy comes from, or why it is not needed."""

    descr = "GDRCopy's library and tests (Spack's gdrcopy), where the checks need them"
    build_system = "Spack"
    sourcesdir = None
    maintainers = ["gpu-mempaths"]
    tags = {"build", "gdrcopy"}

    #: The spec to install, e.g. 'gdrcopy@2.4.4' to choose the version.
    spec = variable(str, value="gdrcopy")

    @property
    def builds(self) -> bool:
        kind, _ = gdrcopy_source(self.current_partition, self.current_environ)
        return kind == "spack" and gdrdrv_absent(self.current_partition) is None

    def prefix(self) -> str | None:
        """GDRCopy's installation for the checks, or None where there is none."""
        kind, where = gdrcopy_source(self.current_partition, self.current_environ)
        if kind == "prefix":
            return where
        return os.path.join(self.stagedir, "gdrcopy") if kind == "spack" else None

    @run_before("compile")
    def configure_build(self):
        if not self.builds:
            kind, where = gdrcopy_source(self.current_partition, self.current_environ)
            why = gdrdrv_absent(self.current_partition) or (
                f"GDRCopy from {where} (the system's data)" if kind == "prefix" else where
            )
            self.build_system = "CustomBuild"
            self.build_system.commands = [f"echo {shlex.quote('nothing to build: ' + why)}"]
            return
        self.build_system.env_create_opts = [os.path.join(REPO, "spack", "gdrcopy.yaml")]
        self.build_system.specs = [self.spec]
        self.build_system.install_opts = ["--fail-fast"]
        self.env_vars["GPU_MEMPATHS_ROOT"] = REPO
        self.env_vars["GPU_MEMPATHS_SYSTEM"] = self.current_system.name
        self.postbuild_cmds = ['ln -sfn "$(spack -e rfm_spack_env location -i gdrcopy)" gdrcopy']

    @sanity_function
    def validate_build(self):
        if not self.builds:
            return sn.assert_true(True)
        bindir = os.path.join(self.stagedir, "gdrcopy", "bin")
        return sn.assert_true(
            any(os.path.isfile(os.path.join(bindir, n)) for n in ("gdrcopy_sanity", "sanity")),
            msg=f"no GDRCopy tests in {bindir}",
        )


# ------------------------------------------------------------------ checks --

#: GDRCopy's allocation function (its tests' -a) for each kind of memory.
GDRCOPY_ALLOC_FN = {"device": "cuMemAlloc"}


def remote_numa_node(node: dict, local: int) -> int:
    """A NUMA node away from `local`: on another socket where the node has
    several (the seed's -N 1 for a GPU behind socket 0), else the next one."""
    nodes = node["numa_nodes"]
    others = [n for n in nodes if n != local]
    sockets = node["cpu"]["sockets"]
    if sockets > 1 and len(nodes) % sockets == 0 and local in nodes:
        per_socket = len(nodes) // sockets
        far = [n for n in others if nodes.index(n) // per_socket != nodes.index(local) // per_socket]
        if far:
            return far[0]
    return others[0]


def read_output(path: str) -> str:
    with open(path) as stream:
        return stream.read()


class GdrCopyCheck(rfm.RunOnlyRegressionTest, NodeFacts):
    """One of GDRCopy's tests on one GPU, its process placed on a NUMA node,
    run `repeats` times in one job ("Repeat: k of n" before each): each
    headline figure's samples are its values in the repeats."""

    valid_systems = ["+gpu", "+detected"]
    valid_prog_environs = ["+cuda"]
    maintainers = ["gpu-mempaths"]
    num_tasks = 1
    num_tasks_per_node = 1
    num_gpus_per_node = 1
    exclusive_access = True

    gdrcopy = fixture(GdrCopyBuild, scope="environment")

    #: The GPU's own NUMA node, or one on another socket.
    placement = parameter(["local", "remote"])

    #: GDRCopy's name of the test: sanity, copybw, copylat or apiperf.
    gdrcopy_test = variable(str)

    #: The GPU the test uses (GDRCopy's -d).
    device = variable(int, value=0)

    def gpu_devices(self) -> list[int]:
        return [self.device]

    #: The NUMA node of placement=remote; None: one on another socket.
    remote_node = variable(int, type(None), value=None)

    #: Runs of the test in the job: the samples of its headline figures.
    repeats = variable(int, value=5)

    # Where GDRCopy came from, its version (libgdrapi's), and how the process
    # was bound, for the perflog; the node facts come from NodeFacts, as for
    # the suite's own checks.
    gdrcopy_prefix = variable(str, value="", loggable=True)
    gdrcopy_version = variable(str, value="unknown", loggable=True)
    numa_binding = variable(str, value="none", loggable=True)

    case_variables = ("device",)

    @run_after("setup")
    def skip_what_cannot_run(self):
        absent = gdrdrv_absent(self.current_partition)
        self.skip_if(absent is not None, absent)
        self.skip_if(
            self.placement == "remote" and len(self.node["numa_nodes"]) < 2,
            f"{self.current_partition.fullname} has one NUMA node: there is no remote placement",
        )
        kind, where = gdrcopy_source(self.current_partition, self.current_environ)
        self.skip_if(kind == "none", where)
        self.gdrcopy_prefix = self.gdrcopy.prefix()

    @run_after("setup")
    def set_resources(self):
        # All of the node's cores: under srun a task of one CPU could not be
        # bound to another NUMA node by numactl.
        cpu = self.node["cpu"]
        self.num_cpus_per_task = cpu["sockets"] * cpu["cores_per_socket"]

    def numa_node(self) -> int | None:
        """The NUMA node to bind to, or None on a node with only one."""
        nodes = self.node["numa_nodes"]
        if len(nodes) < 2:
            return None
        affinity = self.node["gpus"].get("numa_affinity") or [nodes[0]]
        local = affinity[min(self.device, len(affinity) - 1)]
        if self.placement == "local":
            return local
        return self.remote_node if self.remote_node is not None else remote_numa_node(self.node, local)

    def test_options(self) -> list:
        """The test's own options (GDRCopy's getopt letters)."""
        return []

    @run_before("run")
    def set_command(self):
        prefix = self.gdrcopy_prefix
        bindir = os.path.join(prefix, "bin")
        self.env_vars["LD_LIBRARY_PATH"] = f"{prefix}/lib64:{prefix}/lib:$LD_LIBRARY_PATH"
        self.prerun_cmds = [
            f"export gdrcopy_test={bindir}/gdrcopy_{self.gdrcopy_test}",
            f'[ -x "$gdrcopy_test" ] || gdrcopy_test={bindir}/{self.gdrcopy_test}',
            # GDRCopy's tests print no version: the library they load names it.
            f'echo "{LIBGDRAPI_LINE}$(ldd "$gdrcopy_test" | awk \'$1 ~ /^libgdrapi/ {{print $3}}\' | '
            'xargs -r readlink -e)"',
        ]
        command = ['"$gdrcopy_test"', *self.test_options()]
        numa = self.numa_node()
        if numa is None:
            self.numa_binding = "none (one NUMA node)"
        else:
            self.numa_binding = f"numactl -N {numa} -l"
            command = ["numactl", "-N", str(numa), "-l", *command]
        loop = (
            f'for repeat in $(seq {self.repeats}); do echo "Repeat: $repeat of {self.repeats}"; '
            f"{' '.join(command)} || exit $?; done"
        )
        self.executable = "bash"
        self.executable_opts = ["-c", shlex.quote(loop)]

    def output(self) -> str:
        # Hooks run outside the stage directory: read the output by its full path.
        return read_output(os.path.join(self.stagedir, self.stdout.evaluate()))

    @run_before("performance")
    def log_gdrcopy_version(self):
        if not self.is_dry_run():
            self.gdrcopy_version = parse_gdrcopy_version(self.output())

    def ran_to_the_end(self):
        """GDRCopy's tests close the driver last (once a repeat); an ASSERT
        stops them before. The job printed the library they loaded."""
        return sn.all([
            sn.assert_eq(sn.count(sn.findall(r"^closing gdrdrv", self.stdout)), self.repeats,
                         msg="{0} of {1} runs of the test closed gdrdrv (an early stop?)"),
            sn.assert_not_found(r"Assertion .* failed|^ERROR", self.stdout),
            sn.assert_not_found(r"Assertion .* failed|^ERROR", self.stderr),
            _version_known(self.stdout),
        ])  # fmt: skip


@sn.deferrable
def _version_known(stdout: str) -> bool:
    parse_gdrcopy_version(read_output(stdout))
    return True


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


@rfm.simple_test
class gdrcopy_sanity(GdrCopyCheck):
    descr = "GDRCopy's sanity (unit tests of libgdrapi and gdrdrv)"
    gdrcopy_test = "sanity"
    tags = {"gdrcopy"}
    repeats = 1  # unit tests: a pass or a failure, no figures

    def verified(self):
        return sn.all([_version_known(self.stdout), _sanity_passes(self.stdout)])


@sn.deferrable
def _sanity_passes(stdout: str) -> bool:
    why = sanity_failure(parse_sanity(read_output(stdout)))
    if why:
        raise SanityError(f"GDRCopy sanity: {why}")
    return True


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


@rfm.simple_test
class gdrcopy_copybw(GdrCopyCheck):
    descr = "GDRCopy's copybw: CPU write (to GPU) and read (from GPU) bandwidth through the mapping"
    gdrcopy_test = "copybw"
    tags = {"gdrcopy"}

    #: Copy and buffer size (-c, -s): 64 KiB as in the seed's NUMA runs,
    #: 128 KiB as in its default run.
    copy_size = parameter([65536, 131072])

    #: The GPU memory mapped, as GDRCopy's -a allocates it (GDRCOPY_ALLOC_FN).
    memory = parameter(["device"])

    #: Copy offset into the buffer (-o).
    copy_offset = variable(int, value=0)

    case_variables = ("device", "copy_offset")

    def test_options(self) -> list:
        return [
            "-d", str(self.device),
            "-s", str(self.copy_size + self.copy_offset),
            "-o", str(self.copy_offset),
            "-c", str(self.copy_size),
            "-a", GDRCOPY_ALLOC_FN[self.memory],
        ]  # fmt: skip

    def verified(self):
        return sn.all([self.ran_to_the_end(), _copybw_complete(self.stdout, *self._expected())])

    def _expected(self) -> tuple:
        return self.repeats, self.copy_size, self.copy_offset, GDRCOPY_ALLOC_FN[self.memory]

    #: The unit of the figures :meth:`limit_of` bounds.
    limit_unit = "MiB/s"

    @classmethod
    def limit_of(cls, figure: str, case: dict, node: dict) -> float | None:
        # The CPU's loads and stores through the BAR mapping cross the host link.
        link = data.speed_of_light(node)["host_link"]
        return link / 2**20 if link and figure in ("write_bw", "read_bw") else None

    @run_before("performance")
    def set_perf_variables(self):
        if self.is_dry_run():
            return
        runs = copybw_runs(self.output(), *self._expected())
        self.perf_variables = {
            **self.headline("write_bw", sn.defer([r["write"] for r in runs]), BANDWIDTH_UNIT, self.repeats),
            **self.headline("read_bw", sn.defer([r["read"] for r in runs]), BANDWIDTH_UNIT, self.repeats),
        }


@sn.deferrable
def _copybw_complete(stdout: str, repeats: int, size: int, offset: int, alloc_fn: str) -> bool:
    copybw_runs(read_output(stdout), repeats, size, offset, alloc_fn)
    return True


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


@rfm.simple_test
class gdrcopy_copylat(GdrCopyCheck):
    descr = "GDRCopy's copylat: gdr_copy_to/from_mapping and cuMemcpy latency, 1 B to 16 MiB"
    gdrcopy_test = "copylat"
    tags = {"gdrcopy", "latency"}

    #: The GPU memory mapped, as GDRCopy's -a allocates it (GDRCOPY_ALLOC_FN).
    memory = parameter(["device"])

    #: Buffer size (-s): the largest copy, GDRCopy's default.
    buffer_size = variable(int, value=16 * 2**20)

    #: Also time cuMemcpy (-c), the rows "cuMemcpy_H2D/D2H".
    with_cumemcpy = variable(bool, value=True)

    #: What the figures are: copylat's 'average' (GDRCopy up to 2.5) or
    #: 'median' (2.6 on), as its tables' header says.
    statistic = variable(str, value="unknown", loggable=True)

    #: The statistic is part of the case: an average (the seed's references)
    #: never judges a median, and the reverse.
    case_variables = ("device", "buffer_size", "statistic")

    def test_options(self) -> list:
        return ["-d", str(self.device), "-s", str(self.buffer_size), "-a", GDRCOPY_ALLOC_FN[self.memory]] + (
            ["-c"] if self.with_cumemcpy else []
        )

    def required_rows(self) -> list:
        return ["gdr_copy_to_mapping", "gdr_copy_from_mapping"] + (
            ["cuMemcpy_H2D", "cuMemcpy_D2H"] if self.with_cumemcpy else []
        )

    def _expected(self) -> tuple:
        return self.repeats, self.required_rows(), copylat_sizes(self.buffer_size), GDRCOPY_ALLOC_FN[self.memory]

    def verified(self):
        return sn.all([self.ran_to_the_end(), _copylat_complete(self.stdout, *self._expected())])

    @run_before("performance")
    def set_perf_variables(self):
        if self.is_dry_run():
            return
        # The whole table, every row and size: lat_us_<method>_<direction>_<size>;
        # the sizes of COPYLAT_SIZES are headline figures with a sample per repeat.
        runs = copylat_runs(self.output(), *self._expected())
        self.statistic = runs[0].statistic
        self.describe_case()  # the case key, now with its statistic
        perf = {}
        for row in runs[0].tables:
            method, direction = COPYLAT_ROWS[row]
            for size in sorted(runs[0].tables[row]):
                name, samples = f"lat_us_{method}_{direction}_{size}", [r.curve(row)[size] for r in runs]
                if size in COPYLAT_SIZES:
                    perf.update(self.headline(name, sn.defer(samples), "us", self.repeats))
                else:
                    perf[name] = sn.make_performance_function(median(sn.defer(samples)), "us")
        self.perf_variables = perf


@sn.deferrable
def _copylat_complete(stdout: str, repeats: int, rows: list, sizes: list, alloc_fn: str) -> bool:
    copylat_runs(read_output(stdout), repeats, rows, sizes, alloc_fn)
    return True


#: apiperf's headline size: one GPU page.
APIPERF_HEADLINE_SIZE = 65536


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


@rfm.simple_test
class gdrcopy_apiperf(GdrCopyCheck):
    descr = "GDRCopy's apiperf: gdr_pin_buffer, gdr_map, gdr_get_info, gdr_unmap, gdr_unpin_buffer times"
    gdrcopy_test = "apiperf"
    tags = {"gdrcopy"}

    #: Largest buffer (-s): rows for 64 KiB (a GPU page), 128 KiB, ... up to it.
    max_size = variable(int, value=2**20)

    case_variables = ("device",)

    def test_options(self) -> list:
        return ["-d", str(self.device), "-s", str(self.max_size)]

    def verified(self):
        return sn.all(
            [self.ran_to_the_end(), _apiperf_complete(self.stdout, self.repeats, apiperf_sizes(self.max_size))]
        )

    @run_before("performance")
    def set_perf_variables(self):
        if self.is_dry_run():
            return
        runs = apiperf_runs(self.output(), self.repeats, apiperf_sizes(self.max_size))
        perf = {}
        for size in sorted(runs[0]):
            for op in APIPERF_OPS:
                name, samples = f"{op}_us_{size}", [r[size][op] for r in runs]
                if size == APIPERF_HEADLINE_SIZE:
                    perf.update(self.headline(name, sn.defer(samples), "us", self.repeats))
                else:
                    perf[name] = sn.make_performance_function(median(sn.defer(samples)), "us")
        self.perf_variables = perf


@sn.deferrable
def _apiperf_complete(stdout: str, repeats: int, sizes: list) -> bool:
    apiperf_runs(read_output(stdout), repeats, sizes)
    return True
