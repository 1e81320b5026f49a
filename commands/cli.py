"""python -m commands COMMAND: the suite's one parser for what reads perflogs.

load, compare and html turn perflogs into tables, comparisons and figures,
screenshots looks at a report in a browser (reports/browser.py); nightly,
accept and rejudge (runner/nightly.py, runner/accept.py), power and
upgrade judge them. Every command exits as judge/status.py says.

compare judges two sets of runs by the verdict by path, as the nightly and
upgrade do (judge/compare.py): it exits 0 when every path was judged and
none moved, 1 on a broken measurement, 2 when a path moved or is unstable,
3 when a path could not be judged (or nothing could be compared: no data,
an unknown field, runs that cannot be paired, a usage error).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path

import pandas as pd

from experiments.files import DamagedFile, disk_problem
from experiments.keys import SERIES_FIELDS
from experiments.roots import REPO
from judge import compare as cmp
from judge import verdict
from judge.status import AS_ACCEPTED, UNJUDGED
from reports.load import load
from reports.runs import PERFLOGS
from runner.histories import report_histories
from systems import data


def _paths(args) -> list[Path]:
    return [Path(p) for p in args.paths] or [PERFLOGS]


def _windows(args) -> list[tuple[str | None, str | None]] | None:
    """The times a command reads, where it names them (--since, --until; compare --by time's two ranges):
    those rows of the store, not every record it holds."""
    if getattr(args, "by", None) in ("time", "date"):
        ranges = [spec.partition("..") for spec in (args.base, args.new)]
        return [(start or None, (end if sep else start) or None) for start, sep, end in ranges]
    if getattr(args, "since", None) or getattr(args, "until", None):
        return [(args.since, args.until)]
    return None


def _filter(frame: pd.DataFrame, args) -> pd.DataFrame:
    if getattr(args, "test", None):
        frame = frame[frame["test"].str.contains(args.test, regex=True)]
    if getattr(args, "var", None):
        frame = frame[frame["perf_var"].str.contains(args.var, regex=True)]
    if getattr(args, "since", None) or getattr(args, "until", None):
        frame = cmp.select(frame, "time", f"{args.since or ''}..{args.until or ''}")
    return frame


def cmd_load(args) -> int:
    loaded = load(_paths(args), windows=_windows(args))
    frame = _filter(loaded.frame, args)
    print(f"{len(frame)} performance values from {len(loaded.files)} file(s)")
    for path, rows in sorted(loaded.files.items()):
        issues = sum(1 for i in loaded.issues if i.path == path)
        print(
            f"  {path}: {rows} values" + (f", {issues} line(s) skipped or doubted (see the warnings)" if issues else "")
        )
    if not frame.empty:
        keys = list(SERIES_FIELDS)
        print()
        print(frame.groupby(keys + ["test"], dropna=False).size().rename("values").reset_index().to_string(index=False))
    if args.csv:
        frame.to_csv(args.csv, index=False)
        print(f"table written to {args.csv}")
    return 1 if args.strict and loaded.issues else 0


def cmd_compare(args) -> int:
    loaded = load(_paths(args), windows=_windows(args))
    frame = _filter(loaded.frame, args)
    if frame.empty:
        print("error: no performance values to compare (check the paths, --test and --var)", file=sys.stderr)
        return UNJUDGED
    try:
        for spec in args.pool:
            frame = cmp.pool(frame, spec)
        found = cmp.compare(frame, args.by, args.base, args.new, alpha=args.alpha)
    except (KeyError, ValueError) as err:
        print(f"error: {err.args[0]}", file=sys.stderr)
        return UNJUDGED
    result = found.result
    if result.figures.empty:
        print(
            f"nothing to compare: no headline figure (with samples) has {args.by} {args.base!r} or {args.new!r}",
            file=sys.stderr,
        )
        return UNJUDGED
    print(f"{args.by}: base {args.base!r} against new {args.new!r}, {found.design}, by the verdict by path")
    print(verdict.summary_line(result))
    for line in cmp.path_lines(result.paths):
        print(f"  {line}")
    Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
    result.figures.to_csv(args.csv, index=False)
    result.paths.to_csv(Path(args.csv).with_suffix(".paths.csv"), index=False)
    print(f"tables written to {args.csv} (figures) and {Path(args.csv).with_suffix('.paths.csv')} (paths)")
    status = cmp.status_of(result)
    return 0 if status == UNJUDGED and args.allow_unjudged else status


def cmd_html(args) -> int:
    from reports.html import write_report
    from runner.pages import latest_nights

    paths = _paths(args)
    loaded = load(paths, windows=_windows(args))
    loaded.frame = _filter(loaded.frame, args)
    if loaded.frame.empty:
        print("error: no performance values to report", file=sys.stderr)
        return UNJUDGED
    outdir = Path(args.output)
    frame = loaded.frame
    print(
        f"report: {len(frame)} records of {frame['test'].nunique()} checks and {frame['system'].nunique()} systems; "
        f"drawing their histories, latest nights and figures into {outdir} (a second or so a figure)",
        file=sys.stderr,
        flush=True,
    )
    histories = report_histories(loaded.frame, outdir)
    nights = latest_nights(loaded.frame, outdir, histories)  # the index opens with them
    report = write_report(loaded, outdir, args.title, args.generic_for_all, histories=histories, nights=nights)
    print(f"report written to {report.index}")
    return 0


def cmd_reindex(args) -> int:
    """Each system's store rebuilt from its perflogs (reports/store.py), and with --check compared first."""
    import time

    from reports.load import reindex

    status = AS_ACCEPTED
    for top in _paths(args):
        if not top.is_dir():
            print(f"reindex: {top}: not a folder of perflogs", file=sys.stderr)
            return UNJUDGED
        started = time.process_time()
        for folder, rows, found in reindex(top, check=args.check):
            print(f"reindex: {folder}: {rows} rows from its perflogs ({time.process_time() - started:.1f} CPU s)")
            for line in found:
                print(f"reindex: {folder}: the store kept differed from its rebuild: {line}", file=sys.stderr)
            status = UNJUDGED if found else status
    return status


def parser() -> argparse.ArgumentParser:
    """The one parser of the suite's reporting and judging commands."""
    from reports import grafana
    from runner import accept, act, histories, nightly, pages, partition, power, tier_catalogue, upgrade

    # ./suite names its commands as the user typed them (./suite nightly, ./suite report html).
    prog = os.environ.get("GPU_MEMPATHS_PROG", "python -m commands")
    top = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = top.add_subparsers(dest="command", required=True)

    def common(p):
        p.add_argument("paths", nargs="*", help=f"perflog files or directories (default: {PERFLOGS})")
        p.add_argument("--test", help="only checks whose name contains a match of this regular expression")
        p.add_argument("--var", help="only performance variables that contain a match of this regular expression")
        p.add_argument("--since", help="only values recorded at or after this ISO date or time (UTC)")
        p.add_argument("--until", help="only values recorded at or before this ISO date or time (UTC)")

    p = sub.add_parser("load", help="read perflogs into one table; report lines that cannot be read")
    common(p)
    p.add_argument("--csv", help="write the tidy table to this CSV file")
    p.add_argument("--strict", action="store_true", help="exit 1 when any line was skipped")
    p.set_defaults(func=cmd_load)

    p = sub.add_parser("compare", help="two sets of runs per case and performance variable")
    common(p)
    p.add_argument(
        "--by", required=True, help="field that chooses the sets: driver_version, cuda_version, node, time..."
    )
    p.add_argument("--base", required=True, help="value, glob or version prefix (570, 570.x); for time FROM..TO")
    p.add_argument("--new", required=True, help="as --base")
    p.add_argument("--alpha", type=float, default=0.05, help="family-wise significance level (default 0.05)")
    p.add_argument(
        "--pool",
        action="append",
        default=[],
        metavar="REGEX=NAME",
        help="also treat the figures matching REGEX as samples of one figure NAME "
        "(for records older than samples, e.g. 'run([2-9])_bw=steady_runs')",
    )
    p.add_argument("--allow-unjudged", action="store_true", help="exit 0, not 3, when some figures cannot be judged")
    p.add_argument(
        "--csv",
        default=str(REPO / "build" / "compare.csv"),
        help="CSV file of the comparison (default: build/compare.csv in the checkout, which git ignores)",
    )
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser(
        "html",
        help="figures (PNG) and static HTML pages: an index opening with the latest night of each kind of node, "
        "a page per check, the histories",
    )
    common(p)
    p.add_argument("-o", "--output", required=True, help="directory for index.html and the figures")
    p.add_argument("--title", default="GPU memory paths: performance report")
    p.add_argument(
        "--generic-for-all", action="store_true", help="also draw the generic figure for checks with their own"
    )
    p.set_defaults(func=cmd_html)
    p = sub.add_parser(
        "reindex",
        help="rebuild the store the perflogs are read through (build/store/), e.g. after it was deleted or "
        "damaged; --check compares the kept one with the rebuild first",
    )
    p.add_argument("paths", nargs="*", help=f"folders of perflogs (default: {PERFLOGS}, each system's)")
    p.add_argument(
        "--check", action="store_true", help="exit 3 naming what the kept store differed in from its rebuild"
    )
    p.set_defaults(func=cmd_reindex)
    for module in (nightly, accept, histories, grafana, power, upgrade, pages, act, tier_catalogue):
        module.add_parsers(sub)
    partition.add_arguments(sub.choices["nightly"])
    return top


def say_nearest_command(top: argparse.ArgumentParser, argv: list[str]) -> None:
    """After argparse's usage error, the known commands nearest a word that names none ('htm': html)."""
    commands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction)).choices
    word = next((w for w in argv if not w.startswith("-")), None)
    if word is not None and word not in commands:
        print(data.unknown(f"{top.prog}: no command", word, commands), file=sys.stderr)
    elif word is not None:  # an option the command does not have ('--sytem'): the nearest ones
        actions = commands[word]._option_string_actions
        known = {name for name, action in actions.items() if action.help != argparse.SUPPRESS}
        for option in (w.split("=", 1)[0] for w in argv if w.startswith("--")):
            if option not in actions:
                print(data.unknown(f"{top.prog} {word}: no option", option, known), file=sys.stderr)


def main(argv=None) -> int:
    """Parse and run one command; its exit status (judge/status.py)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # What follows '--' goes to ReFrame (nightly, upgrade), whatever it looks like.
    ours, reframe = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    top = parser()
    try:
        args = top.parse_args(ours)
    except SystemExit as exit:  # a usage error judged nothing: 3, never the 2 of a move
        if exit.code not in (0, None):
            say_nearest_command(top, ours)
        return AS_ACCEPTED if exit.code in (0, None) else UNJUDGED
    if reframe and not hasattr(args, "reframe"):
        print(f"{args.command}: options after '--' are ReFrame's, which {args.command} does not run", file=sys.stderr)
        return UNJUDGED
    args.reframe = reframe
    try:
        return args.func(args)
    except SystemExit as err:  # a message of our own (no such run...)
        if err.code in (0, None) or isinstance(err.code, int):
            raise
        print(err.code, file=sys.stderr)
        return UNJUDGED
    except KeyboardInterrupt:  # Ctrl-C: one line, not a traceback (a nightly saves its night: runner/nightly.py)
        print(f"{args.command}: interrupted: nothing judged", file=sys.stderr)
        return UNJUDGED
    except (DamagedFile, data.SystemDataError) as err:  # a file the suite keeps, named with what is wrong with it
        print(f"{args.command}: nothing judged: {err}", file=sys.stderr)
        return UNJUDGED
    except OSError as err:
        why = disk_problem(err)
        if why is None:
            traceback.print_exc()
        print(f"{args.command}: error, nothing judged: {why or err}", file=sys.stderr)
        return UNJUDGED
    except Exception as err:  # an error of the suite itself judged nothing
        traceback.print_exc()
        print(f"{args.command}: error, nothing judged: {err}", file=sys.stderr)
        return UNJUDGED
