"""path_matrix: what its program prints and what it means (parsing and
derivations), free of ReFrame; checks/path_matrix.py runs it, reports/ draw it."""

from __future__ import annotations

import itertools
import re
from functools import lru_cache
from typing import NamedTuple

from experiments.records import records, require
from systems import data

NAME = "path_matrix"

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


def curve_figures(lines: list[str], figures: dict) -> dict:
    """The figures of a kept curve (its lines), beside the run's logged `figures`."""
    # limit_<cell>: the link limit the cell was judged against when it ran.
    return {f"limit_{r['cell']}": (float(r["gbs"]), "GB/s") for r in records("\n".join(lines), "Limit")}


#: What reads each test's kept curve back as figures (reports/curves.py).
CURVE_FIGURES = {"path_matrix": curve_figures}
