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
from .load import load

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
    """A test case that failed its references: its line, and the figures that missed."""

    name: str
    figures: list

    def __new__(cls, name: str, reason: str, figures: list):
        miss = super().__new__(cls, f"{name}: {' '.join(reason.split())}")
        miss.name, miss.figures = name, figures
        return miss


def outcomes(report: Path) -> dict:
    """The test cases of a ReFrame run report by outcome: passed, skipped,
    failed (a program did not measure) and moved (failed its references)."""
    found = {"passed": [], "skipped": [], "failed": [], "moved": []}
    if not report.exists():
        found["failed"].append(f"no run report ({report.name}): ReFrame did not finish")
        return found
    for run in json.loads(report.read_text()).get("runs", [])[-1:]:  # the last try of each case
        for case in run["testcases"]:
            name = case["display_name"]
            if case["result"] == "pass":
                found["passed"].append(name)
            elif case["result"] == "skip":
                found["skipped"].append(name)
            elif case.get("fail_phase") == "performance":
                missed = [k.split(":")[-1] for k, v in (case.get("perfvalues") or {}).items() if v[-1] == "fail"]
                found["moved"].append(ReferenceMiss(name, str(case.get("fail_reason", "")), missed))
            elif case["result"] == "fail_deps":
                found["failed"].append(f"{name}: not run, a test it depends on (the build) failed")
            else:
                why = str(case.get("fail_reason") or case["result"]).strip()
                found["failed"].append(f"{name} ({case.get('fail_phase') or case['result']}): {why}")
    return found


def run_rows(frame: pd.DataFrame, system: str, runs: list[dict]) -> pd.Series:
    """Which rows of `frame` the given runs of `system` logged."""
    mask = pd.Series(False, index=frame.index)
    for run in runs:
        mask |= select_mask(frame, "time", f"{run['start']}..{run['end']}")
    return mask & (frame["system"] == system)


def judge_run(system: str, run: dict, accepted: dict | None, outdir: Path, alpha: float) -> tuple:
    """The gate's verdict on every headline figure of the run (None without a
    baseline), and the run's records."""
    frame = load([PERFLOGS / system], warn=None).frame
    new = run_rows(frame, system, [run])
    if accepted is None:
        print(f"nightly: no accepted run for {system}: nothing to judge against; accept runs with "
              f"./suite accept {run['stamp']} [more stamps] --write-references")  # fmt: skip
        return None, frame[new]
    base = run_rows(frame, system, accepted["runs"])
    result = gate.judge(frame, base, new, alpha)
    stamps = ", ".join(r["stamp"] for r in accepted["runs"])
    print(f"nightly: judged against the accepted run(s) {stamps} (Student's t on log values beyond each figure's "
          f"threshold, Holm-corrected, alpha {alpha})")  # fmt: skip
    cli.print_verdicts(result, outdir / "compare.csv")
    return result, frame[new]


def decided_by_the_gate(moved: list, result: pd.DataFrame | None, frame: pd.DataFrame | None) -> tuple[list, list]:
    """The reference misses the gate did not judge (they count as moves), and
    those it judged and passed: figures whose median left their reference's
    bounds within the noise of their samples (they are reported)."""
    if result is None or frame is None or result.empty:
        return list(moved), []
    judged = result[result["verdict"] != "unjudged"]
    verdicts = {(t, c, f): v for t, c, f, v in judged[["test", "case", "figure", "verdict"]].itertuples(index=False)}
    cases = dict(zip(frame["display_name"], frame["case"]))
    counted, within_noise = [], []
    for miss in moved:
        test = miss.name.split(" ", 1)[0]
        found = [verdicts.get((test, cases.get(miss.name), f)) for f in getattr(miss, "figures", [])]
        if found and all(v in ("pass", "improvement") for v in found):
            within_noise.append(miss)
        elif not found or any(v is None for v in found):
            counted.append(miss)  # a figure the gate did not judge: the reference decides
    return counted, within_noise


def nightly_status(found: dict, result: pd.DataFrame | None, node_judged: bool, allow_unjudged: bool) -> int:
    """`found['moved']`: the reference misses the gate did not decide."""
    if found["failed"]:
        return FAILED
    if found["moved"] or (result is not None and (result["verdict"] == "regression").any()):
        return MOVED
    unjudged = result is None or (result["verdict"] == "unjudged").any() or not node_judged
    return UNJUDGED if unjudged and not allow_unjudged else 0


def nightly(args) -> int:
    system = selected_system(args.system)
    stamp = now()
    outdir = NIGHTLY_DIR / system / stamp.replace(":", "")
    outdir.mkdir(parents=True, exist_ok=True)
    run = {"system": system, "stamp": stamp, "start": stamp}
    accepted = read_accepted(system)

    health = reframe(system, outdir / "health-report.json", "-t", "health", "-S", f"NodeHealth.facts_dir={outdir}",
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
    found["moved"], within_noise = decided_by_the_gate(found["moved"], result, records)
    node_judged = node_facts_judged(accepted, outdir)
    if health == 0 and not args.no_report:
        cli.main(["html", str(PERFLOGS / system), "-o", str(outdir), "--title", f"Nightly run of {system}, {stamp} UTC",
                  "--since", run["start"], "--until", run["end"]])  # fmt: skip
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


def _robust_spread(samples: np.ndarray) -> float:
    """The relative standard deviation of samples, from their median absolute deviation."""
    median = float(np.median(samples))
    return 1.4826 * float(np.median(np.abs(samples - median))) / median if median else 0.0


def tolerance(runs: list[np.ndarray], minimum: float, better: str, history: list[float] = ()) -> tuple[float, float]:
    """A figure's reference (the median of the accepted runs' medians) and
    tolerance: the larger of `minimum`, BETWEEN_RUNS_SIGMAS times the relative
    standard deviation of the runs' medians about the reference (the accepted
    runs', and the values of earlier runs on other nodes in `history`), and
    WITHIN_RUN_SIGMAS times the samples' (robust, from the MAD)."""
    medians = [float(np.median(r)) for r in runs]
    ref = statistics.median(medians)
    others = [*medians, *history]
    between = (sum((m / ref - 1) ** 2 for m in others) / (len(others) - 1)) ** 0.5 if len(others) > 1 and ref else 0.0
    within = statistics.median(_robust_spread(r) for r in runs)
    spread = max(minimum, BETWEEN_RUNS_SIGMAS * between, WITHIN_RUN_SIGMAS * within)
    return ref, min(spread, MAX_RATE_TOLERANCE) if better == "higher" else spread


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
    """The system's records outside the accepted runs: runs on other nodes, earlier."""
    return frame[(frame["system"] == system) & ~run_rows(frame, system, runs)]


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
    directory: Path = REFERENCES,
    history: pd.DataFrame | None = None,
) -> dict[str, list]:
    """Per check, one entry per case and kind of node: each headline figure's
    reference and tolerance from the runs (samples: the runs' sample rows,
    with a 'run' column) and, where `history` (load.py's table) holds runs of
    the same case on the same kind of node, from their spread too. A wider
    tolerance an existing reference gives is kept."""
    entries: dict[str, list] = {}
    keys = [k for k in CASE_KEY if k in samples.columns]
    for _, case in samples.groupby([samples[k].fillna("").astype(str) for k in keys]):
        first = case.iloc[0]
        facts = {k: first.get(k) for k in NODE_FACTS}
        items = parse_case(first["case"])
        existing = matching_values(load_entries(first["test"], str(directory)), facts, items)
        earlier = case_rows(history, first["test"], items, facts, first["environ"]) if history is not None else None
        values = {}
        for (figure, unit), rows in case.groupby(["figure", "unit"]):
            better = direction(unit)
            if better is None:
                continue
            runs = [g["value"].to_numpy(float) for _, g in rows.groupby("run")]
            # One value per earlier run of the case: its jobs' figure, by completion time.
            past = [] if earlier is None else earlier[earlier["figure"] == figure].groupby("time")["value"].median()
            ref, spread = tolerance(runs, minimum, better, [float(v) for v in past])
            old = existing.get(figure)
            if better == "higher":
                if old and old[1] is not None and old[1] < -spread:
                    spread = -old[1]
                values[figure] = [round(ref, 6), -round(spread, 4), None, unit]
            else:
                if old and old[2] is not None and old[2] > spread:
                    spread = old[2]
                values[figure] = [round(ref, 6), None, round(spread, 4), unit]
        if values:
            entry = {"where": _where(first, detected), "case": items, "values": values}
            entries.setdefault(first["test"], []).append(entry)
    return entries


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
        return 2
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
        entries = reference_entries(samples, minimum, detected, history=history)
        note = f"the runs {', '.join(args.stamps)}"
        for path in write_references(entries, note):
            print(f"accept: references written to {path.relative_to(REPO)}")
    return 0


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
    return top


def main(argv=None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exit:  # a usage error judged nothing: 3, not the 2 of something that moved
        return UNJUDGED if exit.code == 2 else exit.code
    if getattr(args, "reframe", None) and args.reframe[0] == "--":
        args.reframe = args.reframe[1:]
    return args.func(args)


if __name__ == "__main__":
    os.chdir(REPO)
    sys.exit(main())
