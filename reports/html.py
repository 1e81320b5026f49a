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
from experiments.gpu_use import process_line, process_place
from experiments.keys import SERIES_FIELDS
from experiments.numbers import signed
from experiments.progress import Progress
from reports.figures import Figure, coverage, coverage_text, drawing_of, each_check, render_check
from reports.figures.common import COVERAGE_FIELDS, in_gb_per_s
from reports.figures.versions import versions_figures
from reports.load import Loaded
from reports.page import WORSE, WORSE_HEADER, page_html
from reports.runs import verdict_words
from systems.finding_codes import failed_checks


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


def _verdict_table(table: pd.DataFrame, columns: dict[str, str], caption: str) -> str:
    """A verdict's table: `columns` (name: heading) of `table`, those it has;
    the % columns signed with one decimal, other numbers to 3 significant
    digits, words left-aligned."""
    empty = [c for c in table.columns if table[c].map(lambda v: v is None or v == "" or v != v).all()]
    names = [c for c in columns if c in table.columns and c not in empty]
    head = "".join(f"<th>{html.escape(columns[c])}</th>" for c in names)
    rows = []
    for record in table[names].to_dict("records"):
        cells = []
        for name in names:
            value = record[name]
            if isinstance(value, str) or value is None:
                cells.append(f"<td class='text'>{html.escape(value or '')}</td>")
            elif value != value:
                cells.append("<td></td>")
            elif name.endswith("worse_pct"):
                cells.append(f"<td>{signed(value)}</td>")
            else:
                cells.append(f"<td>{value:.3g}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f"<table class='verdicts'><caption>{html.escape(caption)}</caption><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


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


def _medians_covered(frame: pd.DataFrame) -> pd.DataFrame:
    """The medians' records (no samples) of `frame`, with only what the index says of them (their check
    and coverage): a year's table cut whole, every text column of it, costs seconds; its few columns do not."""
    columns = ["test", *(c for c in COVERAGE_FIELDS if c in frame)]
    return frame.loc[frame["sample"].isna().to_numpy(bool), columns]


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


#: Units whose values are positive by their nature: a rate or a time of zero or less measured nothing.
POSITIVE_UNITS = frozenset({"GB/s", "GiB/s", "MB/s", "MiB/s", "s", "ms", "us", "ns"})
#: Impossible values named one by one on a check's page, up to this many; the rest counted.
IMPOSSIBLE_NAMED = 8


def drawable(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The records a figure can draw, and those it cannot: a value that is not finite, or a rate or a time
    of zero or less. Drawn, one infinity or a -5 takes a log axis with it; left out unsaid, it would hide
    an impossible measurement: each check's page names them (impossible_note)."""
    value = pd.to_numeric(frame["value"], errors="coerce").astype(float)
    impossible = ~value.map(math.isfinite) | (frame["unit"].isin(POSITIVE_UNITS) & (value <= 0))
    return frame[~impossible], frame[impossible]


def impossible_note(impossible: pd.DataFrame) -> list[str]:
    """A check's page's line on the values its figures and tables leave out (drawable), each named."""
    if impossible.empty:
        return []
    named = [
        f"{r.figure or r.perf_var} ({r.case or 'no case'}, {r.time}): {r.value} {r.unit}"
        for r in impossible.head(IMPOSSIBLE_NAMED).itertuples()
    ]
    more = len(impossible) - len(named)
    return [
        f"<p class='warn'>{len(impossible)} value(s) not drawn nor tabled: not finite, or a rate or time of zero "
        "or less (an impossible measurement): "
        + html.escape("; ".join(named))
        + (f"; {more} more" if more else "")
        + ".</p>"
    ]


def _test_section(
    test: str, data: pd.DataFrame, figures: list, headline: set, outdir: Path, impossible: pd.DataFrame | None = None
) -> list[str]:
    """A check's page: the values it cannot draw, its sections, figures and tables, from `data` (its own
    drawable medians) and `impossible` (its own values it cannot draw)."""
    parts = impossible_note(impossible) if impossible is not None else []
    drawing, experiment = drawing_of(test), experiments.find(test)
    for heading, table, caption in drawing.sections(data) if hasattr(drawing, "sections") else []:
        parts += [f"<h3>{html.escape(heading)}</h3>", _table(table, f"{caption} {coverage_text(data)}.")]
    parts += [_img(f, outdir) for f in figures if f.test == test]
    caption = getattr(experiment, "TABLE_CAPTION", "Median per case.")
    table = drawing.table(data) if hasattr(drawing, "table") else summary_table(data, test)
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


#: The columns of a night's verdict by path, as explain.explain_paths gives them, and their headings.
VERDICT_COLUMNS = {
    "path": "path",
    "verdict": "verdict",
    "worse_pct": f"tonight, {WORSE_HEADER}",
    "rerun_worse_pct": f"its rerun, {WORSE}",
    "later_worse_pct": f"measured later, {WORSE}",
    "spread_pct": "spread of the accepted runs %",
    "floor_pct": "floor %",
    "siblings_verdict": f"the other judge: the GPU against its siblings, {WORSE}",
    "why": "why",
    "contended_by": "another process on its GPUs (not drained)",
}
#: The columns of each GPU against its siblings, as explain.explain_siblings gives them, and their headings.
SIBLING_COLUMNS = {
    "path": "path",
    "gpus": "GPU",
    "verdict": "verdict",
    "worse_pct": f"tonight, {WORSE_HEADER} than its siblings",
    "accepted_worse_pct": f"behind its siblings in the accepted runs, {WORSE}",
    "rerun_worse_pct": f"its rerun, {WORSE}",
    "later_worse_pct": f"measured later, {WORSE}",
    "floor_pct": "floor %",
    "z": "standard errors beyond the floor",
    "accepted_verdict": f"the other judge: the path against its accepted runs, {WORSE}",
    "why": "why",
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
    "pass",
    "unjudged",
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
    found: list = (),
    step: tuple[str, str] | None = None,
) -> list[str]:
    """A night's verdict at the top of its page: the exit status and its
    meaning, the next step (`step`: its name and what it asks), what moved
    (`found`, each finding in a line), why it was not judged (each reason
    with its meaning from `reasons`), a drill's fault, the changes over the
    nights; then one row per path against the accepted runs (`paths`,
    paths.csv) and one per GPU against its siblings (`lags`, siblings.csv),
    findings first and the largest moves first within a verdict. The tables
    as judge/explain.py gives them (runner/nightly.py's explained): every
    change as % worse, every row with its why; the columns they lack are left out."""
    parts = [f"<div class='verdict exit{html.escape(str(run.get('exit')))}'>", *verdict_box(run, list(found), step)]
    for reason in run.get("unjudged_reasons") or []:
        meaning = (reasons or {}).get(reason)
        parts.append(f"<p>Not judged ({html.escape(reason)}){': ' + html.escape(meaning) if meaning else ''}.</p>")
    if changes and not any(f.verdict == "CHANGE" for f in found):
        parts += ["<p>Changes over the nights:</p><ul>", *(f"<li>{html.escape(c)}</li>" for c in changes), "</ul>"]
    parts.append("</div>")
    parts += _drain_section(run)
    if paths is not None and not paths.empty:
        aside = paths["verdict"].isin(["unjudged", "yardstick"])
        table = paths.loc[~aside, [c for c in VERDICT_COLUMNS if c in paths.columns]]
        sizes = table["worse_pct"].abs() if "worse_pct" in table else pd.Series(0, table.index)
        shown, folded = _fold_within_floor(_ranked(table, sizes))
        caption = (
            f"Each path against the accepted runs (paths.csv): {WORSE_HEADER}, the change of the "
            "path's figures signed so that a rate's fall and a time's rise are both positive."
        )
        parts.append(_verdict_table(shown, VERDICT_COLUMNS, caption))
        if not folded.empty:
            parts.append(
                f"<details><summary>{len(folded)} more paths as accepted, each within its floor</summary>"
                + _verdict_table(folded, VERDICT_COLUMNS, "The paths folded above, as judged.")
                + "</details>"
            )
        parts += _set_aside(paths[aside])
    if lags is not None and not lags.empty:
        table = _ranked(lags[[c for c in SIBLING_COLUMNS if c in lags.columns]], lags["z"])
        parts.append(
            _verdict_table(
                table,
                SIBLING_COLUMNS,
                f"Each GPU against its siblings of the same night (siblings.csv): {WORSE_HEADER}, less "
                "how far it sat from them in the accepted runs.",
            )
        )
    return parts


#: A night's path table shows every path up to this many; past it, what moved first and the paths that
#: passed within their floor folded (a four-GPU night had over 100 rows, most of them within 3%).
SHOWN_PATHS = 30


def _fold_within_floor(table: pd.DataFrame, shown: int = SHOWN_PATHS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows to show and those folded: past `shown` rows, the passing paths whose change is within their
    floor (ranked rows: what moved comes first and stays)."""
    if len(table) <= shown or not {"verdict", "worse_pct", "floor_pct"} <= set(table.columns):
        return table, table.iloc[0:0]
    quiet = (table["verdict"] == "pass") & (table["worse_pct"].abs() <= table["floor_pct"])
    return table[~quiet], table[quiet]


def _set_aside(paths: pd.DataFrame) -> list[str]:
    """The paths not judged tonight, and those another check judges, a line per reason."""
    parts = []
    paths = paths.assign(why=paths["why"] if "why" in paths else paths.get("reason", ""))
    for (verdict, why), rows in paths.fillna({"why": ""}).groupby(["verdict", "why"], sort=False):
        names = "; ".join(rows["path"])
        label = "Judged by another check" if verdict == "yardstick" else "Not judged"
        parts.append(f"<p class='aside'>{label} ({len(rows)} path(s), {html.escape(why)}): {html.escape(names)}.</p>")
    return parts


def rejudged_table(run: dict) -> str:
    """A night judged again: its own verdict and the later one side by side, each with its date; the lists
    below are the later one's."""
    when = html.escape(str(run["rejudged"]).replace("T", " "))
    ran = html.escape(str(run.get("stamp", "")).replace("T", " "))
    return (
        "<h2>Verdicts</h2><table class='verdicts'><thead><tr><th></th><th>verdict</th><th>judged</th></tr></thead>"
        f"<tbody><tr><td class='text'>the night itself</td><td class='text'>{html.escape(verdict_words(run['as_ran']))}"
        f"</td><td class='text'>{ran} UTC, as it ran</td></tr>"
        f"<tr><td class='text'>judged again (./suite rejudge)</td><td class='text'>{html.escape(verdict_words(run))}"
        f"</td><td class='text'>{when} UTC, against the accepted runs and rules of then</td></tr></tbody></table>"
        "<p>What follows is the verdict judged again.</p>"
    )


def verdict_box(run: dict, found: list, step: tuple[str, str] | None, limit: int = 12) -> list[str]:
    """The verdict in a few lines: its exit status and meaning, a drill's
    fault, the next step, and what moved (the first `limit` findings, each
    with its own step where it is not the night's)."""
    if run.get("exit") is None:  # a night from before the verdict was written (or killed before it)
        return [
            "<h2>No verdict recorded</h2>",
            "<p class='next'><b>Next step: rerun</b>: judge it against the accepted runs as they are now "
            f"(./suite rejudge {html.escape(str(run.get('stamp', 'STAMP')))}).</p>",
        ]
    if run.get("rejudged"):  # reports/runs.py's as_last_judged: both verdicts, side by side, each dated
        parts = [rejudged_table(run)]
    else:
        parts = [f"<h2>Verdict: exit {run.get('exit')} ({html.escape(str(run.get('meaning', '')))})</h2>"]
    if run.get("host_differs"):  # first: whatever moved may be the host's (runner/nightly.py)
        parts.append(f"<p class='host'><b>Note</b>: {html.escape(run['host_differs'])}.</p>")
    if run.get("drill"):
        parts.append(f"<p>A drill: {html.escape(run['drill'])} (no night of later nights' history).</p>")
    if step is not None:
        parts.append(f"<p class='next'><b>Next step: {html.escape(step[0])}</b>: {html.escape(step[1])}.</p>")
    if found:
        items = [
            f"<li><b>{html.escape(f.verdict)}</b> {html.escape(f.said())}"
            + (f" <i>(next: {html.escape(f.step)})</i>" if step is None or f.step != step[0] else "")
            + "</li>"
            for f in found[:limit]
        ]
        more = f"<li>and {len(found) - limit} more, in the tables below</li>" if len(found) > limit else ""
        # Failures of checks and of the suite itself are no moves: the list is headed by what it holds.
        moved = any(f.verdict not in ("FAILED", "SUITE ERROR") for f in found)
        heading = f"What moved, as {WORSE_HEADER}" if moved else "What the night found"
        parts.append(f"<p>{heading}:</p><ul class='found'>{''.join(items)}{more}</ul>")
    elif run.get("exit") == 3:
        parts.append("<p>Nothing moved of what could be judged.</p>")
    else:
        parts.append("<p>Nothing moved.</p>")
    return parts


def _drain_section(run: dict) -> list[str]:
    """What the night says of the node beyond its findings: the checks that
    failed (drain.txt has them among its reasons), the findings not drained
    because another process used their GPUs, and every other process the
    watch saw on a GPU."""
    parts = []
    failed = failed_checks(run.get("drain") or [])
    if failed:
        items = "".join(f"<li>{html.escape(r)}</li>" for r in failed)
        parts.append(f"<p><strong>Checks that failed</strong> (drain.txt):</p><ul>{items}</ul>")
    if run.get("not_drained"):
        parts.append(
            f"<p><strong>Contended, not drained</strong>: {len(run['not_drained'])} finding(s) on GPUs another "
            "process used: a busy GPU, not a slow one; run the night again when it is free.</p>"
        )
    others = run.get("contention", {}).get("processes", [])
    if others:
        where = [process_place(o) + (f" of {o['node']}" if o.get("node") else "") for o in others]
        items = "".join(f"<li>{html.escape(w)}: {html.escape(process_line(o))}</li>" for w, o in zip(where, others))
        seen = "<p>Other processes on the GPUs or the host's CPUs during the checks (the watch):</p>"
        parts.append(f"{seen}<ul>{items}</ul>")
    return parts


def _ranked(table: pd.DataFrame, sizes: pd.Series) -> pd.DataFrame:
    """Findings first (VERDICT_ORDER), the largest of `sizes` first within a verdict, findings in capitals."""
    rank = {verdict: i for i, verdict in enumerate(VERDICT_ORDER)}
    table = table.assign(rank=table["verdict"].map(rank).fillna(len(rank)), size=-sizes.fillna(-math.inf))
    table = table.sort_values(["rank", "size"], kind="stable").drop(columns=["rank", "size"])
    return table.assign(verdict=table["verdict"].where(table["verdict"].isin(QUIET), table["verdict"].str.upper()))


@dataclass
class NightLink:
    """A night the report's index opens with: its label (its kind of node),
    run.json, page, what it found and its next step (runner/pages.py: judge/explain.py's)."""

    label: str
    run: dict
    page: Path
    found: list = field(default_factory=list)
    step: tuple[str, str] = ("", "")


def write_verdict_page(
    run: dict,
    paths: pd.DataFrame | None,
    lags: pd.DataFrame | None,
    outdir: Path,
    title: str,
    reasons: dict[str, str] | None = None,
    back: str = "",
    history: Path | None = None,
    found: list = (),
    step: tuple[str, str] | None = None,
) -> Path:
    """A night's page of its verdict alone (verdict_section, no check pages):
    index.html in `outdir`, linking its kind's `history` where given."""
    outdir.mkdir(parents=True, exist_ok=True)
    body = verdict_section(run, paths, run.get("changes", []), reasons, lags, found, step)
    if history is not None:
        body.insert(0, f"<p>{_link(history, 'The history of this kind of node, night by night', outdir)}.</p>")
    page = outdir / "index.html"
    page.write_text(page_html(title, body, back=back))
    return page


def nights_section(nights: list[NightLink], outdir: Path, limit: int = 3) -> list[str]:
    """The index's first table: the latest night of each kind of node, its
    verdict, what moved (its first `limit` findings) and its next step."""
    if not nights:
        return []
    rows = []
    for night in nights:
        run, (step, what) = night.run, night.step
        lines = [f"<b>{html.escape(f.verdict)}</b> {html.escape(f.said())}" for f in night.found[:limit]]
        if len(night.found) > limit:
            lines.append(f"and {len(night.found) - limit} more")
        moved = "<br>".join(lines) or "nothing"
        status = html.escape(verdict_words(run))
        if run.get("rejudged"):  # both, each dated: the night's own first
            again = html.escape(str(run["rejudged"])[:10])
            status = f"the night: {html.escape(verdict_words(run['as_ran']))}<br>judged again {again}: {status}"
        drill = "<br><i>a drill</i>" if run.get("drill") else "<br><i>a replay</i>" if run.get("replay") else ""
        rows.append(
            f"<tr class='exit{html.escape(str(run.get('exit')))}'><td class='text'>{html.escape(night.label)}</td>"
            f"<td class='text'>{_link(night.page, run['stamp'].replace('T', ' '), outdir)}{drill}</td>"
            f"<td class='text'>{status}</td><td class='text'>{moved}</td>"
            f"<td class='text'><b>{html.escape(step)}</b><br><small>{html.escape(what)}</small></td></tr>"
        )
    return [
        "<h2>The latest night of each kind of node</h2>",
        "<p>A night judged again (./suite rejudge) shows its own verdict and the later one; what moved and the "
        "next step are the later one's.</p>"
        if any(n.run.get("rejudged") for n in nights)
        else "",
        "<table class='nights'><thead><tr><th>kind of node</th><th>night (UTC)</th><th>verdict</th>"
        f"<th>what moved, as {WORSE_HEADER}</th><th>next step</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>",
    ]


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
    nights: list[NightLink] = (),
) -> Report:
    """index.html, a page per check and their figures under `outdir`; the
    index opens with `verdict` (a night's, verdict_section) or with the
    latest `nights` of each kind of node (runner/pages.py draws their pages),
    and links `histories` (label: page; runner/histories.py writes them)."""
    report = write_pages(loaded, outdir, title, generic_for_all)
    return write_index(report, loaded, title, histories, verdict, nights)


def write_pages(loaded: Loaded, outdir: Path, title: str, generic_for_all: bool = False) -> Report:
    """The figures and a page per check under `outdir` (what takes the time:
    a nightly draws them while it waits for its later measure), not yet the index.
    Each check drawn from its own records, cut from the table once (each_check)."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    headline = headline_figures(loaded.frame)
    report = Report(outdir / "index.html")
    overlays = []
    # Weighed by records, not checks: a check's figures take time by its records (Unified Memory's many, the
    # host's few), and a count of checks said "about 12 s left" with more than a minute to go.
    progress = Progress("report", "records' figures drawn", len(loaded.frame), then="the index and histories after")
    for test, records in each_check(loaded.frame):
        check = CheckRecords.of(records)
        drawn = render_check(test, check.medians, outdir, generic_for_all) if not check.medians.empty else []
        # The versions' overlay reads the samples: the spread is what tells a move from noise.
        overlay = versions_figures(check.every, outdir)
        report.figures += drawn
        overlays += overlay
        if not (check.medians.empty and check.impossible.empty):
            page = outdir / f"{test}.html"
            body = _test_section(test, check.medians, drawn + overlay, headline, outdir, check.impossible)
            page.write_text(page_html(f"{test}: {title}", body, heading=test, anchor=test, back="index.html"))
            report.pages[test] = page
        progress.step(len(records))
    report.figures += overlays
    return report


@dataclass
class CheckRecords:
    """One check's records as its page uses them: those a figure can draw (`every`, samples included),
    their medians (the samples of headline figures are for the verdict; the report shows their medians)
    and the values no figure can draw (drawable)."""

    every: pd.DataFrame
    medians: pd.DataFrame
    impossible: pd.DataFrame

    @classmethod
    def of(cls, records: pd.DataFrame) -> CheckRecords:
        every, impossible = drawable(records)
        every = in_gb_per_s(every)  # one unit of bandwidth on every page, whatever the seed's
        return cls(every, every[every["sample"].isna()], impossible)


def write_index(
    report: Report,
    loaded: Loaded,
    title: str,
    histories: dict[str, Path] | None = None,
    verdict: list[str] = (),
    nights: list[NightLink] = (),
) -> Report:
    """The report's index.html: `verdict` or the latest `nights` first, then
    the pages of `report` (write_pages) and `histories`."""
    report.histories = histories or {}
    outdir = report.index.parent
    frame = _medians_covered(loaded.frame)
    parts = [
        *verdict,
        *nights_section(list(nights), outdir),
        f"<p>Generated by <code>./suite report html</code> on "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC from "
        f"{len(loaded.files)} file(s), {len(frame)} performance values.</p>",
        *_contents(report.pages, report.histories, outdir),
        *_coverage_section(loaded, frame),
        _notes(),
    ]
    report.index.write_text(page_html(title, parts))
    return report
