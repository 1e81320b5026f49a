"""The nightly entry point and the acceptance of a run as the new baseline.

    ./suite nightly [--system NAME] [--threshold PCT] [-- reframe options]
    ./suite accept STAMP [--system NAME] [--write-references --tolerance PCT]

`nightly` runs the health checks (``-t health``), then every other check that
can run (ReFrame's ``nightly`` mode, see systems/rfm.py), with ReFrame's
results storage on and its JSON run report kept. It then compares the run's
perflog lines with those of the last accepted run of the same system
(``reports compare --by time``, pooled repeated runs, Mann-Whitney U), writes
the HTML report of the run with the comparison beside it, and exits non-zero
on a failed check (1) or on a significant regression past the threshold (2).
Everything a run leaves is under reports/nightly/<system>/<stamp>/.

`accept` makes a run the system's baseline (perflogs/<system>/accepted.json)
and, with --write-references, writes the run's medians back as the system's
references (systems/references/<Check>.yaml) with the tolerance given.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml

from checks.suite.references import load_entries, matching_values

from . import cli
from .load import CORE, load

REPO = Path(__file__).resolve().parent.parent
NIGHTLY_DIR = REPO / "reports" / "nightly"
PERFLOGS = REPO / "perflogs"
REFERENCES = REPO / "systems" / "references"

#: Repeated runs inside one case count as samples of one variable.
POOLS = ["run([2-9]|[1-9][0-9]+)_bw=steady_runs", r"(read|write)_bw_node(\d+)_run\d+=\1_bw_node\2_runs"]

#: The variables an acceptance turns into references: each check's headline
#: figures and anchor points, not every sample (per-run values, every point of
#: a sweep) whose noise would make the gate flap.
REFERENCE_VARS = cli.cmp.HEADLINE_VARS

#: Fields that are not a case's parameters or variables.
NOT_CASE = set(CORE) | {"program", "gpu_count"}
#: What a reference's `where` may name of the machine a row comes from.
NODE_FACTS = ("system", "partition", "gpu_model", "gpu_count", "host_link")


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def selected_system(explicit: str | None) -> str:
    """The system ReFrame would pick on this machine, unless one is named."""
    if explicit:
        return explicit
    sys.path.insert(0, str(REPO))
    import socket

    from systems.rfm import site_configuration

    host = socket.gethostname()
    for system in site_configuration()["systems"]:
        if any(re.match(pattern, host) for pattern in system["hostnames"]):
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


def run_rows(system: str, start: str, end: str) -> pd.DataFrame:
    frame = load([PERFLOGS]).frame
    window = cli.cmp.select(frame[frame["system"] == system], "time", f"{start}..{end}")
    return window


def compare_with_accepted(system: str, run: dict, outdir: Path, threshold: float | None) -> int:
    """0: no regression past the threshold; 2: a significant one; no baseline: 0."""
    baseline = accepted_file(system)
    if not baseline.exists():
        print(f"nightly: no accepted run for {system} yet: accept this one with ./suite accept {run['stamp']}")
        return 0
    base = json.loads(baseline.read_text())
    argv = ["compare", str(PERFLOGS), "--by", "time", "--base", f"{base['start']}..{base['end']}",
            "--new", f"{run['start']}..{run['end']}", "--csv", str(outdir / "compare.csv"),
            "--key", "system,partition,environ,test,params,perf_var,unit"]  # fmt: skip
    for spec in POOLS:
        argv += ["--pool", spec]
    if threshold is not None:
        argv += ["--threshold", str(threshold)]
    print(f"nightly: comparing with the run accepted on {base['stamp']}", flush=True)
    status = cli.main(argv)
    return {0: 0, 1: 2}.get(status, 0)


def nightly(args) -> int:
    system = selected_system(args.system)
    stamp = now()
    outdir = NIGHTLY_DIR / system / stamp.replace(":", "")
    outdir.mkdir(parents=True, exist_ok=True)
    run = {"system": system, "stamp": stamp, "start": stamp}

    health = reframe(system, outdir / "health-report.json", "-t", "health", *args.reframe)
    run["health"] = "pass" if health == 0 else "fail"
    status = 0
    if health != 0:
        print("nightly: the health checks failed: no performance checks on an unhealthy node", file=sys.stderr)
        status = 1
    else:
        perf = reframe(system, outdir / "run-report.json", "--mode", "nightly", *args.reframe)
        run["checks"] = "pass" if perf == 0 else "fail"
        status = 1 if perf else 0
    run["end"] = now()
    (outdir / "run.json").write_text(json.dumps(run, indent=1) + "\n")

    if health == 0:
        regression = compare_with_accepted(system, run, outdir, args.threshold)
        status = status or regression
        cli.main(["html", str(PERFLOGS), "-o", str(outdir), "--title",
                  f"Nightly run of {system}, {stamp} UTC"] + _window_filter(run))  # fmt: skip
    print(f"nightly: {run.get('checks', 'not run')} checks, health {run['health']}; results in {outdir}")
    return status


def _window_filter(run: dict) -> list[str]:
    # The HTML report covers this run only: its time window, through --since/--until.
    return ["--since", run["start"], "--until", run["end"]]


def find_run(system: str, stamp: str) -> tuple[Path, dict]:
    outdir = NIGHTLY_DIR / system / stamp.replace(":", "")
    path = outdir / "run.json"
    if not path.exists():
        raise SystemExit(f"accept: no nightly run {stamp} of {system} ({path} is missing)")
    return outdir, json.loads(path.read_text())


def reference_entries(rows: pd.DataFrame, tolerance: float, directory: Path = REFERENCES) -> dict[str, list]:
    """Per check, one entry per case: the run's medians with +-tolerance, or
    with the wider tolerance an existing reference already justifies."""
    entries: dict[str, list] = {}
    case_fields = [c for c in rows.columns if c not in NOT_CASE]
    # One entry per case and machine: the same case on two GPUs and on four is two.
    facts_of = [c for c in NODE_FACTS if c in rows.columns]
    for (test, *_), group in rows.groupby(["test", "display_name", *facts_of], dropna=False):
        first = group.iloc[0]
        where = _where(first)
        # A variable named like a table column was loaded as param_NAME.
        case = {
            c.removeprefix("param_"): _plain(first[c]) for c in case_fields if pd.notna(first[c]) and first[c] != ""
        }
        facts = {k: first[k] for k in facts_of}
        existing = matching_values(load_entries(test, str(directory)), facts, case)
        values = {}
        for var, samples in group.groupby("perf_var"):
            if not re.fullmatch(REFERENCE_VARS, var):
                continue
            median = float(samples["value"].median())
            low, high = -tolerance / 100, tolerance / 100
            if var in existing:
                low, high = min(low, existing[var][1]), max(high, existing[var][2])
            values[var] = [round(median, 6), low, high, str(samples["unit"].iloc[0])]
        if values:
            entries.setdefault(test, []).append({"where": where, "case": case, "values": values})
    return entries


def _plain(value):
    return value.item() if hasattr(value, "item") else value


def _where(row) -> dict:
    # Machines described at run time are matched by what they are, not by name.
    if row["system"] in ("local", "ci-slurm"):
        where = {"gpu_model": row["gpu_model"], "host_link": row["host_link"]}
        if "gpu_count" in row and pd.notna(row["gpu_count"]):
            where["gpu_count"] = int(float(row["gpu_count"]))
        return where
    return {"system": row["system"]}


def write_references(entries: dict[str, list], stamp: str, directory: Path = REFERENCES) -> list[Path]:
    """Append (or replace) this acceptance's section in each check's file."""
    marker = "# --- written by ./suite accept"
    written = []
    for test, items in entries.items():
        path = directory / f"{test}.yaml"
        text = path.read_text() if path.exists() else f"# References of {test}.\n"
        # An empty list written as '[]' cannot be followed by entries.
        kept = [line for line in text.split(marker)[0].rstrip().splitlines() if line.strip() != "[]"]
        body = yaml.safe_dump(items, sort_keys=False, default_flow_style=None, width=120)
        text = "\n".join(kept) + f"\n\n{marker} from the run of {stamp} (later entries refine earlier ones)\n{body}"
        yaml.safe_load(text)  # never leave a file the checks cannot read
        path.write_text(text)
        written.append(path)
    return written


def accept(args) -> int:
    system = selected_system(args.system)
    outdir, run = find_run(system, args.stamp)
    if run.get("checks") != "pass":
        print(f"accept: run {args.stamp} did not pass its checks; accepting it anyway", file=sys.stderr)
    target = accepted_file(system)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(run, indent=1) + "\n")
    print(f"accept: {args.stamp} is now the baseline of {system} ({target.relative_to(REPO)})")
    if args.write_references:
        rows = run_rows(system, run["start"], run["end"])
        for path in write_references(reference_entries(rows, args.tolerance), run["stamp"]):
            print(f"accept: references written to {path.relative_to(REPO)}")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m reports.nightly", description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="command", required=True)
    p = sub.add_parser("nightly", help="health checks, performance checks, comparison, report")
    p.add_argument("--system", help="the system to run (default: the one ReFrame picks on this machine)")
    p.add_argument("--threshold", type=float, default=5.0, help="regression threshold in percent (default 5)")
    p.add_argument("reframe", nargs=argparse.REMAINDER, help="further ReFrame options, after --")
    p.set_defaults(func=nightly)
    p = sub.add_parser("accept", help="make a nightly run the baseline")
    p.add_argument("stamp", help="the run's stamp (reports/nightly/<system>/<stamp>)")
    p.add_argument("--system")
    p.add_argument("--write-references", action="store_true", help="write the run's medians as references")
    p.add_argument("--tolerance", type=float, default=10.0, help="reference tolerance in percent (default 10)")
    p.set_defaults(func=accept)
    return top


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if getattr(args, "reframe", None) and args.reframe[0] == "--":
        args.reframe = args.reframe[1:]
    return args.func(args)


if __name__ == "__main__":
    os.chdir(REPO)
    sys.exit(main())
