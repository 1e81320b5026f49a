"""The nightly runs and the accepted baseline, read through one module: where
they are kept, which records a run logged, and which runs are accepted."""

from __future__ import annotations

import datetime as dt
import enum
import glob
import re
import socket
import sys
from pathlib import Path

from experiments.files import DamagedFile, read_json, write_json
from experiments.roots import NIGHTLY as NIGHTLY_DIR
from experiments.roots import PERFLOGS
from reports.junit import write_verdict_xml
from systems import data
from systems.health import baselines_in, kind_of


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


#: A night's stamp as run.json ('2026-11-26T06:49:16') or its folder ('2026-11-26T064916') spells it: the
#: only words a stamp may be, so that none names a path outside the nights' folder ('../', '/').
STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:?\d{2}:?\d{2}")


def shown(word: str, most: int = 60) -> str:
    """A word a user gave, cut to `most` characters for a message (a 5,000-character name fills no screen)."""
    return word if len(word) <= most else word[: most - 3] + "..."


def checked_stamp(word: str, command: str) -> str:
    """`word` where it is a stamp (STAMP); else a usage error (SystemExit) naming it and the form."""
    if not STAMP.fullmatch(word):
        raise SystemExit(
            f"{command}: {shown(word)!r} is not a night's stamp (YYYY-MM-DDTHH:MM:SS, as the night's last line and "
            "results/nightly/<system>/ name it)"
        )
    return word


class NightState(str, enum.Enum):
    """Where a night is, in its run.json's `state`: written when it starts and at each step after, so that a
    night killed at any point is told from one that ended. A run.json without a state (the nights before
    it was kept) ended where it has a start and an end."""

    RUNNING = "running"  # started; a night killed by SIGKILL or a power cut stays so
    STOPPED = "stopped"  # interrupted (SIGINT, SIGTERM) and saved as such: `stopped` says by what and when
    DONE = "done"  # its verdict written


def night_complete(run: dict) -> bool:
    """Whether a night ended with what it measured whole: its verdict written (NightState.DONE), or, for a
    night from before states were kept, its checks' window closed."""
    state = run.get("state")
    if state is None:
        return bool(run.get("start") and run.get("end"))
    return state == NightState.DONE


def incomplete_why(run: dict) -> str:
    """Why a night is incomplete, in words: stopped by what and while doing what, or killed (no state saved)."""
    stopped = run.get("stopped") or {}
    if run.get("state") == NightState.STOPPED:
        return f"stopped by {stopped.get('by', 'a signal')} during {stopped.get('during', 'the night')}"
    return f"killed during {run.get('phase', 'the night')} (run.json still says {run.get('state', 'running')!r})"


#: How far ahead of this machine's clock a night's stamp may be before it is named as from the future (a
#: node's clock a few minutes off is ordinary; a month is a clock set wrong).
CLOCK_SLACK = dt.timedelta(minutes=10)


def in_the_future(stamp: str, at: str | None = None) -> bool:
    """Whether a night's stamp is later than now (`at`, by default this machine's clock) by CLOCK_SLACK."""
    when = dt.datetime.fromisoformat(stamp.replace("Z", ""))
    return when - dt.datetime.fromisoformat(at or now()) > CLOCK_SLACK


def read_run(path: Path) -> dict | None:
    """A night's run.json, or None, with a warning naming it, where it is damaged (one damaged night never
    stops the pages or the next night)."""
    try:
        run = read_json(path)
    except DamagedFile as err:
        print(f"warning: {err}: that night is left out", file=sys.stderr)
        return None
    if not isinstance(run, dict) or not run.get("stamp"):
        print(f"warning: {path}: damaged (no night's record: no stamp): that night is left out", file=sys.stderr)
        return None
    return run


def selected_system(explicit: str | None) -> str:
    """The system ReFrame would pick on this machine, unless one is named:
    a name no system has is a usage error (SystemExit naming it and the nearest)."""
    if explicit:
        return data.known_system(explicit, partition=False)
    return data.system_for_host(data.load_all(), socket.gethostname()) or "local"


def accepted_file(system: str) -> Path:
    return PERFLOGS / system / "accepted.json"


def read_baselines(system: str) -> dict[str, dict]:
    """The system's baselines by kind of node ('2 x NVIDIA H100 80GB HBM3'):
    each its accepted runs and their node facts, as read_accepted gives it."""
    path = accepted_file(system)
    if not path.exists():
        return {}
    record = read_json(path)
    if not isinstance(record, dict) or not isinstance(record.get("kinds", record.get("runs", [])), (dict, list)):
        raise DamagedFile(path, "not a baseline: no kinds of node and their runs")
    baselines = baselines_in(record)
    return {kind: {"system": system, "kind": kind, **baseline} for kind, baseline in baselines.items()}


def read_accepted(system: str, kind: str | None = None) -> dict | None:
    """The baseline of one kind of node of the system (its runs and node
    facts), or None; without a kind, the system's only one (None where it
    has several: say which)."""
    baselines = read_baselines(system)
    if kind is not None:
        # A baseline accepted before kinds, whose runs recorded no node facts, is of whatever kind the node is.
        return baselines.get(kind) or (baselines["unknown"] if list(baselines) == ["unknown"] else None)
    return next(iter(baselines.values())) if len(baselines) == 1 else None


def write_baseline(system: str, baseline: dict) -> Path:
    """The baseline of its kind (`baseline['kind']`) into the system's
    accepted.json, the other kinds' kept as they are."""
    baselines = read_baselines(system)
    baselines[baseline["kind"]] = baseline
    kinds = {
        kind: {k: v for k, v in record.items() if k not in ("system", "kind")}
        for kind, record in sorted(baselines.items())
    }
    path = accepted_file(system)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {"system": system, "kinds": kinds})
    return path


def fact_files(outdir: Path) -> list[Path]:
    """The node facts files the health checks of a nightly run wrote
    (node-<host>.json): in its folder, or in a folder of their node's (each
    task of an LSF partition's night writes under <host>/)."""
    return sorted(outdir.glob("node-*.json")) + sorted(outdir.glob("*/node-*.json"))


def node_facts_of(outdir: Path) -> list[dict]:
    """The node facts the health checks of a nightly run recorded (fact_files)."""
    return [read_json(path) for path in fact_files(outdir)]


def kind_of_run(system: str, run: dict) -> str | None:
    """The kind of node a nightly run ran on: as its run.json says, else as
    its health checks recorded it; None where neither does."""
    if run.get("kind"):
        return run["kind"]
    facts = node_facts_of(NIGHTLY_DIR / system / run["stamp"].replace(":", ""))
    return kind_of(facts[0]) if facts else None


def find_run(system: str, stamp: str, command: str = "accept") -> tuple[Path, dict]:
    """The folder and run.json of the night `stamp` of `system`: only a stamp (checked_stamp), only inside
    results/nightly/<system>/; a usage error (SystemExit) naming what is missing or damaged."""
    outdir = NIGHTLY_DIR / system / checked_stamp(stamp, command).replace(":", "")
    path = outdir / "run.json"
    if not path.exists():
        elsewhere = sorted(p.parent.parent.name for p in NIGHTLY_DIR.glob(f"*/{glob.escape(outdir.name)}/run.json"))
        hint = f": it is a night of {', '.join(elsewhere)} (--system {elsewhere[0]})" if elsewhere else ""
        raise SystemExit(f"{command}: no nightly run {stamp} of {system} ({path} is missing){hint}")
    try:
        run = read_json(path)
    except DamagedFile as err:
        raise SystemExit(f"{command}: {err}") from None
    if run.get("system", system) != system:
        raise SystemExit(f"{command}: {path} is a night of {run['system']}, not {system}")
    return outdir, run


#: What `./suite rejudge` last concluded of a night (runner/accept.py), in its folder beside run.json:
#: its exit and meaning, when, and the tables rejudged-paths.csv and rejudged-siblings.csv.
REJUDGED = "rejudged.json"


def as_last_judged(outdir: Path, run: dict) -> dict:
    """The night's run.json as last judged: where `./suite rejudge` judged it
    again since, that exit, meaning and reasons for not judging, the night's
    own kept under 'as_ran' and the time under 'rejudged'; else (and for a
    partition's night, which rejudge does not judge) the night's own."""
    path = outdir / REJUDGED
    if run.get("nodes") or not path.exists():
        return run
    try:
        again = read_json(path)
    except DamagedFile as err:
        print(f"warning: {err}: the night's own verdict is shown", file=sys.stderr)
        return run
    ran = {key: run.get(key) for key in ("exit", "meaning", "unjudged_reasons")}
    now = {key: again.get(key) for key in ran}
    return {**run, **now, "rejudged": again["when"], "as_ran": ran}


def verdict_words(run: dict) -> str:
    """'exit 2 (something moved)', or 'no verdict recorded' for a night killed before its verdict."""
    return f"exit {run['exit']} ({run.get('meaning', '')})" if run.get("exit") is not None else "no verdict recorded"


def finished_runs(system: str, drills: bool = False, kind: str | None = None, partitions: bool = False) -> list[dict]:
    """Every nightly run of the system that finished (night_complete: not one killed or stopped, nor one
    whose run.json is damaged), oldest first; a drill
    (a fault planted on purpose, `nightly --drill`) only if asked for: it is
    no night of the node's history; of one kind of node where `kind` says;
    a partition's night (several nodes in one window) only if asked for."""
    found = []
    for path in sorted((NIGHTLY_DIR / system).glob("*/run.json")):
        run = read_run(path)
        if run is None or (run.get("nodes") and not partitions):
            continue
        if night_complete(run) and (drills or not run.get("drill")):
            found.append(run)
    if kind is not None:
        found = [run for run in found if kind_of_run(system, run) == kind]
    return sorted(found, key=lambda r: r["start"])


def nights_outside(system: str, accepted: dict, leave_out: tuple[str, ...] = ()) -> list[dict]:
    """The nights of the accepted runs' kind that finished outside them and
    `leave_out` (no drill, no partition's night), oldest first: the nights the
    judge's test bench replays and a kind's power draws on beside its
    accepted runs."""
    kept = {run["stamp"] for run in accepted["runs"]} | set(leave_out)
    return [run for run in finished_runs(system, kind=accepted["kind"]) if run["stamp"] not in kept]


def save_run(outdir: Path, run: dict) -> None:
    """run.json as it is now, replaced whole (a kill or a full disk leaves the last one whole); once the
    night (or a short tier's run) is done, its verdict as JUnit XML beside it (verdict.xml, reports/junit.py)."""
    write_json(outdir / "run.json", run)
    if run.get("state") == NightState.DONE.value:
        write_verdict_xml(outdir, run)
