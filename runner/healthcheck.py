"""The health tier: the node's facts held to the accepted node, in seconds, where the scheduler gives a check
room: Slurm's HealthCheckProgram (directly or from NHC), a prolog or an epilog, a node's boot.

    ./suite health --system NAME --partition NAME [--act] [--limit-s 25] [--accepted FILE]

- **What it judges:** systems/health.py's facts (GPU count and model, PCIe generation and width as trained
  under a copy, NVLinks up, ECC and retired or remapped pages, clock events, persistence, the driver) against
  the system's data or the accepted node, each failure a FAIL line with its code (GMP-3xx).
- **Not while a job holds the node:** where Slurm runs a job on it, it judges nothing and says CONTENDED.
- **Within its limit:** the facts are read in a process of their own, stopped at `--limit-s` (25 s by
  default, under NHC's 30 s watchdog and Slurm's 60 s); a tier stopped by its limit judged nothing (exit 3).
- **One line for a drain reason** ends its output: `gpu-mempaths GMP-320 health: gpu0 ecc_uncorrected: ...`.
- **--act:** drains the node with that reason (Slurm), resumes it once it passes, only where the suite drained
  it for its health, never a node someone else drained, within the system's cap (runner/act.py).

Exit 0 healthy (or CONTENDED: not judged while a job runs), 1 a fact failed, 3 not judged (past its limit,
the facts unreadable, acting failed), as the nightly's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from experiments.roots import PERFLOGS
from runner.act import CannotAct, Night, Slurm, act_on
from systems import data
from systems.finding_codes import PREFIX, split_code

#: The whole command's limit by default (squeue, the facts and acting): NHC's watchdog is 30 s, Slurm's
#: HealthCheckProgram 60 s.
LIMIT_S = 25.0
#: squeue's part of it.
SQUEUE_S = 5.0
#: What systems/health.py's summary says where it had no accepted node to hold the facts to.
NO_BASELINE = "nothing to judge the node's facts against"
TIER = "health"


def node_name() -> str:
    """The node as the scheduler names it: slurmd says it to the programs it runs (several slurmd may share a
    host); else this host's short name."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def jobs_on(node: str) -> list[str]:
    """The jobs Slurm runs on `node` now (none where there is no Slurm to ask), but the one whose epilog or
    prolog this is (SLURM_JOB_ID; squeue's %A is each array task's own id); a Slurm that does not answer is
    CannotAct: a node judged while a job may hold it could be drained for the job's traffic."""
    if shutil.which("squeue") is None:
        return []
    command = ["squeue", "-h", "-w", node, "-t", "RUNNING,COMPLETING", "-o", "%A"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=SQUEUE_S)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise CannotAct(f"squeue did not answer whether a job holds {node}: {err}") from None
    if done.returncode != 0:
        raise CannotAct(f"squeue did not say whether a job holds {node}: {done.stderr.strip()}")
    own = os.environ.get("SLURM_JOB_ID")
    return [job for job in done.stdout.split() if job != own]


def read_facts(args: argparse.Namespace, limit_s: float) -> tuple[int, list[str]]:
    """systems/health.py's exit status and lines, in a process of its own stopped at `limit_s`."""
    command = [sys.executable, "-m", "systems.health", "--system", args.system, "--partition", args.partition]
    command += ["--systems-dir", str(args.systems_dir)]
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
    return done.returncode, lines


def reason_line(failures: list[str]) -> str:
    """The drain reason of failed facts: the first's code, then what failed, on one line."""
    code, text = split_code(failures[0].removeprefix("FAIL "))
    more = f" (+{len(failures) - 1} more)" if len(failures) > 1 else ""
    return f"{code} {text}{more}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="./suite health", description=__doc__.splitlines()[0])
    parser.add_argument("--system", required=True)
    parser.add_argument("--partition", required=True)
    parser.add_argument("--systems-dir", type=Path, default=data.SYSTEMS_DIR)
    parser.add_argument("--accepted", type=Path, help="accepted.json of a detected system (its node facts)")
    parser.add_argument("--act", action="store_true", help="drain the node on a failure, resume it once it passes")
    parser.add_argument("--limit-s", type=float, default=LIMIT_S, help=f"the whole command's limit ({LIMIT_S:g} s)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as err:
        return 3 if err.code else 0
    try:
        return judged(args, time.monotonic() + args.limit_s)
    except Exception as err:  # the suite's failure, never the node's: not judged, and nothing drained
        why = err if isinstance(err, CannotAct) else f"{type(err).__name__}: {err}"
        print(f"{PREFIX} {TIER}: not judged: {why}")
        return 3


def judged(args: argparse.Namespace, deadline: float) -> int:
    """The tier's run within `deadline` (time.monotonic()): exit 0, 1 or 3 as main says."""
    node = node_name()
    jobs = jobs_on(node)
    if jobs:
        print(f"{PREFIX} {TIER}: CONTENDED: job(s) {', '.join(jobs)} on {node}: not judged while a job holds it")
        return 0
    left = deadline - time.monotonic()
    try:
        status, lines = read_facts(args, left)
    except subprocess.TimeoutExpired:
        print(f"{PREFIX} {TIER}: not judged: the facts took longer than the {args.limit_s:g} s left of its limit")
        return 3
    for line in lines:
        print(line)
    failures = [line for line in lines if line.startswith("FAIL ")]
    against = not any(NO_BASELINE in line for line in lines)
    reason = reason_line(failures) if failures else ""
    code, text = split_code(reason)
    print(f"{PREFIX} {code} {TIER}: {text}" if failures else f"{PREFIX} {TIER}: ok ({len(lines)} lines of facts)")
    if not against:  # the faults were judged, not the node against its kind: nothing to resume, nor to drain by
        print(f"{PREFIX} {TIER}: no accepted node to hold the facts to (./suite accept): nothing acted on")
        return 1 if failures else 3
    if args.act:
        night = Night(TIER, True, [(node, reason)] if failures else [], [] if failures else [node])
        now = dt.datetime.now(dt.UTC).timestamp()
        wait = max(0.0, deadline - time.monotonic())
        act_on(night, args.system, Slurm(), False, f"{TIER} of {node}", now, args.systems_dir, wait)
    return 1 if status or failures else 0


if __name__ == "__main__":
    sys.exit(main())
