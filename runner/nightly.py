"""The nightly: health, every check, the verdict, its reruns, the night's results.

    ./suite nightly [--system NAME] [--alpha A] [--allow-unjudged] [--no-report] [-- reframe options]

`nightly` runs the health checks (``-t health``), then every other check
that can run (ReFrame's ``nightly`` mode) with ReFrame's reference check
held to physical bounds only (``reference_bounds=physical``: a rate above
its link's limit, a time below its path's floor); judges every headline
figure and every path of the run against the accepted runs
(judge/verdict.py); reruns once the cases of any path it flags, and
reports a move only where the rerun confirms it; writes the verdict
(compare.csv per figure, paths.csv per path, run.json with the exit status
and the counts) and the HTML report under results/nightly/<system>/<stamp>/;
and exits with

    0  as accepted: every check passed, every headline figure was judged, no
       path moved (transients, which the rerun did not confirm, are listed);
    1  a check failed: the node is unhealthy, a program did not measure, or a
       measurement is impossible (beyond a physical bound, not a number);
    2  something moved: a path moved or became unstable, and its rerun agrees;
    3  not judged, with its reason: no accepted baseline ('no-baseline'), a
       figure the accepted runs have that tonight lacks ('vanished'), a node
       of a kind (its GPUs counted by model) the system has no baseline of,
       though it has of others ('other-kind'), a path that moved against
       accepted runs of another host (CPU, memory, firmware, hypervisor,
       kernel: 'other-host', not drained), a figure that
       could not be judged for another reason ('unjudged'), or an error of the
       suite itself. --allow-unjudged turns only 'no-baseline' into 0.

A night whose host differs from the accepted runs' says so first, whatever
its exit status (run.json's `host_differs`; systems/host.py).

The verdict is the only judge of a move: ReFrame's reference tolerances are
for runs by hand (./suite run), so one figure never gets two verdicts.

`accept` (runner/accept.py) makes runs the baseline.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from experiments import metrics
from experiments.files import DamagedFile, disk_problem, read_json, write_atomic
from experiments.gpu_use import process_line, process_place
from experiments.numbers import signed
from experiments.roots import REPO
from judge import changepoints, explain, siblings, verdict
from judge.select import RERUNS, accepted_masks, run_rows, runs_without_rows, windows_of
from judge.status import FAILED, MEANING, MOVED, UNJUDGED
from reports.load import Loaded, load
from reports.runs import (
    NIGHTLY_DIR,
    PERFLOGS,
    NightState,
    kind_of_run,
    node_facts_of,
    now,
    read_accepted,
    read_baselines,
    save_run,
    selected_system,
)
from runner import contention, histories, lock, preflight
from runner.plan import make_plan, plan_lines
from runner.rfm import reframe_command
from systems import data, host, toolkits
from systems.finding_codes import code_of, tagged
from systems.health import kind_of, same_kind

#: A rerun restores the night's build from its stage (--restore-session), which
#: ReFrame removes once every test that uses it has passed: a night whose
#: cases all passed (a drill's few checks) could not rerun. The stages are kept.
KEEP_THE_BUILD = ("--keep-stage-files",)

#: The nights whose ReFrame stage and output folders are kept, each in its night's folder (a failed case's
#: job script and output, a build to rerun from): the latest few; an older night's go when a night starts.
KEPT_STAGES = 3


#: A night still 'running' this long after it started was killed (its stage is no one's any more).
RUNNING_AT_MOST = dt.timedelta(days=1)


def still_running(night: Path) -> bool:
    """Whether the night in folder `night` may still be running: its run.json says so and it started less
    than RUNNING_AT_MOST ago."""
    try:
        run = read_json(night / "run.json")
        running_s = _seconds_since(run["start"])
    except (DamagedFile, OSError, KeyError, TypeError, ValueError):
        return False
    return run.get("state") == NightState.RUNNING and running_s < RUNNING_AT_MOST.total_seconds()


def own_folders(outdir: Path) -> tuple[str, ...]:
    """ReFrame's options that stage and write the night's cases in its own folder: no two nights (a
    manual run beside cron's, a partition's) share a stage, and one night's build is never another's."""
    return ("--stage", str(outdir / "stage"), "--output", str(outdir / "output"))


def prune_stages(nights: Path, keep: int = KEPT_STAGES) -> list[Path]:
    """Remove the stage and output folders of all but the latest `keep` nights under `nights` (stamps sort
    as times); the folders removed."""
    staged = sorted({p.parent for name in ("stage", "output") for p in nights.glob(f"*/{name}")})
    removed = []
    for night in staged[:-keep] if keep else staged:
        if still_running(night):  # another node's night in a checkout the nodes share
            continue
        for name in ("stage", "output"):
            if (night / name).exists():
                shutil.rmtree(night / name, ignore_errors=True)
                removed.append(night / name)
    return removed


def as_nights(*options: str) -> tuple[str, ...]:
    """ReFrame's options for measuring as nights are: the nightly mode's options
    spelled out (beside --mode, ReFrame 4.10 adds a -p among `options` to the
    mode's default '.*', so every environment's cases would run), physical
    bounds on every figure, then `options`."""
    from rfmconfig.settings import NIGHTLY_OPTIONS  # the settings build ReFrame's configuration: imported when used

    return (*NIGHTLY_OPTIONS, "-S", "reference_bounds=physical", *options)


def reframe(
    system: str | None, report: Path, *options: str, action: str = "-r", cwd: Path = REPO, env=None, who="nightly"
) -> int:
    """ReFrame run (`action`: -r, or --dry-run) with its report in `report`, the command printed first;
    its exit status. `cwd` and `env` where a partition's night needs its own (runner/partition.py).
    Stopped itself (a signal, Ctrl-C), it stops ReFrame first (stop_child), so that no job outlives it."""
    cmd = reframe_command(system, "--report-file", str(report), *options, action)
    print(f"{who}: " + " ".join(cmd[3:]), flush=True)
    child = subprocess.Popen(cmd, cwd=cwd, env=env, pass_fds=lock.held_fds())  # ReFrame holds the node too
    try:
        return child.wait()
    except BaseException:
        stop_child(child)
        raise


#: How long ReFrame is given to cancel its jobs and write its report once asked to stop: well inside the
#: 30 s a scheduler waits between its SIGTERM and its SIGKILL (Slurm's KillWait), so the night is saved.
STOP_GRACE_S = 10


def stop_child(child: subprocess.Popen) -> None:
    """Ask a child (ReFrame) to stop as a scheduler would (SIGTERM: ReFrame cancels its jobs), then kill it
    if it has not after STOP_GRACE_S."""
    if child.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        child.terminate()
    try:
        child.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


class Stopped(KeyboardInterrupt):
    """The night was asked to stop (SIGTERM from a scheduler or kill, SIGHUP, SIGINT from Ctrl-C): not an
    error of the suite's nor a finding about the node. An interruption, as Ctrl-C's is, so that no `except
    Exception` on the way takes it for a failure, and the command line answers one that escapes with 3."""

    def __init__(self, signal_name: str):
        super().__init__(signal_name)
        self.signal_name = signal_name


#: The signals that stop a night (a scheduler's or kill's SIGTERM, a closed terminal's SIGHUP, Ctrl-C).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


@contextlib.contextmanager
def stopped_by_signals():
    """SIGTERM, SIGHUP and SIGINT raised as Stopped while the block runs (the night's main thread), the
    previous handlers restored after it."""

    def stop(signum, frame):
        raise Stopped(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


#: The suite's own builds: their failure is the installation's, not the node's.
BUILDS = ("SuiteBuild", "GdrCopyBuild")
#: ReFrame's steps before a case's program runs on the node: one that fails there (a setting refused, a job
#: the scheduler would not take) measured nothing of the node.
BEFORE_THE_NODE = ("startup", "setup", "compile", "compile_wait", "run")
#: What a program that could not start says (the loader, the shell, the CUDA runtime finding a driver too
#: old for it or no code built for the GPU): the installation's fault, not the GPU's.
COULD_NOT_START = (
    "error while loading shared libraries",
    "command not found",
    "exit code: 126",
    "exit code: 127",
    "cudaErrorInsufficientDriver",
    "driver version is insufficient",
    "cudaErrorNoKernelImageForDevice",
    "no kernel image is available",
    "cudaErrorUnsupportedPtxVersion",
)


def suite_cause(case: dict) -> str | None:
    """Why a failed test case is the suite's own failure (its build failed, it was not run because of
    that, it failed before its program reached the node, or its program could not start), in words;
    None where it is evidence about the node (a program that ran on the GPU and failed there or measured
    the impossible, a health fact)."""
    name, why = case["display_name"], fail_reason(case)
    if name.split()[0] in BUILDS:
        return f"{name}: the suite's build failed: {why}"
    if case["result"] == "fail_deps":
        return f"{name}: not run, a test it depends on (the build) failed"
    if case.get("fail_phase") in BEFORE_THE_NODE:
        return f"{name} ({case['fail_phase']}): not run on the node: {why}"
    if any(words in why for words in COULD_NOT_START):
        return f"{name}: its program could not start: {why}"
    return None


def _classify(case: dict, found: dict) -> None:
    """A failed test case: the suite's own failure (suite_cause), an impossible measurement (out of the
    physical bounds the nightly holds references to), or a check that did not measure."""
    name = case["display_name"]
    cause = suite_cause(case)
    if cause:
        found["suite"].append(cause)
        return
    why = fail_reason(case)
    if case.get("fail_phase") == "performance":
        found["failed"].append(f"{name}: impossible measurement, beyond a physical bound: {why}")
    else:
        found["failed"].append(f"{name} ({case.get('fail_phase') or case['result']}): {why}")


def fail_reason(case: dict) -> str:
    """A failed case's reason from a ReFrame run report, on one line."""
    return " ".join(str(case.get("fail_reason") or case["result"]).split())


def gather(found: dict, more: dict) -> None:
    """`more` (outcomes) added to `found`, in place: whoever ends the night sees all it found."""
    for outcome, lines in more.items():
        found.setdefault(outcome, []).extend(lines)


def no_outcomes() -> dict:
    """The test cases of a night by outcome, none yet: passed, skipped, failed (evidence about the node)
    and suite (the suite's own failures: not the node's, never drained)."""
    return {"passed": [], "skipped": [], "failed": [], "suite": []}


def outcomes(report: Path) -> dict:
    """The test cases of a ReFrame run report by outcome (no_outcomes); a report that is missing or cut
    (ReFrame did not finish) is the suite's failure."""
    found = no_outcomes()
    if not report.exists():
        found["suite"].append(f"no run report ({report.name}): ReFrame did not finish")
        return found
    try:
        runs = read_json(report).get("runs", [])
    except DamagedFile as err:
        found["suite"].append(f"ReFrame's run report is unreadable: {err}")
        return found
    for run in runs[-1:]:  # the last try of each case
        for case in run["testcases"]:
            if case["result"] == "pass":
                found["passed"].append(case["display_name"])
            elif case["result"] == "skip":
                found["skipped"].append(case["display_name"])
            else:
                _classify(case, found)
    return found


def judge_night(system: str, run: dict, accepted: dict | None, alpha: float) -> tuple:
    """The run judged (the verdict against the accepted runs, None without a
    baseline, and each GPU against its siblings), the run's records (what its
    report is drawn from) and the records it was judged from (night_windows)."""
    loaded = load([PERFLOGS / system], warn=None, windows=night_windows(system, run, accepted))
    frame = loaded.frame
    tonight = run_rows(frame, system, [run])
    records = Loaded(frame[tonight], loaded.issues, loaded.files)
    judged = judge_window(frame, system, accepted, run, alpha)
    say_unbounded(run, verdict.attach_paths(verdict.run_values(frame, {"tonight": tonight}, physical=True)))
    if accepted is None:
        print(
            f"nightly: no accepted run of {system} on a node of this kind ({run.get('kind') or 'unknown'}): "
            f"nothing to judge against; accept runs with ./suite accept {run['stamp']} [more stamps] "
            "--write-references"
        )
        return judged, records, frame
    stamps = ", ".join(r["stamp"] for r in accepted["runs"])
    print(
        f"nightly: judged by path against the accepted runs of {accepted['kind']}: {stamps} (run medians, "
        "moderated robust spread, "
        f"Holm-corrected, alpha {alpha})"
    )
    return judged, records, frame


def night_windows(system: str, run: dict, accepted: dict | None) -> list[tuple[str, str]]:
    """The time windows a night is judged from: its own and its reruns', its kind's accepted runs' and the
    accepted runs of the system's other kinds (whose spreads a kind of few runs borrows: others_pool). Never
    the years of nights between them: those are kept as each night's levels (runner/histories.py)."""
    baselines = [b for b in read_baselines(system).values()] + ([accepted] if accepted else [])
    return windows_of([run, *(r for b in baselines for r in b.get("runs", []))])


def unlogged(report: Path, records: pd.DataFrame, perflogs: Path) -> list[str]:
    """The checks whose measurements (each passed case's performance values in ReFrame's run `report`) did
    not all reach the perflogs (`records`, tonight's rows): a disk that filled or a perflog that could not be
    written while ReFrame logged, which ReFrame only warns of. Each a suite error, named with the counts."""
    try:
        runs = read_json(report).get("runs", [])[-1:] if report.exists() else []
    except DamagedFile:
        return []  # outcomes() names it
    expected: dict[str, int] = {}
    for run in runs:
        for case in run["testcases"]:
            if case["result"] == "pass" and case.get("perfvalues"):
                test = case["display_name"].split()[0]
                expected[test] = expected.get(test, 0) + len(case["perfvalues"])
    logged = records["test"].value_counts() if not records.empty else pd.Series(dtype=int)
    return [
        f"{test}: {int(logged.get(test, 0))} of its {n} measurements reached {perflogs} (a full disk or a perflog "
        "that could not be written lost the rest): not judged; free the disk, then run the night again"
        for test, n in sorted(expected.items())
        if logged.get(test, 0) < n
    ]


def say_unbounded(run: dict, values: pd.DataFrame) -> None:
    """Name the paths no physical bound held tonight (run.json's
    `unbounded_paths`): an impossible value of theirs would pass for a
    measurement, on a first night before anything is accepted too."""
    paths = verdict.unbounded_paths(values)
    if paths:
        run["unbounded_paths"] = paths
        print(
            f"nightly: no physical bound is known for {len(paths)} path(s), which an impossible value would pass: "
            f"{', '.join(paths[:6])}{' ...' if len(paths) > 6 else ''} (the node's data lacks their limit: "
            "systems/cpus/memory.yaml for host memory)",
            flush=True,
        )


@dataclass
class Judgement:
    """A night judged two ways: against the accepted runs of its kind of node
    (the verdict; None without them), and each GPU against its siblings of
    the same run (judge/siblings.py; empty on a node of one GPU)."""

    verdict: verdict.Verdict | None
    siblings: pd.DataFrame

    def flagged_paths(self) -> list[str]:
        moved = self.verdict.flagged_paths() if self.verdict is not None else []
        return sorted(set(moved) | set(siblings.lagging(self.siblings)))

    def cases(self) -> pd.DataFrame:
        """The (test, case, environ) a rerun of the flagged paths runs."""
        parts = [siblings.cases_of_paths(self.siblings, siblings.lagging(self.siblings))]
        if self.verdict is not None:
            parts.append(verdict.cases_of_paths(self.verdict, self.verdict.flagged_paths()))
        return pd.concat(parts, ignore_index=True).drop_duplicates()


def accepted_values(frame: pd.DataFrame, system: str, accepted: dict | None) -> pd.DataFrame:
    """The accepted runs' per-run table (verdict.run_values, with the physical
    bounds their lines carry): what every night of the kind is judged
    against, the same each night (empty without a baseline)."""
    return verdict.run_values(frame, accepted_masks(frame, system, accepted) if accepted else {}, physical=True)


def gpu_models(kind: str) -> set[str]:
    """'2 x NVIDIA H200' -> {'NVIDIA H200'}: the GPU models a kind of node has (systems/health.py's kind_of)."""
    return {part.split(" x ", 1)[-1] for part in kind.split(", ") if part}


def others_pool(frame: pd.DataFrame, system: str, accepted: dict | None) -> verdict.Pool:
    """What the system's other kinds of node with the same GPUs measured
    (their accepted runs; verdict.Pool): the spreads a kind with few
    accepted runs of its own draws its priors on. The same GPUs only: one
    H100's host link latency spreads wider than an H200's, and a kind of ten
    runs held to the H200s' spread alarmed on a clean night."""
    if not accepted:
        return verdict.NO_POOL
    models = gpu_models(accepted.get("kind", ""))
    others = [
        b for kind, b in read_baselines(system).items() if kind != accepted.get("kind") and gpu_models(kind) == models
    ]
    masks = {f"{b['kind']}: {stamp}": mask for b in others for stamp, mask in accepted_masks(frame, system, b).items()}
    if not masks:
        return verdict.NO_POOL
    return verdict.pool_of(verdict.attach_paths(verdict.run_values(frame, masks)))


def judge_window(
    frame: pd.DataFrame,
    system: str,
    accepted: dict | None,
    window: dict,
    alpha: float,
    accepted_table: pd.DataFrame | None = None,
    pool: verdict.Pool | None = None,
    rules: verdict.Rules = verdict.ALL_RULES,
) -> Judgement:
    """The run in `window` judged both ways from one per-run table: against
    the accepted runs (where there is a baseline), and each GPU against its
    siblings, the accepted runs' deviations the node's usual ones.
    `accepted_table`: accepted_values of `accepted`, made once for several
    windows (a night's reruns, the bench's replayed nights); from `frame` by default, as `pool`
    (others_pool) is; `rules` the verdict's (runner/power.py measures each's worth)."""
    base = accepted_values(frame, system, accepted) if accepted_table is None else accepted_table
    pool = others_pool(frame, system, accepted) if pool is None else pool
    tonight = verdict.run_values(frame, {"tonight": run_rows(frame, system, [window])}, physical=True)
    parts = [part for part in (base, tonight) if not part.empty]
    table = verdict.attach_paths(pd.concat(parts, ignore_index=True) if parts else tonight)
    judged = verdict.judge_values(table, alpha, pool, rules) if accepted else None
    return Judgement(judged, siblings.as_accepted(siblings.judge(table), judged.paths if judged else None))


def rerun_selection(judged: Judgement, report: Path) -> list[str]:
    """ReFrame's options that select, by hash, the cases of every flagged path (none if nothing is flagged)."""
    wanted = judged.cases()
    if wanted.empty or not report.exists():
        return []
    keys = set(wanted.itertuples(index=False, name=None))
    try:
        return hash_selection(read_json(report), keys, ("case", "environ"))
    except DamagedFile:  # named by outcomes() as the suite's: nothing to rerun by
        return []


def hash_selection(report: dict, keys: set[tuple], fields: tuple[str, ...]) -> list[str]:
    """ReFrame's options that select, by hash, the cases of a run report whose
    (test, *fields) is among `keys`."""
    hashes = set()
    for run in report.get("runs", []):
        for case in run["testcases"]:
            key = (case["display_name"].split()[0], *(case.get(f, "") for f in fields))
            if key in keys and case.get("hashcode"):
                hashes.add(case["hashcode"])
    return [option for h in sorted(hashes) for option in ("-n", f"/{h}")]


@dataclass
class Night:
    """What the steps of one nightly share once its checks have run."""

    system: str
    run: dict  # run.json as it grows
    outdir: Path
    accepted: dict | None  # the baseline of the node's kind, if any
    options: list[str]  # ReFrame's, from the command line
    alpha: float
    found: dict  # the checks' outcomes: passed, failed, skipped
    frame: pd.DataFrame  # every record of the system, as last loaded (the reruns' included)
    pages: object = None  # the report's figures and pages, drawn while a rerun runs or the later measure waits

    def save(self) -> None:
        """run.json as it is now: a night killed later keeps what it has (its reruns' windows)."""
        save_run(self.outdir, self.run)

    def draw(self, pages) -> None:
        """The night's pages from `pages()` (draw_pages), unless they are drawn already."""
        if self.pages is None:
            self.pages = pages()


def enter(outdir: Path, run: dict, phase: str) -> None:
    """The night's step from now on, saved: a night killed during it says where (reports/runs.py's
    incomplete_why)."""
    run["phase"] = phase
    save_run(outdir, run)


def confirm_by_rerun(night: Night, result: Judgement, meanwhile=None) -> Judgement:
    """Rerun the cases of the flagged paths once and judge the rerun: the
    verdict and the siblings' with each flagged path confirmed, 'transient',
    or unconfirmed where the rerun could not measure it. A rerun case that
    fails is a failed check like any other (added to night.found).
    `meanwhile`, if given, is work done while the rerun runs (alongside)."""
    why = f"confirming {', '.join(result.flagged_paths())}"
    return rerun_flagged(night, "rerun", why, result, meanwhile)


def confirm_later(
    night: Night, result: Judgement, after_s: int, meanwhile=None, budget_s: int | None = None
) -> Judgement:
    """On a host shared with other tenants, another tenant's load can last
    through the rerun minutes after the run, and a rerun cannot tell it from a
    slow node: what the rerun confirmed is measured once more `after_s`
    seconds later, and stays moved only if that agrees too (the system's
    confirm_later_s; 0 leaves the rerun's verdict as it is). Only after a
    rerun, and not on a night a check failed (it exits 1 whatever moved).
    `meanwhile`, if given, is work done while it waits (the night's pages);
    `budget_s`, the night's budget (the system's night_budget_s), shrinks the
    wait to fit it (sized_wait)."""
    if after_s <= 0 or "rerun" not in night.run or night.found["failed"] or not result.flagged_paths():
        return result
    wait = sized_wait(after_s, budget_s, _seconds_since(night.run["start"]), _window_s(night.run["rerun"]))
    sized = f" (not {after_s} s: the night's budget is {budget_s} s)" if wait < after_s else ""
    print(
        f"nightly: {', '.join(result.flagged_paths())}: confirmed by the rerun; {night.system} shares its host "
        f"with other tenants: measuring them again in {wait} s{sized}",
        flush=True,
    )
    night.run["later_wait_s"] = wait
    after_s = wait
    started = time.monotonic()
    if meanwhile is not None:
        meanwhile()
    time.sleep(max(0.0, after_s - (time.monotonic() - started)))
    return rerun_flagged(night, "later", "measuring again", result)


#: The least the later measure waits however little of the night's budget is
#: left: what it is for is a tenant's load that outlasts the rerun, and the
#: seconds-long disturbances seen on these hosts are over by then.
LEAST_WAIT_S = 60
#: What a night does after its later measure: judge it, write its index and history.
CLOSING_S = 45


def sized_wait(after_s: int, budget_s: int | None, elapsed_s: float, rerun_s: float) -> int:
    """The later measure's wait: `after_s`, or less where the night (`elapsed_s`
    so far) would otherwise pass `budget_s` with a later measure as long as
    its rerun (`rerun_s`) and its closing; a minute at least (or `after_s` if less)."""
    if not budget_s:
        return after_s
    room = budget_s - elapsed_s - rerun_s - CLOSING_S
    return int(max(min(after_s, room), min(after_s, LEAST_WAIT_S)))


def _seconds_since(stamp: str) -> float:
    return (dt.datetime.fromisoformat(now()) - dt.datetime.fromisoformat(stamp)).total_seconds()


def _window_s(window: dict) -> float:
    return (dt.datetime.fromisoformat(window["end"]) - dt.datetime.fromisoformat(window["start"])).total_seconds()


def rerun_flagged(night: Night, key: str, why: str, result: Judgement, meanwhile=None) -> Judgement:
    """Run the cases of the flagged paths again (their window in run[key],
    saved at once; ReFrame's report in KEY-report.json) and the verdict
    confirmed by every rerun so far; `why` opens the line that says so;
    `meanwhile`, work done alongside the rerun."""
    selection = rerun_selection(result, night.outdir / "run-report.json")
    if not selection:
        return result
    print(f"nightly: {why}: rerunning {len(selection) // 2} case(s)", flush=True)
    enter(night.outdir, night.run, "the rerun" if key == "rerun" else "the later measure")
    window = {"start": now()}
    try:
        with alongside(meanwhile):
            reframe(
                night.system,
                night.outdir / f"{key}-report.json",
                "--restore-session",
                str(night.outdir / "run-report.json"),
                *own_folders(night.outdir),
                *KEEP_THE_BUILD,
                *as_nights(*selection, *health_options(night.options)),  # measured as the night was
            )
            window["end"] = now()  # the rerun's, not the drawing's: the later measure's wait is sized by it
    except BaseException:
        # A night stopped during its rerun (a time limit's SIGINT) keeps the window: the records
        # it logged are the night's (a drill's stay out of every later baseline's history). One
        # stopped while the pages are joined after it keeps the rerun's own end.
        if "end" not in window:
            window.update(end=now(), cut="stopped during the rerun")
        raise
    finally:
        night.run[key] = window
        night.save()
    contention.snapshot(night.outdir, key)
    again = outcomes(night.outdir / f"{key}-report.json")
    for outcome in ("failed", "suite"):
        night.found.setdefault(outcome, []).extend(f"{key}: {line}" for line in again.get(outcome, []))
    night.frame = load(
        [PERFLOGS / night.system], warn=None, windows=night_windows(night.system, night.run, night.accepted)
    ).frame
    return judged_with_rerun(night.frame, night.system, night.accepted, night.run, night.alpha)


@contextlib.contextmanager
def alongside(work):
    """`work` (the night's pages: a minute of drawing on a busy night) done in
    a thread while the block runs (a rerun: ReFrame's process, which this one
    only waits on), joined at the block's end. The thread runs at the lowest
    CPU priority while the block runs, so the cases measured meanwhile lose at
    most what the scheduler leaves a nice-19 thread beside them, one core's
    idle time; then at the process's again, where the system lets it (root),
    so that the night does not wait on a starved thread. A block that raises
    (an interrupted rerun) leaves the drawing behind: the thread dies with
    the process."""
    if work is None:
        yield
        return
    lowered = threading.Event()

    def run() -> None:
        _set_niceness(threading.get_native_id(), 19)  # before the work starts, so none of it runs above
        lowered.set()
        work()

    thread = threading.Thread(target=run, name="night-pages", daemon=True)
    thread.start()
    lowered.wait()
    yield
    _set_niceness(thread.native_id, os.getpriority(os.PRIO_PROCESS, 0))
    thread.join()


def _set_niceness(thread_id: int, niceness: int) -> None:
    """A thread's niceness (Linux sets it by the thread's own id); nothing where the system does not allow it."""
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, thread_id, niceness)


def judged_with_rerun(
    frame: pd.DataFrame,
    system: str,
    accepted: dict | None,
    run: dict,
    alpha: float,
    rules: verdict.Rules = verdict.ALL_RULES,
) -> Judgement:
    """The run judged against the accepted runs (where there are any) and
    each GPU against its siblings, both confirmed by each of its reruns, by `rules`."""
    base, pool = accepted_values(frame, system, accepted), others_pool(frame, system, accepted)
    judged = judge_window(frame, system, accepted, run, alpha, base, pool, rules)
    for key in RERUNS:
        if key in run:
            again = judge_window(frame, system, accepted, run[key], alpha, base, pool, rules)
            confirmed = verdict.confirm(judged.verdict, again.verdict, by=key) if judged.verdict is not None else None
            judged = Judgement(confirmed, siblings.confirm(judged.siblings, again.siblings, by=key))
    return judged


def with_contention(judged: Judgement, run: dict, outdir: Path) -> Judgement:
    """The night's findings with who else used their GPUs (runner/contention.py):
    `contended_by` on each finding another process explains ('' elsewhere), and
    run.json's `contention`, every other process the watch saw."""
    contended, seen = contention.explain_night(judged, run, outdir)
    run["contention"] = {"processes": seen, "paths": contended}

    def by(paths: pd.Series) -> pd.Series:  # '' where nobody else used the path's GPUs (never NaN: words)
        return paths.map(lambda path: contended.get(path, "")).astype(object)

    lags = judged.siblings.assign(contended_by=by(judged.siblings["path"]))
    result = judged.verdict
    if result is not None:
        paths = result.paths.assign(contended_by=by(result.paths["path"]))
        result = verdict.Verdict(result.figures, paths)
    return Judgement(result, lags)


def unjudged_reasons(
    result: verdict.Verdict | None, node_judged: bool, health_ran: bool, other_kinds: bool = False
) -> list[str]:
    """Why a night was not judged, each a key of UNJUDGED_REASONS; without a
    verdict, 'other-kind' where the system has baselines, though none of this
    node's kind, else 'no-baseline'."""
    if not health_ran:
        return []
    if result is None:
        return ["other-kind" if other_kinds else "no-baseline"]
    reasons = []
    figures = result.figures[result.figures["verdict"] == "unjudged"]
    if figures["reason"].str.startswith("vanished").any():
        reasons.append("vanished")
    if not node_judged:
        reasons.append("other-kind")
    other_program = verdict.by_another_program(figures)
    if other_program.any():
        reasons.append("other-program")
    if (~figures["reason"].str.startswith("vanished") & ~other_program).any():
        reasons.append("unjudged")
    return reasons


def _other_program_paths(result: verdict.Verdict | None) -> set[str]:
    """The paths with a figure another program measured than its accepted runs (not judged: 'other-program')."""
    if result is None:
        return set()
    figures = result.figures
    return set(figures.loc[verdict.by_another_program(figures), "path"])


def other_host(run: dict, result: verdict.Verdict | None, changes: list = ()) -> list[str]:
    """['other-host'] where tonight's host differs from the accepted runs'
    (run.json's `host_differs`) and a path moved against them, or a change
    held over the nights: the move may be the host's, not the node's; not
    judged, never drained. [] otherwise: a night that moved nothing on
    another host is as accepted, its host named all the same."""
    moved = result is not None and result.paths["verdict"].isin(verdict.FLAGGED).any()
    if run.get("host_differs") and (moved or any(change.worse for change in changes)):
        return ["other-host"]
    return []


def nightly_status(
    found: dict,
    result: verdict.Verdict | None,
    reasons: list[str],
    allow_unjudged: bool,
    changes: list = (),
    lagging: list[str] = (),
) -> int:
    """The exit status: a failed check, a moved path or a GPU behind its
    siblings (`lagging`, confirmed), a held change, or not judged. A path
    moved or a change held against the accepted runs of another host
    ('other-host' among the `reasons`) is not judged; a GPU behind its
    siblings of the same host still moved."""
    if found["failed"] or (result is not None and (result.figures["verdict"] == "broken").any()):
        return FAILED
    apart = "other-host" in reasons
    if not apart and result is not None and result.paths["verdict"].isin(verdict.FLAGGED).any():
        return MOVED
    if lagging:
        return MOVED
    # A step or drift over the nights no night alone showed; not on a path another program measured tonight: its
    # nights' levels are that program's (re-accept, 'other-program').
    remeasured = _other_program_paths(result) if "other-program" in reasons else set()
    if not apart and any(change.worse and change.path not in remeasured for change in changes):
        return MOVED
    blocking = [r for r in reasons if not (allow_unjudged and r == "no-baseline")]
    return UNJUDGED if blocking else 0


#: ReFrame's options that select checks, and what follows each: "value" (always
#: one), "optional" (one unless the next word is an option) or "flag" (none).
#: The health checks run whatever the night's selection is.
SELECTION_OPTIONS = {
    "-n": "value",
    "--name": "value",
    "-x": "value",
    "--exclude": "value",
    "-t": "value",
    "--tag": "value",
    "-T": "value",
    "--exclude-tag": "value",
    "-E": "value",
    "--filter-expr": "value",
    "--maintainer": "value",
    "--restore-session": "optional",
    "--failed": "flag",
    "--cpu-only": "flag",
    "--gpu-only": "flag",
}


def health_options(options: list[str]) -> list[str]:
    """The night's ReFrame options less those that select checks (``-n
    path_matrix`` would leave no health check to run, and no node judged),
    in any of their forms (``-n X``, ``-nX``, ``--name=X``)."""
    kept, i = [], 0
    while i < len(options):
        option = options[i]
        name = option.split("=", 1)[0]
        takes = SELECTION_OPTIONS.get(name)
        if takes is None and option[:2] in SELECTION_OPTIONS and not option.startswith("--"):
            takes = "flag"  # a short option with its value attached: -npath_matrix
        if takes is None:
            kept.append(option)
        elif "=" not in option and (
            takes == "value" or takes == "optional" and i + 1 < len(options) and not options[i + 1].startswith("-")
        ):
            i += 1  # its value
        i += 1
    return kept


def later_delay(system: str, given: int | None) -> int:
    """Seconds before a second confirmation: --confirm-later, else the system's confirm_later_s."""
    if given is not None:
        return given
    return int(data.load_all().get(system, {}).get("confirm_later_s", 0))


def nightly(args) -> int:
    if os.environ.pop(toolkits.RUNTIMES_VARIABLE, None):
        # The accepted runs are of the node's own environments: runtime twins have no baseline.
        print(f"nightly: {toolkits.RUNTIMES_VARIABLE} ignored (runtime twins are for ./suite upgrade)", flush=True)
    system = selected_system(args.system)
    if option_mistakes(args.reframe) != 0:  # named on stderr: a usage error, no night of it
        return UNJUDGED
    stamp = now()
    outdir = NIGHTLY_DIR / system / stamp.replace(":", "")
    args.night_dir = outdir  # where --act finds the verdict (runner/partition.py night)
    run = {"system": system, "stamp": stamp, "start": stamp, "state": NightState.RUNNING.value, "phase": "preflight"}
    if args.drill:
        run["drill"] = args.drill
        print(f"nightly: a drill ({args.drill}): judged as any night, and no night of later nights' history")
    blocking = preflight.problems(data.load_all()[system], [outdir.parent, PERFLOGS / system])
    try:
        outdir.mkdir(parents=True, exist_ok=True)
        save_run(outdir, run)  # a night killed from now on reads as incomplete, never as judged
    except OSError as err:
        blocking.append(disk_problem(err) or f"cannot write {outdir}: {err}")
    if blocking:
        return not_judged_by_the_suite(outdir, run, blocking, page=not args.no_report)
    for line in preflight.seal_perflogs(PERFLOGS / system):
        print(f"nightly: {line}", file=sys.stderr)
    prune_stages(outdir.parent)
    stop = None
    found = no_outcomes()  # what the night found so far, kept whatever ends it
    with stopped_by_signals():
        try:
            try:
                return measured_and_judged(args, system, run, outdir, found)
            except DamagedFile as err:  # a run report, a table: the suite's files, not the node
                return not_judged_by_the_suite(outdir, run, [str(err)], not args.no_report, found)
            except OSError as err:  # a disk filled or turned read-only while the night wrote
                why = disk_problem(err)
                if why is None:
                    raise
                return not_judged_by_the_suite(outdir, run, [why], not args.no_report, found)
        except Stopped as err:  # in the night or in its handlers above
            stop = err.signal_name
    return stopped(outdir, run, stop)


def say_clock(run: dict) -> None:
    """Name a night stamped before the accepted runs it is judged against (run.json's `clock`): this node's
    clock is behind, and its night would sort among nights long past."""
    latest = max(run["accepted_runs"], default=None)
    if latest and run["stamp"] < latest:
        run["clock"] = f"stamped {run['stamp']}, before its latest accepted run {latest}: this node's clock is behind"
        print(f"nightly: warning: {run['clock']}", file=sys.stderr, flush=True)


def not_judged_by_the_suite(
    outdir: Path, run: dict, causes: list[str], page: bool = True, found: dict | None = None
) -> int:
    """A night the suite itself could not run or finish (its preflight, a full disk, a damaged file): each
    cause named and kept in run.json (where it can still be written) and on its page (`page`); exit 3 and
    nothing drained, unless the night had already found evidence about the node (`found`'s failed checks:
    exit 1, drained for those alone)."""
    found = found or no_outcomes()
    failed = found["failed"]
    status = FAILED if failed else UNJUDGED
    drain, _ = drain_reasons(None, found, pd.DataFrame(columns=siblings.COLUMNS), {})
    run.update(
        state=NightState.DONE.value,
        exit=status,
        meaning=MEANING[status],
        unjudged_reasons=["suite-error"],
        unjudged_codes=[code_of("night", "suite-error").code],
        suite_errors=[*found["suite"], *causes],
        drain=drain,
        end=run.get("end") or now(),
    )
    for cause in causes:
        print(f"nightly: SUITE ERROR: {cause}", file=sys.stderr)
    for line in failed:
        print(f"nightly: FAILED {line}", file=sys.stderr)
    with contextlib.suppress(OSError):
        save_run(outdir, run)
        write_drain_line(outdir, run["drain"])
        if page:
            write_verdict_only(run["system"], run, outdir)
    if failed:
        print(f"nightly: exit {status} ({MEANING[status]}): the suite then failed too: {causes[0]}")
    else:
        print(
            f"nightly: exit {status} ({MEANING[status]}): the suite could not run, not the node's fault, nothing "
            f"drained: {causes[0]}"
        )
    return status


def stopped(outdir: Path, run: dict, by: str) -> int:
    """A night asked to stop (Stopped): ReFrame stopped with its jobs, the night saved as STOPPED with
    what it was doing, one line, exit 3. Its perflog lines stay where they are, named by its window."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in STOP_SIGNALS}  # the saving is not cut
    try:
        if run.get("state") == NightState.DONE:  # stopped while drawing: its verdict is written and stands
            print(f"nightly: stopped by {by} while drawing its pages; its verdict stands: exit {run['exit']}")
            return run["exit"]
        during = run.get("phase", "the night")
        run.update(state=NightState.STOPPED.value, stopped={"by": by, "during": during, "at": now()})
        run.setdefault("end", run["stopped"]["at"])
        with contextlib.suppress(OSError):
            save_run(outdir, run)
        print(
            f"nightly: stopped by {by} during {during}: not judged (exit {UNJUDGED}), nothing drained; what it "
            f"measured stays in perflogs/{run['system']}, its window in {outdir / 'run.json'}",
            flush=True,
        )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return UNJUDGED


def measured_and_judged(args, system: str, run: dict, outdir: Path, found: dict) -> int:
    """The night itself: health, the checks, the verdict, its reruns, run.json, drain.txt and the pages;
    its exit status. `found` (no_outcomes) gathers what the checks found, for whoever ends the night."""
    enter(outdir, run, "health")
    os.environ[metrics.NIGHT_VARIABLE] = run["stamp"]  # a label of every record sent to a metrics endpoint
    health = reframe(
        system,
        outdir / "health-report.json",
        *own_folders(outdir),
        "-t",
        "health",
        "-S",
        f"node_health.facts_dir={outdir}",
        *health_options(args.reframe),
    )
    gather(found, outcomes(outdir / "health-report.json"))
    if health != 0 and not found["failed"] and not found["suite"]:  # ReFrame failed, no failed case to show
        found["suite"].append(f"health: ReFrame exited {health} (see {outdir / 'health-report.json'})")
    run["health"] = "pass" if health == 0 else "fail"
    try:
        accepted, run["kind"] = baseline_of_node(system, outdir)
    except DamagedFile as err:  # accepted.json: judged against nothing, said, and health's findings kept
        found["suite"].append(str(err))
        accepted, run["kind"] = None, kind_of_facts(outdir)
    if accepted:  # what tonight is judged against, for judging it again once the kind has more accepted runs
        run["accepted_runs"] = [r["stamp"] for r in accepted.get("runs", [])]
        say_clock(run)
    run.update(host_against_accepted(accepted, outdir))
    if run.get("host_differs"):
        print(f"nightly: NOTE {run['host_differs']}", file=sys.stderr, flush=True)
    if health == 0:
        enter(outdir, run, "checks")
        run["plan"] = announce_plan(system, list(as_nights(*args.reframe)))
        checks = (*own_folders(outdir), *KEEP_THE_BUILD, *as_nights(*args.reframe))
        checks_status = reframe(system, outdir / "run-report.json", *checks)
        contention.snapshot(outdir, "tonight")  # before a rerun replaces the cases' outputs
        checks = outcomes(outdir / "run-report.json")
        if checks_status != 0 and not checks["failed"] and not checks["suite"]:
            checks["suite"].append(f"checks: ReFrame exited {checks_status} (see {outdir / 'run-report.json'})")
        gather(found, checks)
        run["checks"] = "pass" if not checks["failed"] and not checks["suite"] else "fail"
    elif found["failed"]:
        print("nightly: the health checks failed: no performance checks on an unhealthy node", file=sys.stderr)
    else:
        print("nightly: the health checks could not run: no performance checks", file=sys.stderr)
    run["end"] = now()
    # A record of the run before it is judged: what it measured is whole, its verdict not yet written.
    enter(outdir, run, "judgement")

    result = records = frame = history = night = None
    lags = pd.DataFrame(columns=siblings.COLUMNS)
    changes: list[changepoints.Change] = []
    if health == 0:
        judged, records, frame = judge_night(system, run, accepted, args.alpha)
        found["suite"] += unlogged(outdir / "run-report.json", records.frame, PERFLOGS / system)
        gone = runs_without_rows(frame, system, accepted["runs"]) if accepted else []
        if gone:  # a baseline whose records are lost judges with what is left: named, never silent
            found["suite"].append(
                f"the accepted runs {', '.join(gone)} have no line in {PERFLOGS / system}: restore their perflogs "
                "(git checkout), or accept other runs"
            )
        night = Night(system, run, outdir, accepted, args.reframe, args.alpha, found, frame)
        draw = None if args.no_report else (lambda: night.draw(lambda: draw_pages(system, run, records, outdir)))
        judged = confirm_by_rerun(night, judged, meanwhile=draw)
        budget = None if args.confirm_later is not None else data.load_all().get(system, {}).get("night_budget_s")
        judged = with_contention(judged, run, outdir)
        if "rerun" in run and judged.flagged_paths() and set(judged.flagged_paths()) <= set(run["contention"]["paths"]):
            print(
                "nightly: every finding the rerun confirmed is on GPUs another process used through it: no later "
                "measure (what it is for, a load nobody sees, is seen); run the night again when they are free",
                flush=True,
            )
        else:
            delay = later_delay(system, args.confirm_later)
            judged = with_contention(confirm_later(night, judged, delay, meanwhile=draw, budget_s=budget), run, outdir)
        enter(outdir, run, "judgement")
        result, lags = judged.verdict, judged.siblings
        frame = night.frame  # with the reruns' records: tonight's transients are at their reruns' level
        if result is not None:
            run["paths"] = path_verdicts(result)
            levels, spreads, changes, starts = held_changes(system, accepted, run, result)
            history = histories.drawn(levels, spreads, changes, starts)  # the history page's, not computed again
    node_judged = node_facts_judged(accepted, outdir)
    reasons = (["suite-error"] if found["suite"] else []) + unjudged_reasons(
        result, node_judged, health == 0, other_kinds=has_baselines(system)
    )
    reasons += other_host(run, result, changes)
    status = nightly_status(found, result, reasons, args.allow_unjudged, changes, siblings.lagging(lags))
    run["changes"] = [tagged("change", "held", change.line()) for change in changes]
    if found["suite"]:
        run["suite_errors"] = found["suite"]
    write_verdict(outdir, run, result, status, reasons, found, lags)
    write_drain(outdir, run, result, found, lags)
    send_verdict(system, run, result, changes, status)
    if records is not None and not args.no_report:
        enter(outdir, run, "drawing")
        write_html(system, run, records, outdir, frame, result, history, lags, pages=night.pages)
    elif not args.no_report:  # health failed or could not run: the night's verdict and next step all the same
        write_verdict_only(system, run, outdir, lags)
    report_outcome(found, result, reasons, status, outdir, changes, lags, run)
    return status


def draw_pages(system: str, run: dict, records: Loaded, outdir: Path):
    """The night's figures and check pages (reports/html.py's write_pages); None where they cannot be drawn."""
    from reports.html import write_pages

    try:
        return write_pages(records, outdir, night_title(system, run))
    except Exception as err:  # matplotlib and pandas raise many kinds
        print(f"nightly: warning: no pages drawn while waiting: {err!r}", file=sys.stderr)
        return None


def explained(run: dict, paths: pd.DataFrame | None, lags: pd.DataFrame | None, accepted: set | None = None) -> tuple:
    """A night's verdict as its page says it (judge/explain.py): paths.csv and
    siblings.csv with every change as % worse, a why for every row and each
    judge's verdict beside the other's; what the night found, each in a line
    with its next step; and the night's next step (its name, what it asks;
    `accepted`, the stamps its kind's baseline holds now, for a night drawn again)."""
    if paths is not None and not paths.empty:
        paths = explain.explain_paths(paths)
    if lags is not None and not lags.empty:
        lags = explain.explain_siblings(lags, paths)
        if paths is not None and not paths.empty:
            paths, lags = explain.side_by_side(paths, lags)
    found = explain.findings(run, paths, lags)
    return paths, lags, found, explain.next_step(run, found, accepted)


def night_title(system: str, run: dict) -> str:
    """'Night of hopper-vm (1 x NVIDIA H100 80GB HBM3), 2026-11-26 06:49:16 UTC'."""
    kind = f" ({run['kind']})" if run.get("kind") else ""
    return f"Night of {system}{kind}, {run['stamp'].replace('T', ' ')} UTC"


def option_mistakes(options: list[str]) -> int:
    """checks/suite/options.py on ReFrame's options (in ReFrame's layer: this Python runs it): 3 where one
    names a test or variable the suite does not have, each named on stderr; 0 otherwise (at once, without
    starting it, where there are no options: the nightly's cron line)."""
    if not options:
        return 0
    return subprocess.run([sys.executable, "-m", "checks.suite.options", *options], cwd=REPO).returncode


def announce_plan(system: str, options: list[str]) -> dict:
    """The checks' plan, printed before they start (runner/plan.py): run.json's
    record of it, the cases and the seconds expected."""
    plan = make_plan(system, options)
    for line in plan_lines(plan, "nightly: plan"):
        print(line, flush=True)
    return {"cases": plan.cases, "expected_s": round(plan.total_s)} if not plan.error else {"error": plan.error}


def write_verdict(
    outdir: Path, run: dict, result, status: int, reasons: list[str], found: dict, lags: pd.DataFrame | None = None
) -> None:
    """compare.csv (every figure), paths.csv (every path), siblings.csv (every
    path with siblings) and run.json: the run's window, its exit status and
    meaning, each path's verdict, each GPU's lag behind its siblings, and the counts."""
    run["exit"] = status
    run["meaning"] = MEANING[status]
    run["state"] = NightState.DONE.value  # its verdict is written: the night is whole
    run["unjudged_reasons"] = reasons
    run["unjudged_codes"] = [code_of("night", reason).code for reason in reasons]
    run["checks_failed"] = len(found["failed"])
    run["suite_failed"] = len(found.get("suite", []))
    if lags is not None and not lags.empty:
        lags.drop(columns=["cases"]).to_csv(outdir / "siblings.csv", index=False)
        run["siblings"] = {
            row.path: {
                "verdict": row.verdict,
                "code": code_of("sibling", row.verdict).code,
                "vs_siblings_pct": _rounded(row.vs_siblings_pct),
                "gpus": row.gpus,
                **({"contended_by": row.contended_by} if getattr(row, "contended_by", "") else {}),
            }
            for row in lags.itertuples()
            if row.verdict != "pass" or row.as_accepted
        }
        run["siblings_judged"] = int(len(lags))
    if result is not None:
        result.figures.to_csv(outdir / "compare.csv", index=False)
        result.paths.to_csv(outdir / "paths.csv", index=False)
        run["counts"] = result.counts()
        run["paths"] = path_verdicts(result)
    save_run(outdir, run)


def drain_reasons(
    result: verdict.Verdict | None, found: dict, lags: pd.DataFrame, contended: dict[str, str]
) -> tuple[list[str], list[str]]:
    """Why the node should be drained (a failed check, a GPU behind its
    siblings or a path moved, confirmed, that no other process explains), and
    the findings not drained because another process (`contended`: path, who) used their GPUs."""
    findings = [
        (row.path, tagged("sibling", "lagging", f"behind its siblings: {siblings.line(row)}"))
        for row in (lags[lags["verdict"] == "lagging"].itertuples() if not lags.empty else [])
    ]
    if result is not None:
        moved = result.paths[result.paths["verdict"].isin(verdict.FLAGGED)]
        findings += [
            (row.path, tagged("path", row.verdict, f"{row.verdict} against the accepted runs: {path_line(row)}"))
            for row in moved.itertuples()
        ]
    failed = [tagged("check", "failed", f"failed {line}") for line in found["failed"]]
    reasons = failed + [t for p, t in findings if p not in contended]
    kept = [f"{t}; another process used its GPUs or its host: {contended[p]}" for p, t in findings if p in contended]
    return reasons, kept


def write_drain(outdir: Path, run: dict, result, found: dict, lags: pd.DataFrame) -> None:
    """drain.txt (the node and its reasons on one line, where there are any,
    for `scontrol update nodename=$node state=drain reason=...`) and run.json's
    `drain` and `not_drained` (findings another process explains: a busy GPU,
    not a slow one). Paths moved against the accepted runs of another host
    ('other-host') are not drained: the move may be the host's."""
    judged = None if "other-host" in run.get("unjudged_reasons", []) else result
    reasons, kept = drain_reasons(judged, found, lags, run.get("contention", {}).get("paths", {}))
    run["drain"], run["not_drained"] = reasons, kept
    write_drain_line(outdir, reasons)
    save_run(outdir, run)


def write_drain_line(outdir: Path, reasons: list[str]) -> None:
    """drain.txt: the node and its reasons on one line, or nothing (for scontrol update ... state=drain)."""
    facts = node_facts_of(outdir)
    # The scheduler's name of the node: the host's short name (Slurm's NodeName), not the full one.
    node = str(facts[0].get("host") or "").split(".")[0] if facts else socket.gethostname().split(".")[0]
    write_atomic(outdir / "drain.txt", f"{node}\t{' | '.join(reasons)}\n" if reasons else "")


def held_changes(system: str, accepted: dict, run: dict, result: verdict.Verdict) -> tuple:
    """The kind's paths' levels over the nights to this one (`run`, its paths
    as `result` judged them; each earlier night's as kept when it was judged), each path's spread between
    the accepted runs, the changes held over the nights and the change points they were found by
    (judge/changepoints.py), found once: (levels, spreads, changes, starts)."""
    spreads = dict(zip(result.paths["path"], result.paths["spread_pct"] / 100))
    levels = histories.night_levels(system, accepted, tonight={**run, "paths": path_verdicts(result)})
    stamps = [r["stamp"] for r in accepted["runs"]]
    starts = changepoints.found_starts(levels, spreads, stamps)
    return levels, spreads, changepoints.changes(levels, spreads, stamps, starts), starts


def path_verdicts(result: verdict.Verdict) -> dict:
    """run.json's paths: each path's verdict, change and number of figures."""
    return {
        row.path: {
            "verdict": row.verdict,
            "code": code_of("path", row.verdict).code,
            "change_pct": _rounded(row.change_pct),
            "figures": int(row.figures),
        }
        for row in result.paths.itertuples()
    }


def send_verdict(system: str, run: dict, result, changes: list, status: int) -> None:
    """The night's exit status and each path's verdict to the system's metrics
    endpoint, if it names one (the status whether or not anything was judged:
    a night whose health failed is one to see); an endpoint that cannot be
    reached is a warning that names it."""
    url = metrics.endpoint(data.load_all().get(system, {}))
    if not url:
        return
    when = end_ms(run)
    kind = run.get("kind") or "unknown"
    lines = metrics.night_line(system, run["stamp"], kind, status, MEANING.get(status, ""), when)
    if result is not None:
        lines += "\n" + metrics.verdict_lines(system, run["stamp"], result.paths, when)
    lines += "\n" + metrics.change_lines(system, run["stamp"], changes, when) if changes else ""
    seen = run.get("contention", {})
    if seen.get("processes") or seen.get("paths"):
        lines += "\n" + metrics.contention_lines(system, run["stamp"], seen["processes"], seen["paths"], when)
    why = metrics.post(url, lines)
    if why:
        print(f"nightly: warning: metrics endpoint {why}: the records are in the perflogs only", file=sys.stderr)


def end_ms(run: dict) -> int:
    """When the run ended (its stamps are UTC), in milliseconds since the epoch: its metrics' timestamp."""
    return int(dt.datetime.fromisoformat(run["end"]).replace(tzinfo=dt.timezone.utc).timestamp() * 1000)


def _rounded(value: float) -> float | None:
    return round(float(value), 2) if value == value else None


def kind_of_facts(outdir: Path) -> str | None:
    """The kind of node the health checks found (their first node's facts in `outdir`; health holds each
    node to it), or None where they recorded none."""
    facts = node_facts_of(outdir)
    return kind_of(facts[0]) if facts else None


def has_baselines(system: str) -> bool:
    """Whether the system has accepted runs of any kind (False where accepted.json is damaged: said apart)."""
    try:
        return bool(read_baselines(system))
    except DamagedFile:
        return False


def baseline_of_node(system: str, outdir: Path) -> tuple[dict | None, str | None]:
    """The baseline of the kind of node the health checks found (their node
    facts in `outdir`), and that kind ('2 x NVIDIA H100 80GB HBM3'); no
    baseline where the system has none of that kind, no kind where health
    recorded no facts."""
    kind = kind_of_facts(outdir)
    return (read_accepted(system, kind), kind) if kind else (None, None)


def host_against_accepted(accepted: dict | None, outdir: Path) -> dict[str, str]:
    """run.json's `host_differs`: how the host of tonight's node differs from
    the accepted runs' (systems/host.py's differences: each node's against
    its partition's accepted facts); or its `host_note` where the accepted
    runs recorded no host (accepted before host facts were): nothing
    compared, no alarm; nothing where there is no baseline, tonight's
    health recorded no host, or the hosts agree."""
    records = [r for r in node_facts_of(outdir) if r.get("machine")]
    if not accepted or not accepted.get("node") or not records:
        return {}
    found, unrecorded = [], False
    for record in records:
        then = (accepted["node"].get(record["partition"]) or {}).get("machine")
        if not then:
            unrecorded = True
            continue
        named = f"{record.get('host')}: " if len(records) > 1 else ""
        found += [named + line for line in host.differences(record["machine"], then)]
    if found:
        return {"host_differs": host.differs_line(found)}
    return {"host_note": "the accepted runs recorded no host facts"} if unrecorded else {}


def node_facts_judged(accepted: dict | None, outdir: Path) -> bool:
    """Whether health held every node of the run to accepted node facts of its kind."""
    if not accepted or not accepted.get("node"):
        return False
    records = [read_json(p) for p in outdir.glob("node-*.json")]
    return bool(records) and all(
        r["partition"] in accepted["node"] and same_kind(accepted["node"][r["partition"]], r) for r in records
    )


def write_html(
    system: str,
    run: dict,
    records: Loaded,
    outdir: Path,
    frame: pd.DataFrame,
    result: verdict.Verdict | None = None,
    history: tuple | None = None,
    lags: pd.DataFrame | None = None,
    pages=None,
) -> None:
    """The run's HTML report, from the records the verdict judged, opening with
    the night's verdict (run.json's, each path's from `result`, each GPU
    against its siblings from `lags`) and linking
    the system's history over every night, kept beside the nights (history/):
    `history`, the levels, spreads and changes tonight was judged over, or
    else drawn from `frame`, every record the verdict read. A report or
    history that cannot be drawn changes no verdict."""
    if records.frame.empty:
        print("nightly: warning: no HTML report: the run logged no performance values", file=sys.stderr)
        return
    try:
        page = night_history(system, run, frame, outdir.parent, history)
    except Exception as err:  # matplotlib and pandas raise many kinds
        print(f"nightly: warning: no history page: {err!r}", file=sys.stderr)
        page = None
    try:
        paths = result.paths if result is not None else None
        report = night_report(system, run, records, outdir, paths, lags, page, pages)
        print(f"report written to {report.index}")
    except Exception as err:
        print(f"nightly: warning: no HTML report: {err!r}", file=sys.stderr)


def write_verdict_only(system: str, run: dict, outdir: Path, lags: pd.DataFrame | None = None) -> None:
    """The night's index.html of its verdict alone (its next step first), where it measured nothing to draw:
    a night whose health failed or could not run. A page that cannot be drawn changes no verdict."""
    from reports.html import write_verdict_page

    try:
        paths, lags, found, step = explained(run, None, lags)
        page = write_verdict_page(
            run, paths, lags, outdir, night_title(system, run), UNJUDGED_REASONS, "", None, found, step
        )
        print(f"report written to {page}")
    except Exception as err:  # matplotlib and pandas raise many kinds
        print(f"nightly: warning: no HTML report: {err!r}", file=sys.stderr)


def night_history(system: str, run: dict, frame: pd.DataFrame, beside: Path, history: tuple | None = None, back=""):
    """The history page of the night's kind of node in `beside`/history-KIND/
    (the nights' folder: one history serves every night): drawn from
    `history` (what tonight was judged over) or else judged over `frame`; None where there is none."""
    from reports.history import slug, write_history

    kind = kind_of_run(system, run)
    folder = beside / (f"history-{slug(kind)}" if kind else "history")
    if history is not None:
        return write_history(system, folder, history, back=back, kind=kind)
    return histories.write_kind(system, folder, frame, back=back, kind=kind)


def night_report(
    system: str,
    run: dict,
    records: Loaded,
    outdir: Path,
    paths: pd.DataFrame | None,
    lags: pd.DataFrame | None,
    history: Path | None = None,
    pages=None,
    accepted: set | None = None,
):
    """The night's index.html in `outdir` opening with its verdict (paths.csv's
    `paths`, siblings.csv's `lags`; `accepted` as explained takes it), its
    check pages (or `pages`, drawn while the later measure waited) and a link
    to `history`: reports/html.py's Report."""
    from reports.html import verdict_section, write_index, write_report

    title = night_title(system, run)
    paths, lags, found, step = explained(run, paths, lags, accepted)
    summary = verdict_section(run, paths, run.get("changes", []), UNJUDGED_REASONS, lags, found, step)
    linked = {system: history} if history else {}
    if pages is not None:  # drawn while the later measure waited: only the index is left
        return write_index(pages, records, title, histories=linked, verdict=summary)
    return write_report(records, outdir, title, histories=linked, verdict=summary)


def report_outcome(
    found: dict, result, reasons: list[str], status: int, outdir: Path, changes: list = (), lags=None, run=None
) -> None:
    run = run or {}
    if run.get("host_differs"):  # first: what every line after it may owe to the host
        print(f"nightly: NOTE {run['host_differs']}", file=sys.stderr)
    for line in found["failed"]:
        print(f"nightly: FAILED {line}", file=sys.stderr)
    for line in found.get("suite", []):
        print(f"nightly: SUITE ERROR {line}", file=sys.stderr)
    for other in run.get("contention", {}).get("processes", []):
        print(f"nightly: ANOTHER PROCESS on {process_place(other)}: {process_line(other)}", file=sys.stderr)
    if lags is not None and not lags.empty:
        for row in lags[lags["verdict"] != "pass"].itertuples():
            by = getattr(row, "contended_by", "")
            line = f"{siblings.line(row)}" + (f"; CONTENDED, not drained: {by}" if by else "")
            print(f"nightly: {row.verdict.upper()} behind its siblings: {line}", file=sys.stderr)
        for row in siblings.held_as_accepted(lags).itertuples():
            print(f"nightly: AS ACCEPTED, behind its siblings: {siblings.line(row)}")
        contended = len(lags[(lags["verdict"] == "lagging") & (lags.get("contended_by", "") != "")])
        print(
            f"nightly: each GPU against its siblings: {len(lags)} paths, {len(siblings.lagging(lags))} lagging"
            + (f" ({contended} contended by another process)" if contended else "")
        )
    if run.get("drain"):
        print(f"nightly: DRAIN (drain.txt): {' | '.join(run['drain'])}", file=sys.stderr)
    for change in changes:
        print(f"nightly: CHANGE {change.line()}", file=sys.stderr)
    if result is not None:
        for row in result.paths.itertuples():
            if row.verdict in ("moved", "unstable", "transient", "improved"):
                by = getattr(row, "contended_by", "")
                line = path_line(row) + (f"; CONTENDED, not drained: {by}" if by else "")
                print(f"nightly: {row.verdict.upper()} {line}", file=sys.stderr)
        for line in figure_lines(result.figures[result.figures["verdict"].isin(["broken", "unjudged"])], outdir):
            print(f"nightly: {line}", file=sys.stderr)
    for reason in reasons:
        print(f"nightly: NOT JUDGED ({reason}): {UNJUDGED_REASONS[reason]}", file=sys.stderr)
    verdict_line = verdict.summary_line(result) if result is not None else "no baseline: nothing judged"
    print(
        # Health's ReFrame run and the checks' (and their reruns') together, the builds among them: more than
        # the checks' own "Ran N/M" by health's case, said so.
        f"nightly: cases of health and the checks, builds included: {len(found['passed'])} passed, "
        f"{len(found['failed'])} failed, "
        + (f"{len(found['suite'])} not run by the suite's fault, " if found.get("suite") else "")
        + f"{len(found['skipped'])} skipped; {verdict_line}"
    )
    cause = found.get("suite", [])[:1] if status == UNJUDGED else []
    why = f"; the suite failed, not the node, nothing drained: {cause[0]}" if cause else ""
    print(f"nightly: exit {status} ({MEANING[status]}); results in {outdir}{why}")


#: Figures of one verdict, test and reason named one by one up to this many;
#: more are counted in one line (compare.csv names each).
FIGURES_NAMED = 5


def figure_lines(figures: pd.DataFrame, outdir: Path) -> list[str]:
    """One line per broken or unjudged figure, or, where a test has many
    for one reason (a check not run tonight), one line that counts them."""
    lines = []
    for (what, test, reason), group in figures.groupby(["verdict", "test", "reason"], sort=False):
        if len(group) <= FIGURES_NAMED:
            lines += [f"{what.upper()} {r.test} {r.case} {r.figure}: {reason}" for r in group.itertuples()]
        else:
            cases = group["case"].nunique()
            lines.append(
                f"{what.upper()} {test}: {len(group)} figures of {cases} case(s): {reason} "
                f"(each in {outdir / 'compare.csv'})"
            )
    return lines


#: Why a night could not be judged, each its own reason in run.json; only the
#: first may be allowed (--allow-unjudged: a system's first nights).
UNJUDGED_REASONS = {
    "no-baseline": "the system has no accepted runs (./suite accept)",
    "vanished": "figures the accepted runs have were not measured tonight",
    "other-kind": "the system's accepted runs are of other kinds of node than this one (./suite accept its runs)",
    "other-host": "paths moved against accepted runs of another host (the host line first says what differs): the "
    "move may be the host's, nothing drained; accept this host's nights or find why it differs",
    "other-program": "cases measured by another program than their accepted runs (its source, build options or "
    "check changed; each figure's code says which): re-accept them (./suite accept new runs)",
    "unjudged": "figures without a path, a direction or enough accepted runs",
    "suite-error": "the suite itself failed (each SUITE ERROR line, run.json's suite_errors): not the node's "
    "fault, nothing drained; fix what it names and run the night again",
}


def path_line(row) -> str:
    """'host link d2h of GPU 0, ce: +20.1% worse (14 of 14 figures agree; spread 0.4%, floor 3%)':
    every change as % worse, positive worse, as on the pages (judge/explain.py)."""
    better = getattr(row, "better", "")
    better = better if isinstance(better, str) else ""  # NaN read back from a table: no direction known

    def worse(change: float) -> str:
        return f"{signed(explain.worse_pct(change, better))}% worse" if better else f"{signed(change)}%"

    line = (
        f"{row.path}: {worse(row.change_pct)} ({row.agree} of {row.figures} figures agree; "
        f"spread between runs {row.spread_pct:.1f}%, floor {row.floor_pct:.0f}%)"
    )
    if row.verdict in ("unstable", "transient") or row.instability > verdict.STABILITY_FACTOR:
        line += f"; samples spread {row.instability:.1f} times the accepted runs'"
    if row.verdict in verdict.FLAGGED and isinstance(getattr(row, "flagged_by", None), str):
        line += "; " + explain.flagged_by_words(
            row.flagged_by, "beyond its floor and spread", {"guard_pct": getattr(row, "guard_pct", None)}
        )
    for key in RERUNS:
        change = getattr(row, f"{key}_change_pct", None)
        if change is not None and pd.notna(change):
            line += f"; {key} {worse(change)}"
    if row.reason:
        line += f"; {row.reason}"
    return line


def add_parsers(sub) -> None:
    """The nightly's command in the suite's one parser (commands/cli.py)."""
    p = sub.add_parser(
        "nightly",
        help="health checks, performance checks, the verdict by path, the report",
        epilog="Options after '--' go to ReFrame.",
    )
    p.add_argument("--system", help="the system to run (default: the one ReFrame picks on this machine)")
    p.add_argument("--alpha", type=float, default=0.05, help="family-wise significance level of the verdict")
    p.add_argument("--allow-unjudged", action="store_true", help="exit 0, not 3, when something could not be judged")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report")
    lock.add_wait(p)
    p.add_argument(
        "--drill",
        metavar="WHAT",
        help="a fault planted on purpose tonight (say which): the night is judged as any other, and left out of "
        "the history later nights are judged over (change points, the history page)",
    )
    p.add_argument(
        "--confirm-later",
        type=_seconds,
        metavar="SECONDS",
        help="measure what the rerun confirmed once more this much later (default: the system's confirm_later_s; "
        "0: the rerun alone confirms)",
    )
    p.add_argument(
        "--act",
        action="store_true",
        help="after the verdict, drain the nodes it names and resume those the suite drained once they pass, "
        "within the system's cap (./suite act: runner/act.py); off unless asked",
    )
    p.set_defaults(func=nightly, reframe=[])  # ReFrame's options: what follows '--' (commands/cli.py)


def _seconds(text: str) -> int:
    """--confirm-later's value: whole seconds, 0 to an hour."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of seconds: {text!r}") from None
    if not 0 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"{value} s: give 0 to 3600")
    return value
