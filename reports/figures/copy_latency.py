"""The small-copy latency curves and crossovers."""

from __future__ import annotations

import math
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from experiments.copy_latency import NAME, TABLE_SIZES, crossovers
from reports.figures.axes import bytes_label, plain_log_ticks, size_label
from reports.figures.common import Figure, coverage_text, finish, group_keys, key_name, link_sol, sets_of

# --- Small-copy latency --------------------------------------------------------

_LAT_VAR = re.compile(r"lat_us_(?P<method>[a-z0-9]+)_(?P<direction>h2d|d2h)_(?P<size>\d+)")
_LAT_METHODS = ["pageable", "pinned", "async", "zerocopy", "gdrcopy"]
_LAT_LABELS = {
    "pageable": "cudaMemcpy, pageable",
    "pinned": "cudaMemcpy, pinned",
    "async": "cudaMemcpyAsync + sync, pinned",
    "zerocopy": "zero-copy kernel, mapped pinned",
    "gdrcopy": "GDRCopy mapping",
}
_LAT_COLORS = dict(zip(_LAT_METHODS, ["#7f7f7f", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"]))
_DIRECTION_TITLES = {"h2d": "host to device", "d2h": "device to host"}


def latency_curves(group: pd.DataFrame) -> pd.DataFrame:
    """method, direction, size, median, min, max, q25, q75, count of one set of runs' latency records."""
    data = group[group["perf_var"].str.fullmatch(_LAT_VAR.pattern) & group["value"].notna()]
    parts = data["perf_var"].str.extract(_LAT_VAR.pattern)
    data = data.assign(method=parts["method"], direction=parts["direction"], size=parts["size"].astype(int))
    by = data.groupby(["method", "direction", "size"])["value"]
    stats = by.agg(["median", "min", "max", "count"])
    return stats.assign(q25=by.quantile(0.25), q75=by.quantile(0.75)).reset_index()


def latency_crossovers(stats: pd.DataFrame) -> dict:
    """experiments.copy_latency.crossovers() on the median curves: {'crossover_<dir>_<b>_over_<a>': size}."""

    curves = {
        (m, d): dict(zip(part["size"], part["median"])) for (m, d), part in stats.groupby(["method", "direction"])
    }
    return crossovers(curves)


def latency_marks(found: dict, direction: str) -> list:
    """The crossovers of one direction: (size, faster method, slower method), by size."""
    return sorted(
        (size, name.split("_")[2], name.split("_")[4])
        for name, size in found.items()
        if name.split("_")[1] == direction
    )


def _draw_method_curves(ax, stats: pd.DataFrame, direction: str, methods: list) -> None:
    for method in methods:
        curve = stats[(stats["method"] == method) & (stats["direction"] == direction)].sort_values("size")
        if curve.empty:
            continue
        color = _LAT_COLORS.get(method, "#9467bd")
        ax.plot(curve["size"], curve["median"], marker="o", ms=3, color=color, label=_LAT_LABELS.get(method, method))
        if curve["count"].max() > 1:  # the middle half of the runs: one slow run stretches min-max up the panel
            ax.fill_between(curve["size"], curve["q25"], curve["q75"], color=color, alpha=0.15)


def _draw_crossovers(ax, stats: pd.DataFrame, direction: str, marks: list, high: float) -> None:
    left, right = (math.log2(x) for x in ax.get_xlim())
    for n, (size, b, a) in enumerate(marks):
        at = stats[(stats["method"] == b) & (stats["direction"] == direction) & (stats["size"] == size)]
        y = float(at["median"].iloc[0]) if not at.empty else high / 2
        ax.axvline(size, color=_LAT_COLORS.get(b, "#9467bd"), linestyle=":", lw=1.2)
        ax.plot([size], [y], marker="o", ms=9, mfc="none", mec="black", mew=1.2)
        # Its note on the side of its line with room: past the middle it reads leftwards, inside the axes.
        rightwards = (math.log2(size) - left) / (right - left) < 0.5
        ax.text(
            size * 1.08 if rightwards else size / 1.08,
            0.97 - 0.11 * n,
            f"{b} faster than {a}\nfrom {bytes_label(size)} on",
            transform=ax.get_xaxis_transform(),  # x in bytes, y in the axes' height: stacked from the top
            fontsize=7,
            va="top",
            ha="left" if rightwards else "right",
            color="black",
            zorder=5,
            bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="none", alpha=0.8),
        )


def _draw_latency_panel(ax, stats: pd.DataFrame, direction: str, methods: list, found: dict, link) -> None:
    low, high = stats["q25"].min() / 2, stats["q75"].max() * 2
    sizes = sorted(stats["size"].unique())
    ax.set_xscale("log", base=2)
    ax.set_xlim(sizes[0] / 1.5, sizes[-1] * 1.5)  # fixed before the notes, which are placed by it
    _draw_method_curves(ax, stats, direction, methods)
    if link:
        xs = [s for s in sizes if s / link.bytes_per_s * 1e6 >= low / 4] or sizes[-1:]
        ax.plot(
            xs,
            [s / link.bytes_per_s * 1e6 for s in xs],
            color="black",
            linestyle="--",
            lw=1,
            label=f"size / link speed of light ({link.bytes_per_s / 1e9:.1f} GB/s)",
        )
    marks = latency_marks(found, direction)
    _draw_crossovers(ax, stats, direction, marks, high)
    ax.set_yscale("log")
    ax.set_ylim(low, high)
    plain_log_ticks(ax.yaxis)
    ticks = [s for s in sizes if math.log2(s) % 4 == 0]
    ax.set_xticks(ticks, [bytes_label(s) for s in ticks], fontsize=8)
    ax.set_xlabel("copy size (bytes, log2 scale)")
    ax.grid(True, which="major", alpha=0.3)
    ax.set_title(
        f"{_DIRECTION_TITLES.get(direction, direction)} ({direction})" + ("" if marks else ": no crossover"),
        fontsize=10,
    )


def _latency_notes(link) -> list:
    notes = [
        "shaded: the middle half of the runs",
        "circles and dotted lines: crossovers, the size from which the first method stays faster",
    ]
    if link:
        notes.append(f"dashed: the time the host link needs at its speed of light ({link.source})")
    return notes


def latency_figure(frame: pd.DataFrame, outdir: Path) -> list[Figure]:
    """Latency against size per method, a panel per direction, crossovers marked, link-limited time dashed."""
    figures = []
    for key, group in sets_of(frame, NAME):
        stats = latency_curves(group)
        if stats.empty:
            continue
        info = dict(zip(group_keys(), key))
        directions = [d for d in ("h2d", "d2h") if d in set(stats["direction"])]
        methods = [m for m in _LAT_METHODS if m in set(stats["method"])]
        methods += sorted(set(stats["method"]) - set(_LAT_METHODS))
        found, link = latency_crossovers(stats), link_sol(group)
        fig, axes = plt.subplots(1, len(directions), figsize=(6.6 * len(directions), 5.6), sharey=True, squeeze=False)
        for ax, direction in zip(axes[0], directions):
            _draw_latency_panel(ax, stats, direction, methods, found, link)
        axes[0][0].set_ylabel("latency, median (µs, log scale)")
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(
            handles,
            labels,
            loc="upper center",
            ncol=3,
            fontsize=8,
            frameon=False,
            bbox_to_anchor=(0.5, 1 - 0.42 / fig.get_figheight()),
        )
        fig.suptitle(
            f"Small-copy latency: one copy of each size ({info['system']}:{info['partition']}, "
            f"{info['gpu_model']}, {info['host_link']})",
            fontsize=11,
        )
        name = finish(
            fig,
            group,
            "; ".join(_latency_notes(link)),
            outdir,
            key_name("latency", key),
            top=1 - 0.8 / fig.get_figheight(),
            margins=(1.05, 1.05),
        )
        caption = f"{coverage_text(group)}. " + (f"Speed of light from {link.source}." if link else "")
        figures.append(Figure(NAME, outdir / name, "Latency against copy size", caption))
    return figures


def table(frame: pd.DataFrame) -> pd.DataFrame:
    """Median latency (us) per method and direction at a few sizes, one row per set of runs and curve."""

    rows = []
    for key, group in sets_of(frame, NAME):
        info = dict(zip(group_keys(), key))
        stats = latency_curves(group)
        found = latency_crossovers(stats)
        for (method, direction), curve in stats.groupby(["method", "direction"], sort=False):
            by_size = dict(zip(curve["size"], curve["median"]))
            row = {
                "set of runs": f"{info['gpu_model']}, driver {info['driver_version']}",
                "direction": direction,
                "method": method,
            }
            row.update({size_label(s): by_size.get(s) for s in TABLE_SIZES})
            row["overtakes (from size)"] = ", ".join(
                f"{name.split('_')[4]} at {size_label(size)}"
                for name, size in found.items()
                if name.split("_")[1] == direction and name.split("_")[2] == method
            )
            rows.append(row)
    table = pd.DataFrame(rows)
    if not table.empty:
        table = table.sort_values(["set of runs", "direction", "method"], ascending=[True, False, True])
        if table["set of runs"].nunique() == 1:
            table = table.drop(columns="set of runs")
    return table


#: The figures of its own the report draws.
FIGURES = [latency_figure]
#: No generic bars even on request: its figures and table show every variable.
GENERIC = False
