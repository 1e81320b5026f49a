"""The Unified Memory reprex's figures: every run's throughput per case, and
the steady state against the host link's speed of light and the copy engine."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

from experiments.um_bandwidth import NAME
from reports.figures.axes import log_limits
from reports.figures.common import GB, Figure, coverage_text, finish, group_keys, key_name, link_sol

# --- Unified Memory reprex ---------------------------------------------------

_ALLOCATORS = ["managed", "numa", "pinned", "device"]
_ADVICE = ["none", "accessed-by", "read-mostly", "preferred-location-cpu"]
_ADVICE_COLORS = dict(zip(_ADVICE, ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"]))
_TOUCH_STYLE = {"notouch": ("-", "o"), "touch": ("--", "s")}


def _um_cases(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    memory = frame["memory"] if "memory" in frame else pd.Series("unknown", index=frame.index)
    parts = memory.astype(str).str.split("+", n=1, expand=True)
    frame["allocator"] = parts[0]
    frame["advice"] = parts[1].fillna("none") if parts.shape[1] > 1 else "none"
    for column, default in (("touch_on_host", "notouch"), ("op", "read"), ("size_class", "fits")):
        if column not in frame:
            frame[column] = default
    return frame


def _copy_engine(group: pd.DataFrame, op: str) -> float | None:
    values = group.loc[(group["perf_var"] == "copy_engine_bw") & (group["op"] == op), "value"]
    return float(values.median()) if not values.empty else None


def _um_groups(frame: pd.DataFrame):
    """The reprex's records by machine, build and size class: one figure each."""
    data = _um_cases(frame[frame["test"] == NAME])
    return data.groupby(group_keys() + ["size_class"], dropna=False)


def um_run_stats(group: pd.DataFrame) -> pd.DataFrame:
    """Every run's throughput over the repeated executions of each case: per
    op, allocator, advice, touch and run, the median, min, max and count."""
    runs = group[group["perf_var"].str.fullmatch(r"run\d+_bw")].copy()
    runs["run"] = runs["perf_var"].str.extract(r"run(\d+)_bw", expand=False).astype(int)
    keys = ["op", "allocator", "advice", "touch_on_host", "run"]
    return runs.groupby(keys)["value"].agg(["median", "min", "max", "count"]).reset_index()


def _ordered(values, known: list) -> list:
    present = set(values)
    return [v for v in known if v in present] + sorted(present - set(known))


def _draw_run_lines(ax, panel: pd.DataFrame) -> None:
    lines = list(panel.groupby(["advice", "touch_on_host"]))
    for n, ((advice, touch), case) in enumerate(lines):
        # Lines that coincide (touch or not, on the link) are set a little apart.
        x = case["run"] + 0.04 * (n - (len(lines) - 1) / 2)
        style, marker = _TOUCH_STYLE.get(touch, (":", "^"))
        color = _ADVICE_COLORS.get(advice, "#7f7f7f")
        ax.plot(x, case["median"], linestyle=style, marker=marker, color=color, ms=4)
        if case["count"].max() > 1:
            ax.fill_between(x, case["min"], case["max"], color=color, alpha=0.15)


def _draw_limits(ax, link_gb: float | None, engine: float | None, label: bool) -> None:
    """The link's speed of light (dashed) and the copy engine (dotted), labelled on the last panel."""
    if link_gb:
        ax.axhline(link_gb, color="black", linestyle="--", linewidth=1)
        if label:
            ax.text(
                0.98,
                link_gb * 1.08,
                f"link {link_gb:.1f}",
                transform=ax.get_yaxis_transform(),
                fontsize=7,
                ha="right",
            )
    if engine:
        ax.axhline(engine, color="#7f7f7f", linestyle=":", linewidth=1.5)
        if label:
            ax.text(
                0.98,
                engine / 1.08,
                f"CE {engine:.1f}",
                transform=ax.get_yaxis_transform(),
                fontsize=7,
                va="top",
                ha="right",
                color="#555555",
            )


def _runs_legend(stats: pd.DataFrame, link_gb: float | None) -> list:
    handles = [
        Line2D([], [], color=_ADVICE_COLORS[a], label=f"advice: {a}") for a in _ADVICE if a in set(stats["advice"])
    ]
    handles += [
        Line2D([], [], color="black", linestyle=s, marker=m, label=t.replace("notouch", "no touch on host"))
        for t, (s, m) in _TOUCH_STYLE.items()
        if t in set(stats["touch_on_host"])
    ]
    if link_gb:
        handles.append(
            Line2D([], [], color="black", linestyle="--", label=f"host link speed of light {link_gb:.1f} GB/s")
        )
    handles.append(Line2D([], [], color="#7f7f7f", linestyle=":", label="copy engine, same run (H2D read / D2H write)"))
    return handles


def _draw_runs(stats: pd.DataFrame, group: pd.DataFrame, link_gb: float | None):
    ops = [op for op in ("read", "write") if op in set(stats["op"])]
    allocators = _ordered(stats["allocator"], _ALLOCATORS)
    fig, axes = plt.subplots(
        len(ops),
        len(allocators),
        figsize=(3.6 * len(allocators) + 2.6, 3.3 * len(ops) + 1.3),
        sharex=True,
        sharey=True,
        squeeze=False,
    )
    low, high = log_limits(pd.concat([stats["min"], stats["median"], stats["max"]]), 0.6, 1.8)
    high = max(high, (link_gb or 0) * 1.5)
    for i, op in enumerate(ops):
        for j, allocator in enumerate(allocators):
            ax = axes[i][j]
            panel = stats[(stats["op"] == op) & (stats["allocator"] == allocator)]
            _draw_run_lines(ax, panel)
            _draw_limits(ax, link_gb, _copy_engine(group, op), label=j == len(allocators) - 1)
            ax.set_yscale("log")
            ax.set_ylim(low, high)
            ax.grid(True, which="major", alpha=0.3)
            ax.set_title(f"{allocator}, {op}" + ("" if not panel.empty else " (not run)"), fontsize=10)
            if j == 0:
                ax.set_ylabel("kernel throughput (GB/s, log scale)")
            if i == len(ops) - 1:
                ax.set_xlabel("run")
            ax.set_xticks(sorted(stats["run"].unique()))
    return fig


def _legend_beside(fig, handles: list, pad_in: float = 0.15) -> float:
    """The legend to the right of the panels, in a margin as wide as its text:
    the layout's right edge (a fraction of the figure), for `finish`. A margin
    of fixed width let the longest label run over the last panels."""
    legend = fig.legend(handles=handles, loc="center right", fontsize=8, frameon=False)
    width_in = legend.get_window_extent(fig.canvas.get_renderer()).width / fig.dpi
    return 1 - (width_in + pad_in) / fig.get_figwidth()


def um_per_run(frame: pd.DataFrame, outdir: Path) -> list[Figure]:
    """Every run's throughput per case, panels by allocator and op, lines by advice and touch."""
    figures = []
    for key, group in _um_groups(frame):
        stats = um_run_stats(group)
        if not (stats["max"] > 0).any():  # nothing to draw on its log axis
            continue
        link = link_sol(group)
        link_gb = link.bytes_per_s / GB if link else None
        fig = _draw_runs(stats, group, link_gb)
        right = _legend_beside(fig, _runs_legend(stats, link_gb))
        info = dict(zip(group_keys() + ["size_class"], key))
        fig.suptitle(
            f"Unified Memory reprex: throughput of every kernel run, {info['size_class']} "
            f"({info['system']}:{info['partition']}, {info['gpu_model']})\n"
            "above the dashed line the data is in GPU memory (migrated or device), not read over the link",
            fontsize=11,
        )
        notes = [f"speed of light: {link.source}"] if link else []
        name = finish(
            fig,
            group,
            "; ".join(notes + ["shaded: min to max over repeated executions of the case"]),
            outdir,
            key_name("um-per-run", key),
            top=0.94,
            right=right,
        )
        caption = f"{coverage_text(group)}. " + (f"Speed of light from {link.source}." if link else "")
        figures.append(Figure(NAME, outdir / name, f"Per-run throughput, {info['size_class']}", caption))
    return figures


def um_steady_table(group: pd.DataFrame) -> pd.DataFrame:
    """Steady-state and first-run throughput (medians over the records) per
    op, allocator, advice and touch."""
    cases = group[group["perf_var"].isin(["steady_bw", "first_run_bw"])]
    return cases.pivot_table(
        index=["op", "allocator", "advice", "touch_on_host"], columns="perf_var", values="value", aggfunc="median"
    )


def _steady_axis_limit(table: pd.DataFrame, bounds: list) -> float:
    """A little past the link's speed of light and the copy engines, where the link-bound cases differ."""
    if bounds:
        return 1.3 * max(bounds)
    steady = table.get("steady_bw", pd.Series(dtype=float)).dropna()
    return 1.1 * steady.median() if not steady.empty else 1.0


def _case_order(part: pd.DataFrame) -> list:
    def rank(k):
        return (
            _ALLOCATORS.index(k[0]) if k[0] in _ALLOCATORS else 9,
            _ADVICE.index(k[1]) if k[1] in _ADVICE else 9,
            k[2],
        )

    return sorted(part.index, key=rank)[::-1]


def _label_bars(ax, steady, firsts, limit: float, link_gb: float | None, engine: float | None) -> None:
    for yi, (value, first) in enumerate(zip(steady, firsts)):
        if value != value:
            continue
        if value > limit:
            ax.text(
                limit * 0.98,
                yi,
                f"{value:.0f} GB/s: data in GPU memory \u2192",
                va="center",
                ha="right",
                fontsize=7,
                color="white",
                fontweight="bold",
            )
            continue
        shares = [f"{value / b:.0%} of {n}" for b, n in ((link_gb, "link"), (engine, "CE")) if b]
        inside = value > 0.45 * limit  # short bars: the text goes past the bar and its first-run mark
        at = limit * 0.04 if inside else max(value, min(first, limit) if first == first else 0) + limit * 0.02
        ax.text(
            at,
            yi,
            f"{value:.3g} GB/s" + (f" ({', '.join(shares)})" if shares else ""),
            va="center",
            fontsize=7,
            color="black",
        )


def _draw_steady_panel(ax, op: str, part: pd.DataFrame, limit: float, link_gb, engine) -> None:
    order = _case_order(part)
    part = part.loc[order]
    labels = [f"{a}{'' if adv == 'none' else '+' + adv}, {t.replace('notouch', 'no touch')}" for a, adv, t in order]
    y = list(range(len(part)))
    steady = part["steady_bw"] if "steady_bw" in part else pd.Series(math.nan, index=part.index)
    ax.barh(y, steady.clip(upper=limit), color=[_ADVICE_COLORS.get(adv, "#7f7f7f") for _, adv, _ in order], alpha=0.8)
    if "first_run_bw" in part:
        ax.plot(part["first_run_bw"].clip(upper=limit), y, "kx", ms=7)
    _label_bars(ax, steady, part["first_run_bw"] if "first_run_bw" in part else steady, limit, link_gb, engine)
    if link_gb:
        ax.axvline(link_gb, color="black", linestyle="--", linewidth=1)
    if engine:
        ax.axvline(engine, color="#555555", linestyle=":", linewidth=1.5)
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlim(0, limit)
    ax.set_ylim(-0.6, len(y) - 0.4)
    ax.set_xlabel("throughput (GB/s)")
    ax.set_title(f"{op}: the kernel {'reads' if op == 'read' else 'writes'} the buffer", fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)


def _steady_legend(fig, link_gb: float | None) -> None:
    handles = [
        Line2D([], [], color="#1f77b4", linewidth=8, alpha=0.8, label="steady state (median of runs 2..N)"),
        Line2D([], [], color="black", marker="x", linestyle="", label="first run"),
        Line2D([], [], color="#555555", linestyle=":", label="copy engine (CE), same run"),
    ]
    if link_gb:
        handles.insert(
            2, Line2D([], [], color="black", linestyle="--", label=f"host link speed of light {link_gb:.1f} GB/s")
        )
    fig.legend(
        handles=handles, loc="upper center", ncol=len(handles), fontsize=8, frameon=False, bbox_to_anchor=(0.5, 0.95)
    )


def um_steady(frame: pd.DataFrame, outdir: Path) -> list[Figure]:
    """Steady-state and first-run throughput per case against the link and the copy engine.

    A linear axis up to a little past the link's speed of light, where the
    differences between the link-bound cases show; cases whose data ends up
    in GPU memory run off the axis and say so with their value.
    """
    figures = []
    for key, group in _um_groups(frame):
        table = um_steady_table(group)
        if table.empty:
            continue
        ops = [op for op in ("read", "write") if op in table.index.get_level_values("op")]
        link = link_sol(group)
        link_gb = link.bytes_per_s / GB if link else None
        engines = {op: _copy_engine(group, op) for op in ops}
        limit = _steady_axis_limit(table, [v for v in (link_gb, *engines.values()) if v])
        rows = max(len(table.xs(op, level="op")) for op in ops)
        fig, axes = plt.subplots(1, len(ops), figsize=(7.4 * len(ops), 0.42 * rows + 2.8), squeeze=False)
        for ax, op in zip(axes[0], ops):
            _draw_steady_panel(ax, op, table.xs(op, level="op"), limit, link_gb, engines[op])
        _steady_legend(fig, link_gb)
        info = dict(zip(group_keys() + ["size_class"], key))
        fig.suptitle(
            f"Unified Memory reprex: steady state against the host link, {info['size_class']} "
            f"({info['system']}:{info['partition']}, {info['gpu_model']}, {info['host_link']})",
            fontsize=11,
        )
        name = finish(
            fig, group, f"speed of light: {link.source}" if link else "", outdir, key_name("um-steady", key), top=0.92
        )
        caption = f"{coverage_text(group)}. " + (f"Speed of light from {link.source}." if link else "")
        figures.append(Figure(NAME, outdir / name, f"Steady state vs speed of light, {info['size_class']}", caption))
    return figures


#: The figures of its own the report draws.
FIGURES = [um_per_run, um_steady]
