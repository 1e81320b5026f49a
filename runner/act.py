"""Acting on the scheduler within limits: a night's verdict drains the nodes it names and resumes the nodes
the suite drained once they pass again, never more than its cap.

    ./suite act NIGHT_DIR [--system NAME] [--scheduler slurm|lsf] [--dry-run]
    ./suite act --reset SYSTEM

- **Drain** each node the night names (drain.txt of a node's night, run.json's `drain` of a partition's),
  with a reason that starts with the suite's name, the finding's code and the tier that found it:
  `gpu-mempaths GMP-101 nightly: moved against the accepted runs: ...`.
- **Resume** a node only where the suite drained it (its reason starts with `gpu-mempaths `) and only once
  it passes the tier that drained it (a node's night exiting 0; a partition's node whose state is ok).
- **Never touch a node drained by someone else**, whatever the night found: it is named, and left alone.
- **A circuit breaker.** Past the system's cap (`act: {cap: 10%, window: 1h}` in its data; a number of
  nodes or a share of the nodes the scheduler lists) of the suite's own drains within the window, it drains
  nothing more, names every node it would have drained, and raises one finding for a person (GMP-701), on
  every night that would drain a node, until `./suite act --reset SYSTEM`. A fleet that moved as one is
  the likeliest cause: that is for a person, not for a script that empties a partition.
- **A night not judged** (exit 3: the suite's own failure) drains and resumes nothing.
- **--dry-run** prints the commands and changes nothing, the breaker's record included.

Every command is an argument list, never a shell line: a node's name or a reason reaches the scheduler as
one argument. A node name that is not a plain host name (letters, digits, '.', '_', '-') is refused: Slurm
reads 'a,b' or 'a[1-9]' as several nodes. Exit 0 done (or nothing to do), 2 the breaker tripped (a person
reads the finding), 3 the suite could not act (a scheduler command failed, the night or the system data
unreadable, a usage mistake), naming why.
"""

from __future__ import annotations

import argparse
import datetime as dt
import fcntl
import math
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from experiments.files import DamagedFile, read_json, write_json
from experiments.roots import DATA_VARIABLE, RESULTS
from reports.runs import incomplete_why, night_complete
from systems import data
from systems.finding_codes import PREFIX, SEVERITY_ORDER, by_code, code_of, split_code
from systems.tiers import NIGHTLY, measured_tiers

#: Where each system's record of the suite's own drains and its breaker is kept.
ACTED = RESULTS / "act"
#: The limits where the system's data says none (the issue's and NVSentinel's kind of default).
DEFAULT_CAP, DEFAULT_WINDOW = "10%", "1h"
#: What a node name must look like to reach the scheduler.
NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def per_node_tiers() -> tuple[str, ...]:
    """Tiers that run on each node for itself (the nightly and the short tiers): their breaker's record must be
    on a directory the nodes share. Read when acting, never at import: a damaged catalogue is then the
    suite's failure, named, not a traceback."""
    return (NIGHTLY, *(t.name for t in measured_tiers()))


#: How long an act waits for another's hold on the breaker's record.
LOCK_WAIT_S = 20.0
#: A drain reason's length at most (Slurm keeps it whole; a ticket's subject line does not need more).
REASON_CHARS = 240
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class CannotAct(Exception):
    """What the suite could not do: exit 3, its cause named, nothing changed past it."""


@dataclass(frozen=True)
class Limits:
    """The breaker's cap (nodes, or a share of the nodes the scheduler lists) within a window (seconds)."""

    cap: str
    window_s: int

    @classmethod
    def of_system(cls, system: dict) -> Limits:
        act = system.get("act") or {}
        window = str(act.get("window", DEFAULT_WINDOW))
        return cls(str(act.get("cap", DEFAULT_CAP)), int(window[:-1]) * _UNITS[window[-1]])

    def nodes(self, listed: int) -> int:
        """The cap in nodes, of `listed` nodes: at least one, where the cap is a share."""
        if self.cap.endswith("%"):
            return max(1, math.floor(float(self.cap[:-1]) / 100 * listed))
        return int(self.cap)


@dataclass
class Night:
    """What a night asks of the scheduler: the nodes to drain (node, reason without the prefix), the nodes
    that passed the tier, and the tier."""

    tier: str
    judged: bool
    drain: list[tuple[str, str]] = field(default_factory=list)
    passed: list[str] = field(default_factory=list)


def read_night(folder: Path) -> Night:
    """The night in `folder`: a node's (drain.txt, run.json) or a partition's (run.json, nodes.csv)."""
    try:
        run = read_json(folder / "run.json")
    except (OSError, DamagedFile) as err:
        raise CannotAct(f"{folder}: no night's run.json to act on ({err})") from None
    if not night_complete(run) or "exit" not in run:
        raise CannotAct(f"{folder}: the night did not end with a verdict ({incomplete_why(run)}): nothing to act on")
    judged = run.get("exit") in (0, 1, 2)
    if "nodes" in (run.get("counts") or {}):
        drain = [(row["node"], " | ".join(row.get("reasons") or [row.get("state", "")])) for row in run["drain"]]
        return Night("partition", judged, drain, _partition_passed(folder))
    node, reasons = _drain_line(folder)
    passed = [node] if run.get("exit") == 0 and node else []
    return Night("nightly", judged, [(node, reasons)] if reasons else [], passed)


def _drain_line(folder: Path) -> tuple[str, str]:
    """drain.txt's node and its reasons ('' where there is nothing to drain: the node its facts name)."""
    try:
        text = (folder / "drain.txt").read_text()
    except OSError as err:
        raise CannotAct(f"{folder}: no drain.txt ({err.strerror})") from None
    node, _, reasons = text.rstrip("\n").partition("\t")
    if not node:  # nothing to drain: the node is the one its facts name
        facts = sorted(folder.glob("node-*.json"))
        node = facts[0].stem.removeprefix("node-") if facts else ""
    return node, reasons


def _partition_passed(folder: Path) -> list[str]:
    import pandas as pd

    try:
        nodes = pd.read_csv(folder / "nodes.csv", dtype=str)
    except (OSError, ValueError) as err:
        raise CannotAct(f"{folder}: no readable nodes.csv ({err})") from None
    return sorted(nodes.loc[nodes["state"] == "ok", "node"])


# --- the scheduler ----------------------------------------------------------


class Slurm:
    """Slurm through sinfo and scontrol."""

    name = "slurm"

    def drained(self) -> dict[str, str]:
        """Every drained or draining node and its reason."""
        found = {}
        for line in _output(["sinfo", "-a", "-R", "-h", "-N", "-o", "%N|%E"]).splitlines():
            node, _, reason = line.partition("|")
            found[node.strip()] = reason.strip()
        return found

    def listed(self) -> int:
        return len(set(_output(["sinfo", "-a", "-h", "-N", "-o", "%N"]).split()))

    def drain(self, node: str, reason: str) -> list[str]:
        return ["scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}"]

    def resume(self, node: str) -> list[str]:
        return ["scontrol", "update", f"nodename={node}", "state=resume"]


class Lsf:
    """LSF through badmin: hclose with the reason as its comment, hopen. Its closed hosts are not read: it acts
    in a dry run only, printing its commands, until a site tests it on its LSF."""

    name = "lsf"

    def drained(self) -> dict[str, str]:
        return {}

    def listed(self) -> int:
        return 0

    def drain(self, node: str, reason: str) -> list[str]:
        return ["badmin", "hclose", "-C", reason, node]

    def resume(self, node: str) -> list[str]:
        return ["badmin", "hopen", node]


SCHEDULERS = {"slurm": Slurm, "lsf": Lsf}


#: How long one scheduler command may take; less where the caller's deadline (within) leaves less.
COMMAND_S = 60.0
#: time.monotonic() by which every scheduler command must be done (None: COMMAND_S each), set by `within`.
_DEADLINE: float | None = None


@contextmanager
def within(deadline: float) -> Iterator[None]:
    """Every scheduler command of the block ends by `deadline` (time.monotonic()), or is CannotAct: a short
    tier acts within its own limit, never past the hook that runs it."""
    global _DEADLINE
    before, _DEADLINE = _DEADLINE, deadline
    try:
        yield
    finally:
        _DEADLINE = before


def _output(command: list[str]) -> str:
    timeout = COMMAND_S if _DEADLINE is None else min(COMMAND_S, _DEADLINE - time.monotonic())
    if timeout <= 0:
        raise CannotAct(f"{shlex.join(command)}: not run, no time left within the limit")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise CannotAct(f"{shlex.join(command)}: {err}") from None
    if done.returncode != 0:
        raise CannotAct(f"{shlex.join(command)}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


# --- the breaker's record ---------------------------------------------------


@contextmanager
def record_of(system: str, keep: bool = True, wait_s: float = LOCK_WAIT_S) -> Iterator[dict]:
    """The system's record of the suite's drains and its breaker, held under an flock (waited for `wait_s` at
    most) and written whole when the block ends, whatever ended it. A lock that cannot be taken in time is
    CannotAct, never an unguarded act. A dry run (`keep` false) reads the record as it is: no folder, no lock,
    nothing written."""
    path = ACTED / f"{system}.json"
    if not keep:
        yield _read_record(path)
        return
    try:
        ACTED.mkdir(parents=True, exist_ok=True)
        handle = open(ACTED / f"{system}.lock", "a")
    except OSError as err:
        raise CannotAct(f"{ACTED / system}.lock: the breaker's record cannot be locked ({err})") from None
    with handle:
        _lock(handle, wait_s)
        record = _read_record(path)
        try:
            yield record
        finally:  # what was done before a command failed is recorded too: the cap counts every drain made
            write_json(path, record)


def _lock(handle, wait_s: float) -> None:
    """An exclusive flock on `handle` within `wait_s`, or CannotAct: a health check has seconds, not forever."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise CannotAct(
                    f"{handle.name}: another act holds the breaker's record: gave up after {wait_s:g} s"
                ) from None
            time.sleep(0.1)
        except OSError as err:
            raise CannotAct(f"{handle.name}: the breaker's record cannot be locked ({err})") from None


def _read_record(path: Path) -> dict:
    try:
        return read_json(path) if path.exists() else {"drains": [], "tripped": None}
    except (OSError, DamagedFile) as err:
        raise CannotAct(str(err)) from None


# --- acting -----------------------------------------------------------------


@dataclass
class Acts:
    """What a night did on the scheduler, or would do (a dry run)."""

    commands: list[list[str]] = field(default_factory=list)
    drained: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    left_alone: list[str] = field(default_factory=list)  # drained by someone else
    held_back: list[str] = field(default_factory=list)  # the breaker's
    finding: str = ""
    #: Each drain command's node, as the plan made it: what the breaker's record counts once it runs.
    drains: dict[tuple[str, ...], str] = field(default_factory=dict)


def plan(night: Night, drained_now: dict[str, str], record: dict, limits: Limits, listed: int, now: float, scheduler):
    """The commands a night calls for (pure: the scheduler's state, the record and the clock given)."""
    acts = Acts()
    if not night.judged:
        return acts
    ours = {node for node, reason in drained_now.items() if reason.startswith(f"{PREFIX} ")}
    named = {node for node, _ in night.drain}
    for node in night.passed:
        if node in ours and node not in named and tier_of(drained_now[node]) == night.tier:
            acts.commands.append(scheduler.resume(node))
            acts.resumed.append(node)
    recent = [d for d in record["drains"] if now - d["when"] <= limits.window_s]
    room = max(0, limits.nodes(listed) - len(recent)) if not record.get("tripped") else 0
    for node, reasons in night.drain:
        if node in drained_now and node not in ours:
            acts.left_alone.append(node)
        elif node in ours:
            continue  # drained by the suite already: its reason stands
        elif room > 0:
            command = scheduler.drain(node, reason_of(reasons, night.tier))
            acts.commands.append(command)
            acts.drains[tuple(command)] = node
            acts.drained.append(node)
            room -= 1
        else:
            acts.held_back.append(node)
    if acts.held_back:
        code = code_of("act", "breaker").code
        why = (
            "it opened earlier and stays open until reset"
            if record.get("tripped")
            else f"{len(recent) + len(acts.drained)} of {limits.nodes(listed)} drains within {limits.window_s} s used"
        )
        acts.finding = (
            f"{code} the suite's breaker is open: {why}; not drained: {', '.join(acts.held_back)}. "
            "A person decides, then ./suite act --reset SYSTEM"
        )
    return acts


def tier_of(reason: str) -> str:
    """The tier that drained a node, from the suite's reason ('gpu-mempaths GMP-101 nightly: ...'), or ''."""
    words = reason.split(" ", 3)
    return words[2].removesuffix(":") if len(words) > 2 and words[0] == PREFIX and words[2].endswith(":") else ""


#: The code of a reason kept before reasons had codes, by how it starts (runner/nightly.py drain_reasons,
#: judge/partition.py NodeState).
OLD_REASONS = {
    "failed ": ("check", "failed"),
    "behind its siblings: ": ("sibling", "lagging"),
    "moved against": ("path", "moved"),
    "unstable against": ("path", "unstable"),
}


def reason_of(reasons: str, tier: str) -> str:
    """A drain reason: the suite's name, the most severe of its findings' codes, the tier, then the findings
    (' | ' between them), on one line. A finding kept before reasons had codes is known by its words."""
    found = [split_code(part) for part in " ".join(reasons.split()).split(" | ")]
    codes = [code or _old_code(text, tier) for code, text in found]
    worst = max(codes, key=lambda c: SEVERITY_ORDER.index(by_code(c).severity))
    return f"{PREFIX} {worst} {tier}: {' | '.join(text for _, text in found)}"[:REASON_CHARS]


def _old_code(text: str, tier: str) -> str:
    source = next((v for k, v in OLD_REASONS.items() if text.startswith(k)), ("check", "failed"))
    if tier == "partition" and source == ("sibling", "lagging"):
        source = ("node-state", "behind its siblings")
    return code_of(*source).code


def act(folder: Path, system: str, scheduler, dry_run: bool, now: float | None = None) -> tuple[Acts, int]:
    """Drain and resume what the night in `folder` calls for (act.json beside it says what was done);
    (what was done, exit status)."""
    night = read_night(folder)
    now = dt.datetime.now(dt.UTC).timestamp() if now is None else now
    acts, status = act_on(night, system, scheduler, dry_run, str(folder), now)
    if not dry_run:
        done = {k: v for k, v in acts.__dict__.items() if k != "drains"}  # its commands say the same
        write_json(folder / "act.json", {**done, "scheduler": scheduler.name, "when": now})
    return acts, status


def act_on(
    night: Night,
    system: str,
    scheduler,
    dry_run: bool,
    where: str,
    now: float,
    systems_dir: Path = data.SYSTEMS_DIR,
    wait_s: float = LOCK_WAIT_S,
) -> tuple[Acts, int]:
    """Drain and resume what `night` (found `where`: a night's folder, a node's health) calls for, within
    the limits of `system` (its data in `systems_dir`); (what was done, exit status)."""
    for node, _ in night.drain:
        if not NODE_NAME.match(node):
            raise CannotAct(f"{where}: node name {node!r} is not a plain host name: refused, nothing done")
    try:
        systems = data.load_all(systems_dir)
    except data.SystemDataError as err:
        raise CannotAct(str(err)) from None
    if night.tier in per_node_tiers() and not dry_run and not os.environ.get(DATA_VARIABLE):
        # Each node acts for itself: the breaker counts every node's drains only where they share its record.
        raise CannotAct(
            f"--act of the {night.tier} tier runs on each node: set {DATA_VARIABLE} to a directory every node "
            "shares (its results/act/ holds the breaker's record, with flock), or nothing is drained"
        )
    if system not in systems:
        raise CannotAct(data.unknown("act: no system", system, systems))
    limits = Limits.of_system(systems[system])
    with record_of(system, keep=not dry_run, wait_s=wait_s) as record:
        acts = plan(night, scheduler.drained(), record, limits, scheduler.listed(), now, scheduler)
        for command in acts.commands:
            print(f"act: {'would run' if dry_run else 'runs'}: {shlex.join(command)}")
            if dry_run:
                continue
            if tuple(command) in acts.drains:  # recorded first: a kill after the command still counts it
                record["drains"].append({"node": acts.drains[tuple(command)], "when": now, "night": where})
                write_json(ACTED / f"{system}.json", record)
            _output(command)  # a failure stops here, CannotAct; the drains before it stay recorded
        if not dry_run:
            if acts.held_back and not record.get("tripped"):
                record["tripped"] = {"when": now, "night": where, "held_back": acts.held_back}
            elif acts.held_back:
                record["tripped"]["held_back"] = sorted(set(record["tripped"]["held_back"]) | set(acts.held_back))
    for node in acts.left_alone:
        print(f"act: {node} is drained by someone else (its reason does not start with '{PREFIX} '): left alone")
    if acts.finding:
        print(f"act: {acts.finding}", file=sys.stderr)
    if not night.judged:
        print(f"act: {where}: not judged: nothing drained, nothing resumed")
    return acts, 2 if acts.finding else 0


#: ReFrame's scheduler names (a system's partitions) -> the scheduler act drives, and whether only in a dry run.
BY_REFRAME = {"slurm": ("slurm", False), "squeue": ("slurm", False), "lsf": ("lsf", True)}


#: What acting after a judgement can fail by, each the suite's failure (said beside the verdict, which stands):
#: a scheduler that refuses or does not answer, a breaker's record that cannot be written, damaged system data.
ACT_FAILURES = (CannotAct, OSError, KeyError, data.SystemDataError)


def after_night(folder: Path) -> int:
    """`./suite nightly --act`: act on the night just judged, through the scheduler its system's partitions
    use; what the suite could not do is said and changes no verdict."""
    try:
        system = _system_of(folder)
        kinds = {p.get("scheduler") for p in data.load_all()[system].get("partitions", [])}
        known = sorted(BY_REFRAME[k] for k in kinds if k in BY_REFRAME)
        if not known:
            named = ", ".join(sorted(map(str, kinds)))
            print(f"act: {system} runs under no scheduler the suite acts on ({named}): nothing done")
            return 0
        name, dry_run = known[-1]  # ("slurm", ...) sorts after ("lsf", ...): Slurm where a system has both
        return act(folder, system, SCHEDULERS[name](), dry_run)[1]
    except ACT_FAILURES as err:  # the night's own exit stands
        print(f"nightly: SUITE ERROR: act: not done: {err}", file=sys.stderr)
        return 3


def reset(system: str) -> None:
    """The breaker closed again (a person read its finding), the suite's drains before now forgotten."""
    with record_of(system) as record:
        record["tripped"] = None
        record["drains"] = []


# --- the command ------------------------------------------------------------


def add_parsers(sub) -> None:
    """act in the suite's one parser (commands/cli.py)."""
    parser = sub.add_parser("act", help=__doc__.splitlines()[0])
    parser.add_argument("night", nargs="?", type=Path, help="the night's folder (results/nightly/SYSTEM/STAMP)")
    parser.add_argument("--system", help="the system whose limits apply (default: the night's)")
    parser.add_argument("--scheduler", choices=sorted(SCHEDULERS), default="slurm")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, change nothing")
    parser.add_argument("--reset", metavar="SYSTEM", help="close the system's breaker again, after a person read it")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    try:
        if args.reset:
            known = data.load_all()
            if args.reset not in known:
                raise CannotAct(data.unknown("--reset: no system", args.reset, known))
            reset(args.reset)
            print(f"act: {args.reset}: the breaker is closed, the suite's earlier drains no longer count")
            return 0
        if args.night is None:
            raise CannotAct("give a night's folder, or --reset SYSTEM")
        if args.scheduler == "lsf" and not args.dry_run:
            raise CannotAct("--scheduler lsf acts in a dry run only (--dry-run): its commands are printed")
        system = args.system or _system_of(args.night)
        _, status = act(args.night, system, SCHEDULERS[args.scheduler](), args.dry_run)
        return status
    except CannotAct as err:
        print(f"act: not done: {err}", file=sys.stderr)
        return 3


def _system_of(folder: Path) -> str:
    try:
        return str(read_json(folder / "run.json")["system"])
    except (OSError, DamagedFile, KeyError) as err:
        raise CannotAct(f"{folder}: no system in its run.json ({err})") from None
