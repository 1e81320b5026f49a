"""The DAXPY study's figures 1 to 8 and its crossovers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

from experiments.daxpy import (
    COMPARISONS,
    CROSSOVER_CAPTION,
    FIXED_OUTER,
    NAME,
    Point,
    case_label,
    crossovers,
    parse_perf_var,
)
from reports.figures.axes import log_limits, plain_log_ticks
from reports.figures.common import Figure, coverage_text, finish, group_keys, key_name, runs_label

# --- DAXPY inner/outer-loop study ------------------------------------------------

#: Cases in legend order; colour by allocator, dashed where prefetched.
_DAXPY_CASES = ["system", "system+prefetch", "managed", "managed+prefetch", "explicit"]
_DAXPY_COLORS = {"system": "#1f77b4", "managed": "#ff7f0e", "explicit": "#2ca02c"}
_DAXPY_METRIC_LABEL = {
    "kernel_us": "kernel time (µs)",
    "touch_us": "TouchOnCPU time (µs)",
    "total_us": "total time (µs)",
}
_DAXPY_METRIC_NOTE = {
    "kernel_us": "kernel time: per outer iteration the prefetch or copy of y to the GPU and the inner kernels, summed",
    "touch_us": "TouchOnCPU time: per outer iteration the prefetch or copy of y back and the host's touch, summed",
    "total_us": "total time: allocation, initialisation, warm-up and the whole experiment",
}


@dataclass(frozen=True)
class DaxpyFigure:
    number: int
    metric: str
    x: str  # 'inner' or 'outer'
    fixed: int  # the other loop's count
    cases: str  # 'plain': no prefetch; 'prefetch': prefetched, plain ones faint; 'all'
    title: str


#: The paper's figures 1 to 8 (checks/daxpy.py's docstring maps the points to them).
DAXPY_FIGURES = [
    DaxpyFigure(1, "kernel_us", "outer", 4, "plain", "kernel time vs CPU touches (outer), inner = 4"),
    DaxpyFigure(2, "kernel_us", "outer", 7, "plain", "kernel time vs CPU touches (outer), inner = 7"),
    DaxpyFigure(3, "kernel_us", "inner", 4, "plain", "kernel time vs consecutive kernels (inner), outer = 4"),
    DaxpyFigure(4, "kernel_us", "inner", 4, "prefetch", "with prefetch: kernel time vs inner, outer = 4"),
    DaxpyFigure(5, "kernel_us", "outer", 4, "prefetch", "with prefetch: kernel time vs outer, inner = 4"),
    DaxpyFigure(6, "touch_us", "outer", 4, "all", "TouchOnCPU time vs outer, inner = 4"),
    DaxpyFigure(7, "total_us", "outer", 4, "all", "total time vs outer, inner = 4"),
    DaxpyFigure(8, "total_us", "inner", 4, "all", "total time vs inner, outer = 4"),
]


def _daxpy_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The study's records with case, size, metric, inner and outer as columns."""

    data = frame[(frame["test"] == NAME) & frame["value"].notna()].copy()
    if data.empty:
        return data
    parsed = data["perf_var"].map(parse_perf_var)
    data = data[parsed.notna()].copy()
    parsed = parsed[parsed.notna()]
    data["metric"] = [p[0] for p in parsed]
    data["inner"] = [p[1] for p in parsed]
    data["outer"] = [p[2] for p in parsed]
    data["size"] = data["data_size"].astype(int)
    data["case"] = [case_label(a, p) for a, p in zip(data["allocator"], data["prefetch"])]
    return data


def daxpy_points(group: pd.DataFrame) -> list:
    """experiments.daxpy Points of one set of runs, each value the median over repeated executions."""

    medians = group.groupby(["allocator", "prefetch", "size", "inner", "outer", "metric"])["value"].median()
    points = []
    for (alloc, prefetch, size, inner, outer), values in medians.groupby(level=[0, 1, 2, 3, 4]):
        metrics = {key[-1]: float(v) for key, v in values.items()}
        points.append(Point(alloc, prefetch, int(size), int(inner), int(outer), metrics))
    return points


def _size_label(size: int) -> str:
    for unit, factor in (("MB", 10**6), ("kB", 10**3)):
        if size >= factor and size % (factor // 10 or 1) == 0:
            return f"{size / factor:g} {unit}"
    return f"{size} B"


def daxpy_crossovers(group: pd.DataFrame) -> dict:
    """experiments.daxpy.crossovers() at outer = 4 on the kernel time, for one set of runs."""

    return crossovers(daxpy_points(group), outer=FIXED_OUTER)


def daxpy_crossover_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per set of runs and data size, experiments.daxpy.crossovers() at outer = 4 on the kernel time:
    the smallest inner count from which the first case stays faster than the second;
    '—' where it never does, 'not run' where either case has no records."""

    data = _daxpy_table(frame)
    columns = [f"{c} vs {b}" for c, b in COMPARISONS]
    rows = []
    if data.empty:
        return pd.DataFrame(columns=["set of runs", "data size (B per block)", *columns])
    for key, group in data.groupby(group_keys(), dropna=False):
        info = dict(zip(group_keys(), key))
        found = daxpy_crossovers(group)
        for size in sorted(group["size"].unique()):
            row = {
                "set of runs": runs_label(info),
                "data size (B per block)": int(size),
            }
            for column in columns:
                by_size = found[column]
                row[column] = ("—" if by_size[size] is None else str(by_size[size])) if size in by_size else "not run"
            rows.append(row)
    return pd.DataFrame(rows)


def daxpy_stats(group: pd.DataFrame) -> pd.DataFrame:
    """Each point of one machine's study over its executions: per case, data
    size, metric, inner and outer, the median, min, max and count."""
    stats = group.groupby(["case", "size", "metric", "inner", "outer"])["value"].agg(["median", "min", "max", "count"])
    return stats.reset_index()


def _present_cases(stats: pd.DataFrame) -> list:
    present = [c for c in _DAXPY_CASES if c in set(stats["case"])]
    return present + sorted(set(stats["case"]) - set(present))


def _faint(spec: DaxpyFigure, case: str) -> bool:
    """A case drawn for comparison only: prefetched ones on a figure without prefetch and the reverse."""
    prefetched = case.endswith("+prefetch")
    return (spec.cases == "plain" and prefetched) or (
        spec.cases == "prefetch" and not prefetched and case != "explicit"
    )


def _draw_case_lines(ax, spec: DaxpyFigure, panel: pd.DataFrame, present: list) -> None:
    for case in present:
        prefetched = case.endswith("+prefetch")
        if spec.cases == "plain" and prefetched:
            continue
        line = panel[panel["case"] == case].sort_values(spec.x)
        if line.empty:
            continue
        color = _DAXPY_COLORS.get(case.split("+")[0], "#7f7f7f")
        alpha = 0.3 if _faint(spec, case) else 1.0
        ax.plot(
            line[spec.x],
            line["median"],
            color=color,
            ms=3.5,
            lw=1 if alpha < 1 else 1.6,
            alpha=alpha,
            linestyle="--" if prefetched else "-",
            marker="s" if prefetched else "o",
        )
        if line["count"].max() > 1:
            ax.fill_between(line[spec.x], line["min"], line["max"], color=color, alpha=0.12 * alpha)


def _set_axes(ax, spec: DaxpyFigure, axis: pd.DataFrame, ticks: list, log: bool, size: int) -> None:
    top = axis["max"].max()  # NaN where the panel has no point
    if log:
        ax.set_yscale("log")
        limits = log_limits(pd.concat([axis["min"], axis["max"]]), 1 / 1.4, 1.4)
        if limits:
            ax.set_ylim(*limits)
        plain_log_ticks(ax.yaxis)
    elif top > 0:
        ax.set_ylim(0, top * 1.1)
    if spec.x == "outer":
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
    else:
        ax.set_xticks([t for t in ticks if t in (1, 2, 4, 6, 8, 10, 12, 14, 16)])
    ax.grid(True, which="major", alpha=0.3)
    ax.set_title(f"data size {_size_label(int(size))} per thread block", fontsize=9)
    ax.set_xlabel(
        f"{spec.x} ({'consecutive kernels' if spec.x == 'inner' else 'CPU touches'}"
        f"{', log2 scale' if spec.x == 'outer' else ''})",
        fontsize=8,
    )


def _mark_crossovers(ax, spec: DaxpyFigure, found: dict, size: int, ticks: list) -> None:
    """On the crossover's own axes (kernel time against inner), where one case becomes faster than another."""
    wanted_prefetch = spec.cases != "plain"
    marks = sorted(
        (by_size[size], label)
        for label, by_size in found.items()
        if label.split(" vs ")[0].endswith("+prefetch") == wanted_prefetch and by_size.get(size) is not None
    )
    for n, (inner, label) in enumerate(marks):
        color = _DAXPY_COLORS.get(label.split(" vs ")[1].split("+")[0], "#7f7f7f")
        ax.axvline(inner, color=color, linestyle=":", lw=1.2)
        right = inner > (ticks[0] + ticks[-1]) / 2  # text on the line's inner side
        ax.text(
            inner + (-0.3 if right else 0.3),
            0.97 - 0.1 * n,
            label.replace(" vs ", " faster than ") + f"\nfrom inner={inner}",
            transform=ax.get_xaxis_transform(),
            fontsize=6.5,
            va="top",
            ha="right" if right else "left",
            zorder=5,
            bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.8),
        )


def _case_legend(fig, spec: DaxpyFigure, present: list) -> None:
    handles = []
    for case in present:
        prefetched = case.endswith("+prefetch")
        if spec.cases == "plain" and prefetched:
            continue
        faint = _faint(spec, case)
        handles.append(
            Line2D(
                [],
                [],
                color=_DAXPY_COLORS.get(case.split("+")[0], "#7f7f7f"),
                linestyle="--" if prefetched else "-",
                marker="s" if prefetched else "o",
                ms=4,
                alpha=0.3 if faint else 1.0,
                label=case + (" (no prefetch, for comparison)" if faint else ""),
            )
        )
    fig.legend(
        handles=handles,
        loc="upper center",
        ncol=len(handles),
        fontsize=8,
        frameon=False,
        bbox_to_anchor=(0.5, 1 - 0.3 / fig.get_figheight()),
    )


def _draw_daxpy_figure(spec: DaxpyFigure, stats: pd.DataFrame, found: dict):
    """One of the paper's figures for one machine, or None where it has no points."""
    other = "outer" if spec.x == "inner" else "inner"
    sel = stats[(stats["metric"] == spec.metric) & (stats[other] == spec.fixed)]
    if sel.empty:
        return None, False
    positive = sel.loc[sel["min"] > 0, "min"]
    log = not positive.empty and (sel["max"].max() / positive.min() > 8)
    sizes, present = sorted(stats["size"].unique()), _present_cases(stats)
    fig, axes = plt.subplots(1, len(sizes), figsize=(3.7 * len(sizes) + 0.6, 4.4), squeeze=False)
    for ax, size in zip(axes[0], sizes):
        panel = sel[sel["size"] == size]
        ticks = sorted(panel[spec.x].unique())
        _draw_case_lines(ax, spec, panel, present)
        _set_axes(ax, spec, panel, ticks, log, size)
        if spec.metric == "kernel_us" and spec.x == "inner":
            _mark_crossovers(ax, spec, found, size, ticks)
    label = _DAXPY_METRIC_LABEL[spec.metric]
    axes[0][0].set_ylabel(label[:-1] + ", log scale)" if log else label, fontsize=9)
    _case_legend(fig, spec, present)
    return fig, log


def _daxpy_notes(spec: DaxpyFigure, stats: pd.DataFrame) -> list:
    notes = [_DAXPY_METRIC_NOTE[spec.metric] + "; median of executions, shaded min to max"]
    missing = [c for c in ("system", "system+prefetch") if c not in set(stats["case"])]
    if missing:
        notes.append(
            f"{' and '.join(missing)}: no records (the check skips system memory where the node has "
            "neither ATS nor HMM)"
        )
    return notes


def daxpy_figures(frame: pd.DataFrame, outdir: Path) -> list[Figure]:
    """The paper's figures 1 to 8: a panel per data size, a line per case (median, min-max shaded)."""
    data = _daxpy_table(frame)
    figures = []
    if data.empty:
        return figures
    for key, group in data.groupby(group_keys(), dropna=False):
        info = dict(zip(group_keys(), key))
        stats, found = daxpy_stats(group), daxpy_crossovers(group)
        for spec in DAXPY_FIGURES:
            fig, _ = _draw_daxpy_figure(spec, stats, found)
            if fig is None:
                continue
            fig.suptitle(
                f"DAXPY study, figure {spec.number}: {spec.title} ({info['system']}:{info['partition']}, "
                f"{info['gpu_model']}, {info['host_link']})",
                fontsize=11,
            )
            notes = _daxpy_notes(spec, stats)
            name = finish(
                fig,
                group,
                "\n".join(notes),
                outdir,
                key_name(f"daxpy-fig{spec.number}", key),
                top=1 - 0.55 / fig.get_figheight(),
                margins=(0.85, 1.25),
            )
            caption = f"{coverage_text(group)}. " + " ".join(n[0].upper() + n[1:] + "." for n in notes)
            figures.append(Figure(NAME, outdir / name, f"Figure {spec.number}: {spec.title}", caption))
    return figures


#: The figures of its own the report draws.
FIGURES = [daxpy_figures]
#: No generic bars even on request: its figures and table show every variable.
GENERIC = False


def sections(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame, str]]:
    """The report's section before the figures: the crossovers."""
    return [("Crossovers", daxpy_crossover_table(frame), CROSSOVER_CAPTION)]
