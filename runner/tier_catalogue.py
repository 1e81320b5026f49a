"""The catalogue of tiers with each case's measured seconds per kind of node: what fits where.

    ./suite tiers [--system NAME] [--markdown]      the catalogue: each tier, then each case, its tier and its
                                                    seconds on each kind of node measured
    ./suite tiers --record NIGHT_DIR...             each case's seconds of those nights (their ReFrame run
                                                    reports) kept in results/tiers/SYSTEM.csv

A case's seconds are its job's (ReFrame's `time_run`: the program's run on the node, not ReFrame's start or
the build), the median over the nights recorded of its kind; a case a kind skips (one GPU, no gdrdrv) has
none there. A tier's whole command, start-up included, is timed on its own (docs/tiers.md).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

from experiments.files import DamagedFile, read_json, write_atomic
from experiments.roots import RESULTS
from judge.status import UNJUDGED
from systems.tiers import catalogue, tier_of

#: Each system's measured seconds: one row per night and case.
TIMES_DIR = RESULTS / "tiers"
COLUMNS = ["system", "kind", "night", "case", "seconds"]


def times_file(system: str) -> Path:
    return TIMES_DIR / f"{system}.csv"


def night_times(night: Path) -> pd.DataFrame:
    """Each case that passed in the night's run report with its job's seconds, and the night's system and
    kind (its run.json); DamagedFile where either is missing or unreadable."""
    run = read_json(night / "run.json")
    report = read_json(night / "run-report.json")
    rows = [
        {
            "system": run.get("system", ""),
            "kind": run.get("kind") or "unknown",
            "night": run.get("stamp", night.name),
            "case": case["display_name"],
            "seconds": round(float(case["time_run"]), 2),
        }
        for r in report.get("runs", [])[:1]  # the night's own run; a --retry's are not its times
        for case in r["testcases"]
        if case.get("result") == "pass" and case.get("time_run") is not None and not case.get("fixture")
    ]
    return pd.DataFrame(rows, columns=COLUMNS)


def record(nights: list[Path]) -> list[Path]:
    """The nights' case times added to each system's file (a night recorded again replaces its rows)."""
    found = pd.concat([night_times(n) for n in nights], ignore_index=True)
    written = []
    for system, rows in found.groupby("system"):
        path = times_file(str(system))
        kept = pd.read_csv(path) if path.exists() else pd.DataFrame(columns=COLUMNS)
        kept = kept[~kept["night"].isin(rows["night"])]
        table = pd.concat([kept, rows], ignore_index=True).sort_values(["kind", "case", "night"])
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, table.to_csv(index=False))
        written.append(path)
    return written


def case_table(times: pd.DataFrame) -> pd.DataFrame:
    """One row per case: its tier and, per kind of node, the median seconds over the nights recorded."""
    if times.empty:
        return pd.DataFrame(columns=["tier", "case"])
    medians = times.groupby(["case", "kind"])["seconds"].median().unstack("kind")
    nights = times.groupby("kind")["night"].nunique()
    medians.columns = [f"{kind} ({nights[kind]} night{'s' if nights[kind] > 1 else ''}), s" for kind in medians]
    table = medians.reset_index()
    order = {t.name: i for i, t in enumerate(catalogue())}
    table.insert(0, "tier", table["case"].map(tier_of))
    return table.sort_values(["tier", "case"], key=lambda c: c.map(order) if c.name == "tier" else c)


def tier_lines(markdown: bool) -> list[str]:
    """Each tier: its command, its limit and where it fits."""
    if markdown:
        lines = ["| tier | command | limit | fits |", "|---|---|---|---|"]
        for t in catalogue():
            limit = f"{t.limit_s:g} s" if t.limit_s else "none"
            lines.append(f"| {t.name} | `{t.command}` | {limit} | {t.fits} |")
        return lines
    return [f"{t.name:<10} {_limit(t.limit_s):>6}  {t.command}\n{'':<18}{t.fits}" for t in catalogue()]


def _limit(limit_s: float | None) -> str:
    return f"{limit_s:g} s" if limit_s else "-"


def cases_lines(table: pd.DataFrame, markdown: bool) -> list[str]:
    """The cases with their tier and seconds per kind ('-': not measured on that kind)."""
    if table.empty:
        return ["no case times recorded (./suite tiers --record NIGHT_DIR)"]
    shown = table.fillna(math.nan).astype(object).where(table.notna(), "-")
    for column in shown.columns[2:]:
        shown[column] = [v if v == "-" else f"{v:.1f}" for v in shown[column]]
    if markdown:
        header = "| " + " | ".join(shown.columns) + " |"
        rule = "|" + "---|" * len(shown.columns)
        return [header, rule, *("| " + " | ".join(map(str, row)) + " |" for row in shown.itertuples(index=False))]
    return shown.to_string(index=False).splitlines()


def sums_lines(table: pd.DataFrame) -> list[str]:
    """Each measured tier's cases' seconds together, per kind: what its measurements take, start-up aside."""
    lines = []
    for column in table.columns[2:]:
        sums = table.groupby("tier", sort=False)[column].sum(min_count=1).dropna()
        parts = ", ".join(f"{tier} {seconds:.1f} s" for tier, seconds in sums.items())
        lines.append(f"{column.removesuffix(', s')}: the cases' jobs take {parts}")
    return lines


def read_times(files: list[Path]) -> pd.DataFrame:
    """The case times kept in `files`; ValueError naming a file that is not such a table."""
    parts = []
    for path in files:
        try:
            table = pd.read_csv(path)
        except (pd.errors.ParserError, pd.errors.EmptyDataError) as err:
            raise ValueError(f"{path} is damaged ({err}): record its nights again (--record)") from None
        missing = [c for c in COLUMNS if c not in table.columns]
        if missing:
            raise ValueError(f"{path} lacks the columns {', '.join(missing)}: record its nights again (--record)")
        parts.append(table)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS)


def main(args: argparse.Namespace) -> int:
    if args.record:
        try:
            written = record([Path(p) for p in args.record])
        except (DamagedFile, KeyError, TypeError, ValueError, AttributeError, OSError) as err:
            print(f"tiers: cannot keep the nights' times: {err}", file=sys.stderr)
            return UNJUDGED
        for path in written:
            print(f"tiers: case times kept in {path}")
        return 0
    files = [times_file(args.system)] if args.system else sorted(TIMES_DIR.glob("*.csv"))
    if args.system and not files[0].exists():
        print(f"tiers: no case times of {args.system} ({files[0]}): ./suite tiers --record NIGHT_DIR", file=sys.stderr)
        return UNJUDGED
    try:
        times = read_times(files)
    except (OSError, ValueError, KeyError) as err:  # pandas' parser errors are ValueErrors
        print(f"tiers: {err}", file=sys.stderr)
        return UNJUDGED
    table = case_table(times)
    print("\n".join(tier_lines(args.markdown)))
    print()
    print("\n".join(cases_lines(table, args.markdown)))
    if not table.empty:
        print()
        print("\n".join(sums_lines(table)))
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("tiers", help="the tiers, each case's tier and its measured seconds per kind of node")
    p.add_argument("--system", help="one system's case times (default: every system's)")
    p.add_argument("--markdown", action="store_true", help="as Markdown tables (docs/tiers.md)")
    p.add_argument("--record", nargs="+", metavar="NIGHT_DIR", help="keep these nights' case times")
    p.set_defaults(func=main)
