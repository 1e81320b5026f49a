"""A partition's page: the heat map of nodes by paths, coloured by how far
each node is behind its siblings, the drain list, the fleet's changes, and
each named node's history one click away. It only draws what
runner/partition.py judged (judge/partition.py's tables).

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

from reports.figures import common  # noqa: F401  (the figures' backend and style)
from reports.page import page_html

#: Nodes drawn one row each, worst first; the others are one summary row.
HEAT_ROWS = 40
#: The colour scale's end, percent behind the siblings.
HEAT_RANGE = 20.0


def heat_rows(cells: pd.DataFrame, nodes: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The nodes by paths drawn (percent behind the siblings, worse positive):
    the first HEAT_ROWS nodes in `nodes`' order (worst first), then the
    median of the rest as one row; and how many that row sums up."""
    table = cells.pivot(index="node", columns="path", values="behind_pct")
    order = list(nodes["node"])
    shown, rest = order[:HEAT_ROWS], order[HEAT_ROWS:]
    drawn = table.reindex(shown)
    if rest:
        drawn.loc[f"median of the other {len(rest)}"] = table.reindex(rest).median()
    return drawn, len(rest)


def draw_heat_map(cells: pd.DataFrame, nodes: pd.DataFrame, target: Path) -> Path:
    drawn, _ = heat_rows(cells, nodes)
    height = 1.2 + 0.22 * len(drawn)
    fig, ax = plt.subplots(figsize=(2 + 0.32 * drawn.shape[1], height))
    shown = np.ma.masked_invalid(drawn.to_numpy(float))
    cmap = plt.get_cmap("RdBu_r").with_extremes(bad="#bbbbbb")  # grey: not measured, or no siblings
    image = ax.imshow(shown, aspect="auto", cmap=cmap, vmin=-HEAT_RANGE, vmax=HEAT_RANGE, interpolation="nearest")
    ax.set_yticks(range(len(drawn)), drawn.index, fontsize=6)
    ax.set_xticks(range(drawn.shape[1]), drawn.columns, fontsize=6, rotation=60, ha="right")
    fig.colorbar(image, ax=ax, label="% behind its siblings (worse up)", shrink=0.8)
    ax.set_title("Each node against its siblings of the night (grey: not measured)", fontsize=8)
    fig.tight_layout()
    fig.savefig(target, dpi=110)
    plt.close(fig)
    return target


def draw_node_history(node: str, rows: pd.DataFrame, target: Path) -> Path:
    """One node's levels behind its siblings by path over the partition nights."""
    fig, ax = plt.subplots(figsize=(8, 3.5))
    for path, group in rows.sort_values("night").groupby("path"):
        ax.plot(group["night"].str[5:16], group["behind_pct"], marker="o", ms=3, lw=1, label=path)
    ax.axhline(0, color="black", lw=0.5)
    ax.set_ylabel("% behind its siblings")
    ax.set_title(f"{node} against its siblings, night by night", fontsize=9)
    ax.tick_params(axis="x", labelsize=6, rotation=45)
    ax.legend(fontsize=5, ncols=2, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(target, dpi=100)
    plt.close(fig)
    return target


def _link(name: str, text: str) -> str:
    return f"<a href='{html.escape(quote(name))}'>{html.escape(text)}</a>"


def write_node_page(node: str, rows: pd.DataFrame, outdir: Path) -> str:
    """The node's history page in `outdir`; its file name."""
    name = f"node-{node}.html"
    draw_node_history(node, rows, outdir / f"node-{node}.png")
    worst = rows.sort_values("z", ascending=False).head(20)[["night", "path", "verdict", "vs_siblings_pct", "z"]]
    body = [
        f"<p>{_link('index.html', 'the partition tonight')}</p>",
        f"<img src='{html.escape(quote(f'node-{node}.png'))}' alt='{html.escape(node)} over the nights'>",
        "<h2>Its worst paths over the nights</h2>",
        worst.to_html(index=False, float_format=lambda v: f"{v:.2f}"),
    ]
    (outdir / name).write_text(page_html(f"{node}: its history", body))
    return name


def write_partition_page(run: dict, result, outdir: Path, histories: dict[str, pd.DataFrame]) -> Path:
    """index.html of a partition's night (`result`: judge/partition.py's Partition)."""
    draw_heat_map(result.cells, result.nodes, outdir / "heat-map.png")
    pages = {node: write_node_page(node, rows, outdir) for node, rows in histories.items() if not rows.empty}
    counts = run["counts"]
    body = [
        f"<p><b>exit {run['exit']} ({html.escape(run['meaning'])})</b>: {counts['reported']} of {counts['nodes']} "
        f"node(s) reported; {counts['node_faults']} node fault(s); {counts['fleet_changes']} fleet change(s) against "
        f"{counts['accepted_runs']} accepted run(s).</p>",
        "<h2>Nodes to drain</h2>",
        "<p>Also in drain.txt (a node and its reasons per line) and run.json's <code>drain</code>.</p>",
    ]
    if run["drain"]:
        items = []
        for row in run["drain"]:
            name = html.escape(row["node"])
            link = f" ({_link(pages[row['node']], 'its history')})" if row["node"] in pages else ""
            items.append(f"<li><b>{name}</b>{link}: {html.escape(' | '.join(row['reasons']))}</li>")
        body.append("<ul>" + "".join(items) + "</ul>")
    else:
        body.append("<p>None.</p>")
    if run.get("not_drained"):
        items = "".join(
            f"<li><b>{html.escape(r['node'])}</b>: {html.escape(' | '.join(r['reasons']))}</li>"
            for r in run["not_drained"]
        )
        body.append(
            "<h2>Contended, not drained</h2><p>Behind their siblings while another process used their GPUs: a busy "
            f"node, not a slow one; measure it again when it is free.</p><ul>{items}</ul>"
        )
    body.append("<h2>The partition against its accepted runs</h2>")
    changes = "".join(f"<li>{html.escape(x)}</li>" for x in run["fleet_changes"])
    body.append(f"<ul>{changes}</ul>" if changes else "<p>No fleet change.</p>")
    body += ["<h2>Each node against its siblings</h2>", "<img src='heat-map.png' alt='nodes by paths'>"]
    if pages:
        links = ", ".join(_link(page, node) for node, page in pages.items())
        body.append(f"<p>Each node's history, night by night: {links}.</p>")
    fleet = result.fleet.drop(columns=["p_adjusted"])
    body += ["<h2>Each path over the partition</h2>", fleet.to_html(index=False, float_format=lambda v: f"{v:.2f}")]
    title = f"Partition night of {run['system']}:{run.get('partition', '')}, {run['stamp']} UTC"
    target = outdir / "index.html"
    target.write_text(page_html(title, body))
    return target
