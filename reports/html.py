"""A report as static HTML: an index (what it covers, loader warnings, notes),
a page per check (its figures and tables) and each system's nightly history."""

from __future__ import annotations

import datetime
import html
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import pandas as pd

import experiments
from experiments.gpu_use import process_line
from experiments.keys import SERIES_FIELDS
from reports.figures import Figure, coverage, coverage_text, drawing_of, render_all
from reports.figures.versions import versions_figures
from reports.load import Loaded
from reports.page import page_html


def summary_table(frame: pd.DataFrame, test: str) -> pd.DataFrame:
    """Median of each performance variable per case (and per set of runs where they differ)."""
    data = frame[frame["test"] == test]
    wanted = getattr(experiments.find(test), "TABLE_VARIABLES", None)
    if wanted:
        data = data[data["perf_var"].isin(wanted)]
    series = [c for c in SERIES_FIELDS if c not in ("gpu_model", "cuda_version") and data[c].nunique() > 1]
    data = data.assign(
        case=data["params"].fillna("").replace("", "(no parameters)"),
        variable=data["perf_var"] + " (" + data["unit"].fillna("") + ")",
    )
    index = series + ["case"]
    table = data.pivot_table(index=index, columns="variable", values="value", aggfunc="median", sort=False)
    if wanted:  # in the order asked for
        data = data.sort_values("perf_var", key=lambda names: names.map(wanted.index), kind="stable")
    order = list(dict.fromkeys(data["variable"]))
    table = table[[c for c in order if c in table.columns]]
    runs = data.drop_duplicates(index + ["time"]).groupby(index, sort=False).size().rename("executions")
    table = table.join(runs)
    table.columns.name = None
    return table.reset_index()


def headline_figures(data: pd.DataFrame) -> set:
    """The figures logged with samples: the headline figures (experiments/keys.py)."""
    return set(data.loc[data["sample"].notna(), "figure"])


def node_table(data: pd.DataFrame, headline: set) -> pd.DataFrame | None:
    """One row per node where a check ran on several nodes (ReFrame's
    --distribute), so that a slow node stands out: the medians of the check's
    headline figures per node, and each node's worst ratio to the median node."""
    if data["node"].nunique() < 2:
        return None
    head = data[data["sample"].isna() & data["figure"].isin(headline)]
    head = head if not head.empty else data
    head = head.assign(column=(head["params"].fillna("").astype(str) + " " + head["perf_var"].astype(str)).str.strip())
    table = head.pivot_table(index="node", columns="column", values="value", aggfunc="median")
    ratios = table / table.median()
    table["worst vs median node"] = ratios.apply(lambda row: row.loc[(row - 1).abs().idxmax()], axis=1).round(3)
    return table.reset_index()


def _table(table: pd.DataFrame, caption: str) -> str:
    text = table.to_html(border=0, float_format="{:.4g}".format, na_rep="", index=False)
    return re.sub(r"(<table[^>]*>)", lambda m: m[1] + f"<caption>{html.escape(caption)}</caption>", text, count=1)


def _img(figure: Figure, outdir: Path) -> str:
    return (
        f'<figure><img src="{_href(figure.path, outdir)}" alt="{html.escape(figure.title)}">'
        f"<figcaption>{html.escape(figure.title)}. {html.escape(figure.caption)}</figcaption></figure>"
    )


def _notes() -> str:
    """What each experiment's figures mean, below the report."""
    items = [
        f"<li>{html.escape(m.NAME)}: {html.escape(m.NOTE)}</li>" for m in experiments.every() if hasattr(m, "NOTE")
    ]
    return (
        "<h2>Notes</h2><ul>"
        + "".join(items)
        + "<li>CUDA (driver) is the CUDA version the driver supports; CUDA runtime is the toolkit the programs "
        "were built with ('unknown' where the perflog predates that field).</li></ul>"
    )


def _coverage_section(loaded: Loaded, frame: pd.DataFrame) -> list[str]:
    cover = pd.DataFrame([coverage(g).values() for _, g in frame.groupby("test")], columns=list(coverage(frame)))
    cover.insert(0, "check", sorted(frame["test"].unique()))
    cover["values"] = frame.groupby("test").size().values
    parts = ["<h2>What this report covers</h2>", cover.to_html(index=False, border=0)]
    files = pd.DataFrame(sorted(loaded.files.items()), columns=["file", "performance values"])
    parts.append("<details><summary>Input files</summary>" + files.to_html(index=False, border=0) + "</details>")
    if loaded.issues:
        parts.append(f"<h2 class='warn'>Lines the loader skipped or doubted ({len(loaded.issues)})</h2><ul>")
        parts += [f"<li>{html.escape(str(i))}</li>" for i in loaded.issues]
        parts.append("</ul>")
    return parts


def _test_section(test: str, frame: pd.DataFrame, figures: list, headline: set, outdir: Path) -> list[str]:
    data = frame[frame["test"] == test]
    parts = []
    drawing, experiment = drawing_of(test), experiments.find(test)
    for heading, table, caption in drawing.sections(frame) if hasattr(drawing, "sections") else []:
        parts += [f"<h3>{html.escape(heading)}</h3>", _table(table, f"{caption} {coverage_text(data)}.")]
    parts += [_img(f, outdir) for f in figures if f.test == test]
    caption = getattr(experiment, "TABLE_CAPTION", "Median per case.")
    table = drawing.table(frame) if hasattr(drawing, "table") else summary_table(frame, test)
    parts.append(_table(table, f"{caption} {coverage_text(data)}."))
    per_node = node_table(data, headline)
    if per_node is not None:
        parts.append(_table(per_node, "One row per node (medians); a ratio far from 1 marks a node unlike its peers."))
    return parts


@dataclass
class Report:
    """What write_report wrote: the index, a page per check, the histories it links and the figures."""

    index: Path
    pages: dict[str, Path] = field(default_factory=dict)
    histories: dict[str, Path] = field(default_factory=dict)
    figures: list[Figure] = field(default_factory=list)


def _href(path: Path, outdir: Path) -> str:
    """A link from a page in `outdir` to `path`: relative, URL-quoted, escaped."""
    return html.escape(quote(os.path.relpath(path, outdir)))


def _link(page: Path, text: str, outdir: Path) -> str:
    return f"<a href='{_href(page, outdir)}'>{html.escape(text)}</a>"


#: The columns of a night's verdict by path, as paths.csv names them, and their headings.
VERDICT_COLUMNS = {
    "path": "path",
    "verdict": "verdict",
    "change_pct": "change %",
    "rerun_change_pct": "rerun %",
    "later_change_pct": "later %",
    "spread_pct": "spread between runs %",
    "floor_pct": "floor %",
    "reason": "why",
    "contended_by": "another process on its GPUs (not drained)",
}
#: The columns of each GPU against its siblings, as siblings.csv names them, and their headings.
SIBLING_COLUMNS = {
    "path": "path",
    "verdict": "verdict",
    "vs_siblings_pct": "against its siblings %",
    "accepted_vs_siblings_pct": "as accepted %",
    "rerun_vs_siblings_pct": "rerun %",
    "later_vs_siblings_pct": "later %",
    "floor_pct": "floor %",
    "z": "standard errors beyond the floor",
    "reason": "why",
    "contended_by": "another process on its GPUs (not drained)",
}
#: A path's verdicts, the ones a centre must read first.
VERDICT_ORDER = [
    "moved",
    "lagging",
    "unstable",
    "broken",
    "transient",
    "improved",
    "unjudged",
    "pass",
    "yardstick",
]
#: Verdicts that are no finding, shown in lower case.
QUIET = ("pass", "yardstick")


def verdict_section(
    run: dict,
    paths: pd.DataFrame | None,
    changes: list[str],
    reasons: dict[str, str] | None = None,
    lags: pd.DataFrame | None = None,
) -> list[str]:
    """A night's verdict at the top of its report: the exit status and its
    meaning, why it was not judged (each reason with its meaning from
    `reasons`), a drill's fault, the changes over the nights, one row per
    path, what moved first and the largest moves first within a verdict, as
    run.json and paths.csv have them, and each GPU against its siblings
    (`lags`, siblings.csv), what lags first."""
    parts = [f"<h2>Verdict: exit {run.get('exit')} ({html.escape(str(run.get('meaning', '')))})</h2>"]
    if run.get("drill"):
        parts.append(f"<p>A drill: {html.escape(run['drill'])} (no night of later nights' history).</p>")
    for reason in run.get("unjudged_reasons") or []:
        meaning = (reasons or {}).get(reason)
        parts.append(f"<p>Not judged ({html.escape(reason)}){': ' + html.escape(meaning) if meaning else ''}.</p>")
    if changes:
        parts += ["<p>Changes over the nights:</p><ul>", *(f"<li>{html.escape(c)}</li>" for c in changes), "</ul>"]
    parts += _drain_section(run)
    if paths is not None and not paths.empty:
        table = paths[[c for c in VERDICT_COLUMNS if c in paths.columns]]
        table = _ranked(table, table["change_pct"].abs() if "change_pct" in table else pd.Series(0, table.index))
        parts.append(_table(table.rename(columns=VERDICT_COLUMNS), "each path against the accepted runs (paths.csv)"))
    if lags is not None and not lags.empty:
        table = _ranked(lags[[c for c in SIBLING_COLUMNS if c in lags.columns]], lags["z"])
        parts.append(_table(table.rename(columns=SIBLING_COLUMNS), "each GPU against its siblings (siblings.csv)"))
    return parts


def _drain_section(run: dict) -> list[str]:
    """What the night says of the node: drain it and why (drain.txt), the
    findings not drained because another process used their GPUs, and every
    other process the watch saw on a GPU."""
    parts = []
    if run.get("drain"):
        items = "".join(f"<li>{html.escape(r)}</li>" for r in run["drain"])
        parts.append(f"<p><strong>Drain the node</strong> (drain.txt):</p><ul>{items}</ul>")
    if run.get("not_drained"):
        items = "".join(f"<li>{html.escape(r)}</li>" for r in run["not_drained"])
        parts.append(
            "<p><strong>Contended, not drained</strong>: a busy GPU, not a slow one; run the night again when "
            f"it is free:</p><ul>{items}</ul>"
        )
    others = run.get("contention", {}).get("processes", [])
    if others:
        where = [f"GPU {o['gpu']}" + (f" of {o['node']}" if o.get("node") else "") for o in others]
        items = "".join(f"<li>{html.escape(w)}: {html.escape(process_line(o))}</li>" for w, o in zip(where, others))
        parts.append(f"<p>Other processes on the GPUs during the checks (the NVML watch):</p><ul>{items}</ul>")
    return parts


def _ranked(table: pd.DataFrame, sizes: pd.Series) -> pd.DataFrame:
    """Findings first (VERDICT_ORDER), the largest of `sizes` first within a verdict, findings in capitals."""
    rank = {verdict: i for i, verdict in enumerate(VERDICT_ORDER)}
    table = table.assign(rank=table["verdict"].map(rank).fillna(len(rank)), size=-sizes.fillna(-math.inf))
    table = table.sort_values(["rank", "size"], kind="stable").drop(columns=["rank", "size"])
    return table.assign(verdict=table["verdict"].where(table["verdict"].isin(QUIET), table["verdict"].str.upper()))


def _contents(pages: dict[str, Path], histories: dict[str, Path], outdir: Path) -> list[str]:
    items = [f"<li>{_link(p, t, outdir)}</li>" for t, p in pages.items()]
    parts = ["<h2>Checks</h2><ul>", *items, "</ul>"]
    if histories:
        items = [f"<li>{_link(p, f'History of {s}', outdir)}</li>" for s, p in histories.items()]
        parts += ["<h2>Nightly history</h2><ul>", *items, "</ul>"]
    return parts


def write_report(
    loaded: Loaded,
    outdir: Path,
    title: str,
    generic_for_all: bool = False,
    histories: dict[str, Path] | None = None,
    verdict: list[str] = (),
) -> Report:
    """index.html, a page per check and their figures under `outdir`; the
    index opens with `verdict` (a night's, verdict_section) and links
    `histories` (label: page; runner/histories.py writes them)."""
    report = write_pages(loaded, outdir, title, generic_for_all)
    return write_index(report, loaded, title, histories, verdict)


def write_pages(loaded: Loaded, outdir: Path, title: str, generic_for_all: bool = False) -> Report:
    """The figures and a page per check under `outdir` (what takes the time:
    a nightly draws them while it waits for its later measure), not yet the index."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    # The samples of headline figures are for the verdict; the report shows their medians.
    headline = headline_figures(loaded.frame)
    frame = loaded.frame[loaded.frame["sample"].isna()]
    # The versions' overlay reads the samples: the spread is what tells a move from noise.
    figures = render_all(frame, outdir, generic_for_all) + versions_figures(loaded.frame, outdir)
    report = Report(outdir / "index.html", figures=figures)
    for test in sorted(frame["test"].unique()):
        page = outdir / f"{test}.html"
        body = _test_section(test, frame, figures, headline, outdir)
        page.write_text(page_html(f"{test}: {title}", body, heading=test, anchor=test, back="index.html"))
        report.pages[test] = page
    return report


def write_index(
    report: Report, loaded: Loaded, title: str, histories: dict[str, Path] | None = None, verdict: list[str] = ()
) -> Report:
    """The report's index.html: `verdict` first, then the pages of `report` (write_pages) and `histories`."""
    report.histories = histories or {}
    outdir = report.index.parent
    frame = loaded.frame[loaded.frame["sample"].isna()]
    parts = [
        *verdict,
        f"<p>Generated by <code>python -m commands html</code> on "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC from "
        f"{len(loaded.files)} file(s), {len(frame)} performance values.</p>",
        *_contents(report.pages, report.histories, outdir),
        *_coverage_section(loaded, frame),
        _notes(),
    ]
    report.index.write_text(page_html(title, parts))
    return report
