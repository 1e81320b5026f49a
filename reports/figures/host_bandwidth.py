"""Host memory bandwidth per NUMA node."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from experiments.host_bandwidth import NAME
from reports.figures.common import SERIES_FIELDS, Figure, coverage_text, finish, series_labels, varying_fields

# --- Host bandwidth per NUMA node --------------------------------------------


def host_numa(frame: pd.DataFrame, outdir: Path) -> list[Figure]:
    """Read and write bandwidth of each NUMA node, a group of bars per node and set of runs."""
    data = frame[(frame["test"] == NAME) & frame["perf_var"].str.fullmatch(r"(read|write)_bw_node\d+")].copy()
    if data.empty:
        return []
    parts = data["perf_var"].str.extract(r"(?P<op>read|write)_bw_node(?P<numa>\d+)")
    data["op"], data["numa"] = parts["op"], parts["numa"].astype(int)
    varying = varying_fields(data, SERIES_FIELDS) or ["system", "node"]
    data["series"] = series_labels(data, varying)
    stats = data.groupby(["series", "numa", "op"], sort=False)["value"].agg(["median", "min", "max", "count"])
    stats = stats.reset_index()
    groups = stats[["series", "numa"]].drop_duplicates().reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(max(7.5, 1.6 * len(groups) + 2.5), 5.2))
    width = 0.3
    for k, (op, color) in enumerate((("read", "#1f77b4"), ("write", "#ff7f0e"))):
        for g, group in groups.iterrows():
            match = (stats["series"] == group["series"]) & (stats["numa"] == group["numa"]) & (stats["op"] == op)
            row = stats[match]
            if row.empty:
                continue
            row = row.iloc[0]
            x = g + (k - 0.5) * width
            err = [[row["median"] - row["min"]], [row["max"] - row["median"]]] if row["count"] > 1 else None
            ax.bar(x, row["median"], width, color=color, yerr=err, capsize=3, label=op if g == 0 else None)
            ax.text(x, row["median"], f"{row['median']:.1f}", ha="center", va="bottom", fontsize=8)
    labels = [f"{group['series'].replace(', ', chr(10))}\nNUMA node {group['numa']}" for _, group in groups.iterrows()]
    ax.set_xticks(range(len(groups)), labels, fontsize=8)
    ax.set_ylabel("bandwidth (GB/s)")
    ax.set_xlim(-0.8, len(groups) - 0.2)
    ax.set_title(
        "Host memory bandwidth per NUMA node\nthreads bound to the node, memory on it; median of the program's runs",
        fontsize=10,
    )
    ax.legend(title="operation", fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_ylim(0, stats["max"].max() * 1.2)
    name = finish(
        fig,
        data,
        "error bars: min to max over repeated executions" if stats["count"].max() > 1 else "",
        outdir,
        "host-bandwidth-numa.png",
        top=1.0,
    )
    return [Figure(NAME, outdir / name, "Host memory bandwidth per NUMA node", coverage_text(data) + ".")]


#: The figures of its own the report draws.
FIGURES = [host_numa]
