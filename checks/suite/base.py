"""Base classes of the run-only checks: the shared build, node facts and the
case for the perflog, headline figures with their samples, references from
data, the NVML watch around every program that uses a GPU, the launcher's
placement from the system's data (placement.py), and the GPU skip rule."""

from __future__ import annotations

import functools
import math
import os
import statistics
import sys
import uuid

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import fixture, run_after, run_before, sanity_function, variable

from experiments import code as fingerprints
from experiments.budget import CASE_BUDGET_S, EXPECTED, START_S, minutes
from experiments.keys import NODE_FACTS, format_case, format_value, sample_name
from experiments.paths import min_time_us
from experiments.records import read_output, records
from experiments.references import references_for
from systems import gpu_use

from .build import REPO, SuiteBuild
from .curves import keep_curve, output_curve
from .placement import Placement
from .settings import Choice, Count, SiteSettings, Unreadable, Whole


def build_facts_text(build_stagedir: str) -> str:
    """What the build of src/ recorded of itself (share/gpu-mempaths/build-facts.txt):
    its toolkit, compiler and options; '' where it left none (dry runs)."""
    try:
        with open(os.path.join(build_stagedir, "share", "gpu-mempaths", "build-facts.txt")) as stream:
            return stream.read()
    except OSError:
        return ""


def cuda_build_facts(build_stagedir: str) -> tuple[str, str]:
    """('12.9', 'Clang 22.1.8'): the CUDA toolkit the build of src/ compiled
    against and its CUDA compiler, as the build recorded them; 'unknown' where it left none."""
    facts = fingerprints.build_facts(build_facts_text(build_stagedir))
    return facts.get("cuda_toolkit") or "unknown", facts.get("cuda_compiler") or "unknown"


@sn.deferrable
def runtime_loaded(stdout: str, expected: str) -> bool:
    """The program loaded the CUDA runtime its record names ('13.5' from its
    "CUDA: runtime=13050" line), where the record names one."""
    if expected in ("unknown", "none"):
        return True
    found = records(read_output(stdout), "CUDA")
    if not found or "runtime" not in found[0]:
        raise sn.SanityError("no 'CUDA: runtime=' line: which CUDA runtime the program loaded is unknown")
    number = int(found[0]["runtime"])
    loaded = f"{number // 1000}.{number % 1000 // 10}"
    if loaded != expected:
        raise sn.SanityError(f"the program loaded CUDA runtime {loaded}, its environment's is {expected}")
    return True


def parser_sanity(function):
    """`function` (the body of a deferred sanity or performance function over
    a parser of experiments/) with the parser's ValueError raised as ReFrame's
    SanityError, its message kept: an output that did not parse fails the
    sanity by name, not with a traceback."""

    @functools.wraps(function)
    def judged(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except ValueError as err:
            raise sn.SanityError(str(err)) from None

    return judged


@sn.deferrable
def median(values) -> float:
    """The median of a figure's samples (the value references judge); not a
    number where a sample is not: ReFrame's reference check then fails the
    figure and its sample by name, and the perflog keeps them as 'nan'
    (reports/load.py names them, the verdict judges them broken), where a
    median of the rest would pass."""
    values = list(values)
    if not values:
        raise sn.SanityError("no samples to take the median of")
    if not all(math.isfinite(float(v)) for v in values):
        return math.nan
    return statistics.median(values)


#: What the NVML watch prints when the program ran on healthy GPUs
#: (systems/watch.py): every GPU watched, no fault.
_WATCHED = r"^Watch: [1-9]\d* GPU\(s\) watched for \S+ s, 0 fault\(s\)$"


class KeptSkipReason(rfm.RegressionTestPlugin):
    """Why a case was skipped, kept where ReFrame's report keeps none: the
    run's plan (runner/plan.py) groups the cases left out by it. First
    among a test's bases, before ReFrame's own skip_if."""

    left_out_because = variable(str, value="", loggable=True)

    def skip_if(self, cond, msg=None):
        if cond:
            self.left_out_because = msg or ""
        super().skip_if(cond, msg)


class NodeFacts(Placement, SiteSettings):
    """The node a check runs on and the case it measures, as every perflog
    line carries them and as references are matched on (experiments/keys.py);
    the launch defaults the system's data gives; and the NVML watch around
    every program that uses a GPU, whose faults fail the check."""

    #: The node facts (experiments/keys.py), from the partition's node at
    #: setup: the GPUs' model and count, the driver, the CUDA version the
    #: driver supports, and the GPUs' link to the host ('pcie gen5 x16').
    gpu_model = variable(str, value="none", loggable=True)
    gpu_count = variable(int, value=0, loggable=True)
    driver_version = variable(str, value="unknown", loggable=True)
    cuda_version = variable(str, value="unknown", loggable=True)
    host_link = variable(str, value="unknown", loggable=True)

    #: The case: the parameters and the `case_variables`, 'name=value' sorted
    #: by name. With the node facts it keys references, baselines and comparisons.
    case = variable(str, value="", loggable=True)

    #: What ReFrame's reference check holds the figures to: 'tolerance' (the
    #: references' bounds, for a run by hand), or 'physical' (only what no
    #: correct measurement can cross: a rate above its link's limit, a time
    #: below its path's floor), which the nightly sets: there its verdict
    #: (judge/verdict.py) judges every move, one verdict per figure. Not
    #: logged: how a run was held is no fact of the case, and a new perflog
    #: column would make ReFrame start every perflog anew.
    reference_bounds = variable(str, value="tolerance", loggable=False)

    #: The seconds this case is expected to take on its node (experiments/budget.py),
    #: and why it is left out ('' where it runs): what the run's plan
    #: (runner/plan.py) reads from ReFrame's report. Not in the perflogs.
    expected_s = variable(float, value=0.0, loggable=True)
    sized_down = variable(str, value="", loggable=True)

    #: The most seconds one case may be expected to take: a longer one is
    #: sized down where the check knows how (size_down), else left out.
    case_budget_s = variable(Whole, int, Unreadable, value=CASE_BUDGET_S, loggable=False)

    #: Variables that change what the check measures (sizes, launch shapes);
    #: with the parameters they make the case. Repetitions are not among them.
    case_variables: tuple = ()

    #: The variables a site may set, each with the values it may take
    #: (checks/suite/settings.py): checked at setup, before any job script.
    #: A check's own add to its bases'.
    settings: dict = {"reference_bounds": Choice(("tolerance", "physical")), "case_budget_s": Count(10, 86_400)}

    @property
    def node(self) -> dict:
        return self.current_partition.extras["node"]

    #: The unit of the figures :meth:`limit_of` bounds (the references' unit).
    limit_unit = ""

    @classmethod
    def limit_of(cls, figure: str, case: dict, node: dict) -> float | None:
        """The physical limit of a figure, in its own unit, on a node of the
        system data's form, for a case's items (some may be missing: a
        reference's case names only what it depends on); None where none is
        known. Checks whose figures have limits override it; a test holds
        every reference to it."""
        return None

    def figure_limit(self, figure: str) -> float | None:
        return self.limit_of(figure, self.case_items(), self.node)

    @classmethod
    def floor_us_of(cls, figure: str, case: dict, node: dict) -> float | None:
        """The physical floor of a time figure in microseconds, on a node of
        the system data's form, for a case's items; None where none is known.
        Its path's kind's (systems/paths/paths.yaml) unless the check knows
        better from what the case moves."""
        return min_time_us(cls.__name__, case, figure)

    def figure_floor_us(self, figure: str) -> float | None:
        return self.floor_us_of(figure, self.case_items(), self.node)

    def gpu_numa_node(self, device: int = 0) -> int:
        """The NUMA node of a GPU (the first NUMA node where affinity is unknown)."""
        affinity = self.node["gpus"].get("numa_affinity") or [self.node["numa_nodes"][0]]
        return affinity[min(device, len(affinity) - 1)]

    def node_facts(self) -> dict:
        values = {
            "system": self.current_system.name,
            "partition": self.current_partition.name,
            "gpu_model": self.gpu_model,
            "gpu_count": self.gpu_count,
            "host_link": self.host_link,
        }
        return {name: values[name] for name in NODE_FACTS}

    def reference_applies(self, entry: dict) -> bool:
        """Whether a reference entry may judge this case beyond what its
        'where' and 'case' match (a check whose variables change what an
        entry written without them would judge says no)."""
        return True

    def case_items(self) -> dict:
        """The case's items: parameters as the test's name shows them, and the case variables."""
        cls = type(self)
        # ReFrame's own hidden parameters ('.nid', '.part' of --distribute, '.repeat_no') say where and how often
        # a case ran, not what it measures: a node's case is its siblings' case.
        params = [p for p in cls.param_space.params if not p.startswith(".")]
        items = {p: cls.raw_params[p].format(getattr(self, p)) for p in params}
        items.update({v: format_value(getattr(self, v)) for v in self.case_variables})
        return items

    def headline(self, name: str, samples, unit: str, count: int) -> dict:
        """The performance variables of a headline figure: the median of its
        `count` samples (a deferred list) under `name`, and each sample."""
        perf = {name: sn.make_performance_function(median(samples), unit)}
        for k in range(1, count + 1):
            perf[sample_name(name, k)] = sn.make_performance_function(sn.getitem(samples, k - 1), unit)
        return perf

    #: The record tags of the program's output whose lines are the points of
    #: the case's curves: kept beside the perflog (curves.py), not logged as
    #: figures; the perflog has the headline figures they sum up.
    curve_tags: tuple = ()

    def curve_records(self):
        """The run's curve records: a deferred list of lines (curves.py)."""
        return output_curve(self.stdout, self.curve_tags)

    @classmethod
    def curve_figures(cls, lines: list[str], figures: dict) -> dict:
        """{figure: (value, unit)}: the figures a run's curve records give, as
        the perflogs of earlier runs carried them, where `figures` is what the
        run's perflog has ({figure: value}); reports/load.py reads curves so."""
        return {}

    @run_after("setup")
    def describe_node(self):
        node = self.node
        info = self.current_partition.extras.get("node_info", {})
        self.gpu_model = node["gpus"].get("model", "none")
        self.gpu_count = node["gpus"]["count"]
        self.driver_version = info.get("driver_version", "unknown")
        self.cuda_version = info.get("cuda_driver_version", "unknown")
        link = node["host_link"]
        self.host_link = " ".join(
            str(part)
            for part in (
                link["type"],
                f"gen{link['generation']}" if "generation" in link else None,
                f"x{link['width']}" if "width" in link else None,
            )
            if part
        )

    @run_after("setup")
    def describe_case(self):
        self.case = format_case(self.case_items())

    def expected_seconds(self) -> float:
        """What this case is expected to take on its node: a program's start,
        and what a check adds for the bytes its program moves (budget.py)."""
        return START_S

    def size_down(self, budget_s: float) -> str:
        """Make the case fit `budget_s` seconds where the check knows how
        (fewer repeats of the same measurement, never another case): what it
        changed ('repeats 5 -> 3'), '' where it could not."""
        return ""

    @run_after("setup", always_last=True)
    def fit_the_budget(self):
        expected = self.expected_seconds()
        changed = self.size_down(self.case_budget_s) if expected > self.case_budget_s else ""
        if changed:
            self.sized_down = f"{changed}: {minutes(expected)} -> {minutes(self.expected_seconds())}"
            expected = self.expected_seconds()
        self.skip_if(
            expected > self.case_budget_s,
            f"over the case budget of {minutes(self.case_budget_s)} (-S case_budget_s=SECONDS runs it){EXPECTED}"
            f"{minutes(expected)}",
        )
        self.expected_s = round(expected, 1)

    def uses_gpu(self) -> bool:
        return bool(self.num_gpus_per_node) and self.node["gpus"]["count"] > 0

    @run_before("run", always_last=True)
    def watch_the_gpus(self):
        # The watch runs where the program runs (after srun or jsrun, on the
        # compute node), so it sees the GPUs the program uses. A program of
        # the host alone (host_bandwidth) is watched too: who else used the
        # host's CPUs, and every GPU's host link, while it measured host
        # memory is what tells a neighbour from a slow node (systems/host_use.py);
        # its GPUs' faults are none of its own (`watched`).
        allowed = self.current_partition.extras.get("clock_events_allowed", [])
        self.executable_opts = [
            "-m",
            "systems.watch",
            "--allow",
            ",".join(allowed) or "none",
            "--",
            self.executable,
            *self.executable_opts,
        ]
        self.executable = sys.executable
        self.env_vars["PYTHONPATH"] = REPO + os.pathsep + "$PYTHONPATH"
        # One token for all the ranks of this launch: each rank's watch tells its siblings, which
        # srun or jsrun started beside it, from another's process on the same GPU (systems/gpu_use.py).
        self.env_vars[gpu_use.CASE_TOKEN] = uuid.uuid4().hex
        # CUDA's default order puts the fastest GPU first, NVML's is the PCI
        # bus's: the same order makes CUDA_VISIBLE_DEVICES name the same GPUs
        # to the program and to the watch (and to detection).
        self.env_vars["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"

    @run_before("performance", always_last=True)
    def set_references(self):
        self.reference = references_for(self)

    @run_before("performance", always_last=True)
    def log_nothing_in_a_dry_run(self):
        # A dry run measures nothing: its figures would reach the perflogs
        # as null values beside real ones (ReFrame logs them all the same).
        if self.is_dry_run():
            self.perf_variables = {}

    def verified(self):
        """What the program must have printed for its figures to count (a
        deferred assertion); every check defines it."""
        raise NotImplementedError(f"{type(self).__name__} does not say how its output is verified")

    def loaded_runtime(self):
        """The CUDA runtime the program loaded is the one its records name
        (a deferred assertion; programs without CUDA have nothing to hold)."""
        return sn.assert_true(True)

    def watched(self):
        """No fault on any GPU while the program ran (systems/watch.py)."""
        if not self.uses_gpu():
            return sn.assert_true(True)
        return sn.all(
            [
                sn.assert_not_found(r"^Watch: FAIL", self.stdout, msg="a GPU fault during the run (see 'Watch: FAIL')"),
                sn.assert_found(
                    _WATCHED, self.stdout, msg="the NVML watch did not report (see 'Watch:' in the output)"
                ),
            ]
        )

    @sanity_function
    def validate(self):
        # The curve is kept last, once its records are known to be sound.
        return sn.all([self.verified(), self.watched(), self.loaded_runtime(), keep_curve(self, self.curve_records())])


class SuiteCheck(KeptSkipReason, rfm.RunOnlyRegressionTest, NodeFacts):
    """A run of one of the suite's programs, built once by :class:`SuiteBuild`."""

    build = fixture(SuiteBuild, scope="environment")
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    maintainers = ["gpu-mempaths"]
    num_tasks = 1
    num_tasks_per_node = 1
    exclusive_access = True

    #: The program of src/ this check runs: by default the one named as the
    #: check (one name per experiment, README's table).
    program = variable(str, value="")

    #: The CUDA runtime the programs load: the environment's (a runtime
    #: twin's, systems/toolkits.py) or else the toolkit they were built with;
    #: the sanity holds the programs to it. 'none' for host-only builds,
    #: 'unknown' where the build left no record (Spack builds, dry runs).
    cuda_runtime_version = variable(str, value="unknown", loggable=True)

    #: The CUDA compiler of the build and its version ('NVIDIA 13.0.88', 'Clang 22.1.0').
    cuda_compiler = variable(str, value="unknown", loggable=True)

    @run_after("setup")
    def describe_build(self):
        if not self.build.has_cuda or not self.uses_gpu():
            # A host program (host_bandwidth) links no CUDA runtime.
            self.cuda_runtime_version = self.cuda_compiler = "none"
            return
        toolkit, self.cuda_compiler = cuda_build_facts(self.build.stagedir)
        self.cuda_runtime_version = self.current_environ.extras.get("cuda_runtime") or toolkit

    def loaded_runtime(self):
        if not self.uses_gpu():
            return sn.assert_true(True)
        return runtime_loaded(self.stdout, self.cuda_runtime_version)

    @run_after("setup")
    def set_executable(self):
        self.program = self.program or type(self).variant_name()
        self.executable = os.path.join(self.build.stagedir, "bin", self.program)

    #: What measured the records (experiments/code.py): the program's
    #: sources, the build options and `code_version`. The verdict does not
    #: hold a case to accepted runs another program measured.
    code = variable(str, value=fingerprints.UNKNOWN, loggable=True)

    #: Raised when the check's own way of measuring changes (what it passes
    #: the program, how it reads its figures): its records are then another
    #: program's, as a change of src/ makes them.
    code_version: int = 1

    @run_after("setup")
    def fingerprint(self):
        # Where the build kept no facts (a dry run), the sources and the version still count.
        self.code = fingerprints.fingerprint(self.program, build_facts_text(self.build.stagedir), self.code_version)


class GpuCheck(SuiteCheck):
    """A check that needs a GPU and a CUDA build; skipped with the reason
    where the node has none, rather than silently left out."""

    valid_systems = ["+gpu", "+detected"]
    valid_prog_environs = ["+cuda"]
    num_gpus_per_node = 1

    @run_after("setup")
    def skip_without_gpu(self):
        extras = self.current_partition.extras
        reasons = "; ".join(extras.get("detection_notes", [])) or "the partition declares no GPU"
        self.skip_if(extras["node"]["gpus"]["count"] == 0, f"no GPU on {self.current_partition.fullname}: {reasons}")


class MultiGpuCheck(GpuCheck):
    """Needs two GPUs or more that reach each other; skipped with the reason elsewhere."""

    @property
    def node_gpus(self) -> int:
        return self.node["gpus"]["count"]

    @run_after("setup")
    def skip_without_peers(self):
        name = self.current_partition.fullname
        self.skip_if(self.node_gpus < 2, f"{name} has {self.node_gpus} GPU(s): this check needs two or more")
        self.skip_if(
            "multigpu" not in self.current_partition.features,
            f"{name} lacks the 'multigpu' feature (one GPU, or GPUs that cannot reach each other)",
        )
