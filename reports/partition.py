"""A partition's page: its verdict and next step, the heat map of nodes by
paths, coloured by how much worse each node is than its siblings in units
of the path's floor (the smallest move worth an alarm) and with the cells
that named a node marked, the drain list, the fleet's paths, and each named
node's history one click away. It only draws what runner/partition.py
judged (judge/partition.py's tables, judge/explain.py's words and % worse).

A partition of thousands stays readable: the heat map shows the nodes to
drain and the worst others first, up to HEAT_ROWS rows, and the rest as one
summary row (their median) with their count.
"""

from __future__ import annotations

import html
from pathlib import Path
from urllib.parse import quote

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.patches import Rectangle

from reports.figures import common  # noqa: F401  (the figures' backend and style)
from reports.page import WORSE_HEADER, page_html
from systems.finding_codes import failed_checks

#: Nodes drawn one row each, worst first; the others are one summary row.
HEAT_ROWS = 40
#: The colour scale's end, in floors of each path: a cell this many floors worse (or better) is at full colour.
HEAT_FLOORS = 4.0
#: A path's floor where the fleet's table does not give it (the host link's and most paths'), percent.
DEFAULT_FLOOR = 3.0
#: A cell's verdicts that named its node: behind its siblings, alone or on a path the partition moved on.
NAMED = ("node fault", "both")


def heat_rows(cells: pd.DataFrame, nodes: pd.DataFrame, column: str = "worse_pct") -> tuple[pd.DataFrame, int]:
    """The nodes by paths drawn (`column` of `cells`: by default % worse than
    the siblings): the first HEAT_ROWS nodes in `nodes`' order (worst first),
    then the median of the rest as one row; and how many that row sums up."""
    table = cells.pivot(index="node", columns="path", values=column)
    order = list(nodes["node"])
    shown, rest = order[:HEAT_ROWS], order[HEAT_ROWS:]
    drawn = table.reindex(shown)
    if rest:
        drawn.loc[f"median of the other {len(rest)}"] = table.reindex(rest).median()
    return drawn, len(rest)


def floors_of(fleet: pd.DataFrame, paths) -> pd.Series:
    """Each path's floor (percent), from the fleet's table."""
    known = fleet.set_index("path")["floor_pct"] if "floor_pct" in fleet.columns else pd.Series(dtype=float)
    return known.reindex(paths).fillna(DEFAULT_FLOOR).astype(float)


#: How the heat map marks a cell by its verdict (judge/partition.py's Cell): its outline's style and colour.
MARKS = {
    "node fault": ("-", "black"),
    "both": ("-", "black"),
    "contended": ("--", "black"),
    "transient": (":", "#555555"),
}
#: What the page says of the heat map, under it.
HEAT_CAPTION = (
    "Each node (a row, the worst first) against its siblings of the night on each path (a column, its floor "
    "beside its name): % worse than the median of the other nodes, in floors of the path, so that 1 is the "
    "smallest move worth an alarm on that path whatever the path (red worse, blue better; full colour from "
    f"{HEAT_FLOORS:g} floors on). Outlined, with its % worse written in: a cell that named its node (behind its "
    "siblings beyond the floor and beyond chance, confirmed by its rerun); dashed: behind while another process "
    "used its GPUs (not drained); dotted: flagged, then not behind in its rerun (transient); grey: not measured."
)


def draw_heat_map(cells: pd.DataFrame, nodes: pd.DataFrame, target: Path, fleet: pd.DataFrame | None = None) -> Path:
    """The heat map (HEAT_CAPTION): each cell's % worse than its siblings
    over its path's floor, the cells that named their node outlined."""
    drawn, _ = heat_rows(cells, nodes)
    marks = {}
    for verdict in MARKS:
        table, _ = heat_rows(cells.assign(mark=(cells["verdict"] == verdict).astype(float)), nodes, "mark")
        marks[verdict] = table.reindex(index=drawn.index, columns=drawn.columns).fillna(0).to_numpy() > 0
    floors = floors_of(fleet if fleet is not None else pd.DataFrame(), drawn.columns)
    scaled = drawn / floors.to_numpy()[None, :]
    rows, columns = drawn.shape
    fig, ax = plt.subplots(figsize=(3.0 + 0.45 * columns, 2.6 + 0.28 * rows))
    cmap = plt.get_cmap("RdBu_r").with_extremes(bad="#bbbbbb")  # grey: not measured, or no siblings
    image = ax.imshow(
        np.ma.masked_invalid(scaled.to_numpy(float)),
        aspect="auto",
        cmap=cmap,
        vmin=-HEAT_FLOORS,
        vmax=HEAT_FLOORS,
        interpolation="nearest",
    )
    values = drawn.to_numpy(float)
    for verdict, (style, colour) in MARKS.items():
        for i, j in zip(*np.nonzero(marks[verdict])):
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=1.8, ec=colour, ls=style))
            if verdict != "transient":
                ax.text(
                    j, i, f"{values[i, j]:+.0f}%", ha="center", va="center", fontsize=7, color="white", weight="bold"
                )
    ax.set_yticks(range(rows), drawn.index, fontsize=9)
    labels = [f"{p} ({f:g}%)" for p, f in zip(drawn.columns, floors)]
    ax.set_xticks(range(columns), labels, fontsize=9, rotation=50, ha="right", rotation_mode="anchor")
    bar = fig.colorbar(image, ax=ax, shrink=0.8, pad=0.02)
    bar.set_label(
        "% worse than its siblings, in floors of its path\n(1 = the path's floor; positive is worse)", fontsize=9
    )
    bar.ax.tick_params(labelsize=9)
    fig.tight_layout()
    fig.savefig(target, dpi=100)
    plt.close(fig)
    return target


#: Paths a node's history draws at most: those it was named on, worst first (its table lists the rest).
PATHS_DRAWN = 8


def drawn_paths(rows: pd.DataFrame) -> tuple[list[str], bool]:
    """The paths a node's history draws: those it was named on over the nights, worst (highest z) first, or
    its worst ones where it never was (then False); at most PATHS_DRAWN. Forty lines and a forty-line legend
    tell no one anything, and drawing them is what made a partition's pages cost minutes."""
    named = rows[rows["verdict"].isin(NAMED)] if "verdict" in rows else rows.iloc[:0]
    ranked = (named if not named.empty else rows).groupby("path")["z"].max().sort_values(ascending=False)
    return list(ranked.index[:PATHS_DRAWN]), not named.empty


#: Night labels a node's history writes at most under its axis.
NIGHT_TICKS = 12


def draw_node_history(node: str, rows: pd.DataFrame, target: Path) -> Path:
    """One node's % worse than its siblings over the partition nights, on the paths it was named on."""
    paths, named = drawn_paths(rows)
    fig, ax = plt.subplots(figsize=(9, 4))
    # Fixed margins, the legend in the right one: tight_layout measured every label again, a figure each.
    fig.subplots_adjust(left=0.09, right=0.74, top=0.9, bottom=0.22)
    nights = sorted(rows["night"].unique())
    at = {night: i for i, night in enumerate(nights)}  # each night its place, whichever paths it has
    for path in paths:
        group = rows[rows["path"] == path].sort_values("night")
        ax.plot(group["night"].map(at), group["worse_pct"], marker="o", ms=3, lw=1, label=path)
    step = -(-len(nights) // NIGHT_TICKS)
    shown = nights[::step]
    ax.set_xticks([at[n] for n in shown], [str(n)[5:16].replace("T", " ") for n in shown])
    ax.axhline(0, color="black", lw=0.5)
    ax.set_ylabel(f"{WORSE_HEADER}\nthan its siblings", fontsize=9)
    left_out = rows["path"].nunique() - len(paths)
    which = "the paths it was named on" if named else "its worst paths"
    more = f" ({left_out} more paths not drawn)" if left_out > 0 else ""
    ax.set_title(f"{node} against its siblings, night by night: {which}{more}", fontsize=9)
    ax.tick_params(axis="x", labelsize=8, rotation=30)
    ax.tick_params(axis="y", labelsize=8)
    ax.legend(fontsize=7, ncols=1, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.savefig(target, dpi=100)
    plt.close(fig)
    return target


def _link(name: str, text: str) -> str:
    return f"<a href='{html.escape(quote(name))}'>{html.escape(text)}</a>"


def write_node_page(node: str, rows: pd.DataFrame, outdir: Path) -> str:
    """The node's history page in `outdir`; its file name."""
    name = f"node-{node}.html"
    draw_node_history(node, rows, outdir / f"node-{node}.png")
    worst = rows.sort_values("z", ascending=False).head(20)
    worst = worst[["night", "path", "verdict", "worse_pct", "z"]].rename(
        columns={"worse_pct": f"{WORSE_HEADER} than its siblings", "z": "standard errors beyond the floor"}
    )
    body = [
        f"<img src='{html.escape(quote(f'node-{node}.png'))}' alt='{html.escape(node)} over the nights'>",
        "<h2>Its worst paths over the nights</h2>",
        worst.to_html(index=False, float_format=lambda v: f"{v:+.1f}"),
    ]
    (outdir / name).write_text(page_html(f"{node}: its history", body, back="index.html", back_text="the partition"))
    return name


def _node_words(node: str, cells: pd.DataFrame) -> str:
    """A node's findings in words: each path it is behind its siblings on, as % worse, worst first."""
    mine = cells[(cells["node"] == node) & cells["verdict"].isin([*NAMED, "not measured", "contended"])]
    parts = []
    for cell in mine.sort_values("z", ascending=False).itertuples():
        if cell.verdict == "not measured":
            parts.append(f"{cell.path}: not measured")
            continue
        also = "; the partition moved too" if cell.verdict == "both" else ""
        busy = f"; another process on its GPUs: {cell.contended_by}" if cell.verdict == "contended" else ""
        parts.append(f"{cell.path}: {cell.worse_pct:+.1f}% worse than its siblings (z {cell.z:.1f}{also}){busy}")
    return "; ".join(parts)


def write_partition_page(
    run: dict,
    result,
    outdir: Path,
    histories: dict[str, pd.DataFrame],
    back: str = "",
    found: list = (),
    step: tuple[str, str] = ("", ""),
) -> Path:
    """index.html of a partition's night (`result`: judge/partition.py's
    Partition, its cells and fleet with `worse_pct`) in `outdir`, with a
    history page for each node in `histories`, what it found and its next
    step (`found`, `step`: judge/explain.py's); a way back to `back` where given."""
    draw_heat_map(result.cells, result.nodes, outdir / "heat-map.png", result.fleet)
    pages = {node: write_node_page(node, rows, outdir) for node, rows in histories.items() if not rows.empty}
    cells = result.cells
    counts = run["counts"]
    step, text = step
    items = "".join(f"<li><b>{html.escape(f.verdict)}</b> {html.escape(f.said())}</li>" for f in found[:12])
    body = [
        f"<div class='verdict exit{html.escape(str(run['exit']))}'>",
        f"<h2>Verdict: exit {run['exit']} ({html.escape(run['meaning'])})</h2>",
        *([f"<p>{html.escape(run['replay'])}</p>"] if run.get("replay") else []),
        f"<p class='next'><b>Next step: {html.escape(step)}</b>: {html.escape(text)}.</p>",
        f"<p>What moved, as {WORSE_HEADER}:</p><ul>{items}</ul>" if found else "<p>Nothing moved.</p>",
        f"<p>{counts['reported']} of {counts['nodes']} node(s) reported, {counts.get('paths', '')} paths; "
        f"{counts['node_faults']} path(s) of a node behind its siblings; {counts['fleet_changes']} fleet "
        f"change(s) against {counts['accepted_runs']} accepted run(s).</p>",
        "</div>",
        "<h2>Each node against its siblings</h2>",
        f"<figure><img src='heat-map.png' alt='nodes by paths'><figcaption>{html.escape(HEAT_CAPTION)}</figcaption>"
        "</figure>",
    ]
    if pages:
        links = ", ".join(_link(page, node) for node, page in pages.items())
        body.append(f"<p>Each node's history, night by night: {links}.</p>")
    body += [
        "<h2>Nodes to drain</h2>",
        "<p>Also in drain.txt (a node and its reasons per line) and run.json's <code>drain</code>.</p>",
    ]
    if run["drain"]:
        items = []
        for row in run["drain"]:
            name = html.escape(row["node"])
            link = f" ({_link(pages[row['node']], 'its history')})" if row["node"] in pages else ""
            failed = [f"failed {line}" for line in failed_checks(row.get("reasons", []))]
            words = "; ".join([_node_words(row["node"], cells) or row.get("state", ""), *failed])
            items.append(f"<li><b>{name}</b>{link}: {html.escape(words)}</li>")
        body.append("<ul>" + "".join(items) + "</ul>")
    else:
        body.append("<p>None.</p>")
    if run.get("not_drained"):
        items = "".join(
            f"<li><b>{html.escape(r['node'])}</b>: {html.escape(_node_words(r['node'], cells))}</li>"
            for r in run["not_drained"]
        )
        body.append(
            "<h2>Contended, not drained</h2><p>Behind their siblings while another process used their GPUs: a busy "
            f"node, not a slow one; measure it again when it is free.</p><ul>{items}</ul>"
        )
    body.append("<h2>The partition against its accepted runs</h2>")
    fleet = result.fleet
    changes = fleet[fleet["verdict"] == "fleet change"]
    lines = "".join(
        f"<li>{html.escape(r.path)}: {r.worse_pct:+.1f}% worse on the whole partition ({int(r.nodes)} nodes)</li>"
        for r in changes.itertuples()
    )
    body.append(f"<ul>{lines}</ul>" if lines else "<p>No fleet change.</p>")
    shown = fleet[["path", "verdict", "worse_pct", "share", "nodes", "accepted_runs", "floor_pct", "z"]].rename(
        columns={
            "worse_pct": f"median node, {WORSE_HEADER}",
            "share": "share of nodes moved the same way",
            "accepted_runs": "accepted runs",
            "floor_pct": "floor %",
            "z": "standard errors beyond the floor",
        }
    )
    body += ["<h2>Each path over the partition</h2>", shown.to_html(index=False, float_format=lambda v: f"{v:.2f}")]
    title = f"Partition night of {run['system']}:{run.get('partition', '')}, {run['stamp'].replace('T', ' ')} UTC"
    target = outdir / "index.html"
    target.write_text(page_html(title, body, back=back))
    return target
