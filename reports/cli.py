"""python -m reports COMMAND: the suite's one parser for what reads perflogs.

load, compare and html turn perflogs into tables, comparisons and figures,
screenshots looks at a report in a browser (reports/browser.py); nightly,
accept and rejudge (reports/nightly.py, reports/accept.py), power and
upgrade judge them. Every command exits as reports/status.py says.

compare exits 0 when every headline figure was judged and none regressed,
2 on a regression, 3 when a figure could not be judged (or nothing could be
compared: no data, an unknown field, a usage error).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

import pandas as pd

from . import compare as cmp
from . import gate
from .load import load
from .runs import PERFLOGS
from .status import AS_ACCEPTED, MOVED, UNJUDGED


def _paths(args) -> list[Path]:
    return [Path(p) for p in args.paths] or [PERFLOGS]


def _filter(frame: pd.DataFrame, args) -> pd.DataFrame:
    if getattr(args, "test", None):
        frame = frame[frame["test"].str.contains(args.test, regex=True)]
    if getattr(args, "var", None):
        frame = frame[frame["perf_var"].str.contains(args.var, regex=True)]
    if getattr(args, "since", None) or getattr(args, "until", None):
        frame = cmp.select(frame, "time", f"{args.since or ''}..{args.until or ''}")
    return frame


def cmd_load(args) -> int:
    loaded = load(_paths(args))
    frame = _filter(loaded.frame, args)
    print(f"{len(frame)} performance values from {len(loaded.files)} file(s)")
    for path, rows in sorted(loaded.files.items()):
        issues = sum(1 for i in loaded.issues if i.path == path)
        print(
            f"  {path}: {rows} values" + (f", {issues} line(s) skipped or doubted (see the warnings)" if issues else "")
        )
    if not frame.empty:
        keys = ["system", "partition", "node", "gpu_model", "driver_version", "cuda_version", "cuda_runtime_version"]
        print()
        print(frame.groupby(keys + ["test"], dropna=False).size().rename("values").reset_index().to_string(index=False))
    if args.csv:
        frame.to_csv(args.csv, index=False)
        print(f"table written to {args.csv}")
    return 1 if args.strict and loaded.issues else 0


def verdict_status(result: pd.DataFrame | None, allow_unjudged: bool) -> int:
    """2 on any regression; else 3 when a figure could not be judged or there
    was none to judge (no result, or an empty one), unless allowed; else 0."""
    if result is not None and (result["verdict"] == "regression").any():
        return MOVED
    unjudged = result is None or result.empty or (result["verdict"] == "unjudged").any()
    return UNJUDGED if unjudged and not allow_unjudged else AS_ACCEPTED


def print_verdicts(result: pd.DataFrame, csv: str | Path, out=None) -> None:
    """The table of every figure, the CSV, and the figures that need a look."""
    out = out or sys.stdout
    shown = result.drop(columns=["p_improved"], errors="ignore").copy()
    shown["change_pct"] = shown["change_pct"].map(lambda v: f"{v:+.1f}%" if v == v else "")
    shown["threshold_pct"] = shown["threshold_pct"].map(lambda v: f"{v:.1f}%" if v == v else "")
    for column in ("p_value", "p_adjusted"):
        shown[column] = shown[column].map(lambda v: f"{v:.3g}" if v == v else "")
    for column in ("median_base", "median_new"):
        shown[column] = shown[column].map(lambda v: f"{v:.4g}" if v == v else "")
    with pd.option_context("display.max_colwidth", 60, "display.width", 250):
        print(shown.drop(columns=["reason"]).to_string(index=False), file=out)
    result.to_csv(csv, index=False)
    print(f"\ntable written to {csv}", file=out)
    print(gate.summary_line(result), file=out)
    for _, row in result[result["verdict"].isin(["regression", "unjudged"])].iterrows():
        what = f"{row.get('test', '')} {row.get('case', '')} {row['figure']}".replace("  ", " ")
        if row["verdict"] == "regression":
            print(
                f"  REGRESSION {what}: {row['median_base']:.4g} -> {row['median_new']:.4g} {row['unit']} "
                f"({row['change_pct']:+.1f}%, threshold {row['threshold_pct']:.1f}%, "
                f"p = {row['p_adjusted']:.2g} after Holm)",
                file=out,
            )
        else:
            print(f"  UNJUDGED {what}: {row['reason']}", file=out)


def cmd_compare(args) -> int:
    loaded = load(_paths(args))
    frame = _filter(loaded.frame, args)
    if frame.empty:
        print("error: no performance values to compare (check the paths, --test and --var)", file=sys.stderr)
        return UNJUDGED
    try:
        for spec in args.pool:
            frame = cmp.pool(frame, spec)
        result = cmp.compare(frame, args.by, args.base, args.new, alpha=args.alpha, threshold=args.threshold)
    except (KeyError, ValueError) as err:
        print(f"error: {err.args[0]}", file=sys.stderr)
        return UNJUDGED
    if result.empty:
        print(
            f"nothing to compare: no headline figure (with samples) has {args.by} {args.base!r} or {args.new!r}",
            file=sys.stderr,
        )
        return UNJUDGED
    print(
        f"{args.by}: base {args.base!r} vs new {args.new!r} (Student's t on log values beyond each figure's "
        f"threshold, one-sided, Holm-corrected, alpha {args.alpha})"
    )
    print_verdicts(result, args.csv)
    return verdict_status(result, args.allow_unjudged)


def cmd_html(args) -> int:
    from .html import write_report

    paths = _paths(args)
    loaded = load(paths)
    loaded.frame = _filter(loaded.frame, args)
    if loaded.frame.empty:
        print("error: no performance values to report", file=sys.stderr)
        return UNJUDGED
    report = write_report(loaded, Path(args.output), args.title, args.generic_for_all)
    print(f"report written to {report.index}")
    return 0


def parser() -> argparse.ArgumentParser:
    """The one parser of the suite's reporting and judging commands."""
    from . import accept, browser, grafana, history, nightly, power, upgrade

    top = argparse.ArgumentParser(
        prog="python -m reports", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
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
    p.add_argument(
        "--threshold",
        type=float,
        metavar="PCT",
        help="practical threshold in percent for every figure (default: each figure's reference tolerance)",
    )
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
    p.add_argument("--csv", default="compare.csv", help="CSV file of the comparison (default compare.csv)")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("html", help="figures (PNG) and static HTML pages: an index, one per check, the histories")
    common(p)
    p.add_argument("-o", "--output", required=True, help="directory for index.html and the figures")
    p.add_argument("--title", default="GPU memory paths: performance report")
    p.add_argument(
        "--generic-for-all", action="store_true", help="also draw the generic figure for checks with their own"
    )
    p.set_defaults(func=cmd_html)
    for module in (nightly, accept, history, grafana, power, upgrade, browser):
        module.add_parsers(sub)
    return top


def main(argv=None) -> int:
    """Parse and run one command; its exit status (reports/status.py)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # What follows '--' goes to ReFrame (nightly, upgrade), whatever it looks like.
    ours, reframe = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    try:
        args = parser().parse_args(ours)
    except SystemExit as exit:  # a usage error judged nothing: 3, never the 2 of a move
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
    except Exception as err:  # an error of the suite itself judged nothing
        traceback.print_exc()
        print(f"{args.command}: error, nothing judged: {err}", file=sys.stderr)
        return UNJUDGED
