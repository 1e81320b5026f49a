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

Memory: GDRCopy maps regular device memory only, not managed memory (its
README, "Restrictions and known issues"); ``memory`` reaches the tests as
their allocation function (``-a``, 'device': cuMemAlloc), and sanity checks
the test's "gpu alloc fn:" line.

Parsing is strict: every measurement line and every row of every table must
read as GDRCopy's printf formats of 2.3 to 2.6 write it (tests/copybw.cpp,
copylat.cpp, apiperf.cpp of NVIDIA/gdrcopy), with every figure a finite
number, or sanity fails quoting the line and its number in the job's output.

Units: copybw prints "MB/s" but divides bytes per second by 1024 * 1024, so
its bandwidths are logged in MiB/s; copylat's and apiperf's times are in
microseconds (us). copylat prints averages up to GDRCopy 2.5 (Avg.Time(us))
and the median and minimum of 100 batches from 2.6 on (Median Time(us),
Min. Time(us)): its figures are the first column, and every record logs which
statistic that is (``statistic``, known from the version before the run and
held to the tables' header by the sanity) and GDRCopy's version
(``gdrcopy_version``, from the file name of the installed libgdrapi,
libgdrapi.so.<major>.<minor>; the sanity checks the test loaded that one).
The perflog has the headline sizes; every row and size is kept beside it
(checks/suite/curves.py).
"""

from __future__ import annotations

import os
import shlex

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import fixture, parameter, run_after, run_before, variable
from reframe.core.exceptions import SanityError

from checks.suite.base import KeptSkipReason, NodeFacts
from checks.suite.build import GdrCopyBuild, gdrcopy_source, gdrdrv_absent
from checks.suite.gdrcopy_runs import (
    apiperf_curve,
    apiperf_runs,
    apiperf_samples,
    copybw_runs,
    copybw_samples,
    copylat_curve,
    copylat_runs,
    copylat_samples,
    copylat_statistic,
    installed_version,
    reads_output,
    version_loaded,
)
from checks.suite.placement import remote_numa_node
from checks.suite.settings import Count, Device, NumaNode, Unreadable, Whole
from experiments.gdrcopy import (
    APIPERF_OPS,
    BANDWIDTH_UNIT,
    COPYLAT_ROWS,
    COPYLAT_SIZES,
    LIBGDRAPI_LINE,
    apiperf_sizes,
    copylat_sizes,
    parse_sanity,
    sanity_failure,
)
from experiments.records import read_output
from systems import data

# ------------------------------------------------------------------ checks --

#: GDRCopy's allocation function (its tests' -a) for each kind of memory.
GDRCOPY_ALLOC_FN = {"device": "cuMemAlloc"}


class GdrCopyCheck(KeptSkipReason, rfm.RunOnlyRegressionTest, NodeFacts):
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
    device = variable(Whole, int, Unreadable, value=0)

    def gpu_devices(self) -> list[int]:
        return [self.device]

    #: The NUMA node of placement=remote; None: one on another socket.
    remote_node = variable(Whole, int, Unreadable, type(None), value=None)

    #: Runs of the test in the job: the samples of its headline figures.
    repeats = variable(Whole, int, Unreadable, value=5)

    #: For the perflog: GDRCopy's prefix, its version (the installed libgdrapi's) and the process's binding.
    gdrcopy_prefix = variable(str, value="", loggable=True)
    gdrcopy_version = variable(str, value="unknown", loggable=True)
    numa_binding = variable(str, value="none", loggable=True)

    case_variables = ("device",)

    #: What each may be (the tests' own options get theirs in each test).
    settings = {"device": Device(), "remote_node": NumaNode(optional=True), "repeats": Count(1, 20)}

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
        self.gdrcopy_version = installed_version(self.gdrcopy_prefix)

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
        local = self.gpu_numa_node(self.device)
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

    def ran_to_the_end(self):
        """GDRCopy's tests close the driver last (once a repeat); an ASSERT
        stops them before. The job printed the library they loaded."""
        return sn.all(
            [
                sn.assert_eq(
                    sn.count(sn.findall(r"^closing gdrdrv", self.stdout)),
                    self.repeats,
                    msg="{0} of {1} runs of the test closed gdrdrv (an early stop?)",
                ),
                sn.assert_not_found(r"Assertion .* failed|^ERROR", self.stdout),
                sn.assert_not_found(r"Assertion .* failed|^ERROR", self.stderr),
                version_loaded(self.stdout, self.gdrcopy_version),
            ]
        )


@rfm.simple_test
class gdrcopy_sanity(GdrCopyCheck):
    descr = "GDRCopy's sanity (unit tests of libgdrapi and gdrdrv)"
    gdrcopy_test = "sanity"
    tags = {"gdrcopy"}
    repeats = 1  # unit tests: a pass or a failure, no figures

    def verified(self):
        return sn.all([version_loaded(self.stdout, self.gdrcopy_version), _sanity_passes(self.stdout)])


@reads_output
def _sanity_passes(stdout: str) -> bool:
    why = sanity_failure(parse_sanity(read_output(stdout)))
    if why:
        raise SanityError(f"GDRCopy sanity: {why}")
    return True


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
    copy_offset = variable(Whole, int, Unreadable, value=0)

    case_variables = ("device", "copy_offset")
    settings = {"copy_offset": Count(0, 65535)}

    def test_options(self) -> list:
        return [
            "-d",
            str(self.device),
            "-s",
            str(self.copy_size + self.copy_offset),
            "-o",
            str(self.copy_offset),
            "-c",
            str(self.copy_size),
            "-a",
            GDRCOPY_ALLOC_FN[self.memory],
        ]

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

    @run_after("setup")
    def set_perf_variables(self):
        self.perf_variables = {
            **self.headline(
                "write_bw", copybw_samples(self.stdout, *self._expected(), "write"), BANDWIDTH_UNIT, self.repeats
            ),
            **self.headline(
                "read_bw", copybw_samples(self.stdout, *self._expected(), "read"), BANDWIDTH_UNIT, self.repeats
            ),
        }


@reads_output
def _copybw_complete(stdout: str, repeats: int, size: int, offset: int, alloc_fn: str) -> bool:
    copybw_runs(read_output(stdout), repeats, size, offset, alloc_fn)
    return True


@rfm.simple_test
class gdrcopy_copylat(GdrCopyCheck):
    descr = "GDRCopy's copylat: gdr_copy_to/from_mapping and cuMemcpy latency, 1 B to 16 MiB"
    gdrcopy_test = "copylat"
    tags = {"gdrcopy", "latency"}

    #: The GPU memory mapped, as GDRCopy's -a allocates it (GDRCOPY_ALLOC_FN).
    memory = parameter(["device"])

    #: Buffer size (-s): the largest copy, GDRCopy's default.
    buffer_size = variable(Whole, int, Unreadable, value=16 * 2**20)
    settings = {"buffer_size": Count(1, 1 << 30)}

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
        return sn.all([self.ran_to_the_end(), _copylat_complete(self.stdout, *self._expected(), self.statistic)])

    @run_after("setup")
    def set_statistic(self):
        # Known from the version installed; the sanity holds the tables to it.
        self.statistic = copylat_statistic(self.gdrcopy_version)
        self.describe_case()  # the case key, now with its statistic

    @run_after("setup")
    def set_perf_variables(self):
        # The sizes of COPYLAT_SIZES of every row, a sample per repeat; the
        # whole table is the curve (:meth:`curve_records`).
        perf = {}
        for row in self.required_rows():
            method, direction = COPYLAT_ROWS[row]
            for size in (s for s in copylat_sizes(self.buffer_size) if s in COPYLAT_SIZES):
                samples = copylat_samples(self.stdout, *self._expected(), row, size)
                perf.update(self.headline(f"lat_us_{method}_{direction}_{size}", samples, "us", self.repeats))
        self.perf_variables = perf

    def curve_records(self):
        return copylat_curve(self.stdout, *self._expected())


@reads_output
def _copylat_complete(stdout: str, repeats: int, rows: list, sizes: list, alloc_fn: str, statistic: str) -> bool:
    runs = copylat_runs(read_output(stdout), repeats, rows, sizes, alloc_fn)
    if statistic != "unknown" and runs[0].statistic != statistic:
        raise SanityError(f"copylat printed {runs[0].statistic}s; its GDRCopy's version prints {statistic}s")
    return True


#: apiperf's headline size: one GPU page.
APIPERF_HEADLINE_SIZE = 65536


@rfm.simple_test
class gdrcopy_apiperf(GdrCopyCheck):
    descr = "GDRCopy's apiperf: gdr_pin_buffer, gdr_map, gdr_get_info, gdr_unmap, gdr_unpin_buffer times"
    gdrcopy_test = "apiperf"
    tags = {"gdrcopy"}

    #: Largest buffer (-s): rows for 64 KiB (a GPU page), 128 KiB, ... up to it.
    max_size = variable(Whole, int, Unreadable, value=2**20)
    settings = {"max_size": Count(1 << 16, 1 << 30)}

    case_variables = ("device",)

    def test_options(self) -> list:
        return ["-d", str(self.device), "-s", str(self.max_size)]

    def verified(self):
        return sn.all(
            [self.ran_to_the_end(), _apiperf_complete(self.stdout, self.repeats, apiperf_sizes(self.max_size))]
        )

    @run_after("setup")
    def set_perf_variables(self):
        # Every call at one GPU page, a sample per repeat; the other sizes are the curve.
        perf, sizes = {}, apiperf_sizes(self.max_size)
        for op in APIPERF_OPS:
            samples = apiperf_samples(self.stdout, self.repeats, sizes, APIPERF_HEADLINE_SIZE, op)
            perf.update(self.headline(f"{op}_us_{APIPERF_HEADLINE_SIZE}", samples, "us", self.repeats))
        self.perf_variables = perf

    def curve_records(self):
        return apiperf_curve(self.stdout, self.repeats, apiperf_sizes(self.max_size))


@reads_output
def _apiperf_complete(stdout: str, repeats: int, sizes: list) -> bool:
    apiperf_runs(read_output(stdout), repeats, sizes)
    return True
