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

`accept` (reports/accept.py) makes runs the baseline.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
import traceback
from pathlib import Path

import pandas as pd

from systems import data, toolkits
from systems.health import same_kind

from . import cli, gate
from .compare import select_mask
from .load import Loaded, load

REPO = Path(__file__).resolve().parent.parent
NIGHTLY_DIR = REPO / "reports" / "nightly"
PERFLOGS = REPO / "perflogs"
REFERENCES = REPO / "systems" / "references"

FAILED, MOVED, UNJUDGED = 1, cli.REGRESSION, cli.UNJUDGED


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


#: ReFrame's options that select checks, and what follows each: "value" (always
#: one), "optional" (one unless the next word is an option) or "flag" (none).
#: The health checks run whatever the night's selection is.
SELECTION_OPTIONS = {"-n": "value", "--name": "value", "-x": "value", "--exclude": "value", "-t": "value",
                     "--tag": "value", "-T": "value", "--exclude-tag": "value", "-E": "value",
                     "--filter-expr": "value", "--maintainer": "value", "--restore-session": "optional",
                     "--failed": "flag", "--cpu-only": "flag", "--gpu-only": "flag"}  # fmt: skip


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


def nightly(args) -> int:
    if os.environ.pop(toolkits.RUNTIMES_VARIABLE, None):
        # The accepted runs are of the node's own environments: runtime twins have no baseline.
        print(f"nightly: {toolkits.RUNTIMES_VARIABLE} ignored (runtime twins are for ./suite upgrade)", flush=True)
    system = selected_system(args.system)
    stamp = now()
    outdir = NIGHTLY_DIR / system / stamp.replace(":", "")
    outdir.mkdir(parents=True, exist_ok=True)
    run = {"system": system, "stamp": stamp, "start": stamp}
    accepted = read_accepted(system)

    health = reframe(system, outdir / "health-report.json", "-t", "health", "-S", f"node_health.facts_dir={outdir}",
                     *health_options(args.reframe))  # fmt: skip
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


def find_run(system: str, stamp: str) -> tuple[Path, dict]:
    outdir = NIGHTLY_DIR / system / stamp.replace(":", "")
    path = outdir / "run.json"
    if not path.exists():
        raise SystemExit(f"accept: no nightly run {stamp} of {system} ({path} is missing)")
    return outdir, json.loads(path.read_text())


def _accept(args) -> int:
    from .accept import accept  # accept builds on this module

    return accept(args)


def _rejudge(args) -> int:
    from .accept import rejudge

    return rejudge(args)


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
        help="smallest tolerance in percent (default 3); with fewer than 3 runs, the tolerance itself",
    )  # fmt: skip
    p.set_defaults(func=_accept)
    p = sub.add_parser("rejudge", help="judge earlier runs again against the references as they are now")
    p.add_argument("stamps", nargs="+", metavar="STAMP")
    p.add_argument("--system")
    p.add_argument("--alpha", type=float, default=0.05)
    p.set_defaults(func=_rejudge)
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
