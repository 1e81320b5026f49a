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
as ``<test>``; the job script takes whichever the installation has.

Each check runs with the process bound to the GPU's own NUMA node
(``placement=local``) and to one on the other socket (``placement=remote``),
as in GDRCopy's "NUMA effects" (``numactl -N <node> -l``), where the node has
more than one NUMA node. Skipped with the reason: nodes without gdrdrv (our
H100 and H200), the remote placement on one-NUMA-node machines, and managed
memory, which GDRCopy does not support.

Performance variables keep GDRCopy's units: copybw's ``MB/s`` are 2^20 bytes
per second; copylat's and apiperf's times are microseconds.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import fixture, parameter, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from checks.suite.base import NodeFacts, median
from checks.suite.build import REPO

# ------------------------------------------------------------------ parsing --

_LIBCHECK = re.compile(r"Checks: (?P<checks>\d+), Failures: (?P<failures>\d+), Errors: (?P<errors>\d+)")
_TESTSUITE = re.compile(
    r"^Total: (?P<total>\d+), Passed: (?P<passed>\d+), Failed: (?P<failed>\d+), Waived: (?P<waived>\d+)", re.MULTILINE
)
_BW = r"(?P<bw>[0-9.]+(?:[eE][-+]?\d+)?) ?MB/s"
_TEST = r"test, size=(?P<size>\d+) offset=(?P<offset>\d+) num_iters=(?P<iters>\d+)\s*\n"
_WRITE = re.compile(rf"^writing {_TEST}write BW: {_BW}", re.MULTILINE)
_READ = re.compile(rf"^reading {_TEST}read BW: {_BW}", re.MULTILINE)
_COPYLAT_ROW = re.compile(
    r"^(?P<test>gdr_copy_to_mapping|gdr_copy_from_mapping|cuMemcpy_H2D|cuMemcpy_D2H)\s+(?P<size>\d+)\s+"
    r"(?P<time>[0-9.]+)(?:\s+(?P<min>[0-9.]+))?\s*$",
    re.MULTILINE,
)
_APIPERF_ROW = re.compile(
    r"^(?P<size>\d+)\s+(?P<pin>[0-9.]+)\s+(?P<map>[0-9.]+)\s+(?P<get_info>[0-9.]+)\s+(?P<unmap>[0-9.]+)\s+"
    r"(?P<unpin>[0-9.]+)\s*$",
    re.MULTILINE,
)

#: copylat's rows as the suite's (method, direction), so that their perflog
#: names read like SmallCopyLatency's: lat_us_gdrcopy_h2d_8.
COPYLAT_ROWS = {
    "gdr_copy_to_mapping": ("gdrcopy", "h2d"),
    "gdr_copy_from_mapping": ("gdrcopy", "d2h"),
    "cuMemcpy_H2D": ("cumemcpy", "h2d"),
    "cuMemcpy_D2H": ("cumemcpy", "d2h"),
}

#: copylat's sizes that must be in every run (8 B to 1 MiB).
COPYLAT_SIZES = [8, 4096, 65536, 1048576]

APIPERF_OPS = ["pin", "map", "get_info", "unmap", "unpin"]


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


def parse_copybw(text: str) -> list:
    """copybw's measurements, in order: dicts of direction ('write' or
    'read'), size, offset, iterations and bandwidth in MB/s (2^20 B/s)."""
    found = []
    for direction, pattern in (("write", _WRITE), ("read", _READ)):
        for m in pattern.finditer(text):
            found.append(
                {
                    "direction": direction,
                    "size": int(m["size"]),
                    "offset": int(m["offset"]),
                    "iters": int(m["iters"]),
                    "bw": float(m["bw"]),
                    "at": m.start(),
                }
            )
    found.sort(key=lambda f: f["at"])
    for f in found:
        del f["at"]
    return found


def parse_copylat(text: str, column: str = "time") -> dict:
    """copylat's tables as {row: {size: microseconds}}, rows named as GDRCopy
    prints them (gdr_copy_to_mapping, ..., cuMemcpy_H2D). `column` 'time' is
    the Avg.Time(us) of GDRCopy up to 2.5 or the Median Time(us) of later
    versions; 'min' is the Min. Time(us) that only later versions print."""
    table: dict = {}
    for m in _COPYLAT_ROW.finditer(text):
        if m[column] is not None:
            table.setdefault(m["test"], {})[int(m["size"])] = float(m[column])
    return table


def apiperf_rows(max_size: int) -> int:
    """How many sizes apiperf -s max_size times: 64 KiB (a GPU page) doubled
    up to max_size rounded up to a GPU page."""
    rounded = -(-max_size // 65536) * 65536
    return rounded.bit_length() - 16


def parse_apiperf(text: str) -> dict:
    """apiperf's rows as {size: {pin, map, get_info, unmap, unpin}} in us."""
    return {int(m["size"]): {op: float(m[op]) for op in APIPERF_OPS} for m in _APIPERF_ROW.finditer(text)}


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

MANAGED_MEMORY = (
    "GDRCopy does not support CUDA managed memory: gdr_pin_buffer takes regular device memory only "
    "(cudaMalloc, cuMemAlloc), as its README says"
)


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

    #: The NUMA node of placement=remote; None: one on another socket.
    remote_node = variable(int, type(None), value=None)

    #: Runs of the test in the job: the samples of its headline figures.
    repeats = variable(int, value=5)

    # Where GDRCopy came from, and how the process was bound, for the perflog;
    # the node facts come from NodeFacts, as for the suite's own checks.
    gdrcopy_prefix = variable(str, value="", loggable=True)
    numa_binding = variable(str, value="none", loggable=True)

    case_variables = ("device",)

    @run_after("setup")
    def skip_what_cannot_run(self):
        # Managed memory first: it is never supported, whatever the node.
        self.skip_if(getattr(self, "memory", "device") == "managed", MANAGED_MEMORY)
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
        with open(os.path.join(self.stagedir, self.stdout.evaluate())) as stream:
            return stream.read()

    def ran_to_the_end(self):
        """GDRCopy's tests close the driver last (once a repeat); an ASSERT stops them before."""
        return sn.all([
            sn.assert_eq(sn.count(sn.findall(r"^closing gdrdrv", self.stdout)), self.repeats,
                         msg="{0} of {1} runs of the test closed gdrdrv (an early stop?)"),
            sn.assert_not_found(r"Assertion .* failed|^ERROR", self.stdout),
            sn.assert_not_found(r"Assertion .* failed|^ERROR", self.stderr),
        ])  # fmt: skip


def split_repeats(text: str) -> list:
    """The output of each repeat of a test (after its "Repeat: k of n" line), in order."""
    return re.split(r"^Repeat: \d+ of \d+\n", text, flags=re.MULTILINE)[1:]


@rfm.simple_test
class GdrCopySanity(GdrCopyCheck):
    descr = "GDRCopy's sanity (unit tests of libgdrapi and gdrdrv)"
    gdrcopy_test = "sanity"
    tags = {"gdrcopy"}
    repeats = 1  # unit tests: a pass or a failure, no figures

    def verified(self):
        return _sanity_passes(self.stdout)


@sn.deferrable
def _sanity_passes(stdout: str) -> bool:
    with open(stdout) as stream:
        why = sanity_failure(parse_sanity(stream.read()))
    if why:
        raise SanityError(f"GDRCopy sanity: {why}")
    return True


@rfm.simple_test
class GdrCopyBandwidth(GdrCopyCheck):
    descr = "GDRCopy's copybw: CPU write (to GPU) and read (from GPU) bandwidth through the mapping"
    gdrcopy_test = "copybw"
    tags = {"gdrcopy"}

    #: Copy and buffer size (-c, -s): 64 KiB as in the seed's NUMA runs,
    #: 128 KiB as in its default run.
    copy_size = parameter([65536, 131072])
    memory = parameter(["device", "managed"])

    #: Copy offset into the buffer (-o).
    copy_offset = variable(int, value=0)

    case_variables = ("device", "copy_offset")

    def test_options(self) -> list:
        return [
            "-d", str(self.device),
            "-s", str(self.copy_size + self.copy_offset),
            "-o", str(self.copy_offset),
            "-c", str(self.copy_size),
        ]  # fmt: skip

    def verified(self):
        return sn.all([
            self.ran_to_the_end(),
            sn.assert_eq(sn.count(sn.findall(rf"^writing test, size={self.copy_size} offset={self.copy_offset} ",
                                             self.stdout)), self.repeats),
            sn.assert_eq(sn.count(sn.findall(rf"^write BW: {_BW}", self.stdout)), self.repeats),
            sn.assert_eq(sn.count(sn.findall(rf"^read BW: {_BW}", self.stdout)), self.repeats),
        ])  # fmt: skip

    @run_before("performance")
    def set_perf_variables(self):
        self.perf_variables = {
            **self.headline("write_bw", sn.extractall(rf"^write BW: {_BW}", self.stdout, "bw", float), "MB/s",
                            self.repeats),
            **self.headline("read_bw", sn.extractall(rf"^read BW: {_BW}", self.stdout, "bw", float), "MB/s",
                            self.repeats),
        }  # fmt: skip


@rfm.simple_test
class GdrCopyLatency(GdrCopyCheck):
    descr = "GDRCopy's copylat: gdr_copy_to/from_mapping and cuMemcpy latency, 1 B to 16 MiB"
    gdrcopy_test = "copylat"
    tags = {"gdrcopy", "latency"}

    memory = parameter(["device", "managed"])

    #: Buffer size (-s): the largest copy, GDRCopy's default.
    buffer_size = variable(int, value=16 * 2**20)

    #: Also time cuMemcpy (-c), the rows "cuMemcpy_H2D/D2H".
    with_cumemcpy = variable(bool, value=True)

    case_variables = ("device", "buffer_size")

    def test_options(self) -> list:
        return ["-d", str(self.device), "-s", str(self.buffer_size)] + (["-c"] if self.with_cumemcpy else [])

    def required_rows(self) -> list:
        return ["gdr_copy_to_mapping", "gdr_copy_from_mapping"] + (
            ["cuMemcpy_H2D", "cuMemcpy_D2H"] if self.with_cumemcpy else []
        )

    def verified(self):
        return sn.all([
            self.ran_to_the_end(),
            _copylat_complete(self.stdout, self.required_rows(), COPYLAT_SIZES, self.repeats),
        ])  # fmt: skip

    @run_before("performance")
    def set_perf_variables(self):
        if self.is_dry_run():
            return
        # The whole table, every row and size: lat_us_<method>_<direction>_<size>;
        # the sizes of COPYLAT_SIZES are headline figures with a sample per repeat.
        tables = [parse_copylat(text) for text in split_repeats(self.output())]
        perf = {}
        for row, curve in tables[0].items():
            method, direction = COPYLAT_ROWS[row]
            for size in sorted(curve):
                name, samples = f"lat_us_{method}_{direction}_{size}", [t[row][size] for t in tables]
                if size in COPYLAT_SIZES:
                    perf.update(self.headline(name, sn.defer(samples), "us", self.repeats))
                else:
                    perf[name] = sn.make_performance_function(median(sn.defer(samples)), "us")
        self.perf_variables = perf


@sn.deferrable
def _copylat_complete(stdout: str, rows: list, sizes: list, repeats: int) -> bool:
    with open(stdout) as stream:
        tables = [parse_copylat(text) for text in split_repeats(stream.read())]
    if len(tables) != repeats:
        raise SanityError(f"copylat: {len(tables)} runs in the output, {repeats} asked for")
    for k, table in enumerate(tables, start=1):
        for row in rows:
            missing = [s for s in sizes if s not in table.get(row, {})]
            if missing:
                raise SanityError(f"copylat run {k}: no {row} row for sizes {missing}")
        if {r: sorted(c) for r, c in table.items()} != {r: sorted(c) for r, c in tables[0].items()}:
            raise SanityError(f"copylat run {k}: other rows or sizes than run 1's")
    return True


#: apiperf's headline size: one GPU page.
APIPERF_HEADLINE_SIZE = 65536


@rfm.simple_test
class GdrCopyApiPerf(GdrCopyCheck):
    descr = "GDRCopy's apiperf: gdr_pin_buffer, gdr_map, gdr_get_info, gdr_unmap, gdr_unpin_buffer times"
    gdrcopy_test = "apiperf"
    tags = {"gdrcopy"}

    #: Largest buffer (-s): rows for 64 KiB (a GPU page), 128 KiB, ... up to it.
    max_size = variable(int, value=2**20)

    case_variables = ("device",)

    def test_options(self) -> list:
        return ["-d", str(self.device), "-s", str(self.max_size)]

    def verified(self):
        rows = sn.count(sn.extractall(_APIPERF_ROW.pattern, self.stdout, "size"))
        return sn.all([self.ran_to_the_end(), sn.assert_eq(rows, self.repeats * apiperf_rows(self.max_size))])

    @run_before("performance")
    def set_perf_variables(self):
        if self.is_dry_run():
            return
        tables = [parse_apiperf(text) for text in split_repeats(self.output())]
        perf = {}
        for size in sorted(tables[0]):
            for op in APIPERF_OPS:
                name, samples = f"{op}_us_{size}", [t[size][op] for t in tables]
                if size == APIPERF_HEADLINE_SIZE:
                    perf.update(self.headline(name, sn.defer(samples), "us", self.repeats))
                else:
                    perf[name] = sn.make_performance_function(median(sn.defer(samples)), "us")
        self.perf_variables = perf
