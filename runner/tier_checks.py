"""A short tier's measurements (systems/tiers/catalogue.yaml: health, epilog): the tier's cases measured
again from the latest night's kept build, judged as a night is, against the node kind's accepted runs.

- **The same cases, the same references.** The tier runs ReFrame on the night's cases that the tier names
  (`path_matrix %paths=host-ce`, ...), restored from that night's build (`--restore-session`, as the
  nightly's rerun is), measured as nights are: so the accepted runs' samples are the tier's reference, and
  the verdict is the nightly's own (runner/nightly.py judged_with_rerun, with_contention, nightly_status).
- **Its own folder.** Its perflog, run report, stage and run.json (`tier` named) go to
  results/health/SYSTEM/NODE/STAMP, never into the nights' perflogs: a night's history is nights alone.
- **Here, now.** Its cases run on this node (the local scheduler: a health check submits no job).
- **Confirmed where there is time.** A path that moved is measured once more while the limit leaves the
  first measurement's time again, as a night's rerun confirms it; without that time it stands as measured.
- **Within its deadline.** ReFrame is stopped at the deadline less the judging's share; a tier stopped
  there judged nothing.

`measure` raises CannotAct where the suite cannot measure (no night's build kept, no case of the tier in
it, ReFrame past its time): not judged, never the node's failure.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from experiments.files import DamagedFile, read_json
from judge import siblings, verdict
from judge.select import windows_of
from reports.load import load
from reports.runs import NIGHTLY_DIR, PERFLOGS, NightState, kind_of_run, now, read_baselines, save_run
from rfmconfig import ON_NODE_VARIABLE
from runner import contention
from runner.act import CannotAct
from runner.lock import held_fds
from runner.nightly import (
    as_nights,
    baseline_of_node,
    gather,
    has_baselines,
    hash_selection,
    host_against_accepted,
    judged_with_rerun,
    nightly_status,
    no_outcomes,
    node_facts_judged,
    other_host,
    outcomes,
    path_line,
    rerun_selection,
    unjudged_reasons,
    with_contention,
    write_drain,
    write_verdict,
)
from runner.rfm import reframe_command
from systems.tiers import Tier

#: The deadline's share kept for judging what was measured (loading the accepted runs, the verdict).
JUDGE_S = 6.0
#: How long ReFrame is given to cancel its jobs once its time is up, before it is killed.
STOP_S = 2.0


@dataclass
class Measured:
    """A tier's measurements judged: its exit status as the nightly's (0, 1, 2, 3), the lines it says, the
    drain reasons (each with its code); its run.json is the `run` measure was given, updated."""

    status: int
    lines: list[str]
    reasons: list[str]


def kept_build(system: str, tier: Tier, kind: str | None) -> tuple[Path, list[str]]:
    """The latest night of `system` on a node of `kind` whose build is kept (its stage: the latest few
    nights') and whose cases include the tier's, whatever node ran it (a checkout the nodes share), with
    ReFrame's options that select those cases; CannotAct naming what is missing. Another kind's night would
    measure its cases (a pair's peer links on one GPU) and read their failure as this node's."""
    kept = [r.parent for r in sorted((NIGHTLY_DIR / system).glob("*/run-report.json"), reverse=True)]
    kept = [night for night in kept if (night / "stage").is_dir() and _kind_of_night(system, night) == kind]
    if not kept:
        raise CannotAct(
            f"no night's build of {system} on a node of this kind ({kind or 'unknown'}) is kept to measure with "
            f"(the latest nights keep theirs in {NIGHTLY_DIR / system}/STAMP/stage): run ./suite nightly on this "
            "system first"
        )
    for night in kept:
        try:
            selection = tier_selection(read_json(night / "run-report.json"), tier)
        except DamagedFile:  # another kept night may serve
            continue
        if selection:
            return night, selection
    raise CannotAct(
        f"no kept night of {system} ({', '.join(n.name for n in kept)}) measured the {tier.name} tier's cases "
        f"({', '.join(tier.cases)}): run ./suite nightly with them"
    )


def _kind_of_night(system: str, night: Path) -> str | None:
    """The kind of node a kept night ran on (reports/runs.py kind_of_run), None where it is unknown or its
    run.json unreadable."""
    try:
        run = read_json(night / "run.json")
        return kind_of_run(system, run) if isinstance(run, dict) else None
    except (DamagedFile, OSError, KeyError):
        return None


def tier_selection(report: dict, tier: Tier) -> list[str]:
    """ReFrame's options that select, by hash, the cases of the night's report that passed and that `tier`
    measures (a case skipped on this kind of node, or failed, is not measured again)."""
    keys = set()
    for run in report.get("runs", [])[-1:]:
        for case in run["testcases"]:
            name = case["display_name"]
            if case.get("result") == "pass" and tier.measures(name):
                keys.add((name.split()[0], case.get("case", "")))
    return hash_selection(report, keys, ("case",))


def measure(run: dict, tier: Tier, outdir: Path, deadline: float, alpha: float) -> Measured:
    """The tier's cases measured and judged within `deadline` (time.monotonic()); its run (`run`: its system,
    tier, node and stamp so far, run.json's) in `outdir`, where the facts' node file already is
    (systems/health.py --facts-dir)."""
    system = run["system"]
    accepted, kind = baseline_of_node(system, outdir)
    night, selection = kept_build(system, tier, kind)
    report = night / "run-report.json"
    run.update(kind=kind, build_of=night.name, state=NightState.RUNNING.value, phase="checks")
    if accepted:
        run["accepted_runs"] = [r["stamp"] for r in accepted.get("runs", [])]
    save_run(outdir, run)
    first_s = _measured(system, report, selection, outdir, "run-report.json", deadline)
    run["end"] = now()
    contention.snapshot(outdir, "tonight")
    found = no_outcomes()
    gather(found, outcomes(outdir / "run-report.json"))
    if not found["passed"] and not found["failed"]:  # ReFrame ran none of them to an outcome: no evidence
        raise CannotAct(f"ReFrame measured none of the tier's cases (see {outdir / 'run-reframe.out'})")
    _in_time(deadline, JUDGE_S, "to judge what it measured")
    kept = _accepted_records(system) if accepted else None  # read once, for the rerun's judging too
    judged = _judged(kept, system, accepted, run, outdir, alpha) if accepted else None
    flagged = judged.flagged_paths() if judged else []
    if flagged and deadline - time.monotonic() > first_s + JUDGE_S:
        again = rerun_selection(judged, report)
        if again:
            run["rerun"] = {"start": now()}
            _measured(system, report, again, outdir, "rerun-report.json", deadline)
            run["rerun"]["end"] = now()
            contention.snapshot(outdir, "rerun")
            gather(found, outcomes(outdir / "rerun-report.json"))
            _in_time(deadline, JUDGE_S, "to judge its rerun")
            judged = _judged(kept, system, accepted, run, outdir, alpha)
    return _concluded(system, run, outdir, accepted, judged, found)


def _in_time(deadline: float, needed_s: float, what: str) -> None:
    """CannotAct where less than `needed_s` is left before `deadline` for `what`: the tier stops, not judged."""
    if deadline - time.monotonic() < needed_s:
        raise CannotAct(f"too little of its limit left {what} ({needed_s:g} s needed)")


def _measured(system: str, report: Path, selection: list[str], outdir: Path, name: str, deadline: float) -> float:
    """ReFrame run on this node on the selected cases of the night's `report`, restored from its build, its
    records in the tier's own perflog; its seconds. Past the deadline less JUDGE_S it is stopped: CannotAct."""
    folders = {"--report-file": name, "--stage": "stage", "--output": "output", "--perflogdir": "perflogs"}
    options = ["--restore-session", str(report), *(w for o, f in folders.items() for w in (o, str(outdir / f)))]
    command = reframe_command(system, *options, *as_nights(*selection), "-r")
    # This node's own jobs, whatever the partition's scheduler (rfmconfig/settings.py); no session kept in
    # ReFrame's results database every few minutes.
    env = {**os.environ, ON_NODE_VARIABLE: "1", "RFM_ENABLE_RESULTS_STORAGE": "0"}
    left = deadline - time.monotonic() - JUDGE_S
    if left <= 0:
        raise CannotAct("no time left to measure within the limit")
    started = time.monotonic()
    with open(outdir / f"{name.removesuffix('-report.json')}-reframe.out", "w") as out:
        # The node's lock handed to ReFrame too: a tier killed while it measures holds the node until the
        # ReFrame it started ends, as a night's does.
        child = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True, pass_fds=held_fds()
        )
        try:
            child.wait(left)
        except subprocess.TimeoutExpired:
            _stop(child)
            raise CannotAct(f"its measurements took longer than the {left:.0f} s the limit left them") from None
        except BaseException:  # stopped itself (SIGTERM from a watchdog, Ctrl-C): ReFrame and its jobs too
            _stop(child)
            raise
    return time.monotonic() - started


def _stop(child: subprocess.Popen) -> None:
    """ReFrame asked to stop (SIGTERM: it cancels its jobs), then its whole session killed after STOP_S."""
    os.killpg(child.pid, signal.SIGTERM)
    try:
        child.wait(STOP_S)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def _accepted_records(system: str) -> pd.DataFrame:
    """The records of the system's accepted runs, every kind's (a kind of few runs borrows the others'
    spreads), read from the nights' perflogs: what the tier is judged against."""
    baselines = [*read_baselines(system).values()]
    windows = windows_of([r for b in baselines for r in b.get("runs", [])])
    return load([PERFLOGS / system], warn=None, windows=windows).frame


def _judged(kept: pd.DataFrame, system: str, accepted: dict, run: dict, outdir: Path, alpha: float):
    """The tier's run (and its rerun) judged against the accepted runs and each GPU against its siblings, by
    the nightly's own functions, from the accepted runs' records (`kept`) and the tier's own perflog."""
    files = sorted((outdir / "perflogs").rglob("*.log"))
    measured = load(files, warn=None).frame if files else kept.iloc[0:0]
    # The accepted runs' figures of the tier's cases alone: the nightly's other cases were not measured
    # (not 'vanished').
    cases = pd.MultiIndex.from_frame(measured[["test", "case"]].drop_duplicates())
    kept = kept[pd.MultiIndex.from_frame(kept[["test", "case"]]).isin(cases)]
    frame = pd.concat([kept, measured], ignore_index=True)
    return with_contention(judged_with_rerun(frame, system, accepted, run, alpha), run, outdir)


def _concluded(system: str, run: dict, outdir: Path, accepted, judged, found: dict) -> Measured:
    """The exit status, lines, drain reasons and run.json of the tier's judged measurements."""
    result = judged.verdict if judged else None
    lags = judged.siblings if judged else pd.DataFrame(columns=siblings.COLUMNS)
    run.update(host_against_accepted(accepted, outdir))
    reasons = (["suite-error"] if found["suite"] else []) + unjudged_reasons(
        result, node_facts_judged(accepted, outdir), True, other_kinds=has_baselines(system)
    )
    reasons += other_host(run, result)
    status = nightly_status(found, result, reasons, False, (), siblings.lagging(lags))
    if found["suite"]:
        run["suite_errors"] = found["suite"]
    write_verdict(outdir, run, result, status, reasons, found, lags)
    write_drain(outdir, run, result, found, lags)  # run.json's drain and not_drained, drain.txt
    return Measured(status, _lines(result, found, run["not_drained"], reasons), run["drain"])


def _lines(result, found: dict, kept: list[str], reasons: list[str]) -> list[str]:
    """What the tier says of its measurements: each failed case, each path moved or unstable, each finding
    another process explains, each reason it could not judge."""
    lines = [f"FAILED {line}" for line in found["failed"]]
    lines += [f"SUITE ERROR {line}" for line in found["suite"]]
    if result is not None:
        flagged = result.paths[result.paths["verdict"].isin(verdict.FLAGGED)]
        lines += [f"{row.verdict.upper()} {path_line(row)}" for row in flagged.itertuples()]
        judged = int((result.paths["verdict"] != "unjudged").sum())
        lines.append(f"{judged} path(s) judged against the accepted runs, {len(flagged)} flagged")
    lines += [f"CONTENDED {line}" for line in kept]
    lines += [f"NOT JUDGED ({reason})" for reason in reasons]
    return lines
