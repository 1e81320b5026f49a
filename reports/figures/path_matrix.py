"""The path matrix as heat maps: GPU x NUMA node (host paths), each GPU with
all the others at once, GPU x peer (pairs), GPU x target (latency). Each cell
shows its median and, where the system data gives its link, the share of
that limit (the colour), and the accepted value (its reference) where the
node has one: the one bad path of a node stands out as a pale cell."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from experiments.path_matrix import NAME, cell_parts
from reports.figures.common import Figure, coverage_text, finish, key_name, references, sets_of


def cell_table(group: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: its matrix ('host', 'allgpus', 'peer', 'latency'),
    panel, row and column, median, unit, limit and accepted value."""
    data = group[group["sample"].isna()]
    limits = data[data["figure"].str.startswith("limit_")].groupby("figure")["value"].median()
    rows = []
    for figure, cell in data[~data["figure"].str.startswith("limit_")].groupby("figure"):
        c = cell_parts(figure)
        if c is None:
            continue
        refs = references(cell)
        accepted = refs.median() if len(refs) else None
        row = {
            "figure": figure,
            "median": cell["value"].median(),
            "unit": cell["unit"].iloc[0],
            "limit": limits.get(f"limit_{figure}"),
            "accepted": accepted,
        }
        both = ", both ways" if c.both else ""
        panel = "dependent loads (ns)" if c.matrix == "latency" else f"{c.action}, {c.engine}{both}"
        row |= {"matrix": c.matrix, "panel": panel, "row": f"GPU {c.gpu}", "column": c.target}
        rows.append(row)
    return pd.DataFrame(rows)


def _number(value: float) -> str:
    """Three figures, never in e-notation: 1237, 52.1, 0.873."""
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def cell_label(row) -> str:
    text = _number(row["median"])
    if row["limit"] and not math.isnan(row["limit"]):
        text += f"\n{100 * row['median'] / row['limit']:.0f}% of {row['limit']:.0f}"
    if row["accepted"] is not None and not pd.isna(row["accepted"]):
        text += f"\nacc. {_number(row['accepted'])}"
    return text


def _draw_panel(ax, cells: pd.DataFrame, title: str) -> None:
    rows, columns = sorted(cells["row"].unique()), sorted(cells["column"].unique())
    grid = [[math.nan] * len(columns) for _ in rows]
    best, fastest = cells["median"].max(), cells["median"].min()
    for _, cell in cells.iterrows():
        # The colour: the share of the link where there is one, else the share of the panel's best;
        # for latency, the fastest over this one.
        if cell["unit"] == "ns":
            share = fastest / cell["median"]
        elif cell["limit"] and not math.isnan(cell["limit"]):
            share = cell["median"] / cell["limit"]
        else:
            share = cell["median"] / best
        grid[rows.index(cell["row"])][columns.index(cell["column"])] = share
        ax.text(
            columns.index(cell["column"]),
            rows.index(cell["row"]),
            cell_label(cell),
            ha="center",
            va="center",
            fontsize=7,
        )
    ax.imshow(grid, cmap="RdYlGn", vmin=0.5, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(columns)), columns, fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    ax.set_title(title, fontsize=9)


_TITLES = {
    "host": "GPU x NUMA node: pinned host memory bound to each node, GB/s",
    "allgpus": "every GPU with its own NUMA node at once, GB/s",
    "peer": "GPU (rows) reading or writing a peer (columns), GB/s",
    "latency": "latency of dependent loads from each GPU, ns",
}


def path_heat_maps(frame: pd.DataFrame, outdir: Path) -> list[Figure]:
    """One figure per matrix and machine, a panel per engine and direction."""
    figures = []
    for key, group in sets_of(frame, NAME):
        table = cell_table(group)
        for matrix, cells in table.groupby("matrix") if not table.empty else []:
            panels = sorted(cells["panel"].unique())
            width = max(2.6, 0.9 * cells["column"].nunique() + 1.2)
            height = max(1.8, 0.55 * cells["row"].nunique() + 1.0)
            columns = min(4, len(panels))
            lines = math.ceil(len(panels) / columns)
            size = (max(7.5, width * columns + 0.5), height * lines + 1.6)
            fig, axes = plt.subplots(lines, columns, squeeze=False, figsize=size)
            for ax, panel in zip(axes.flat, panels):
                _draw_panel(ax, cells[cells["panel"] == panel], panel)
            for ax in list(axes.flat)[len(panels) :]:
                ax.axis("off")
            title = f"{NAME}: {_TITLES[matrix]} ({key[0]}:{key[1]}, {key[2]})"
            fig.suptitle(title, fontsize=10, wrap=True)  # one panel is narrower than the title
            name = finish(
                fig,
                group,
                "colour: share of the cell's link limit (system data); green at 100%",
                outdir,
                key_name(f"paths-{matrix}", key),
                top=0.9,
            )
            caption = (
                f"Each cell: its median over the run's samples; below it the share of its link's limit "
                f"(checks/path_matrix.py: PCIe per GPU, NVLink per pair, from systems/) and the accepted "
                f"value where the node has a reference. {coverage_text(group)}."
            )
            figures.append(Figure(NAME, outdir / name, title, caption))
    return figures


#: The figures of its own the report draws.
FIGURES = [path_heat_maps]
#: No generic bars even on request: its figures and table show every variable.
GENERIC = False
