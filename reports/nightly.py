"""The nightly entry point and the acceptance of runs as the baseline.

    ./suite nightly [--system NAME] [--alpha A] [--allow-unjudged] [--no-report] [-- reframe options]
    ./suite accept STAMP [STAMP ...] [--system NAME] [--write-references] [--min-tolerance PCT]

`nightly` runs the health checks (``-t health``), then every other check
that can run (ReFrame's ``nightly`` mode), with ReFrame's results storage on
and its JSON run reports kept; judges every headline figure of the run
against the accepted baseline's samples (reports/gate.py); writes the
comparison (compare.csv, one verdict per figure) and the HTML report under
reports/nightly/<system>/<stamp>/; and exits with

    0  as accepted: every check passed, every headline figure was judged, none moved;
    1  a check failed: the node is unhealthy or a program did not measure;
    2  something moved: a headline figure flagged by the gate, or another figure
       out of its reference's bounds;
    3  not judged: no accepted baseline, a figure or the node's facts without one,
       or a comparison that could not be made (--allow-unjudged turns this into 0).

Where the gate judged a figure, its verdict is the nightly's: ReFrame's
reference check holds each median to its bounds with no statistics and no
correction for the 150-odd figures of a run, so a median outside them that the
gate finds within the noise is reported, not counted as a move.

`accept` makes one or more runs the system's baseline
(perflogs/<system>/accepted.json: the runs, and the node facts their health
checks recorded) and, with --write-references, writes references from them
into systems/references/<Check>.yaml: per case and headline figure the
median of the runs and a tolerance from their spread, which needs at least
three runs on separately started nodes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import statistics
import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from checks.suite.keys import CASE_KEY, NODE_FACTS, direction, format_case, parse_case
from checks.suite.references import load_entries, matching_values, same_value
from systems import data
from systems.health import same_kind

from . import cli, gate
from .compare import select_mask
from .load import Loaded, load

REPO = Path(__file__).resolve().parent.parent
NIGHTLY_DIR = REPO / "reports" / "nightly"
PERFLOGS = REPO / "perflogs"
REFERENCES = REPO / "systems" / "references"

FAILED, MOVED, UNJUDGED = 1, cli.REGRESSION, cli.UNJUDGED

#: Runs on separately started nodes that tolerances are taken from, at least.
MIN_RUNS = 3
#: A tolerance covers this many standard deviations of the runs' medians
#: between nodes, and of the samples within a run (robust: from the MAD).
BETWEEN_RUNS_SIGMAS = 4.0
WITHIN_RUN_SIGMAS = 3.0
#: A rate's lower bound stays above a tenth of its reference.
MAX_RATE_TOLERANCE = 0.9


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def selected_system(explicit: str | None) -> str:
    """The system ReFrame would pick on this machine, unless one is named."""
    if explicit:
        return explicit
    import socket

    for system in data.load_all().values():
        if any(re.match(pattern, socket.gethostname()) for pattern in system["hostnames"]):
            return system["name"]
    return "local"


def reframe(system: str, report: Path, *options: str) -> int:
    cmd = [
        sys.executable, "-c", "import sys; from reframe.frontend.cli import main; sys.exit(main())",
        "-C", str(REPO / "reframe_settings.py"), "-c", str(REPO / "checks"), "--system", system,
        "--report-file", str(report), *options, "-r",
    ]  # fmt: skip
    print("nightly: " + " ".join(cmd[3:]), flush=True)
    return subprocess.run(cmd, cwd=REPO).returncode


def accepted_file(system: str) -> Path:
    return PERFLOGS / system / "accepted.json"


def read_accepted(system: str) -> dict | None:
    """The system's baseline: its runs (older records held one run) and node facts."""
    path = accepted_file(system)
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    if "runs" not in record:
        record = {"system": system, "runs": [record], "node": {}}
    return record


class ReferenceMiss(str):
    """A test case that failed its references: its line, and for each figure
    that missed, the bound it crossed ('lower' or 'upper')."""

    name: str
    figures: dict

    def __new__(cls, name: str, reason: str, figures: dict):
        miss = super().__new__(cls, f"{name}: {' '.join(reason.split())}")
        miss.name, miss.figures = name, figures
        return miss


def missed_bound(value: float, ref: float, lower, upper) -> str:
    """Which bound of its reference a value crossed."""
    return "upper" if upper is not None and value > ref * (1 + upper) else "lower"


def _classify(case: dict, found: dict) -> None:
    """A failed test case: out of its references (moved) where a figure failed
    them, else a check that did not measure (failed)."""
    name = case["display_name"]
    if case["result"] == "fail_deps":
        found["failed"].append(f"{name}: not run, a test it depends on (the build) failed")
        return
    missed = {
        key.split(":")[-1]: missed_bound(v[0], v[1], v[2], v[3])
        for key, v in (case.get("perfvalues") or {}).items()
        if v[-1] == "fail" and v[0] is not None and v[1]
    }
    why = " ".join(str(case.get("fail_reason") or case["result"]).split())
    if case.get("fail_phase") == "performance" and missed:
        found["moved"].append(ReferenceMiss(name, why, missed))
    else:
        found["failed"].append(f"{name} ({case.get('fail_phase') or case['result']}): {why}")


def outcomes(report: Path) -> dict:
    """The test cases of a ReFrame run report by outcome: passed, skipped,
    failed (a program did not measure) and moved (failed its references)."""
    found = {"passed": [], "skipped": [], "failed": [], "moved": []}
    if not report.exists():
        found["failed"].append(f"no run report ({report.name}): ReFrame did not finish")
        return found
    for run in json.loads(report.read_text()).get("runs", [])[-1:]:  # the last try of each case
        for case in run["testcases"]:
            if case["result"] == "pass":
                found["passed"].append(case["display_name"])
            elif case["result"] == "skip":
                found["skipped"].append(case["display_name"])
            else:
                _classify(case, found)
    return found


def run_rows(frame: pd.DataFrame, system: str, runs: list[dict]) -> pd.Series:
    """Which rows of `frame` the given runs of `system` logged."""
    mask = pd.Series(False, index=frame.index)
    for run in runs:
        mask |= select_mask(frame, "time", f"{run['start']}..{run['end']}")
    return mask & (frame["system"] == system)


def judge_run(system: str, run: dict, accepted: dict | None, outdir: Path, alpha: float) -> tuple:
    """The gate's verdict on every headline figure of the run (None without a
    baseline), and the run's records (what its report is drawn from)."""
    loaded = load([PERFLOGS / system], warn=None)
    frame = loaded.frame
    new = run_rows(frame, system, [run])
    records = Loaded(frame[new], loaded.issues, loaded.files)
    if accepted is None:
        print(f"nightly: no accepted run for {system}: nothing to judge against; accept runs with "
              f"./suite accept {run['stamp']} [more stamps] --write-references")  # fmt: skip
        return None, records
    base = run_rows(frame, system, accepted["runs"])
    result = gate.judge(frame, base, new, alpha)
    stamps = ", ".join(r["stamp"] for r in accepted["runs"])
    print(f"nightly: judged against the accepted run(s) {stamps} (Student's t on log values beyond each figure's "
          f"threshold, Holm-corrected, alpha {alpha})")  # fmt: skip
    cli.print_verdicts(result, outdir / "compare.csv")
    return result, records


def decided_by_the_gate(found: dict, result: pd.DataFrame | None, frame: pd.DataFrame | None) -> list:
    """Sort the reference misses of `found['moved']` by who decides them.

    A rate above its upper bound (its physical limit) is a measurement that
    cannot be right: a failed check. A miss of a figure the gate judged and
    passed is a median out of its bounds within the noise of its samples: it
    is returned, to be reported. Every other miss stays a move.
    """
    judged, cases = {}, {}
    if result is not None and frame is not None and not result.empty:
        cases = dict(zip(frame["display_name"], frame["case"]))
        columns = ["test", "case", "figure", "verdict", "better"]
        judged = {(t, c, f): (v, b) for t, c, f, v, b in result[columns].itertuples(index=False)}
    within_noise, moved = [], []
    for miss in found["moved"]:
        test, case = miss.name.split(" ", 1)[0], cases.get(miss.name)
        verdicts = {f: judged.get((test, case, f), (None, None)) for f in miss.figures}
        beyond_physics = [f for f, side in miss.figures.items() if side == "upper" and verdicts[f][1] == "higher"]
        if beyond_physics:
            found["failed"].append(f"{miss} (above the physical limit: {', '.join(beyond_physics)})")
        elif all(verdicts[f][0] == "pass" for f in miss.figures):
            within_noise.append(miss)
        else:
            moved.append(miss)
    found["moved"] = moved
    return within_noise


def nightly_status(found: dict, result: pd.DataFrame | None, node_judged: bool, allow_unjudged: bool) -> int:
    """`found['moved']`: the reference misses the gate did not decide."""
    if found["failed"]:
        return FAILED
    if found["moved"]:
        return MOVED
    status = cli.verdict_status(result, allow_unjudged)
    if status == 0 and not node_judged and not allow_unjudged:
        return UNJUDGED
    return status


def nightly(args) -> int:
    system = selected_system(args.system)
    stamp = now()
    outdir = NIGHTLY_DIR / system / stamp.replace(":", "")
    outdir.mkdir(parents=True, exist_ok=True)
    run = {"system": system, "stamp": stamp, "start": stamp}
    accepted = read_accepted(system)

    health = reframe(system, outdir / "health-report.json", "-t", "health", "-S", f"node_health.facts_dir={outdir}",
                     *args.reframe)  # fmt: skip
    found = outcomes(outdir / "health-report.json")
    run["health"] = "pass" if health == 0 else "fail"
    if health == 0:
        reframe(system, outdir / "run-report.json", "--mode", "nightly", *args.reframe)
        checks = outcomes(outdir / "run-report.json")
        found = {k: found[k] + checks[k] for k in found}
        run["checks"] = "pass" if not (checks["failed"] or checks["moved"]) else "fail"
    else:
        print("nightly: the health checks failed: no performance checks on an unhealthy node", file=sys.stderr)
    run["end"] = now()
    (outdir / "run.json").write_text(json.dumps(run, indent=1) + "\n")

    result, records = judge_run(system, run, accepted, outdir, args.alpha) if health == 0 else (None, None)
    within_noise = decided_by_the_gate(found, result, records.frame if records is not None else None)
    node_judged = node_facts_judged(accepted, outdir)
    if records is not None and not args.no_report:
        write_html(system, run, records, outdir)
    status = nightly_status(found, result, node_judged, args.allow_unjudged)
    for miss in within_noise:
        print(f"nightly: WITHIN NOISE {miss} (the gate passed {', '.join(miss.figures)}: not beyond the threshold "
              "with confidence after Holm's correction)")  # fmt: skip
    report_outcome(found, result, node_judged, status, outdir)
    return status


def node_facts_judged(accepted: dict | None, outdir: Path) -> bool:
    """Whether health held every node of the run to accepted node facts of its kind."""
    if not accepted or not accepted.get("node"):
        return False
    records = [json.loads(p.read_text()) for p in outdir.glob("node-*.json")]
    return bool(records) and all(
        r["partition"] in accepted["node"] and same_kind(accepted["node"][r["partition"]], r) for r in records
    )


def write_html(system: str, run: dict, records: Loaded, outdir: Path) -> None:
    """The run's HTML report, from the records the gate judged; a report that
    cannot be drawn changes no verdict."""
    if records.frame.empty:
        print("nightly: warning: no HTML report: the run logged no performance values", file=sys.stderr)
        return
    try:
        from .html import write_report

        page = write_report(records, outdir, f"Nightly run of {system}, {run['stamp']} UTC")
        print(f"report written to {page}")
    except Exception as err:  # matplotlib and pandas raise many kinds
        print(f"nightly: warning: no HTML report: {err!r}", file=sys.stderr)


_MEANING = {0: "as accepted", FAILED: "a check failed", MOVED: "something moved", UNJUDGED: "not judged"}


def report_outcome(found: dict, result: pd.DataFrame | None, node_judged: bool, status: int, outdir: Path) -> None:
    for kind in ("failed", "moved"):
        for line in found[kind]:
            print(f"nightly: {kind.upper()} {line}", file=sys.stderr)
    if not node_judged:
        print("nightly: UNJUDGED the node's facts: the accepted baseline records none of this kind of node",
              file=sys.stderr)  # fmt: skip
    gate_line = gate.summary_line(result) if result is not None else "no baseline: no figure judged"
    print(f"nightly: checks {len(found['passed'])} passed, {len(found['failed'])} failed, "
          f"{len(found['moved'])} out of references the gate does not judge, {len(found['skipped'])} skipped; "
          f"{gate_line}")  # fmt: skip
    print(f"nightly: exit {status} ({_MEANING[status]}); results in {outdir}")


# ---------------------------------------------------------------- accept --


def find_run(system: str, stamp: str) -> tuple[Path, dict]:
    outdir = NIGHTLY_DIR / system / stamp.replace(":", "")
    path = outdir / "run.json"
    if not path.exists():
        raise SystemExit(f"accept: no nightly run {stamp} of {system} ({path} is missing)")
    return outdir, json.loads(path.read_text())


def node_facts_of(outdirs: list[Path]) -> dict:
    """Per partition, the node facts the runs' health checks recorded; runs that disagree are named."""
    facts: dict = {}
    for outdir in outdirs:
        for path in sorted(outdir.glob("node-*.json")):
            record = json.loads(path.read_text())
            partition, host = record.pop("partition"), record.pop("host")
            if partition in facts and facts[partition] != record:
                print(f"accept: warning: {path} ({host}) differs from the first node of {partition}", file=sys.stderr)
            facts.setdefault(partition, record)
    return facts


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
    node: by the case field where a record carries one, else by the parameters
    and variables it logged (records older than the case field)."""
    rows = frame[(frame["test"] == test) & frame["sample"].isna() & (frame["environ"] == environ)]
    for name, value in facts.items():
        if name == "gpu_count":  # older records may not say
            rows = rows[(rows[name] == str(value)) | (rows[name] == "")]
        else:
            rows = rows[rows[name] == value]
    logged = rows["case_logged"] & (rows["case"] == format_case(items))
    older = ~rows["case_logged"]
    for name, value in items.items():
        column = name if name in rows.columns else f"param_{name}"
        older &= rows[column].map(lambda v, value=value: same_value(v, value)) if column in rows.columns else False
    return rows[logged | older]


def history_of(frame: pd.DataFrame, runs: list[dict], system: str) -> pd.DataFrame:
    """The system's records outside the accepted runs that passed their
    checks: runs on other nodes, earlier, not the runs that failed (a fault
    injected, a node that was sick) whose figures would widen tolerances."""
    passed = frame["result"].fillna("pass") == "pass"
    return frame[(frame["system"] == system) & ~run_rows(frame, system, runs) & passed]


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
                    warnings.append(f"{what} {figure}: accepted run {run + 1} ({median:.4g} {unit}) is outside "
                                    f"the tolerance the runs give ({ref:.4g} {unit}, {spread:.0%})")  # fmt: skip
            bound = round(spread, 4)
            values[figure] = (
                [round(ref, 6), -bound, None, unit] if better == "higher" else [round(ref, 6), None, bound, unit]
            )
        if values:
            entries.setdefault(first["test"], []).append(
                {"where": _where(first, detected), "case": items, "values": values}
            )
    return entries, warnings


def write_references(entries: dict[str, list], note: str, directory: Path = REFERENCES) -> list[Path]:
    """Append (or replace) the acceptance's section in each check's file."""
    marker = "# --- written by ./suite accept"
    written = []
    for test, items in entries.items():
        path = directory / f"{test}.yaml"
        text = path.read_text() if path.exists() else f"# References of {test}.\n"
        # An empty list written as '[]' cannot be followed by entries.
        kept = [line for line in text.split(marker)[0].rstrip().splitlines() if line.strip() != "[]"]
        body = yaml.safe_dump(items, sort_keys=False, default_flow_style=None, width=120)
        text = "\n".join(kept) + f"\n\n{marker} from {note} (later entries refine earlier ones)\n{body}"
        yaml.safe_load(text)  # never leave a file the checks cannot read
        path.write_text(text)
        written.append(path)
    return written


def accepted_samples(frame: pd.DataFrame, system: str, runs: list[dict]) -> pd.DataFrame:
    """The sample rows of the runs, each with the index of its run."""
    parts = []
    for i, run in enumerate(runs):
        rows = frame[run_rows(frame, system, [run]) & frame["sample"].notna()]
        parts.append(rows.assign(run=i))
    return pd.concat(parts, ignore_index=True) if parts else frame.iloc[0:0]


def accept(args) -> int:
    system = selected_system(args.system)
    found = [find_run(system, stamp) for stamp in args.stamps]
    runs = [run for _, run in found]
    for run in runs:
        if run.get("checks") != "pass" or run.get("health") != "pass":
            print(
                f"accept: warning: run {run['stamp']} did not pass all its checks; accepting it anyway", file=sys.stderr
            )
    if args.write_references and len(runs) < MIN_RUNS and args.min_tolerance is None:
        print(f"accept: references need the spread of at least {MIN_RUNS} runs on separately started nodes, "
              f"{len(runs)} given; give more stamps, or a tolerance with --min-tolerance", file=sys.stderr)  # fmt: skip
        return UNJUDGED
    record = {"system": system, "accepted": now(), "runs": runs, "node": node_facts_of([o for o, _ in found])}
    target = accepted_file(system)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(record, indent=1) + "\n")
    print(f"accept: {', '.join(args.stamps)} now the baseline of {system} ({target.relative_to(REPO)})")
    if not record["node"]:
        print("accept: warning: the runs recorded no node facts: health on this system judges nothing", file=sys.stderr)
    if args.write_references:
        minimum = (args.min_tolerance if args.min_tolerance is not None else 3.0) / 100
        detected = bool(data.load_all()[system].get("detect"))
        frame = load([PERFLOGS / system], warn=None).frame
        samples, history = accepted_samples(frame, system, runs), history_of(frame, runs, system)
        entries, warnings = reference_entries(samples, minimum, detected, history, min(MIN_RUNS, len(runs)))
        for line in warnings:
            print(f"accept: warning: {line}", file=sys.stderr)
        note = f"the runs {', '.join(args.stamps)}"
        for path in write_references(entries, note):
            print(f"accept: references written to {path.relative_to(REPO)}")
    return 0


def with_current_thresholds(frame: pd.DataFrame, rows: pd.Series) -> pd.DataFrame:
    """`frame` with the thresholds of the chosen figure rows taken from the
    references as they are now, instead of those logged when the run ran."""
    frame = frame.copy()
    entries: dict = {}
    for index in frame.index[rows & frame["sample"].isna()]:
        row = frame.loc[index]
        if row["test"] not in entries:
            entries[row["test"]] = load_entries(row["test"])
        facts = {k: row[k] for k in NODE_FACTS}
        value = matching_values(entries[row["test"]], facts, parse_case(row["case"])).get(row["figure"])
        lower, upper = (value[1], value[2]) if value else (None, None)
        frame.loc[index, ["lower_thres", "upper_thres"]] = [np.nan if lower is None else lower,
                                                             np.nan if upper is None else upper]  # fmt: skip
    return frame


def rejudge(args) -> int:
    """The gate's verdict on earlier runs against the accepted baseline and the
    references as they are now: what a change of references or of the gate
    would have said of them (rejudged.csv beside each run's compare.csv)."""
    system = selected_system(args.system)
    accepted = read_accepted(system)
    if accepted is None:
        print(f"rejudge: no accepted run for {system}", file=sys.stderr)
        return UNJUDGED
    frame = load([PERFLOGS / system], warn=None).frame
    base, worst = run_rows(frame, system, accepted["runs"]), 0
    for stamp in args.stamps:
        outdir, run = find_run(system, stamp)
        new = run_rows(frame, system, [run])
        result = gate.judge(with_current_thresholds(frame, new), base, new, args.alpha)
        result.to_csv(outdir / "rejudged.csv", index=False)
        status = cli.verdict_status(result, allow_unjudged=False)
        print(f"rejudge: {stamp}: {gate.summary_line(result)}; exit {status} ({_MEANING[status]})")
        for row in result[result["verdict"] == "regression"].itertuples():
            change = f"{row.change_pct:+.1f}% (threshold {row.threshold_pct:.1f}%)"
            print(f"  REGRESSION {row.test} {row.case} {row.figure}: {change}")
        worst = max(worst, status)
    return worst


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m reports.nightly", description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="command", required=True)
    p = sub.add_parser("nightly", help="health checks, performance checks, the gate, the report")
    p.add_argument("--system", help="the system to run (default: the one ReFrame picks on this machine)")
    p.add_argument("--alpha", type=float, default=0.05, help="family-wise significance level of the gate")
    p.add_argument("--allow-unjudged", action="store_true", help="exit 0, not 3, when something could not be judged")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report")
    p.add_argument("reframe", nargs=argparse.REMAINDER, help="further ReFrame options, after --")
    p.set_defaults(func=nightly)
    p = sub.add_parser("accept", help="make nightly runs the baseline")
    p.add_argument("stamps", nargs="+", metavar="STAMP", help="the runs' stamps (reports/nightly/<system>/<stamp>)")
    p.add_argument("--system")
    p.add_argument("--write-references", action="store_true", help="write references from the runs")
    p.add_argument(
        "--min-tolerance", type=float, metavar="PCT",
        help=f"smallest tolerance in percent (default 3); with fewer than {MIN_RUNS} runs, the tolerance itself",
    )  # fmt: skip
    p.set_defaults(func=accept)
    p = sub.add_parser("rejudge", help="judge earlier runs again against the references as they are now")
    p.add_argument("stamps", nargs="+", metavar="STAMP")
    p.add_argument("--system")
    p.add_argument("--alpha", type=float, default=0.05)
    p.set_defaults(func=rejudge)
    return top


def main(argv=None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exit:  # a usage error judged nothing: 3, not the 2 of something that moved
        return UNJUDGED if exit.code == 2 else exit.code
    if getattr(args, "reframe", None) and args.reframe[0] == "--":
        args.reframe = args.reframe[1:]
    try:
        return args.func(args)
    except SystemExit as err:  # a message of our own (no such run...)
        if err.code in (0, None) or isinstance(err.code, int):
            raise
        print(err.code, file=sys.stderr)
        return UNJUDGED
    except Exception as err:  # an error of the suite itself judged nothing
        traceback.print_exc()
        print(f"{args.command}: error, nothing judged: {err}", file=sys.stderr)
        return UNJUDGED


if __name__ == "__main__":
    os.chdir(REPO)
    sys.exit(main())
