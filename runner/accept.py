"""The acceptance of nightly runs as the baseline, and earlier runs judged
again against the references as they are now (rejudge).

    ./suite accept STAMP [STAMP ...] [--system NAME] [--write-references] [--min-tolerance PCT]

`accept` makes one or more runs the system's baseline
(perflogs/<system>/accepted.json: the runs, and the node facts their health
checks recorded) and, with --write-references, writes references from them
into systems/references/<Check>.yaml: per case and headline figure the
median of the runs and a tolerance from their spread, which needs at least
three runs on separately started nodes. From four runs on, each is judged
against the others as a night would be (leave one out); a run the others
would flag is refused unless --despite says why, and each run's result is
kept in accepted.json.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

import experiments
from experiments.files import read_json, write_json
from experiments.keys import CASE_KEY, NODE_FACTS, direction, format_case, parse_case
from experiments.roots import REFERENCES, REPO
from judge import siblings, verdict
from judge.select import RERUNS, run_rows, runs_without_rows, windows_of
from judge.status import FAILED, MEANING, UNJUDGED
from reports.load import load
from reports.runs import (
    PERFLOGS,
    REJUDGED,
    fact_files,
    find_run,
    finished_runs,
    incomplete_why,
    kind_of_run,
    night_complete,
    now,
    read_accepted,
    read_baselines,
    selected_system,
    write_baseline,
)
from runner import lock, nightly
from systems import data
from systems.host import differences

#: Runs on separately started nodes that tolerances are taken from, at least.
MIN_RUNS = 3
#: A tolerance covers this many standard deviations of the runs' medians
#: between nodes, and of the samples within a run (robust: from the MAD).
BETWEEN_RUNS_SIGMAS = 4.0
WITHIN_RUN_SIGMAS = 3.0
#: A rate's lower bound stays above a tenth of its reference.
MAX_RATE_TOLERANCE = 0.9


def node_facts_of(outdirs: list[Path]) -> dict:
    """Per partition, the node facts the runs' health checks recorded (the
    first node's host among them: what later nights' hosts are compared
    with); runs that disagree are named, on their GPUs, or on their hosts
    where these differ as a night's would (systems/host.py: not by a
    BIOS date or a few MiB of memory)."""
    facts: dict = {}
    for outdir in outdirs:
        for path in fact_files(outdir):
            record = read_json(path)
            partition, host = record.pop("partition"), record.pop("host")
            first = facts.setdefault(partition, record)
            if _gpus_of(first) != _gpus_of(record):
                print(f"accept: warning: {path} ({host}) differs from the first node of {partition}", file=sys.stderr)
            elif first.get("machine") and record.get("machine"):
                other = differences(record["machine"], first["machine"])
                if other:
                    said = "; ".join(other)
                    print(f"accept: warning: {path} ({host}) is on another host than the first node of {partition}: "
                          f"{said} (the first's kept: later nights are compared with it)", file=sys.stderr)  # fmt: skip
    return facts


def _gpus_of(facts: dict) -> dict:
    """Node facts less the host's."""
    return {k: v for k, v in facts.items() if k != "machine"}


def robust_relative_sd(values, center: float | None = None) -> float:
    """The standard deviation of `values` relative to `center` (their median
    by default), from their median absolute deviation about it."""
    values = np.asarray(values, dtype=float)
    center = float(np.median(values)) if center is None else center
    return 1.4826 * float(np.median(np.abs(values / center - 1))) if center else 0.0


def tolerance(runs: list[np.ndarray], minimum: float, better: str, history: list[float] = ()) -> tuple[float, float]:
    """A figure's reference (the median of the accepted runs' medians) and
    tolerance: the larger of `minimum`, BETWEEN_RUNS_SIGMAS times the spread
    of the runs' medians about the reference (the accepted runs', and the
    values of earlier runs on other nodes in `history`), and
    WITHIN_RUN_SIGMAS times the samples'. Both spreads are robust standard
    deviations (1.4826 times the median absolute deviation), so that one odd
    run among a few does not widen a tolerance until nothing fails it."""
    medians = [float(np.median(r)) for r in runs]
    ref = statistics.median(medians)
    between = robust_relative_sd([*medians, *history], center=ref)
    within = statistics.median(robust_relative_sd(r) for r in runs)
    spread = max(minimum, BETWEEN_RUNS_SIGMAS * between, WITHIN_RUN_SIGMAS * within)
    return ref, min(spread, MAX_RATE_TOLERANCE) if better == "higher" else spread


def outside(ref: float, spread: float, better: str, value: float) -> bool:
    """Whether a value fails a reference [ref, -spread, -] (rates) or [ref, -, +spread] (times)."""
    return value < ref * (1 - spread) if better == "higher" else value > ref * (1 + spread)


def case_rows(frame: pd.DataFrame, test: str, items: dict, facts: dict, environ: str) -> pd.DataFrame:
    """The figure values (no samples) `frame` holds of one case on one kind of
    node."""
    rows = frame[(frame["test"] == test) & frame["sample"].isna() & (frame["environ"] == environ)]
    rows = rows[rows["case"] == format_case(items)]
    for name, value in facts.items():
        if name == "gpu_count":  # records from before the count was logged do not say
            rows = rows[(rows[name] == str(value)) | (rows[name] == "")]
        else:
            rows = rows[rows[name] == value]
    return rows


def history_of(frame: pd.DataFrame, runs: list[dict], system: str) -> pd.DataFrame:
    """The system's records outside the accepted runs that passed their
    checks: runs on other nodes, earlier, not the runs that failed (a node
    that was sick) nor drills (a fault planted on purpose, which passes its
    checks: they hold to physical bounds only), whose figures would widen tolerances."""
    passed = frame["result"].fillna("pass") == "pass"
    drills = [run for run in finished_runs(system, drills=True) if run.get("drill")]
    drilled = [window for run in drills for window in (run, *(run[key] for key in RERUNS if key in run))]
    return frame[(frame["system"] == system) & ~run_rows(frame, system, runs + drilled) & passed & alike(frame)]


def alike(frame: pd.DataFrame) -> pd.Series:
    """The records that measured what their experiment's program measures
    today: not those from before a change of what a case means (an
    experiment's ALIKE_SINCE)."""
    keep = pd.Series(True, index=frame.index)
    times = None  # read once, where an experiment asks
    for test in frame["test"].unique():
        since = getattr(experiments.find(test), "ALIKE_SINCE", None)
        if since:
            times = pd.to_datetime(frame["time"], utc=True) if times is None else times
            keep &= ~((frame["test"] == test) & (times < pd.Timestamp(since)))
    return keep


def _where(row: pd.Series, detected: bool) -> dict:
    # Machines described at run time are matched by what they are, not by name.
    if not detected:
        return {"system": row["system"], "partition": row["partition"]}
    where = {"gpu_model": row["gpu_model"], "host_link": row["host_link"]}
    if str(row.get("gpu_count", "")).isdigit():
        where["gpu_count"] = int(row["gpu_count"])
    return where


def reference_entries(
    samples: pd.DataFrame,
    minimum: float,
    detected: bool,
    history: pd.DataFrame | None = None,
    required_runs: int = MIN_RUNS,
) -> tuple[dict[str, list], list[str]]:
    """Per check, one entry per case and kind of node: each headline figure's
    reference and tolerance from the runs (samples: the runs' sample rows,
    with a 'run' column) and, where `history` (load.py's table) holds runs of
    the same case on the same kind of node, from their spread too; and the
    warnings: a case seen in fewer than `required_runs` runs gets no reference
    (its figures stay unjudged), an accepted run outside a figure's tolerance
    is named."""
    entries: dict[str, list] = {}
    warnings: list[str] = []
    keys = [k for k in CASE_KEY if k in samples.columns]
    for _, case in samples.groupby([samples[k].fillna("").astype(str) for k in keys]):
        first = case.iloc[0]
        facts = {k: first.get(k) for k in NODE_FACTS}
        items = parse_case(first["case"])
        what = f"{first['test']} {first['case']} on {first['gpu_model']}"
        if case["run"].nunique() < required_runs:
            warnings.append(f"{what}: in {case['run'].nunique()} of the runs, {required_runs} needed: no reference")
            continue
        earlier = case_rows(history, first["test"], items, facts, first["environ"]) if history is not None else None
        values = {}
        for (figure, unit), rows in case.groupby(["figure", "unit"]):
            better = direction(unit)
            if better is None:
                continue
            runs = {run: g["value"].to_numpy(float) for run, g in rows.groupby("run")}
            # One value per earlier run of the case: its jobs' figure, by completion time.
            past = [] if earlier is None else earlier[earlier["figure"] == figure].groupby("time")["value"].median()
            ref, spread = tolerance(list(runs.values()), minimum, better, [float(v) for v in past])
            for run, values_of_run in runs.items():
                median = float(np.median(values_of_run))
                if outside(ref, spread, better, median):
                    warnings.append(
                        f"{what} {figure}: accepted run {run + 1} ({median:.4g} {unit}) is outside "
                        f"the tolerance the runs give ({ref:.4g} {unit}, {spread:.0%})"
                    )
            bound = round(spread, 4)
            values[figure] = (
                [round(ref, 6), -bound, None, unit] if better == "higher" else [round(ref, 6), None, bound, unit]
            )
        if values:
            entries.setdefault(first["test"], []).append(
                {"where": _where(first, detected), "case": items, "values": values}
            )
    return entries, warnings


#: What opens each acceptance's section of a references file.
MARKER = "# --- written by ./suite accept"


def write_references(
    entries: dict[str, list], note: str, directory: Path | None = None, kind: str | None = None
) -> list[Path]:
    """Append (or replace) the acceptance's section in each check's file
    (under systems/references/ unless `directory` says otherwise): one
    section per kind of node, so that accepting the runs of one kind (a pair
    of GPUs) keeps another's (one GPU); a section of no kind is replaced by
    an acceptance of no kind."""
    directory = directory or REFERENCES
    own = f"{MARKER} for {kind} from " if kind else f"{MARKER} from "
    written = []
    for test, items in entries.items():
        path = directory / f"{test}.yaml"
        text = path.read_text() if path.exists() else f"# References of {test}.\n"
        head, *sections = text.split(f"\n{MARKER}")
        kept = [MARKER + s.rstrip() for s in sections if not (MARKER + s).startswith(own)]
        # An empty list written as '[]' cannot be followed by entries.
        lines = [line for line in head.rstrip().splitlines() if line.strip() != "[]"]
        body = yaml.safe_dump(items, sort_keys=False, default_flow_style=None, width=120)
        new = f"{own}{note} (later entries refine earlier ones)\n{body}"
        text = "\n\n".join(["\n".join(lines), *kept, new])
        data.parse_yaml(text)  # never leave a file the checks cannot read (as they read it)
        path.write_text(text)
        written.append(path)
    return written


def accepted_samples(frame: pd.DataFrame, system: str, runs: list[dict]) -> pd.DataFrame:
    """The sample rows of the runs, each with the index of its run: only
    numbers above zero (a broken sample, kept by the loader for the verdict
    to name, gives no reference)."""
    parts = []
    numbers = frame["sample"].notna() & np.isfinite(frame["value"]) & (frame["value"] > 0)
    for i, run in enumerate(runs):
        rows = frame[run_rows(frame, system, [run]) & numbers]
        parts.append(rows.assign(run=i))
    return pd.concat(parts, ignore_index=True) if parts else frame.iloc[0:0]


#: A partition's night gives at most this many accepted runs, spread over its nodes: the verdict needs a few
#: runs on separately started nodes, and every more one only costs (its nulls are simulated per count).
MAX_NODE_RUNS = 10


def node_runs(run: dict) -> list[dict]:
    """A night as accepted runs: itself, or up to MAX_NODE_RUNS nodes of a
    partition's night, spread over those that reported and are not to be
    drained (nodes started apart, as references need), each 'STAMP@NODE',
    with the night's own health and checks (a failure of no node's is the
    whole night's: accepted only --despite it)."""
    if not run.get("nodes"):
        return [run]
    drained = {row["node"] for row in run.get("drain", [])}
    healthy = [node for node in run["nodes"] if node not in drained]
    picked = [healthy[round(i)] for i in np.linspace(0, len(healthy) - 1, min(len(healthy), MAX_NODE_RUNS))]
    keep = ("start", "end", "kind", "health", "checks", "system", "drill")
    base = {k: run[k] for k in keep if k in run}
    return [{**base, "stamp": f"{run['stamp']}@{node}", "node": node} for node in picked]


def leave_one_out(frame: pd.DataFrame, system: str, record: dict, alpha: float = 0.05) -> dict[str, list[str]] | None:
    """Each run of the baseline `record` judged as a night is, against the
    others, its own rerun confirming: the paths it moved, by its stamp (none:
    the others would have passed it). None where a run would have fewer than
    MIN_RUNS others to be judged against. A baseline holds together when no
    run of it is a move to the rest: one that is would widen every spread it
    sets and hide the next night's fault behind it. Held to what its paths
    say (verdict.UPGRADE_RULES): one case moving alone flags a night only
    once its rerun shows it again, and a baseline's run seldom has one."""
    runs = record["runs"]
    if len(runs) <= MIN_RUNS:
        return None
    found = {}
    for i, run in enumerate(runs):
        others = {**record, "runs": runs[:i] + runs[i + 1 :]}
        result = nightly.judged_with_rerun(frame, system, others, run, alpha, verdict.UPGRADE_RULES).verdict
        paths = result.paths if result is not None else None
        moved = [] if paths is None else paths[paths["verdict"].isin(verdict.FLAGGED)].itertuples()
        found[run["stamp"]] = [nightly.path_line(row) for row in moved]
    return found


def held_out(record: dict, found: dict[str, list[str]] | None, despite: str | None = None) -> dict:
    """`record` with each run's leave-one-out result (accepted.json): the
    paths it moved against the others (and, where it did, why it was kept:
    `despite`), or why it was not judged."""
    others = len(record["runs"]) - 1
    if found is None:
        result = {"judged_against": others, "moved": None, "why": f"{MIN_RUNS} other runs needed"}
        return {**record, "runs": [{**run, "leave_one_out": result} for run in record["runs"]]}
    runs = []
    for run in record["runs"]:
        result = {"judged_against": others, "moved": found[run["stamp"]]}
        if result["moved"] and despite:
            result["kept_despite"] = despite
        runs.append({**run, "leave_one_out": result})
    return {**record, "runs": runs}


def declares_no_gpu(system: dict) -> bool:
    """Whether a system's data declares nodes without GPUs (a partition with node.gpus.count 0)."""
    return any(p.get("node", {}).get("gpus", {}).get("count") == 0 for p in system.get("partitions", []))


def accept(args) -> int:
    system = selected_system(args.system)
    args.stamps = list(dict.fromkeys(args.stamps))  # a run given twice is one run, not its own baseline
    found = [find_run(system, stamp) for stamp in args.stamps]
    incomplete = [f"{run['stamp']} ({incomplete_why(run)})" for _, run in found if not night_complete(run)]
    if incomplete:
        print(
            f"accept: a night that did not end is no baseline: {'; '.join(incomplete)}; run the night again",
            file=sys.stderr,
        )
        return UNJUDGED
    runs = [node for _, run in found for node in node_runs(run)]
    if not runs:
        print("accept: no run to accept: every node of those partition nights is to be drained", file=sys.stderr)
        return UNJUDGED
    drills = [f"{run['stamp']} ({run['drill']})" for run in runs if run.get("drill")]
    if drills:
        print(f"accept: a drill is no baseline: {', '.join(drills)} had a fault planted", file=sys.stderr)
        return UNJUDGED
    failed = [run["stamp"] for run in runs if run.get("checks") != "pass" or run.get("health") != "pass"]
    if failed and not args.despite:
        print(
            f"accept: {', '.join(failed)} did not pass all its health checks and checks: a baseline is of runs that "
            "did; accept one anyway only with --despite WHY (kept in the baseline beside the run)",
            file=sys.stderr,
        )
        return UNJUDGED
    runs = [{**run, "accepted_despite": args.despite} if run["stamp"] in failed else run for run in runs]
    if args.write_references and len(runs) < MIN_RUNS and args.min_tolerance is None:
        print(
            f"accept: references need the spread of at least {MIN_RUNS} runs on separately started nodes, "
            f"{len(runs)} given; give more stamps, or a tolerance with --min-tolerance",
            file=sys.stderr,
        )
        return UNJUDGED
    kinds = {kind_of_run(system, run) for run in runs}
    if len(kinds) > 1:
        print(
            f"accept: the runs are of several kinds of node ({'; '.join(sorted(map(str, kinds)))}): "
            "a baseline is of one kind, accept each kind's runs apart",
            file=sys.stderr,
        )
        return UNJUDGED
    kind = kinds.pop() or "unknown"
    if kind == "no GPU" and not declares_no_gpu(data.load_all()[system]):
        print(
            f"accept: {', '.join(args.stamps)}: health saw no GPU on the node, and {system} does not declare a node "
            "without GPUs (its partitions' node.gpus.count: 0): a GPU node whose driver did not load would become "
            "the baseline; accept runs of the node with its GPUs",
            file=sys.stderr,
        )
        return UNJUDGED
    record = {"system": system, "kind": kind, "accepted": now(), "runs": runs}
    record["node"] = node_facts_of([o for o, _ in found])
    frame = load([PERFLOGS / system], warn=None, windows=windows_of(runs)).frame
    unlogged = runs_without_rows(frame, system, runs)
    if unlogged:
        print(
            f"accept: no perflog line of {', '.join(unlogged)} is in {PERFLOGS / system}: a baseline is of what "
            "the runs measured; restore their perflogs, or accept other runs",
            file=sys.stderr,
        )
        return UNJUDGED
    moves = leave_one_out(frame, system, record)
    apart = {stamp: lines for stamp, lines in (moves or {}).items() if lines}
    if apart:
        print(
            f"accept: judged against the other {len(runs) - 1} runs, as a night would be, "
            f"{', '.join(apart)} moved"
            + (
                f"; accepted despite it: {args.despite}"
                if args.despite
                else ": a baseline holds together; accept the others, or these too only with --despite WHY"
            ),
            file=sys.stderr,
        )
        for stamp, lines in apart.items():
            for line in lines:
                print(f"  {stamp}: {line}", file=sys.stderr)
        if not args.despite:
            return UNJUDGED
    record = held_out(record, moves, args.despite)
    before = read_baselines(system).get(kind)
    target = write_baseline(system, record)
    shown = target.relative_to(REPO) if target.is_relative_to(REPO) else target
    was = ", ".join(r["stamp"] for r in before["runs"]) if before else "none"
    print(f"accept: {', '.join(args.stamps)} now the baseline of {system} on {kind} ({shown}; it was: {was})")
    if not record["node"]:
        print("accept: warning: the runs recorded no node facts: health on this system judges nothing", file=sys.stderr)
    if args.write_references:
        minimum = (args.min_tolerance if args.min_tolerance is not None else 3.0) / 100
        detected = bool(data.load_all()[system].get("detect"))
        # Every record of the system, once: the tolerances widen by what other runs measured.
        every = load([PERFLOGS / system], warn=None).frame
        samples, history = accepted_samples(frame, system, runs), history_of(every, runs, system)
        entries, warnings = reference_entries(samples, minimum, detected, history, min(MIN_RUNS, len(runs)))
        for line in warnings:
            print(f"accept: warning: {line}", file=sys.stderr)
        note = f"the runs {', '.join(args.stamps)}"
        for path in write_references(entries, note, kind=kind):
            print(f"accept: references written to {path.relative_to(REPO)}")
    return 0


def rejudge(args) -> int:
    """The verdict on earlier runs against the accepted baseline as it is now,
    confirmed by each run's own rerun where it had one, with who else used
    its GPUs and the changes held over the nights to it: what a change of
    the baseline or of the verdict would have said of them (rejudged.csv,
    rejudged-paths.csv and rejudged-siblings.csv beside each run's
    compare.csv, its exit in rejudged.json). The checks are not run again:
    a night whose checks or health failed stays failed. A partition's night
    is judged as one (nightly --nodes), not here."""
    system = selected_system(args.system)
    nights = {stamp: find_run(system, stamp, "rejudge") for stamp in args.stamps}  # every stamp checked first
    # The nights' windows and every baseline's: what each is judged from, as the nightly judged it.
    windows = [w for _, run in nights.values() if night_complete(run) for w in nightly.night_windows(system, run, None)]
    frame = load([PERFLOGS / system], warn=None, windows=windows).frame
    worst = 0
    for stamp, (outdir, run) in nights.items():
        if not night_complete(run):
            print(f"rejudge: {stamp}: the night did not end ({incomplete_why(run)}): nothing to judge", file=sys.stderr)
            worst = max(worst, UNJUDGED)
            continue
        for stale in (REJUDGED, "rejudged-siblings.csv"):  # nothing of an earlier rejudge is left beside this one
            (outdir / stale).unlink(missing_ok=True)
        if run.get("nodes"):
            print(f"rejudge: {stamp}: a partition's night: its nodes are judged against each other, not here")
            worst = max(worst, UNJUDGED)
            continue
        kind = kind_of_run(system, run)
        accepted = read_accepted(system, kind) if kind else read_accepted(system)
        if accepted is None:
            print(f"rejudge: {stamp}: no accepted run of {system} on {kind or 'its kind of node'}", file=sys.stderr)
            worst = max(worst, UNJUDGED)
            continue
        judged = nightly.judged_with_rerun(frame, system, accepted, run, args.alpha)
        judged = nightly.with_contention(judged, dict(run), outdir)  # a copy: run.json's contention is the night's
        result, lags = judged.verdict, judged.siblings
        result.figures.to_csv(outdir / "rejudged.csv", index=False)
        result.paths.to_csv(outdir / "rejudged-paths.csv", index=False)
        if not lags.empty:
            lags.drop(columns=["cases"]).to_csv(outdir / "rejudged-siblings.csv", index=False)
        reasons = nightly.unjudged_reasons(result, node_judged=True, health_ran=True)
        lagging = siblings.lagging(lags)
        _, _, changes, _ = nightly.held_changes(system, accepted, run, result)
        reasons += nightly.other_host(run, result, changes)  # the night's host against the accepted ones', as recorded
        failed = ["its checks or health, not run again"] if run.get("exit") == FAILED else []
        status = nightly.nightly_status({"failed": failed}, result, reasons, False, changes, lagging)
        write_rejudged(outdir, status, result, accepted, reasons)
        print(
            f"rejudge: {stamp}: {verdict.summary_line(result)}; {len(lagging)} lagging behind siblings; "
            f"exit {status} ({MEANING[status]})"
        )
        for row in result.paths[result.paths["verdict"].isin(["moved", "unstable", "transient"])].itertuples():
            print(f"  {row.verdict.upper()} {nightly.path_line(row)}")
        for row in lags[lags["verdict"] != "pass"].itertuples():
            print(f"  {row.verdict.upper()} behind its siblings: {siblings.line(row)}")
        worst = max(worst, status)
    return worst


def write_rejudged(outdir: Path, status: int, result: verdict.Verdict, accepted: dict, reasons: list[str]) -> None:
    """What rejudge concluded of a night, beside its own run.json (reports/runs.py's REJUDGED): the
    night's pages and the report's index show it as the night's verdict now, the night's own beside it."""
    record = {
        "when": now(),
        "exit": status,
        "meaning": MEANING[status],
        "unjudged_reasons": reasons,
        "summary": verdict.summary_line(result),
        "accepted_runs": [r["stamp"] for r in accepted["runs"]],
    }
    write_json(outdir / REJUDGED, record)


def add_parsers(sub) -> None:
    """accept and rejudge in the suite's one parser (commands/cli.py)."""
    p = sub.add_parser("accept", help="make nightly runs the baseline")
    p.add_argument("stamps", nargs="+", metavar="STAMP", help="the runs' stamps (results/nightly/<system>/<stamp>)")
    p.add_argument("--system")
    p.add_argument("--write-references", action="store_true", help="write references from the runs")
    p.add_argument(
        "--despite",
        metavar="WHY",
        help="accept runs whose checks or health checks failed, or that moved against the others, saying why: "
        "kept in the baseline beside each",
    )
    p.add_argument(
        "--min-tolerance",
        type=float,
        metavar="PCT",
        help="smallest tolerance in percent (default 3); with fewer than 3 runs, the tolerance itself",
    )
    lock.add_wait(p)
    p.set_defaults(func=lock.holding(accept))
    p = sub.add_parser("rejudge", help="judge earlier runs again against the baseline as it is now")
    p.add_argument("stamps", nargs="+", metavar="STAMP")
    p.add_argument("--system")
    p.add_argument("--alpha", type=float, default=0.05)
    lock.add_wait(p)
    p.set_defaults(func=lock.holding(rejudge))
