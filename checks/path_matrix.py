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

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, variable

from checks.suite.base import GpuCheck
from checks.suite.settings import Count, Size, Unreadable, Whole, size_bytes
from experiments import budget
from experiments.path_matrix import (
    CASES,
    cell_parts,
    compute_major,
    describe,
    expected_cells,
    samples_by_cell,
)
from experiments.records import parsed_output, read_output, records
from systems import data


@sn.deferrable
def cell_samples(stdout: str, figure: str, count: int) -> list:
    """A cell's samples in order (GB/s, or ns for latency), exactly `count` of them."""
    found = list(parsed_output(stdout, samples_by_cell).get(figure, ()))
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
    samples = variable(Whole, int, Unreadable, value=5)
    #: Dependent loads per pointer chase.
    chase_steps = variable(Whole, int, Unreadable, value=20000)

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

    #: One dependent load's round trip, at most (a PCIe host link's is about 1.25 us).
    CHASE_STEP_S = 2e-6

    def expected_seconds(self) -> float:
        # Every cell a warm-up and its samples, at its link's limit; a chase per sample.
        total = budget.START_S
        for cell in self.cells():
            if "_latency_" in cell:
                total += self.samples * self.chase_steps * self.CHASE_STEP_S
            else:
                limit = self.figure_limit(cell)
                total += budget.transfer_s((self.samples + 1) * size_bytes(self.size), limit * 1e9 if limit else None)
        return total

    def curve_records(self):
        # No points of a curve: each cell's link limit (system data, not measured), for the report's heat maps.
        limits = ((cell, self.figure_limit(cell)) for cell in self.cells())
        return [f"Limit: cell={cell} gbs={limit!r}" for cell, limit in limits if limit]

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
