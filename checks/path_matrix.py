"""The node's path matrix (src/path_matrix): every path between the node's
memories as a cell of its own, each a headline figure with its samples,
judged against its own reference and bounded by its own link from systems/.

Cells, in decimal GB/s (latency in ns per dependent load):

- ``gpu<g>_h2d_numa<n>_<engine>``, ``gpu<g>_d2h_numa<n>_<engine>``: GPU g
  and pinned memory on NUMA node n (``unbound`` without libnuma), by the copy
  engine (``ce``) or the SMs (``sm``); ``..._both_<engine>`` the same
  direction while the other runs at once. Limit: the GPU's host link.
- ``gpu<g>_h2d_allgpus_<engine>`` (and d2h): every GPU with its own NUMA
  node's memory at once, GPU g's share. Limit: its host link, and what all
  host links carry together.
- ``gpu<a>_read_gpu<b>_<engine>``: GPU a pulls GPU b's memory into its own
  (``bulk``: sm_90's bulk copies into shared memory, read only);
  ``gpu<a>_write_gpu<b>_<engine>`` pushes its own into b's; ``..._both_...``
  while b does the same to a. Limit: the pair's link, per direction.
- ``gpu<g>_latency_numa<n>``, ``gpu<g>_latency_gpu<b>``: a dependent pointer
  chase through that memory, uncached.

One case per matrix and engine (``%paths=host-ce``, ``peer-bulk``, ``latency-sm``, ...).
A pair the system data joins must reach each other; a cell missing from the
output fails the sanity, naming it. A cell outside its reference fails the
performance stage under its own name, with its value and reference.
"""

from __future__ import annotations

import itertools
import re
from functools import lru_cache
from typing import NamedTuple

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, variable

from checks.suite.base import GpuCheck
from checks.suite.records import read_output, records, require
from checks.suite.settings import Count, Size, Whole
from systems import data

ENGINES = ("ce", "sm")
PEER_ENGINES = ("ce", "sm", "bulk")

_HOST = re.compile(
    r"^gpu(?P<gpu>\d+)_(?P<dir>h2d|d2h)_(?P<where>numa\d+|unbound|allgpus)(?P<both>_both)?_(?P<engine>\w+)$"
)
_PEER = re.compile(r"^gpu(?P<gpu>\d+)_(?P<op>read|write)_gpu(?P<peer>\d+)(?P<both>_both)?_(?P<engine>\w+)$")
_LATENCY = re.compile(r"^gpu(?P<gpu>\d+)_latency_(?P<where>numa\d+|unbound|gpu\d+)$")


def numa_label(node: int) -> str:
    return f"numa{node}" if node >= 0 else "unbound"


def cell_name(record: dict) -> str:
    """The figure a 'Cell:' record is a sample of."""
    path, gpu, engine = record["path"], record["gpu"], record["engine"]
    if path == "latency":
        where = numa_label(int(record["numa"])) if record["dir"] == "host" else f"gpu{record['peer']}"
        return f"gpu{gpu}_latency_{where}"
    both = "_both" if record["dir"].endswith("-both") or record["dir"] == "both" else ""
    if path == "peer":
        return f"gpu{gpu}_{record['op']}_gpu{record['peer']}{both}_{engine}"
    where = "allgpus" if path == "host-all" else numa_label(int(record["numa"]))
    return f"gpu{gpu}_{record['dir'].split('-')[0]}_{where}{both}_{engine}"


#: The engines in words.
ENGINE_WORDS = {"ce": "copy engine", "sm": "SM", "bulk": "bulk (TMA)"}


class CellParts(NamedTuple):
    """A cell's name taken apart: its matrix ('host', 'allgpus', 'peer',
    'latency'), the GPU that runs it, the GPU at the other end (peer cells),
    and in words the memory it reaches, what it does and by which engine."""

    matrix: str
    gpu: int
    peer: int | None
    target: str  # 'NUMA node 1', 'GPU 0', 'own NUMA node', 'host memory'
    action: str  # 'read', 'write', 'host -> GPU', 'GPU -> host', 'latency'
    both: bool
    engine: str  # in words; '' for latency


def _numa_words(where: str, unbound: str) -> str:
    return unbound if where == "unbound" else f"NUMA node {where[4:]}"


def cell_parts(figure: str) -> CellParts | None:
    """The parts of a cell's name; None for a name that is no cell."""
    if m := _PEER.match(figure):
        peer = int(m["peer"])
        return CellParts(
            "peer", int(m["gpu"]), peer, f"GPU {peer}", m["op"], bool(m["both"]), ENGINE_WORDS[m["engine"]]
        )
    if m := _HOST.match(figure):
        allgpus = m["where"] == "allgpus"
        target = "own NUMA node" if allgpus else _numa_words(m["where"], "host memory")
        action = "host -> GPU" if m["dir"] == "h2d" else "GPU -> host"
        matrix = "allgpus" if allgpus else "host"
        return CellParts(matrix, int(m["gpu"]), None, target, action, bool(m["both"]), ENGINE_WORDS[m["engine"]])
    if m := _LATENCY.match(figure):
        where = m["where"]
        peer = int(where[3:]) if where.startswith("gpu") else None
        target = f"GPU {peer}" if peer is not None else _numa_words(where, "host")
        return CellParts("latency", int(m["gpu"]), peer, target, "latency", False, "")
    return None


def describe(figure: str) -> str:
    """'GPU 1 -> GPU 0 read, SM': a cell in words, for people."""
    c = cell_parts(figure)
    if c is None:
        return figure
    both = ", both ways at once" if c.both else ""
    if c.matrix == "peer":
        return f"GPU {c.gpu} -> {c.target} {c.action}, {c.engine}{both}"
    if c.matrix == "latency":
        return f"GPU {c.gpu} latency through {c.target}"
    where = c.target + (", all GPUs at once" if c.matrix == "allgpus" else "")
    return f"GPU {c.gpu} {c.action} ({where}), {c.engine}{both}"


def compute_major(node: dict) -> int:
    """The GPUs' compute capability's major number (0 where the data gives none)."""
    return int(str(node["gpus"].get("compute_capability", "0")).split(".")[0])


#: The matrices and engines, each pair a case of its own (the program's
#: --paths and --engines): a case's figures stay in the hundreds even on eight
#: GPUs and eight NUMA nodes, since ReFrame formats every figure of a case
#: into each of its perflog lines.
CASES = [
    ("host", "ce"),
    ("host", "sm"),
    ("host-all", "ce"),
    ("host-all", "sm"),
    ("peer", "ce"),
    ("peer", "sm"),
    ("peer", "bulk"),
    ("latency", "sm"),
]
MATRICES = ("host", "host-all", "peer", "latency")


def ordered_pairs(node: dict) -> list[tuple[int, int]]:
    """Every ordered pair of GPUs the system data joins."""
    return sorted([*data.gpu_pairs(node), *((b, a) for a, b in data.gpu_pairs(node))])


def expected_cells(node: dict, numa_nodes: list[int], matrix: str, engine: str | None = None) -> list[str]:
    """The cells of one matrix on a node of the system data's form: every GPU
    x NUMA node (host), every GPU with the others at once (host-all, two GPUs
    or more), every ordered pair the data joins (peer; bulk reads where the
    GPUs are sm_90 or newer), and the latencies through each NUMA node and
    peer; of one engine where `engine` names one."""
    gpus = range(node["gpus"]["count"])
    cells = []
    if matrix == "host":
        for g, n, e, d in itertools.product(gpus, numa_nodes, ENGINES, ("h2d", "d2h")):
            cells += [f"gpu{g}_{d}_{numa_label(n)}_{e}", f"gpu{g}_{d}_{numa_label(n)}_both_{e}"]
    elif matrix == "host-all" and len(gpus) > 1:
        cells = [f"gpu{g}_{d}_allgpus_{e}" for g in gpus for e in ENGINES for d in ("h2d", "d2h")]
    elif matrix == "peer":
        for a, b in ordered_pairs(node):
            for e in PEER_ENGINES if compute_major(node) >= 9 else ENGINES:
                for op in ("read", "write") if e != "bulk" else ("read",):
                    cells += [f"gpu{a}_{op}_gpu{b}_{e}", f"gpu{a}_{op}_gpu{b}_both_{e}"]
    elif matrix == "latency":
        for g in gpus:
            cells += [f"gpu{g}_latency_{numa_label(n)}" for n in numa_nodes]
            cells += [f"gpu{g}_latency_gpu{b}" for a, b in ordered_pairs(node) if a == g]
        return cells  # the chase is the SMs' alone
    return [c for c in cells if engine is None or c.endswith(f"_{engine}")]


@lru_cache(maxsize=4)
def samples_by_cell(text: str) -> dict[str, tuple[float, ...]]:
    """{cell: its samples in order} of a program output, parsed once however
    many of its hundreds of figures ask (read_output gives the same text)."""
    found: dict[str, list[float]] = {}
    for record in records(text, "Cell"):
        value = "ns" if record["path"] == "latency" else "gbs"
        found.setdefault(cell_name(record), []).append(float(require(record, [value, "sample"], "Cell")[value]))
    return {cell: tuple(values) for cell, values in found.items()}


@sn.deferrable
def cell_samples(stdout: str, figure: str, count: int) -> list:
    """A cell's samples in order (GB/s, or ns for latency), exactly `count` of them."""
    found = list(samples_by_cell(read_output(stdout)).get(figure, ()))
    if len(found) != count:
        raise sn.SanityError(f"{describe(figure)} ({figure}): {len(found)} samples, expected {count}")
    return found


@sn.deferrable
def joined_pairs_reach(stdout: str, joined: list) -> bool:
    """Every pair of GPUs the system data joins reached each other (no
    'Unreachable:' record of the program names it)."""
    found = [(int(r["gpu"]), int(r["peer"])) for r in records(read_output(stdout), "Unreachable")]
    joined = {tuple(sorted(p)) for p in joined}
    cut = [pair for pair in found if tuple(sorted(pair)) in joined]
    if cut:
        names = ", ".join(f"GPU {a} and GPU {b}" for a, b in cut)
        raise sn.SanityError(f"{names}: no peer access, though the system data joins them")
    return True


@rfm.simple_test
class path_matrix(GpuCheck):
    descr = "Every path between the node's memories: GPU x NUMA node, all GPUs at once, every GPU pair, latency"
    tags = {"paths", "acceptance"}
    time_limit = "20m"

    #: The matrix and engine this case measures (CASES).
    paths = parameter(CASES, fmt=lambda case: "-".join(case))

    @property
    def matrix(self) -> str:
        return self.paths[0]

    @property
    def engine(self) -> str:
        return self.paths[1]

    #: Bytes per transfer (the program's --size).
    size = variable(str, value="256M")
    #: Timed runs of every cell: the samples of its figure.
    samples = variable(Whole, int, value=5)
    #: Dependent loads per pointer chase.
    chase_steps = variable(Whole, int, value=20000)

    case_variables = ("size",)

    #: What each may be: at most 20 samples of 16 GiB per cell keep the
    #: largest matrix (every GPU pair of eight) within the check's 20
    #: minutes; a chase of 10^7 dependent loads takes about 10 s over PCIe.
    settings = {
        "size": Size(64 << 10, 16 << 30, words=64 << 10),
        "samples": Count(1, 20),
        "chase_steps": Count(100, 10_000_000),
    }

    #: The unit of the figures :meth:`limit_of` bounds.
    limit_unit = "GB/s"

    @property
    def numa_nodes(self) -> list[int]:
        """The NUMA nodes whose memory the cells measure; [-1] (unbound) without libnuma."""
        return list(self.node["numa_nodes"]) if self.node["libnuma"] else [-1]

    @run_after("setup")
    def use_every_gpu(self):
        self.num_gpus_per_node = max(1, self.node["gpus"]["count"])
        name = self.current_partition.fullname
        self.skip_if(
            self.matrix == "host-all" and self.node["gpus"]["count"] < 2,
            f"{name} has one GPU: all GPUs at once is the host matrix itself",
        )
        self.skip_if(
            self.matrix == "peer" and not data.gpu_pairs(self.node),
            f"no two GPUs of {name} are joined (system data: gpu_link)",
        )
        major = compute_major(self.node)
        self.skip_if(
            self.engine == "bulk" and major < 9,
            f"bulk copies (cp.async.bulk) need sm_90, {name}'s GPUs are sm_{major}x",
        )

    @run_before("run")
    def set_options(self):
        self.executable_opts = [
            "--paths",
            self.matrix,
            "--engines",
            self.engine,
            "--size",
            self.size,
            "--samples",
            str(self.samples),
            "--chase-steps",
            str(self.chase_steps),
        ]
        if self.node["libnuma"]:
            self.executable_opts += ["--numa-nodes", ",".join(str(n) for n in self.numa_nodes)]

    @classmethod
    def limit_of(cls, figure: str, case: dict, node: dict) -> float | None:
        c = cell_parts(figure)
        if c is None or c.matrix == "latency":
            return None
        if c.matrix == "peer":
            peer = data.peer_bandwidth(node, c.gpu, c.peer)
            return peer / 1e9 if peer else None
        limits = [data.host_link_bandwidth(node)]
        limits += [data.host_all_gpus_bandwidth(node)] if c.matrix == "allgpus" else []
        known = [x for x in limits if x]
        return min(known) / 1e9 if known else None

    def cells(self) -> list[str]:
        return expected_cells(self.node, self.numa_nodes, self.matrix, self.engine)

    def curve_records(self):
        # No points of a curve: each cell's link limit (system data, not measured), for the report's heat maps.
        limits = ((cell, self.figure_limit(cell)) for cell in self.cells())
        return [f"Limit: cell={cell} gbs={limit!r}" for cell, limit in limits if limit]

    @classmethod
    def curve_figures(cls, lines: list[str], figures: dict) -> dict:
        # limit_<cell>: the link limit the cell was judged against when it ran.
        return {f"limit_{r['cell']}": (float(r["gbs"]), "GB/s") for r in records("\n".join(lines), "Limit")}

    def verified(self):
        return sn.all(
            [
                sn.assert_not_found(r"^error:|CUDA error", self.stderr),
                sn.assert_found(rf"^Verified: cells=\d+ samples={self.samples}$", self.stdout),
                joined_pairs_reach(self.stdout, data.gpu_pairs(self.node)),
            ]
        )

    @run_after("setup")
    def set_perf_variables(self):
        perf = {}
        for cell in self.cells():
            unit = "ns" if "_latency_" in cell else "GB/s"
            perf.update(self.headline(cell, cell_samples(self.stdout, cell, self.samples), unit, self.samples))
        self.perf_variables = perf
