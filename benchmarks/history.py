"""History at a centre's scale: what the nightly's own code costs as the history it reads grows.

    python -m benchmarks.history kind --times 1 4 10 [--years 1 3] [--keep DIR] [--csv FILE]
    python -m benchmarks.history partition --nodes 100 1000 4608 [--nights 2] [--keep DIR] [--csv FILE]

`kind`: for each size, a history of one kind of node (by default the one with most nights: the committed
H100's) made of the committed nights alone (benchmarks/synthetic.py: `--times k` adds k-1 copies of each
of its finished nights, `--years Y` one a day for 365*Y days, each moved past the last committed night),
in a data root of its own (GPU_MEMPATHS_DATA). Then tonight: the last committed night of the kind measured
again after the history by runner/nightly.py's own `measured_and_judged`, from its health on, with ReFrame
stood in for (its records appended to the perflogs when its checks "end", its run reports the committed
night's, or made from its lines where its folder did not keep them: git keeps run.json, not ReFrame's
reports) and the later measure off (--confirm-later 0); then the next night, on the same history, as a
centre's next night finds it (its caches kept).

`partition`: for each N, the committed history and `--nights` nights of a partition of N made-up nodes,
each node one committed night of the kind (its node and job id its own, moved into the night's window),
judged by runner/partition.py's own `measured_and_judged`, the scheduler stood in for.

Each night runs in a process of its own (benchmarks/night.py), so that peaks do not mix, under an address
space limit (--memory-limit-gb): a night that runs out of memory is reported as far as it got. Each
scenario's table gives, per night and phase, the CPU seconds and the peak resident memory; --csv writes
the same, a row per night and phase.

The phases are the nightly's own functions, wrapped by name in the tables below: when their code moves,
adjust the names here (a name that is gone, or a phase a night must run that no longer runs, stops the
benchmark; never a silent zero).
"""

from __future__ import annotations

#: The nightly's phases: each the functions (module, name) whose calls it times. A call inside another
#: timed call of the same thread counts in the outer one; the pages drawn in their own thread beside the
#: rerun count as pages.
NIGHT_PHASES = {
    "load+judge": [("runner.nightly", "judge_night")],
    "rerun reload+judge": [("runner.nightly", "rerun_flagged")],
    "held changes": [("runner.nightly", "held_changes")],
    "history drawn": [("runner.histories", "drawn")],
    "verdict written": [("runner.nightly", "write_verdict"), ("runner.nightly", "write_drain")],
    "pages": [("runner.nightly", "draw_pages"), ("runner.nightly", "write_html")],
}
#: A partition's night's phases, likewise.
PARTITION_PHASES = {
    # The night's records read a chunk of nodes at a time and reduced to run medians (tables: its loads).
    "load": [("runner.partition", "tables")],
    "judge": [("judge.partition", "levels"), ("judge.partition", "judge")],
    "rerun": [("runner.partition", "confirm_by_rerun")],
    "contention": [("runner.partition", "with_contention")],
    "results": [("runner.partition", "write_results")],
    "pages": [("runner.partition", "write_page")],
}
#: Phases a night runs only when it needs them (a rerun, where something was flagged).
OPTIONAL = {"rerun reload+judge", "rerun"}
#: What the benchmark calls (the night from its health on) and what it stands in for, by name.
NIGHT_DRIVEN = {
    "entry": ("runner.nightly", "measured_and_judged"),
    "save_run": ("runner.nightly", "save_run"),
    "reframe": ("runner.nightly", "reframe"),
    "plan": ("runner.nightly", "announce_plan"),
}
PARTITION_DRIVEN = {
    "entry": ("runner.partition", "measured_and_judged"),
    "night": ("runner.partition", "Night"),
    "save_run": ("runner.nightly", "save_run"),
    "measure": ("runner.partition", "measure"),
}
#: Where the loader keeps what it read of a history (experiments/roots.py's names; those it has are used):
#: a store under the data root is the scenario's own already; a cache in the checkout (build/cache/load)
#: is moved under the data root (DIR/cache/), so that each scenario's first night is a cold one and the
#: checkout's caches are neither read nor pushed out. Each night's table says how many files each held.
HISTORY_CACHES = ("STORES", "LOAD_CACHE")

# The tables above come first, where whoever moves the nightly's code finds them.
# ruff: noqa: E402
import argparse
import csv
import datetime as dt
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import synthetic

#: Exit status of a mistake on the command line (the suite's: 3, naming the option).
USAGE = 3
#: The nights of a `kind` scenario: (number, what the table calls it).
KIND_NIGHTS = ((1, "first night on this history (cold)"), (2, "next night (warm)"))


class Parser(argparse.ArgumentParser):
    """argparse, a mistake exiting 3 with the option named (argparse's own message) and the usage."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(USAGE, f"{self.prog}: error: {message}\n")


def _whole(low: int, high: int):
    def whole(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value}: give {low} to {high}")
        return value

    return whole


def _positive(high: float):
    def positive(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not 0 < value <= high:
            raise argparse.ArgumentTypeError(f"{value}: give more than 0, at most {high:g}")
        return value

    return positive


def parser() -> Parser:
    p = Parser(prog="python -m benchmarks.history", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="scenario", required=True, parser_class=Parser)
    common = Parser(add_help=False)
    common.add_argument("--system", default="hopper-vm", help="the system whose committed history is copied")
    common.add_argument("--kind", help="the kind of node (default: the one with most committed nights)")
    common.add_argument("--keep", metavar="DIR", type=Path, help="make each scenario's data root under DIR, kept")
    common.add_argument(
        "--csv", metavar="FILE", type=Path, help="also write the tables as CSV, a row per night and phase"
    )
    common.add_argument(
        "--memory-limit-gb",
        type=_positive(4096),
        default=20.0,
        metavar="GB",
        help="each night's address space limit (RLIMIT_AS; default 20): a night past it is reported as far as it got",
    )
    common.add_argument(
        "--night-timeout-min",
        type=_positive(24 * 60),
        default=60.0,
        metavar="MIN",
        help="stop a night still running after this many minutes (default 60), its threads' stacks in its log",
    )
    kind = sub.add_parser("kind", parents=[common], help="one kind of node's nightly over histories of growing size")
    kind.add_argument(
        "--times",
        type=_whole(1, 1000),
        nargs="+",
        default=[],
        metavar="K",
        help="the committed nights of the kind K times",
    )
    kind.add_argument(
        "--years",
        type=_positive(50),
        nargs="+",
        default=[],
        metavar="Y",
        help="about 365*Y nights of the kind, one a day",
    )
    part = sub.add_parser("partition", parents=[common], help="a partition's nights of N made-up nodes")
    part.add_argument("--nodes", type=_whole(1, 100_000), nargs="+", required=True, metavar="N", help="nodes a night")
    part.add_argument(
        "--nights", type=_whole(1, 366), default=2, metavar="K", help="nights in one data root (default 2)"
    )
    part.add_argument(
        "--layout",
        choices=synthetic.LAYOUTS,
        default="slurm",
        help="where the nodes' records go: one perflog per check as Slurm's --distribute logs them (default), or a "
        "folder per node as the LSF job's tasks log them",
    )
    return p


def checked(args: argparse.Namespace, p: Parser) -> argparse.Namespace:
    """Mistakes argparse does not see, each naming its option (exit 3)."""
    if args.scenario == "kind" and not args.times and not args.years:
        p.error("kind: give --times K... or --years Y... (the history's sizes)")
    if args.keep is not None and args.keep.exists() and not args.keep.is_dir():
        p.error(f"argument --keep: {args.keep} is a file, not a folder")
    if args.csv is not None and not args.csv.parent.is_dir():
        p.error(f"argument --csv: no folder {args.csv.parent} to write {args.csv.name} in")
    if args.system not in {p.name for p in (synthetic.REPO / "perflogs").iterdir() if p.is_dir()}:
        p.error(f"argument --system: no committed perflogs of {args.system!r} (perflogs/<system>/)")
    kinds = {n.kind for n in synthetic.finished(synthetic.committed_nights(args.system)) if n.kind}
    if args.kind is not None and args.kind not in kinds:
        p.error(f"argument --kind: no finished night of {args.kind!r}; the committed kinds: {'; '.join(sorted(kinds))}")
    for name in scenario_names(args):
        if args.keep is not None and (args.keep / name).exists() and any((args.keep / name).iterdir()):
            p.error(f"argument --keep: {args.keep / name} holds a scenario already; give another folder")
    return args


def scenario_names(args: argparse.Namespace) -> list[str]:
    """Each scenario's folder name under --keep."""
    if args.scenario == "kind":
        return [f"kind-times-{k}" for k in args.times] + [f"kind-years-{y:g}" for y in args.years]
    return [f"partition-{n}-nodes" for n in args.nodes]


# --- one night in a process of its own ---------------------------------------------------------------


def run_night(root: Path, spec: dict, label: str, limit_gb: float, timeout_min: float = 60.0) -> dict:
    """benchmarks/night.py on `spec` in a process of its own (the data root `root`, an address space of
    `limit_gb`, `timeout_min` minutes at most), its output in bench/<label>.log; what it measured, with
    how it ended."""
    from experiments.metrics import URL_VARIABLE
    from experiments.roots import DATA_VARIABLE

    bench = root / "bench"
    out, log, spec_path = bench / f"{label}.json", bench / f"{label}.log", bench / f"{label}.spec.json"
    out.unlink(missing_ok=True)
    spec_path.write_text(json.dumps({**spec, "out": str(out)}) + "\n")
    env = {**os.environ, DATA_VARIABLE: str(root)}
    env.pop(URL_VARIABLE, None)  # a site's metrics endpoint never hears of made-up nights

    def limited() -> None:
        size = int(limit_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (size, size))

    hung = False
    with log.open("w") as stream:
        child = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.night", str(spec_path)],
            cwd=synthetic.REPO,
            env=env,
            stdout=stream,
            stderr=subprocess.STDOUT,
            preexec_fn=limited,
        )
        try:
            child.wait(timeout_min * 60)
        except subprocess.TimeoutExpired:
            hung = True
            child.send_signal(signal.SIGUSR1)  # benchmarks/night.py writes every thread's stack to its log
            time.sleep(2)
            child.kill()
            child.wait()
    record = json.loads(out.read_text()) if out.exists() else {"phases": {}, "error": "it wrote no record"}
    record["returncode"] = child.returncode
    running = ", ".join(record.get("running") or []) or "the night"
    if hung:
        record["error"] = f"no end after {timeout_min:g} min during {running}: stopped (its threads' stacks: {log})"
    elif child.returncode < 0:
        record["error"] = f"killed by signal {-child.returncode} during {running} (out of memory?)"
    caught = [line.strip() for line in log.read_text(errors="replace").splitlines() if "MemoryError" in line]
    if caught:
        record["caught"] = caught[:3]
    record["log"] = str(log)
    return record


def phases_ran(record: dict, phases: dict, table: str) -> None:
    """Stop where a phase a night must run never ran in a night that ended well: its function is no
    longer what the nightly calls (adjust `table`)."""
    if record.get("error") or record.get("returncode"):
        return
    for phase, names in phases.items():
        if phase not in OPTIONAL and not record["phases"].get(phase, {}).get("calls"):
            called = ", ".join(f"{m}.{n}" for m, n in names)
            raise SystemExit(
                f"benchmark: the night never called {called} (phase {phase!r}): the suite's code changed; adjust "
                f"{table} in benchmarks/history.py (its log: {record.get('log')})"
            )


# --- scenarios ------------------------------------------------------------------------------------------


@dataclass
class Night:
    """One night of a scenario: what its history held and what it cost."""

    label: str
    nights: int | None  # finished nights of the kind in its history
    lines: int  # perflog and curves lines under the system's perflogs
    record: dict


@dataclass
class Scenario:
    name: str
    title: str
    phases: dict
    nights: list[Night] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def data_root(keep: Path | None, name: str) -> Path:
    if keep is None:
        return Path(tempfile.mkdtemp(prefix=f"gpu-mempaths-{name}-"))
    (keep / name).mkdir(parents=True, exist_ok=True)
    return (keep / name).resolve()


def say(line: str) -> None:
    print(f"history: {line}", file=sys.stderr, flush=True)


def kind_scenario(args: argparse.Namespace, name: str, times: int = 1, years: float | None = None) -> Scenario:
    """A history of the kind (`times` or `years`), then tonight and the next night on it."""
    root = data_root(args.keep, name)
    try:
        started = dt.datetime.now()
        history = synthetic.make_history(root, args.system, args.kind, times=times, years=years)
        size = f"--years {years:g}" if years else f"--times {times}"
        say(
            f"{name}: {history.nights} nights of {history.kind}, {history.lines:,} lines in {root} "
            f"({(dt.datetime.now() - started).total_seconds():.0f} s to write)"
        )
        scenario = Scenario(
            name,
            f"kind {size}: {history.nights:,} finished nights of {history.kind}, {history.lines:,} perflog and curves "
            f"lines; tonight is {history.source.stamp} measured again",
            NIGHT_PHASES,
        )
        for number, label in KIND_NIGHTS:
            synthetic.stage_night(history, number)
            spec = {"mode": "kind", "system": args.system, "pending": str(root / "bench" / "pending" / str(number))}
            record = run_night(root, spec, f"night-{number}", args.memory_limit_gb, args.night_timeout_min)
            phases_ran(record, NIGHT_PHASES, "NIGHT_PHASES")
            lines = synthetic.count_lines(root / "perflogs" / args.system)
            scenario.nights.append(Night(label, history.nights + number - 1, lines, record))
            say(f"{name}: {label}: {ended(record)}")
            if record.get("error"):
                break  # a night that could not end: the next would not either
        scenario.notes += notes(scenario)
        return scenario
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


def partition_scenario(args: argparse.Namespace, nodes: int) -> Scenario:
    """The committed history, then `--nights` nights of a partition of `nodes` nodes."""
    name = f"partition-{nodes}-nodes"
    root = data_root(args.keep, name)
    try:
        history = synthetic.make_history(root, args.system, args.kind)
        scenario = Scenario(
            name,
            f"partition of {nodes:,} nodes of {history.kind} ({args.layout} perflogs), {args.nights} night(s) on the "
            f"committed history ({history.nights} finished nights of the kind)",
            PARTITION_PHASES,
        )
        for number in range(1, args.nights + 1):
            started = dt.datetime.now()
            night = synthetic.write_partition_night(history, nodes, number, args.layout)
            say(
                f"{name}: night {number}: {night.lines:,} lines of {nodes} nodes written in "
                f"{(dt.datetime.now() - started).total_seconds():.0f} s"
            )
            spec = {"mode": "partition", "system": args.system, "pending": str(night.pending)}
            record = run_night(root, spec, f"partition-{number}", args.memory_limit_gb, args.night_timeout_min)
            phases_ran(record, PARTITION_PHASES, "PARTITION_PHASES")
            lines = synthetic.count_lines(root / "perflogs" / args.system)
            scenario.nights.append(Night(f"night {number} ({night.stamp})", None, lines, record))
            say(f"{name}: night {number}: {ended(record)}")
            if record.get("error"):
                break  # a night that could not be judged: the next would not be either
        scenario.notes += notes(scenario)
        return scenario
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


def ended(record: dict) -> str:
    if record.get("error"):
        return f"stopped: {record['error']} (log: {record['log']})"
    total = record.get("total") or {}
    return f"exit {record.get('exit')}, {total.get('cpu_s', 0):.1f} CPU s after the checks"


def notes(scenario: Scenario) -> list[str]:
    """What a reader of the table needs besides its cells: reruns, errors, memory errors the suite caught."""
    found = []
    for night in scenario.nights:
        record = night.record
        reruns = record.get("reruns")
        if reruns is not None:
            found.append(
                f"{night.label}: " + (f"reruns: {', '.join(reruns)}" if reruns else "no rerun (nothing flagged)")
            )
        if record.get("error"):
            found.append(f"{night.label}: STOPPED: {record['error']}; the cells before it are what it reached")
        for line in record.get("caught", []):
            found.append(f"{night.label}: the suite caught a MemoryError (a page or figure left out): {line}")
    first = scenario.nights[0].record if scenario.nights else {}
    virtual = max((night.record.get("virtual_peak_mb") or 0 for night in scenario.nights), default=0)
    found.append(
        "CPU s: the process's user+sys while the phase ran (the pages drawn in their own thread within the rerun "
        f"count as pages only); peak MB: the process's peak resident memory, {first.get('peaks', 'unknown')}; "
        f"the largest address space a night reached (what --memory-limit-gb holds): {virtual:,.0f} MB"
    )
    return found


# --- tables ------------------------------------------------------------------------------------------------


def cache_words(state: dict | None) -> str:
    if not state:
        return "?"
    held = sum(state.values())
    return "cold (empty)" if held == 0 else f"warm ({held} kept)"


def cell(spent: dict | None) -> str:
    if not spent or not spent.get("calls", 1):
        return "not run"
    cpu = spent["cpu_s"]
    if spent.get("raised"):
        return f"raised after {cpu:.2f} s / {spent['peak_mb']:,.0f} MB"
    return f"{cpu:.2f} s / {spent['peak_mb']:,.0f} MB" if cpu >= 1 else f"{cpu:.3f} s / {spent['peak_mb']:,.0f} MB"


def table(scenario: Scenario) -> str:
    """The scenario's markdown table: a row per night, per phase its CPU s / peak MB."""
    phases = list(scenario.phases)
    head = ["night", "nights of the kind", "lines", "rows loaded", "store/cache before", *phases]
    head += ["total after the checks", "exit"]
    rows = []
    for night in scenario.nights:
        record = night.record
        exit_word = record.get("error") or str(record.get("exit"))
        rows.append(
            [
                night.label,
                f"{night.nights:,}" if night.nights is not None else "-",
                f"{night.lines:,}",
                f"{record['rows']:,}" if record.get("rows") else "?",
                cache_words(record.get("cache_before")),
                *(cell(record.get("phases", {}).get(phase)) for phase in phases),
                cell(record.get("total")),
                exit_word if len(exit_word) < 80 else exit_word[:77] + "...",
            ]
        )
    lines = [f"### {scenario.title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    lines += ["", *(f"- {note}" for note in scenario.notes)]
    return "\n".join(lines) + "\n"


CSV_COLUMNS = ["scenario", "night", "nights", "lines", "rows", "cache", "phase", "calls", "cpu_s", "wall_s", "peak_mb"]
CSV_COLUMNS += ["exit", "error"]


def write_csv(scenarios: list[Scenario], path: Path) -> None:
    with path.open("w", newline="") as stream:
        out = csv.writer(stream)
        out.writerow(CSV_COLUMNS)
        for scenario in scenarios:
            for night in scenario.nights:
                record = night.record
                spent = {**record.get("phases", {}), "total after the checks": record.get("total") or {}}
                for phase, cost in spent.items():
                    out.writerow(
                        [
                            scenario.name,
                            night.label,
                            night.nights if night.nights is not None else "",
                            night.lines,
                            record.get("rows") or "",
                            cache_words(record.get("cache_before")),
                            phase,
                            cost.get("calls", 1 if cost else 0),
                            round(cost.get("cpu_s", 0.0), 4),
                            round(cost.get("wall_s", 0.0), 3),
                            round(cost.get("peak_mb", 0.0), 1),
                            record.get("exit", ""),
                            record.get("error", ""),
                        ]
                    )


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = checked(p.parse_args(argv), p)
    scenarios = []
    if args.scenario == "kind":
        names = iter(scenario_names(args))
        runs = [{"times": k} for k in args.times] + [{"years": y} for y in args.years]
        for run in runs:
            scenarios.append(kind_scenario(args, next(names), **run))
            print(table(scenarios[-1]), flush=True)
    else:
        for nodes in args.nodes:
            scenarios.append(partition_scenario(args, nodes))
            print(table(scenarios[-1]), flush=True)
    if args.csv is not None:
        write_csv(scenarios, args.csv)
        say(f"the tables as CSV in {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
