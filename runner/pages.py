"""The pages of committed nights, drawn again from what each night's folder
keeps: a night's page, the report's latest night of each kind of node, and
the screenshots README and docs/report/ show.

    ./suite report night STAMP|FOLDER [--system NAME] [-o DIR] [--verdict-only]
    ./suite report screenshots [REPORT -o DIR]

A night's folder keeps its verdict's tables (run.json, paths.csv,
siblings.csv, the watch's gpu-use and contention tables, its node facts;
a partition's cells.csv, nodes.csv and fleet.csv), the perflogs keep what it
measured: its page is drawn from them as the nightly drew it (its verdict,
its check pages, the history of its kind of node), into build/ unless asked
otherwise. Nothing is judged again here: what the night concluded is drawn.
"""

from __future__ import annotations

import datetime as dt
import difflib
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from experiments.files import DamagedFile, read_json
from experiments.roots import DRY_RUNS, REPO, RESULTS
from judge import explain
from judge import partition as judge_partition
from judge.select import run_rows
from reports import browser
from reports.history import slug
from reports.load import Loaded, load
from reports.runs import (
    NIGHTLY_DIR,
    PERFLOGS,
    as_last_judged,
    finished_runs,
    in_the_future,
    kind_of_run,
    now,
    read_accepted,
    shown,
    verdict_words,
)
from runner import histories, nightly
from runner import partition as runner_partition

if TYPE_CHECKING:  # reports.html draws figures: imported where a page is written, not by every command's parser
    from reports.html import NightLink

#: Where `report night` draws a night unless -o says: build/, which git ignores.
DRAWN = REPO / "build" / "nights"
#: Where `report screenshots` draws the pages it shows, and where it puts their screenshots.
SHOWCASE = REPO / "build" / "screenshots"
SCREENSHOTS = REPO / "docs" / "report"
#: Nights the screenshots show beside the latest of each kind (the index's): one that exited 2.
SHOWCASE_NIGHTS = [("hopper-vm", "2026-11-25T21:41:00")]
#: Stamps a usage error names, the nearest first.
NEAREST = 3


# --- finding a night ------------------------------------------------------------


def folder_name(stamp: str) -> str:
    """'2026-11-26T06:49:16' -> '2026-11-26T064916': a stamp as its folder is named."""
    return stamp.replace(":", "")


def find_night(word: str, system: str | None = None) -> Path:
    """The folder of the night `word` names: a folder with a run.json, or a
    stamp (as run.json or the folder spells it) of a system's nights; a word
    that names none is a usage error (SystemExit naming it and the nearest stamps)."""
    given = Path(word)
    if _is_night_folder(given):
        inside = [root for root in (RESULTS, DRY_RUNS) if given.resolve().is_relative_to(root.resolve())]
        if not inside:
            raise SystemExit(f"report night: {word!r} is outside {RESULTS} and {DRY_RUNS}: a night is read there only")
        return given
    if "/" in word or word.startswith("."):
        raise SystemExit(f"report night: no night's folder {word!r} (a stamp, or a folder under {RESULTS})")
    systems = [system] if system else sorted(p.name for p in NIGHTLY_DIR.iterdir() if p.is_dir())
    found = [NIGHTLY_DIR / s / folder_name(word) for s in systems]
    found = [f for f in found if _is_night_folder(f)]
    if len(found) == 1:
        return found[0]
    if found:
        systems = ", ".join(f.parent.name for f in found)
        raise SystemExit(f"report night: {word!r} is a night of {systems}: give --system")
    stamps = sorted({p.parent.name for s in systems for p in (NIGHTLY_DIR / s).glob("*/run.json")})
    near = nearest(folder_name(word), stamps)
    hint = f" (the nearest: {', '.join(near)})" if near else f" (the latest: {', '.join(stamps[-NEAREST:][::-1])})"
    where = f"results/nightly/{system or '*'}/"
    raise SystemExit(f"report night: no night {shown(word)!r} in {where}{hint}; give a stamp or a night's folder")


def _is_night_folder(path: Path) -> bool:
    """Whether `path` is a folder with a run.json; False for what no file system can hold (a name too long)."""
    try:
        return path.is_dir() and (path / "run.json").exists()
    except OSError:
        return False


def nearest(word: str, stamps: list[str]) -> list[str]:
    """The stamps nearest `word`: in time where it reads as one, else in spelling."""
    try:
        when = _when(word)
    except ValueError:
        return difflib.get_close_matches(word, stamps, n=NEAREST, cutoff=0.5)
    timed = []
    for stamp in stamps:
        try:
            timed.append((abs((_when(stamp) - when).total_seconds()), stamp))
        except ValueError:
            continue
    return [stamp for _, stamp in sorted(timed)[:NEAREST]]


def _when(text: str) -> dt.datetime:
    """A stamp as a time, with or without its colons ('2026-11-26T064916'), or a date alone."""
    day, _, clock = text.partition("T")
    digits = clock.replace(":", "")
    if digits and (not digits.isdigit() or len(digits) not in (2, 4, 6)):
        raise ValueError(text)
    clock = ":".join(digits[i : i + 2] for i in range(0, len(digits), 2))
    return dt.datetime.fromisoformat(f"{day}T{clock}" if clock else day)


# --- drawing a night --------------------------------------------------------------


def night_table(path: Path) -> pd.DataFrame | None:
    """A night's table, its words '' where empty, or None where the night did not write it."""
    if not path.exists():
        return None
    table = pd.read_csv(path)
    words = [c for c in table.columns if table[c].dtype == object or pd.api.types.is_string_dtype(table[c])]
    return table.fillna({c: "" for c in words})


def night_tables(folder: Path, run: dict) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """The night's paths and siblings tables of its last judgement
    (`as_last_judged`): rejudge's where it judged the night again, else the night's own."""
    if run.get("rejudged"):
        return night_table(folder / "rejudged-paths.csv"), night_table(folder / "rejudged-siblings.csv")
    return night_table(folder / "paths.csv"), night_table(folder / "siblings.csv")


def read_night(folder: Path) -> dict:
    """The night's run.json, as last judged (reports/runs.py's as_last_judged)."""
    try:
        run = read_json(folder / "run.json")
    except DamagedFile as err:
        raise SystemExit(f"report night: {err}") from None
    return as_last_judged(folder, run)


def draw_night(
    folder: Path,
    outdir: Path,
    loaded: Loaded | None = None,
    verdict_only: bool = False,
    back: str = "",
    history: Path | None = None,
) -> Path:
    """The page of the night in `folder` drawn again into `outdir`: a
    partition's (its heat map, drain list and each named node's history), or
    a node's: its verdict, its check pages from the perflogs' records of its
    window (`loaded`, read where not given) and the history of its kind of
    node (history-KIND/ inside `outdir`); with `verdict_only`, its verdict
    alone, linking `history` where given. Its index.html."""
    run = read_night(folder)
    outdir.mkdir(parents=True, exist_ok=True)
    if run.get("nodes"):  # its named nodes' histories are few and quick: drawn whatever is asked
        return draw_partition(folder, run, outdir, back=back)
    system = run["system"]
    paths, lags = night_tables(folder, run)
    if verdict_only:
        return verdict_page(run, paths, lags, outdir, back, history)
    loaded = loaded if loaded is not None else load([PERFLOGS / system], warn=None)
    frame = loaded.frame
    records = Loaded(frame[run_rows(frame, system, [run])], [], loaded.files)
    if records.frame.empty:  # its perflogs are not here: its verdict is all there is to draw
        print(f"night: no records of {run['stamp']} in {PERFLOGS / system}: its verdict alone", file=sys.stderr)
        return verdict_page(run, paths, lags, outdir, back)
    page = nightly.night_history(system, run, frame, outdir, back="../index.html")
    return nightly.night_report(system, run, records, outdir, paths, lags, page, accepted=accepted_now(run)).index


def accepted_now(run: dict) -> set[str] | None:
    """The stamps the baseline of the night's kind of node holds now; None where it has none."""
    baseline = read_accepted(run["system"], kind_of_run(run["system"], run) or "unknown")
    return {r["stamp"] for r in baseline["runs"]} if baseline else None


def verdict_page(run: dict, paths, lags, outdir: Path, back: str = "", history: Path | None = None) -> Path:
    """A node's night's page of its verdict alone, as judge/explain.py says it."""
    paths, lags, found, step = nightly.explained(run, paths, lags, accepted_now(run))
    title = nightly.night_title(run["system"], run)
    reasons = nightly.UNJUDGED_REASONS
    from reports.html import write_verdict_page

    return write_verdict_page(run, paths, lags, outdir, title, reasons, back, history, found, step)


#: The tables a partition's page is drawn again from (read_partition).
PARTITION_TABLES = ("cells.csv", "fleet.csv", "nodes.csv")


def partition_lacks(folder: Path) -> list[str]:
    """The tables of a partition's night its folder does not keep: a night copied with less than the
    nightly wrote (the history benchmark's made-up years keep its cells.csv alone) cannot be drawn again."""
    return [name for name in PARTITION_TABLES if not (folder / name).exists()]


def read_partition(folder: Path) -> judge_partition.Partition:
    """A partition's night as its folder keeps it (cells.csv, fleet.csv,
    nodes.csv), each cell's and path's % worse where a table written before
    it does not keep it; a usage error naming the tables a folder lacks."""
    lacks = partition_lacks(folder)
    if lacks:
        raise SystemExit(f"report night: {folder} lacks {', '.join(lacks)}: its partition's page cannot be drawn")
    cells, fleet, nodes = (night_table(folder / f"{name}.csv") for name in ("cells", "fleet", "nodes"))
    cells = cells.assign(worse_pct=explain.cell_worse(cells))
    fleet = fleet.assign(worse_pct=explain.fleet_worse(fleet))
    silent = list(nodes.loc[nodes["state"] == judge_partition.NodeState.SILENT, "node"])
    return judge_partition.Partition(cells, fleet, nodes, silent)


def draw_partition(folder: Path, run: dict, outdir: Path, node_pages: bool = True, back: str = "") -> Path:
    """A partition's page drawn again from its folder: the heat map, the drain
    list, the fleet's paths and, with `node_pages`, each named node's history."""
    from reports.partition import write_partition_page

    result = read_partition(folder)
    named = list(dict.fromkeys([r["node"] for r in run.get("drain", []) + run.get("not_drained", [])]))
    pages = runner_partition.node_histories(run["system"], named) if node_pages else {}
    found = explain.partition_findings(run, result.cells, result.fleet)
    return write_partition_page(run, result, outdir, pages, back, found, explain.partition_next_step(run))


# --- the report's latest nights -----------------------------------------------------


def latest_runs(system: str, at: str | None = None) -> dict[tuple[str, bool], dict]:
    """The latest judged night of each kind of node of `system` (and of each kind's partition nights), as
    last judged, by (kind, partition?): never one stamped later than the clock (`at`, this machine's by
    default), whose node's clock was wrong and which would hide the real latest night; each such named."""
    latest: dict[tuple[str, bool], dict] = {}
    for run in finished_runs(system, partitions=True):
        run = as_last_judged(NIGHTLY_DIR / system / folder_name(run["stamp"]), run)
        if run.get("exit") is None:
            continue
        if in_the_future(run["stamp"], at):
            print(
                f"report: the night {run['stamp']} of {system} is stamped later than this machine's clock "
                f"({at or now()} UTC): left out of the latest nights (its node's clock was wrong?)",
                file=sys.stderr,
            )
            continue
        latest[(kind_of_run(system, run) or "unknown", bool(run.get("nodes")))] = run
    return latest


def latest_nights(frame: pd.DataFrame, outdir: Path, history_pages: dict[str, Path] | None = None) -> list[NightLink]:
    """The latest judged night of each kind of node (and of each kind's
    partition nights) of every system the records hold, drills left out,
    each page drawn into `outdir`/night-SYSTEM-KIND/ (its verdict alone; a
    partition's with its heat map), linking its kind's history where
    `history_pages` has it (report_histories' labels)."""
    from reports.html import NightLink

    links = []
    for system in sorted(frame["system"].dropna().unique()):
        for (kind, whole), run in sorted(latest_runs(system).items()):
            name = f"night-{system}-{slug(kind)}" + ("-partition" if whole else "")
            folder = NIGHTLY_DIR / system / folder_name(run["stamp"])
            if whole and partition_lacks(folder):
                print(
                    f"report: the partition's night {run['stamp']} of {system} lacks "
                    f"{', '.join(partition_lacks(folder))}: left out of the latest nights",
                    file=sys.stderr,
                )
                continue
            history = (history_pages or {}).get(f"{system}, {kind}")
            page = draw_night(folder, outdir / name, verdict_only=True, back="../index.html", history=history)
            label = f"{system}, {kind}" + (f": a partition's night of {len(run['nodes'])} nodes" if whole else "")
            if whole:
                result = read_partition(folder)
                found = explain.partition_findings(run, result.cells, result.fleet)
                links.append(NightLink(label, run, page, found, explain.partition_next_step(run)))
            else:
                *_, found, step = nightly.explained(run, *night_tables(folder, run), accepted_now(run))
                links.append(NightLink(label, run, page, found, step))
    return links


# --- the command line ----------------------------------------------------------------


def add_parsers(sub) -> None:
    """night and screenshots in the suite's one parser (commands/cli.py)."""
    p = sub.add_parser("night", help="a committed night's page drawn again from its folder and the perflogs")
    p.add_argument(
        "night",
        help="its stamp (2026-11-26T06:49:16, or as its folder spells it: 2026-11-26T064916), "
        "or its folder (results/nightly/SYSTEM/STAMP)",
    )
    p.add_argument("--system", help="the system whose nights hold it (default: whichever does)")
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        help="directory for its index.html (default: build/nights/SYSTEM/STAMP, which git ignores)",
    )
    p.add_argument(
        "--verdict-only", action="store_true", help="its verdict and tables alone: no check pages, no history (seconds)"
    )
    p.set_defaults(func=night)
    p = sub.add_parser(
        "screenshots",
        help="open a report's pages in headless Chromium, a screenshot of each; without REPORT, the pages README "
        "shows (the committed perflogs' report, a night that exited 0 and one that exited 2, the history, a "
        "partition's night) into docs/report/",
    )
    p.add_argument("report", type=Path, nargs="?", help="the directory `./suite report html` wrote")
    p.add_argument(
        "-o", "--output", type=Path, help="directory for one PNG per page (default without REPORT: docs/report)"
    )
    p.set_defaults(func=screenshots)


def night(args) -> int:
    folder = find_night(args.night, args.system)
    run = read_night(folder)
    outdir = args.output or DRAWN / run["system"] / folder.name
    page = draw_night(folder, Path(outdir), verdict_only=args.verdict_only)
    status = verdict_words(run)
    if run.get("rejudged"):
        status += f", judged again {run['rejudged']} (the night: {verdict_words(run['as_ran'])})"
    print(f"night: {run['stamp']} of {run['system']}, {status}: {page}")
    return 0


def screenshots(args) -> int:
    if args.report is not None and args.output is None:
        raise SystemExit("screenshots: give -o DIR for the screenshots of REPORT")
    if args.report is not None:
        looks = browser.look_at_report(args.report, args.output)
        return browser.said(looks, args.output)
    target = args.output or SCREENSHOTS
    report = draw_showcase(SHOWCASE)
    extra = [report / f"night-{folder_name(stamp)}" / "index.html" for _, stamp in SHOWCASE_NIGHTS]
    looks = browser.look_at_report(report, target, extra=extra)
    if args.output is None:  # docs/report holds these pages' screenshots and no others
        shot = {seen.screenshot.resolve() for seen in looks}
        for stale in sorted(target.glob("*.png")):
            if stale.resolve() not in shot:
                print(f"screenshots: {stale} removed: no page of it now")
                stale.unlink()
    return browser.said(looks, target)


def draw_showcase(outdir: Path) -> Path:
    """The pages README shows, under `outdir` (build/, which git ignores):
    the report of the committed perflogs of hopper-vm (its index opening
    with the latest night of each kind, a partition's among them, its check
    pages and histories) and the SHOWCASE_NIGHTS' verdicts, linking their kind's history."""
    if outdir.exists():
        shutil.rmtree(outdir)
    from reports.html import write_report

    loaded = load([PERFLOGS / "hopper-vm"], warn=None)
    print(f"screenshots: the report of {PERFLOGS / 'hopper-vm'} into {outdir}", flush=True)
    pages = histories.report_histories(loaded.frame, outdir)
    nights = latest_nights(loaded.frame, outdir, pages)
    write_report(loaded, outdir, "GPU memory paths: performance report", histories=pages, nights=nights)
    for system, stamp in SHOWCASE_NIGHTS:
        folder = find_night(stamp, system)
        run = read_json(folder / "run.json")
        history = pages.get(f"{system}, {kind_of_run(system, run)}")
        draw_night(folder, outdir / f"night-{folder.name}", verdict_only=True, back="../index.html", history=history)
    return outdir
