"""One benchmark night in a process of its own (benchmarks/history.py starts it; not for use by hand).

    GPU_MEMPATHS_DATA=DIR python -m benchmarks.night SPEC.json

The night is the nightly's (or a partition's) own code from its checks on: `measured_and_judged`, with
ReFrame, the plan's dry run, the scheduler and the clock stood in for (history.py's DRIVEN tables), and
its phases (history.py's NIGHT_PHASES, PARTITION_PHASES) wrapped, by name, in timers. What each phase
cost goes to SPEC's `out` (JSON), rewritten as each phase ends, so that a night killed for memory still
says how far it got.

A phase's CPU seconds are the process's (getrusage, user+sys: its DuckDB and BLAS threads' too) while
it ran, less those of a phase that ran within it in another thread (the nightly draws its pages in a
thread of their own while the rerun waits for ReFrame: they count as pages, not as the rerun); the
total's are all of the process's after the checks. A phase's peak is the process's peak resident memory
while it ran (Linux's VmHWM, reset as each phase starts by /proc/self/clear_refs; where that is refused,
the peak so far).
"""

from __future__ import annotations

import argparse
import datetime as dt
import faulthandler
import functools
import importlib
import json
import os
import resource
import shutil
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

#: Exit statuses of this process besides the night's own verdict (which goes to `out`).
OUT_OF_MEMORY = 4
FAILED = 5


# --- memory and CPU --------------------------------------------------------------------------------


def _status_kb(field: str) -> int:
    """A field of /proc/self/status in kB (0 where there is none)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _peak_kb() -> int:
    """The process's peak resident memory since it started or was last reset, in kB."""
    return _status_kb("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _reset_peak() -> bool:
    """The peak resident memory started again from what is resident now (Linux 4.0 on); False if refused."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def _process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Span:
    """One timed stretch: a phase's call, or the whole night after its checks (`whole`: nothing within
    it is taken off)."""

    def __init__(self, phase: str, whole: bool = False):
        self.phase, self.whole = phase, whole
        self.cpu0, self.wall0 = _process_cpu(), time.monotonic()
        self.within_cpu = 0.0  # spent by spans that began and ended within this one
        self.peak_kb = 0

    def cpu(self) -> float:
        return _process_cpu() - self.cpu0 - (0.0 if self.whole else self.within_cpu)


class Meter:
    """The phases' CPU, wall time and peak memory, kept in `out` as they end."""

    def __init__(self, out: Path, phases: list[str]):
        self.out = out
        self.record: dict = {
            "phases": {name: {"calls": 0, "cpu_s": 0.0, "wall_s": 0.0, "peak_mb": 0.0} for name in phases},
            "total": None,
            "rows": None,
            "running": [],
        }
        self.open: list[Span] = []
        self.lock = threading.Lock()
        self.local = threading.local()
        self.total: Span | None = None
        self.resettable = _reset_peak()
        self.record["peaks"] = "per phase" if self.resettable else "the process's so far (clear_refs refused)"

    def enter(self, span: Span) -> Span:
        with self.lock:
            now = _peak_kb()
            for other in self.open:
                other.peak_kb = max(other.peak_kb, now)
            if self.resettable:
                _reset_peak()
            self.open.append(span)
            self.record["running"] = [s.phase for s in self.open]
            self.save()
        return span

    def leave(self, span: Span) -> dict:
        with self.lock:
            now, cpu = _peak_kb(), span.cpu()
            self.open.remove(span)
            for other in self.open:
                other.peak_kb = max(other.peak_kb, now)
                other.within_cpu += cpu  # every open span began before this one
            self.record["running"] = [s.phase for s in self.open]
        return {"cpu_s": cpu, "wall_s": time.monotonic() - span.wall0, "peak_mb": max(span.peak_kb, now) / 1024}

    def wrap(self, phase: str, module_name: str, name: str, table: str) -> None:
        """`module_name`.`name` replaced by itself timed as `phase`: a call inside another timed call of the
        same thread counts in the outer one. A name that is gone stops the benchmark, naming the table."""
        original = attribute(module_name, name, table)

        @functools.wraps(original)
        def timed(*args, **kwargs):
            if getattr(self.local, "inside", False):
                return original(*args, **kwargs)
            self.local.inside = True
            span, raised = self.enter(Span(phase)), None
            try:
                result = original(*args, **kwargs)
                self.rows_of(result)
                return result
            except BaseException as err:
                raised = repr(err)[:200]
                raise
            finally:
                self.local.inside = False
                self.add(phase, {**self.leave(span), "raised": raised})

        setattr(importlib.import_module(module_name), name, timed)

    def add(self, phase: str, spent: dict) -> None:
        with self.lock:
            kept = self.record["phases"][phase]
            kept["calls"] += 1
            kept["cpu_s"] += spent["cpu_s"]
            kept["wall_s"] += spent["wall_s"]
            kept["peak_mb"] = max(kept["peak_mb"], spent["peak_mb"])
            if spent.get("raised"):
                kept["raised"] = spent["raised"]
            self.save()

    def rows_of(self, result) -> None:
        """The rows of the largest table a phase returned (a Loaded's frame, a DataFrame, in a tuple)."""
        tables = list(result) if isinstance(result, tuple) else [result]
        sizes = [len(getattr(t, "frame", t)) for t in tables if hasattr(getattr(t, "frame", t), "columns")]
        if sizes:
            self.record["rows"] = max(self.record["rows"] or 0, *sizes)

    def start_total(self) -> None:
        """The night after its checks starts now (its checks' ReFrame has just returned)."""
        if self.total is None:
            self.total = self.enter(Span("total", whole=True))

    def end_total(self) -> None:
        if self.total is not None:
            self.record["total"] = self.leave(self.total)
            self.total = None
        self.save()

    def save(self) -> None:
        self.record["virtual_peak_mb"] = _status_kb("VmPeak") / 1024  # what --memory-limit-gb holds
        partial = self.out.with_suffix(".partial")
        partial.write_text(json.dumps(self.record, indent=1) + "\n")
        partial.replace(self.out)


def attribute(module_name: str, name: str, table: str):
    """`module_name`.`name`, or a stop that says which of benchmarks/history.py's tables to adjust."""
    try:
        return getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as err:
        raise SystemExit(
            f"benchmark: {module_name}.{name} is gone ({err}): the suite's code changed; adjust {table} in "
            "benchmarks/history.py to the function that does that phase now"
        ) from None


def stand_in(where: tuple[str, str], replacement, table: str) -> None:
    """(module, name) replaced by `replacement`; a name that is gone stops the benchmark, naming `table`."""
    attribute(*where, table)
    setattr(importlib.import_module(where[0]), where[1], replacement)


# --- the clock and the data ----------------------------------------------------------------------------


class Clock:
    """The night's clock: where ReFrame leaves it, then a second on at each reading, so that two windows
    read one after the other never share a second."""

    def __init__(self, start: str):
        self.at = dt.datetime.fromisoformat(start)

    def set(self, when: str) -> None:
        self.at = max(self.at, dt.datetime.fromisoformat(when))

    def now(self) -> str:
        text = self.at.strftime("%Y-%m-%dT%H:%M:%S")
        self.at += dt.timedelta(seconds=1)
        return text


def use_clock(clock: Clock, table: str) -> None:
    """Every module's `now` that is reports.runs.now (imported by name: the nightly's, the partition's)
    read from `clock`."""
    original = attribute("reports.runs", "now", table)
    for module in list(sys.modules.values()):
        if getattr(module, "now", None) is original:
            module.now = clock.now


def append_lines(pending: Path, perflogs: Path) -> int:
    """The staged lines under `pending` (NAME.log, NAME.curves, by their path under the system's perflogs)
    appended to the perflogs, as ReFrame logs them; the lines appended."""
    count = 0
    for path in sorted(p for p in pending.rglob("*") if p.is_file()):
        target = perflogs / path.relative_to(pending)
        text = path.read_text()
        with target.open("rb") as ends:
            ends.seek(-1, 2)
            cut = ends.read(1) != b"\n"
        with target.open("a") as stream:
            stream.write(("\n" if cut else "") + text)
        count += text.count("\n")
    return count


def cache_state(caches: dict[str, Path]) -> dict[str, int]:
    """How many files each of the history's caches and stores holds, their locks aside (0: cold)."""
    return {
        name: sum(1 for p in folder.rglob("*") if p.is_file() and p.name != "lock" and p.suffix != ".lock")
        for name, folder in caches.items()
    }


def redirect_caches(names: tuple[str, ...], root: Path) -> dict[str, Path]:
    """experiments/roots.py's caches and stores of the history (those of `names` it has) under the data
    root `root`, before any module reads them: one kept there already (the store, under the data root's
    build/) stays; one kept in the checkout (a loader's cache under build/cache/) is moved under
    root/cache/, so that a scenario's first night is cold and the checkout's caches are left as they are.
    None of them left: the suite's code changed (adjust HISTORY_CACHES)."""
    from experiments import roots

    found = {}
    for name in (name for name in names if hasattr(roots, name)):
        old = Path(getattr(roots, name))
        if old.resolve().is_relative_to(root.resolve()):
            found[name] = old
            continue
        found[name] = root / "cache" / name.lower()
        for module in list(sys.modules.values()):  # roots itself, and any module that imported the name already
            if getattr(module, name, None) == old:
                setattr(module, name, found[name])
    if not found:
        raise SystemExit(
            f"benchmark: experiments.roots has none of {', '.join(names)}: adjust HISTORY_CACHES in "
            "benchmarks/history.py to where the loader keeps what it read"
        )
    return found


# --- the nights ---------------------------------------------------------------------------------------


def options(**given) -> argparse.Namespace:
    """The nightly's command-line options as a cron line gives them, the later measure off (it sleeps)."""
    return argparse.Namespace(
        **{
            "reframe": [],
            "alpha": 0.05,
            "allow_unjudged": False,
            "no_report": False,
            "confirm_later": 0,
            "drill": None,
            "dry_run": False,
            **given,
        }
    )


def node_night(spec: dict, meter: Meter, tables) -> int:
    """One node's night: the history's source night measured again, from its health on."""
    from reports.runs import NIGHTLY_DIR, PERFLOGS

    driven = tables.NIGHT_DRIVEN
    entry = attribute(*driven["entry"], "NIGHT_DRIVEN")
    save_run = attribute(*driven["save_run"], "NIGHT_DRIVEN")
    pending, system = Path(spec["pending"]), spec["system"]
    meta = json.loads((pending / "meta.json").read_text())
    clock = Clock(meta["stamp"])
    use_clock(clock, "NIGHT_DRIVEN")

    def reframe(system_name, report, *rest, **how) -> int:
        """ReFrame, as far as the night sees it: its run report, the node facts health records, the
        records it logs (appended to the perflogs now), the clock at the end of the run."""
        report = Path(report)
        key = report.name.removesuffix("-report.json")
        if key not in ("health", "run", "rerun", "later"):
            raise SystemExit(f"benchmark: the night asked ReFrame for {report.name}, which the benchmark cannot give")
        if (pending / report.name).exists():
            shutil.copy2(pending / report.name, report)
        elif key in ("rerun", "later"):  # a night that had none: its rerun's cases passed as they did in the run
            shutil.copy2(pending / "run-report.json", report)
        if key == "health":
            for facts in pending.glob("node-*.json"):
                shutil.copy2(facts, report.parent / facts.name)
            return 0
        window = "tonight" if key == "run" else key
        if (pending / window).is_dir():
            meter.record.setdefault("appended", {})[window] = append_lines(pending / window, PERFLOGS / system)
        if window in meta["windows"]:
            clock.set(meta["windows"][window][1])
        if key == "run":
            meter.start_total()
        return 0

    stand_in(driven["reframe"], reframe, "NIGHT_DRIVEN")
    stand_in(driven["plan"], lambda *args, **kwargs: meta.get("plan") or {}, "NIGHT_DRIVEN")
    stamp = meta["stamp"]
    run = {"system": system, "stamp": stamp, "start": stamp, "state": "running", "phase": "preflight"}
    outdir = NIGHTLY_DIR / system / stamp.replace(":", "")
    outdir.mkdir(parents=True, exist_ok=True)
    save_run(outdir, run)
    found = {"passed": [], "skipped": [], "failed": [], "suite": []}
    status = entry(options(), system, run, outdir, found)
    meter.end_total()
    meter.record["reruns"] = [key for key in ("rerun", "later") if key in run]
    return status


def partition_night(spec: dict, meter: Meter, tables) -> int:
    """A partition's night: its nodes' records are in the perflogs already (written before this process
    started: nothing reads them before the checks end); the scheduler hands over their node facts and
    reports, and a rerun measures nothing."""
    from reports.runs import NIGHTLY_DIR
    from systems import data

    driven = tables.PARTITION_DRIVEN
    entry = attribute(*driven["entry"], "PARTITION_DRIVEN")
    night_class = attribute(*driven["night"], "PARTITION_DRIVEN")
    save_run = attribute(*driven["save_run"], "PARTITION_DRIVEN")
    pending, system = Path(spec["pending"]), spec["system"]
    meta = json.loads((pending / "meta.json").read_text())
    clock = Clock(meta["start"])
    use_clock(clock, "PARTITION_DRIVEN")

    def measure(night, nodes, folder, reframe_options):
        """The scheduler and ReFrame, as far as the night sees them: the nodes' facts and run reports in
        `folder`, the clock at the night's end; a rerun measures nothing."""
        if Path(folder) != Path(night.outdir):
            meter.record["reruns"] = ["rerun (measured nothing)"]
            return list(nodes), [], 0
        shutil.copytree(pending, folder, dirs_exist_ok=True, ignore=lambda d, names: ["meta.json"])
        (Path(folder) / "meta.json").unlink(missing_ok=True)
        clock.set(meta["end"])
        meter.start_total()
        if meta["layout"] == "lsf":
            reports = sorted(Path(folder).glob("*/run-report.json")) + sorted(Path(folder).glob("*/health-report.json"))
        else:
            reports = [Path(folder) / "health-report.json", Path(folder) / "run-report.json"]
        return list(nodes), reports, 0

    stand_in(driven["measure"], measure, "PARTITION_DRIVEN")
    part = data.load_all()[system]["partitions"][0]
    stamp = meta["stamp"]
    run = {"system": system, "stamp": stamp, "start": stamp, "partition": part["name"], "nodes_asked": "all"}
    run.update(state="running", phase="checks")
    outdir = NIGHTLY_DIR / system / stamp.replace(":", "")
    outdir.mkdir(parents=True, exist_ok=True)
    save_run(outdir, run)
    night = night_class(system, part, run, outdir, [], False)
    status = entry(night, meta["nodes"], {}, options())
    meter.end_total()
    meter.record.setdefault("reruns", [])
    return status


def main(argv: list[str] | None = None) -> int:
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a hung night's stacks, asked for before it is killed
    spec = json.loads(Path((argv or sys.argv[1:])[0]).read_text())
    root = Path(os.environ["GPU_MEMPATHS_DATA"])
    from benchmarks import history as tables  # its tables; none of the suite's loaders imported yet

    caches = redirect_caches(tables.HISTORY_CACHES, root)
    phases = tables.NIGHT_PHASES if spec["mode"] == "kind" else tables.PARTITION_PHASES
    table = "NIGHT_PHASES" if spec["mode"] == "kind" else "PARTITION_PHASES"
    meter = Meter(Path(spec["out"]), list(phases))
    meter.record["cache_before"] = cache_state(caches)
    for phase, names in phases.items():
        for module_name, name in names:
            meter.wrap(phase, module_name, name, table)
    status = FAILED
    try:
        night = node_night if spec["mode"] == "kind" else partition_night
        meter.record["exit"] = night(spec, meter, tables)
        status = 0
    except MemoryError:
        meter.record["error"] = f"MemoryError during {', '.join(meter.record['running']) or 'the night'}"
        status = OUT_OF_MEMORY
    except SystemExit as err:
        meter.record["error"] = str(err.code)
    except BaseException as err:  # said and kept: the table says where the night stopped
        meter.record["error"] = f"{err!r} during {', '.join(meter.record['running']) or 'the night'}"
        traceback.print_exc()
    meter.record["cache_after"] = cache_state(caches)
    meter.save()
    return status


if __name__ == "__main__":
    sys.exit(main())
