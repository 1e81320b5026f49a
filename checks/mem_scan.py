"""WholeMemory-style random-access scan (src/mem_scan): a buffer spread over
the node's N GPUs, a fraction of their memory; every GPU at once reads, writes or atomically adds
random, naturally aligned segments of the whole buffer (4 B to 16 KiB, 4, 8
or 16 bytes per thread; atomics 4). One case per mode and op, the segment
sizes and widths swept inside the run:

- single: one process, one contiguous virtual range mapped across the GPUs
  (the CUDA VMM API);
- chunked: one process, a table of the N chunks' pointers;
- multiprocess: one process per GPU, the chunks shared through CUDA IPC. It
  runs N tasks through the partition's launcher (srun, jsrun: one resource
  set of N tasks and N GPUs). ReFrame's local launcher starts one process, so
  there the program is launched once with ``--spawn`` and starts its N ranks
  itself (the same program, the rank on its command line).

Each point's per-GPU rate (decimal GB/s: the bytes of all segments a GPU
touched over its kernel time), the node's aggregate (every GPU's bytes over
the common window: all GPUs start their timed launches together at a start
gate, and the window ends when the last one is done), and the per-GPU rate as
a fraction of the seed's speed of light: each GPU's GPU-GPU bandwidth per
direction times N/(N-1), since 1/N of a GPU's segments are its own (the
DGX-A100's 300 GB/s x 8/7 = 343 GB/s). The perflog has the case's
summaries: ``plateau_gbs`` (lowest over segments of 128 B and more, at each
segment's best width), ``seg64_gbs``, ``best_gbs`` and ``best_segment``,
``best_aggregate_gbs``, ``plateau_of_sol`` and ``best_of_sol``. A point's
timed launches are timed in five consecutive blocks too; the headline
figures (``plateau_gbs``, ``seg64_gbs``, ``best_gbs``, ``link_gbs``) are also
computed from each block alone, and those are their samples. Every point is
kept beside the perflog, record for record (``mem_scan.curves``,
checks/suite/curves.py); the reports read each back as the names the
perflog carried before: ``gbs_s<segment>_w<width>`` (mean per-GPU GB/s),
``agg_gbs_...`` and ``sol_...``.

Reads and writes are also measured against a yardstick taken in the same run:
every GPU at once streams through all its peers' chunks (16-byte
words in order), the same traffic over the links without the randomness.
``link_gbs`` is that per-GPU rate to the peers, ``link_limit_gbs`` the scan's
limit that follows (N/(N-1) times it), and ``plateau_of_link`` and
``best_of_link`` the scan's share of that limit. Where the speed of light
counts what the links carry, this counts what SM loads and stores get through
them: on the H200 pair, with both GPUs reading each other at once, about 75%
of the 450 GB/s per direction.
"""

from __future__ import annotations

import shlex

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, run_after, run_before, variable

from checks.suite.base import MultiGpuCheck, parser_sanity
from checks.suite.curves import output_curve
from checks.suite.settings import Choice, Count, Decimal, Each, ReadSetting, Real, Size, Unreadable, Whole
from experiments import budget
from experiments.mem_scan import (
    ATOMIC_WIDTHS,
    HEADLINE_SCAN,
    SCAN_BLOCKS,
    SEGMENTS,
    SUMMARY_UNITS,
    WIDTHS,
    LinkYardstick,
    block_summaries,
    parse_link,
    parse_scan,
    scan_limit,
    summarise,
    summary_names,
)
from experiments.records import parsed_output, read_output
from systems import data, parse_quantity


@sn.deferrable
def scan_points(stdout: str, mode: str, op: str) -> list:
    """The case's points from the job's output (read when the figures are evaluated)."""
    return [p for p in parsed_output(stdout, parse_scan) if p.mode == mode and p.op == op]


@sn.deferrable
def link_yardstick(stdout: str, mode: str, op: str) -> LinkYardstick:
    found = parsed_output(stdout, parse_link, mode, op)
    if found is None:
        raise sn.SanityError(f"no Link line for mode={mode} op={op}")
    return found


@sn.deferrable
def summary(points: list, sol_gbs: float | None, link_limit_gbs: float | None, name: str) -> float:
    value = summarise(points, sol_gbs, link_limit_gbs).get(name)
    if value is None:
        raise sn.SanityError(f"the scan measured no {name}")
    return value


@sn.deferrable
@parser_sanity
def block_summary(points: list, sol_gbs: float | None, name: str) -> list:
    """A headline summary of each block of timed launches: its samples."""
    return [b[name] for b in block_summaries(points, sol_gbs, SCAN_BLOCKS)]


@sn.deferrable
def complete_case(stdout: str, mode: str, op: str, segments: list, widths: list, link: bool) -> bool:
    """Every point of the sweep with its block rates, and the link yardstick
    where the op has one, or an error saying what is missing."""
    text = read_output(stdout)
    points = {(p.segment, p.width): p for p in parse_scan(text) if p.mode == mode and p.op == op}
    missing = [f"{s} B at {w} B" for s in segments for w in widths if (s, w) not in points]
    if missing:
        raise sn.SanityError(f"no Scan record of mode={mode} op={op} for {', '.join(missing)}")
    unblocked = [f"{s} B at {w} B" for (s, w), p in sorted(points.items()) if len(p.block_means) != SCAN_BLOCKS]
    if unblocked:
        raise sn.SanityError(f"Scan records without {SCAN_BLOCKS} block rates: {', '.join(unblocked)}")
    if link and parse_link(text, mode, op) is None:
        raise sn.SanityError(f"no Link record of mode={mode} op={op}")
    return True


@rfm.simple_test
class mem_scan(MultiGpuCheck):
    descr = "WholeMemory-style random-access scan over all GPUs: random segments read, written, atomically added"
    tags = {"multigpu", "nvlink", "wholememory"}
    time_limit = "15m"

    mode = parameter(["single", "chunked", "multiprocess"])
    op = parameter(["read", "write", "atomic"])

    #: The whole buffer as a fraction of the GPUs' memory (the seed's 400 GB
    #: of a DGX-A100's 640 GB is 0.63).
    memory_fraction = variable(Decimal, float, Unreadable, value=0.5)
    segments = variable(typ.List[Whole], typ.List[int], typ.List[ReadSetting], value=SEGMENTS)
    widths = variable(typ.List[Whole], typ.List[int], typ.List[ReadSetting], value=WIDTHS)
    #: Timed launches per point (after one warm-up launch), timed in
    #: SCAN_BLOCKS blocks: the samples of the headline figures.
    reps = variable(Whole, int, Unreadable, value=20)
    #: The single mode's physical allocations per GPU, in bytes ('chunk': one
    #: per GPU; '2M', '64M', ...): the page-reach experiment's mapping.
    map_granularity = variable(str, value="chunk")
    #: The bytes of every chunk one launch's segments fall in ('chunk': all of
    #: it): fewer distinct pages per launch at the same footprint.
    launch_span = variable(str, value="chunk")

    case_variables = ("memory_fraction", "segments", "widths")

    #: What each may be: the program's own ranges, launches bounded so that
    #: the 13-segment sweep stays within the check's 15 minutes.
    settings = {
        "memory_fraction": Real(0.01, 0.9),
        "segments": Each(Choice(tuple(4 << i for i in range(13))), most=13),  # powers of two, 4 B to 16 KiB
        "widths": Each(Choice((4, 8, 16)), most=3),
        "reps": Count(SCAN_BLOCKS, 1000),  # at least one launch per timed block
        "map_granularity": Size(2 << 20, 1 << 40, words=2 << 20, also=("chunk",)),
        "launch_span": Size(2 << 20, 64 << 30, words=2 << 20, also=("chunk",)),
    }
    #: Part of the case only where set, so that runs before they existed read as the same case.
    layout_variables = ("map_granularity", "launch_span")

    def layout_items(self) -> dict:
        return {v: getattr(self, v) for v in self.layout_variables if getattr(self, v) != "chunk"}

    def case_items(self) -> dict:
        return {**super().case_items(), **self.layout_items()}

    def reference_applies(self, entry: dict) -> bool:
        # A reference of the default layout would judge a study's layout as a move: only one naming it may.
        return all(name in entry.get("case", {}) for name in self.layout_items())

    def point_widths(self) -> list:
        return ATOMIC_WIDTHS if self.op == "atomic" else self.widths

    #: One timed launch: tens of milliseconds per 20 (the program sizes each
    #: launch so; 26-33 ms on two H200s from 4 B to 16 KiB segments).
    LAUNCH_S = 1.6e-3

    def expected_seconds(self) -> float:
        # The buffer filled once at HBM speed, and a warm-up and `reps` launches per point.
        gpu_memory = parse_quantity(self.node["gpus"]["memory"])
        fill = budget.transfer_s(self.memory_fraction * gpu_memory, data.speed_of_light(self.node)["hbm"])
        points = len(self.segments) * len(self.point_widths())
        starts = self.node_gpus if self.mode == "multiprocess" else 1
        return starts * budget.START_S + fill + points * (self.reps + 1) * self.LAUNCH_S

    @run_after("setup")
    def skip_other_mappings(self):
        why = f"map_granularity={self.map_granularity} maps the single mode's VMM range, not {self.mode}'s"
        self.skip_if(self.map_granularity != "chunk" and self.mode != "single", why)

    @run_after("setup")
    def set_tasks(self):
        gpus = max(1, self.node_gpus)
        self.num_gpus_per_node = gpus
        spawn = self.mode == "multiprocess" and self.current_partition.launcher_type.registered_name == "local"
        # One task per GPU, except where the launcher starts one process only.
        self.num_tasks = gpus if self.mode == "multiprocess" and not spawn else 1
        self.num_tasks_per_node = self.num_tasks
        # Each rank reads its peers' chunks through CUDA IPC: it must see every GPU.
        self.tasks_share_gpus = self.num_tasks > 1

    @run_before("run")
    def set_options(self):
        multi = self.mode == "multiprocess"
        self.executable_opts = [
            "--modes", self.mode,
            "--ops", self.op,
            "--segments", ",".join(str(s) for s in self.segments),
            "--widths", ",".join(str(w) for w in self.widths),
            "--size", f"{self.memory_fraction:g}x",
            "--reps", str(self.reps),
        ]  # fmt: skip
        for name, value in self.layout_items().items():
            self.executable_opts += [f"--{name.replace('_', '-')}", shlex.quote(str(value))]
        if multi and self.num_tasks == 1:
            self.executable_opts.append("--spawn")

    def verified(self):
        expected = len(self.segments) * len(self.point_widths())
        found = sn.count(sn.findall(rf"^Scan: mode={self.mode} op={self.op} ", self.stdout))
        checks = [
            sn.assert_not_found(r"^error:|CUDA error", self.stderr),
            sn.assert_not_found(r"^Skipped:", self.stdout),
            sn.assert_eq(found, expected),
            sn.assert_found(rf"^Mode done: mode={self.mode} points={expected}$", self.stdout),
            # What the figures are made of, here where a gap fails the check
            # (ReFrame skips a figure it cannot evaluate, with a warning only).
            complete_case(
                self.stdout, self.mode, self.op, self.segments, self.point_widths(), self.has_link_yardstick()
            ),
        ]
        if self.op == "atomic":
            checks.append(sn.assert_found(rf"^Atomics verified: mode={self.mode} adds=\d+", self.stdout))
        return sn.all(checks)

    def sol_gbs(self):
        sol = scan_limit(self.node)
        return sol / 1e9 if sol else None

    #: The unit of the figures :meth:`limit_of` bounds.
    limit_unit = "GB/s"

    @classmethod
    def limit_of(cls, figure: str, case: dict, node: dict) -> float | None:
        # Per GPU: the scan against its speed of light, the link yardstick
        # (every GPU reading its peers at once) against the links.
        limit = scan_limit(node) if figure in HEADLINE_SCAN else None
        if figure == "link_gbs" and data.every_pair_joined(node):
            # Where some peers are reached through the CPUs, so is their share.
            limit = data.speed_of_light(node)["gpu_fabric"]
        return limit / 1e9 if limit else None

    def has_link_yardstick(self) -> bool:
        """Reads and writes are measured against the link in the same run; atomics are not."""
        return self.op != "atomic"

    @run_after("setup")
    def set_perf_variables(self):
        sol, link = self.sol_gbs(), self.has_link_yardstick()
        points = scan_points(self.stdout, self.mode, self.op)
        perf = {}

        def add(name, value, unit):
            perf[name] = sn.make_performance_function(value, unit)

        yardstick = link_yardstick(self.stdout, self.mode, self.op) if link else None
        if link:
            perf.update(self.headline("link_gbs", sn.getattr(yardstick, "block_means"), "GB/s", SCAN_BLOCKS))
            add("link_limit_gbs", sn.getattr(yardstick, "scan_limit_gbs"), "GB/s")
        limit = sn.getattr(yardstick, "scan_limit_gbs") if link else None
        for name in summary_names(self.segments, bool(sol), link):
            if name in HEADLINE_SCAN:
                perf.update(self.headline(name, block_summary(points, sol, name), "GB/s", SCAN_BLOCKS))
            else:
                add(name, summary(points, sol, limit, name), SUMMARY_UNITS.get(name, "GB/s"))
        self.perf_variables = perf

    curve_tags = ("Scan",)

    def curve_records(self):
        # The points, and the speed of light their fractions are of (system data, not measured).
        sol = self.sol_gbs()
        return output_curve(self.stdout, self.curve_tags) + ([f"Limit: sol_gbs={sol!r}"] if sol else [])
