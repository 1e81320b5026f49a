"""The short tiers (systems/tiers/catalogue.yaml): the node's facts held to the accepted node, then a few
cases measured again and judged against the accepted runs, in seconds, where the scheduler gives a check
room: Slurm's HealthCheckProgram (directly or from NHC), a prolog, an epilog, a node's boot.

    ./suite health --system NAME --partition NAME [--tier health|epilog] [--act] [--facts-only] [--limit-s S]

- **The facts:** systems/health.py's (GPU count and model, PCIe generation and width as trained under a
  copy, NVLinks up, ECC and retired or remapped pages, clock events, persistence, the driver) against the
  system's data or the accepted node, each failure a FAIL line with its code (GMP-3xx). A node whose facts
  fail is not measured.
- **The measurements:** the tier's cases (health: the host link each way by copy engine, each peer link,
  latency) from the latest night's kept build, judged by the nightly's own verdict against the accepted
  runs of the node's kind, a moved path measured once more where the limit leaves time
  (runner/tier_checks.py). `--facts-only` leaves them out.
- **Not while a job holds the node:** where Slurm runs a job on it, or another of the suite's commands holds
  the node, it judges nothing and says CONTENDED.
- **Within its limit:** one deadline (the tier's, 25 s for health: under NHC's 30 s watchdog and Slurm's
  60 s) holds asking squeue, reading the facts, measuring and acting; a tier stopped by it judged nothing.
- **Its run is kept** in results/health/SYSTEM/NODE/STAMP (run.json with its `tier`, verdict.xml).
- **One line for a drain reason** ends its output: `gpu-mempaths GMP-320 health: gpu0 ecc_uncorrected: ...`.
- **--act:** drains the node with that reason (Slurm), resumes it once it passes, only where the suite drained
  it for that tier, never a node someone else drained, within the system's cap (runner/act.py).

Exit 0 healthy (or CONTENDED: a job holds the node, or another process explains every move), 1 a fact or a
check failed, 2 a path moved, 3 not judged (past its limit, the facts unreadable, no night's build to measure
with). An act not done (a breaker's record that cannot be written, a Slurm that refuses, a signal while
acting) is said beside the verdict, which stands.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from experiments.roots import PERFLOGS, RESULTS
from judge.status import AS_ACCEPTED, MEANING, MOVED
from reports.runs import NightState, now, save_run
from runner import lock
from runner.act import ACT_FAILURES, CannotAct, Night, Slurm, act_on, reason_of, within
from systems import data
from systems.finding_codes import PREFIX, code_of, split_code
from systems.tiers import Tier, tier_named

#: Where the short tiers keep their runs: results/health/SYSTEM/NODE/STAMP.
HEALTH_DIR = RESULTS / "health"
#: A node's runs kept: a day of checks every five minutes (HealthCheckInterval=300).
KEPT_RUNS = 288
#: squeue's part of it.
SQUEUE_S = 5.0
#: What systems/health.py's summary says where it had no accepted node to hold the facts to.
NO_BASELINE = "nothing to judge the node's facts against"
#: systems/detect.py's words where NVML's Python module is missing: an installation the suite made.
NO_NVML_MODULE = "nvidia-ml-py is not installed"
#: run.json's meaning of a tier whose every move another process explains (exit 0).
CONTENDED_MEANING = "contended: another process on its GPUs or host explains what moved"
#: The exit status of a tier once judged and saved: a signal after it (while acting) does not unsay it.
_judged_status: int | None = None
TIER = "health"


def node_name() -> str:
    """The node as the scheduler names it: slurmd says it to the programs it runs (several slurmd may share a
    host); else this host's short name."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def jobs_on(node: str, timeout_s: float = SQUEUE_S) -> list[str]:
    """The jobs Slurm runs on `node` now (none where there is no Slurm to ask), but the one whose epilog or
    prolog this is (SLURM_JOB_ID; squeue's %A is each array task's own id); a Slurm that does not answer is
    CannotAct: a node judged while a job may hold it could be drained for the job's traffic."""
    if shutil.which("squeue") is None:
        return []
    command = ["squeue", "-h", "-w", node, "-t", "RUNNING,COMPLETING", "-o", "%A"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=max(0.1, min(SQUEUE_S, timeout_s)))
    except (OSError, subprocess.TimeoutExpired) as err:
        raise CannotAct(f"squeue did not answer whether a job holds {node}: {err}") from None
    if done.returncode != 0:
        raise CannotAct(f"squeue did not say whether a job holds {node}: {done.stderr.strip()}")
    own = os.environ.get("SLURM_JOB_ID")
    return [job for job in done.stdout.split() if job != own]


def read_facts(args: argparse.Namespace, limit_s: float, outdir: Path) -> tuple[int, list[str]]:
    """systems/health.py's exit status and lines, in a process of its own stopped at `limit_s`; the node's
    facts kept in `outdir` (what its kind is, what its host is: the measurements are judged by them)."""
    command = [sys.executable, "-m", "systems.health", "--system", args.system, "--partition", args.partition]
    command += ["--systems-dir", str(args.systems_dir), "--facts-dir", str(outdir)]
    # As the nightly's health check: a system described at run time is held to its accepted node's facts.
    if args.accepted and not args.accepted.is_file():
        raise CannotAct(f"--accepted {args.accepted}: no such file")
    accepted = args.accepted or PERFLOGS / args.system / "accepted.json"
    if accepted.exists():
        command += ["--accepted", str(accepted)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=limit_s)
    lines = done.stdout.splitlines()
    # Its summary is its last word: without it (a traceback, a kill) the facts were not read, whatever its exit.
    if done.returncode not in (0, 1) or not any(line.startswith("Health: ") for line in lines):
        tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-1:])
        raise CannotAct(f"the node's facts could not be read (exit {done.returncode}): {tail}")
    if any(NO_NVML_MODULE in line for line in lines):  # the suite's environment lacks it, not the node its GPUs
        raise CannotAct(f"{NO_NVML_MODULE} in the suite's Python ({sys.executable}): the facts cannot be read")
    return done.returncode, lines


def counted_errors() -> set[str]:
    """The codes of the facts that fail any node, accepted or not: errors its GPUs counted."""
    return {
        code_of("health", key).code for key in ("ecc_uncorrected", "remap_pending", "remap_failure", "retired_pending")
    }


def reason_line(failures: list[str]) -> str:
    """The drain reason of failed facts: the first's code, then what failed, on one line."""
    code, text = split_code(failures[0].removeprefix("FAIL "))
    more = f" (+{len(failures) - 1} more)" if len(failures) > 1 else ""
    return f"{code} {text}{more}"


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    parser = argparse.ArgumentParser(prog="./suite health", description=__doc__.splitlines()[0])
    parser.add_argument("--system", required=True)
    parser.add_argument("--partition", required=True)
    parser.add_argument("--tier", default=TIER, help=f"the tier to run: health or epilog ({TIER} by default)")
    parser.add_argument("--systems-dir", type=Path, default=data.SYSTEMS_DIR)
    parser.add_argument("--accepted", type=Path, help="accepted.json of a detected system (its node facts)")
    parser.add_argument("--act", action="store_true", help="drain the node on a failure, resume it once it passes")
    parser.add_argument("--facts-only", action="store_true", help="the node's facts alone: no measurement")
    parser.add_argument("--alpha", type=float, default=0.05, help="family-wise significance level of the verdict")
    parser.add_argument("--limit-s", type=float, help="the whole command's limit (the tier's, 25 s for health)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as err:
        return 3 if err.code else 0
    # A watchdog's SIGTERM (NHC's, slurmd's) stops the tier as Ctrl-C does: its ReFrame and jobs stopped too.
    signal.signal(signal.SIGTERM, _interrupted)
    try:  # the catalogue read here too: a damaged one is the suite's failure, never the node's
        tier = tier_named(args.tier)
        if not tier.cases or tier.limit_s is None:
            raise CannotAct(f"--tier {args.tier}: not a short tier (health or epilog)")
        args.limit_s = args.limit_s if args.limit_s is not None else tier.limit_s
        return judged(args, tier, started + args.limit_s)
    except KeyboardInterrupt:
        if _judged_status is not None:  # judged and saved; stopped while acting: the verdict stands
            print(f"{PREFIX} {args.tier}: stopped by a signal while acting: not all done", file=sys.stderr)
            return _judged_status
        return not_judged(args.tier, "stopped by a signal before it judged")
    except Exception as err:  # the suite's failure, never the node's: not judged, and nothing drained
        return not_judged(args.tier, err if isinstance(err, CannotAct) else f"{type(err).__name__}: {err}")


def _interrupted(signum, frame):
    raise KeyboardInterrupt(signal.Signals(signum).name)


def not_judged(tier: str, why) -> int:
    """The tier's last line where the suite could not judge the node (exit 3): the suite's error, never the
    node's; nothing drained, nothing resumed."""
    print(f"{PREFIX} {code_of('night', 'suite-error').code} {tier}: not judged: {why}")
    return 3


def judged(args: argparse.Namespace, tier: Tier, deadline: float) -> int:
    """The tier's run within `deadline` (time.monotonic()): exit 0, 1, 2 or 3 as main says."""
    node = node_name()
    jobs = jobs_on(node, deadline - time.monotonic())
    if jobs:
        print(f"{PREFIX} {tier.name}: CONTENDED: job(s) {', '.join(jobs)} on {node}: not judged while a job holds it")
        return 0
    try:
        # Held while it reads the facts, measures and acts, named brief: a nightly that finds it waits for it
        # rather than end not judged; it never waits itself, past its own limit.
        left = max(0.0, deadline - time.monotonic())
        with lock.held(lock.brief(lock.command_line(), left), brief_wait_s=0):
            return judged_holding(args, tier, node, deadline)
    except lock.Busy:
        print(f"{PREFIX} {tier.name}: CONTENDED: {lock.holder_of(lock.lock_path())}: not judged while it runs")
        return 0


def judged_holding(args: argparse.Namespace, tier: Tier, node: str, deadline: float) -> int:
    """judged's work with the node's lock held."""
    stamp = now()
    outdir = HEALTH_DIR / args.system / node / stamp.replace(":", "")
    outdir.mkdir(parents=True, exist_ok=True)
    prune(outdir.parent)
    try:
        status, lines = read_facts(args, deadline - time.monotonic(), outdir)
    except subprocess.TimeoutExpired:
        return not_judged(tier.name, f"the facts took longer than the {args.limit_s:g} s of its limit")
    for line in lines:
        print(line)
    failures = [line for line in lines if line.startswith("FAIL ")]
    if NO_BASELINE in " ".join(lines):
        # Without an accepted node only the errors its GPUs counted judge it (an uncorrected ECC error, a
        # remap pending): the node's, drained with --act like any other. Anything else (NVML not read, a
        # clock reason) may be the suite's reading: with no fault counted, no pass either.
        failures = [line for line in failures if split_code(line.removeprefix("FAIL "))[0] in counted_errors()]
        if not failures:
            print(
                f"{PREFIX} {tier.name}: no errors counted; no accepted node to hold the facts to (./suite accept): "
                "not judged"
            )
            return 3
    run = {"system": args.system, "tier": tier.name, "node": node, "stamp": stamp, "start": stamp}
    measuring = not (failures or status or args.facts_only)  # a node whose facts fail is not measured
    if not measuring:
        reasons = [reason_line(failures)] if failures else []
        result = 1 if status or failures else 0
    else:
        try:
            result, reasons = measured(args, tier, run, outdir, deadline)
        except CannotAct:
            save_tier_run(outdir, run, 3, [])  # its run.json says not judged, never 'running'
            raise
    # Every move explained by another process on its GPUs or host: CONTENDED, healthy to the scheduler's hooks
    # (exit 0, as with a job on the node: NHC and an epilog drain on anything else), never drained, never
    # resumed either (a node drained before is not shown healthy by a night it shared).
    contended = result == MOVED and not reasons and bool(run.get("not_drained"))
    exit_status = AS_ACCEPTED if contended else result
    run["facts"] = {"lines": lines, "failures": [line.removeprefix("FAIL ") for line in failures]}
    save_tier_run(outdir, run, exit_status, reasons, CONTENDED_MEANING if contended else None)
    last = said(tier, run, exit_status, reasons, len(lines), measured=measuring)
    global _judged_status
    _judged_status = exit_status
    if args.act and result in (0, 1, 2):
        if time.monotonic() > deadline:  # the hook may have given up on it: the verdict stands, nothing is acted on
            print(f"{PREFIX} {tier.name}: judged past its {args.limit_s:g} s limit: nothing acted on", file=sys.stderr)
        else:
            act_within(args, tier, node, result, reasons, deadline)
    print(last)  # its last line, after what acting printed: the reason a hook or a person reads
    return exit_status


def act_within(args, tier: Tier, node: str, result: int, reasons: list[str], deadline: float) -> None:
    """--act on the tier's verdict (drain, or resume a node the suite drained) within the time left. What it
    could not do is said and changes no verdict, as after a nightly: the node was judged, and a breaker
    that held its drain back has said so for a person to read (act_on)."""
    night = Night(tier.name, True, [(node, " | ".join(reasons))] if reasons else [], [] if result else [node])
    now_s = dt.datetime.now(dt.UTC).timestamp()
    # As act.after_night: what fails here is the suite's, not the node's; each Slurm command within the limit.
    try:
        with within(deadline):
            wait_s = max(0.0, deadline - time.monotonic())
            act_on(night, args.system, Slurm(), False, f"{tier.name} of {node}", now_s, args.systems_dir, wait_s)
    except ACT_FAILURES as err:
        print(f"{PREFIX} {tier.name}: SUITE ERROR: act: not done: {err}", file=sys.stderr)


def measured(args, tier: Tier, run: dict, outdir: Path, deadline: float) -> tuple[int, list[str]]:
    """The tier's measurements (runner/tier_checks.py), `run` (run.json's) updated: (status, drain reasons)."""
    from runner import tier_checks  # the verdict's code, imported where it measures: the facts alone stay fast

    done = tier_checks.measure(run, tier, outdir, deadline, args.alpha)
    for line in done.lines:
        print(line)
    return done.status, done.reasons


def prune(folder: Path, keep: int = KEPT_RUNS) -> None:
    """A node's runs but the latest `keep` removed (`folder`: results/health/SYSTEM/NODE)."""
    runs = sorted(p for p in folder.glob("*") if p.is_dir())
    for old in runs[:-keep] if keep else runs:
        shutil.rmtree(old, ignore_errors=True)


def save_tier_run(outdir: Path, run: dict, status: int, reasons: list[str], meaning: str | None = None) -> None:
    """The tier's run.json (and verdict.xml) with its exit status and drain reasons, the measured run's
    verdict kept where there is one."""
    run.setdefault("end", now())
    run.update(state=NightState.DONE.value, exit=status, meaning=meaning or MEANING[status], drain=reasons)
    save_run(outdir, run)


def said(tier: Tier, run: dict, status: int, reasons: list[str], facts: int, measured: bool) -> str:
    """The tier's last line, fit for a drain reason: the worst finding's code, the tier, what it found."""
    if reasons:
        return reason_of(" | ".join(reasons), tier.name)
    kept = run.get("not_drained") or []
    if kept:  # moved, but another process on its GPUs or host explains it: said as such, never drained
        text = split_code(kept[0])[1] + (f" (+{len(kept) - 1} more)" if len(kept) > 1 else "")
        return f"{PREFIX} {code_of('node', 'contended').code} {tier.name}: CONTENDED, not drained: {text}"
    if status == 0:
        return f"{PREFIX} {tier.name}: ok ({facts} lines of facts" + (", its paths as accepted)" if measured else ")")
    codes = run.get("unjudged_codes") or []
    why = ", ".join(run.get("unjudged_reasons") or []) or MEANING[status]
    return f"{PREFIX} {codes[0] + ' ' if codes else ''}{tier.name}: {MEANING[status]}: {why}"


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as err:  # even an import's failure is the suite's, never a failed node's exit 1
        sys.exit(not_judged(TIER, f"{type(err).__name__}: {err}"))
