"""Figures from the tidy table (reports.load), written as PNG.

Checks with a figure of their own: the Unified Memory reprex (every run's
throughput per case, and the steady state against the host link's speed of
light and the copy engine), the host bandwidth per NUMA node, the DAXPY
study, the small-copy latency curves and the multi-GPU random-access scan
against its speed of light. Every other check gets the generic figure: one bar
chart per performance variable, so a new check renders without code here
(NO_GENERIC lists the checks that get none: their tables say it all). Every figure names the systems, nodes,
GPUs, drivers and CUDA versions it covers in its footer.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from . import sol  # noqa: E402

GiB = 2**30
DPI = 90

#: What distinguishes one set of runs from another in a figure's series.
SERIES_FIELDS = ["system", "partition", "node", "gpu_model", "driver_version", "cuda_version", "cuda_runtime_version"]


@dataclass
class Figure:
    test: str
    path: Path
    title: str
    caption: str  # what the figure covers and where its speed-of-light lines come from


def _unique(frame: pd.DataFrame, column: str) -> list[str]:
    return sorted({str(v) for v in frame[column].dropna().unique()}) if column in frame else []


def coverage(frame: pd.DataFrame) -> dict[str, str]:
    """What a figure or table covers, field by field."""
    systems = sorted({f"{s}:{p}" for s, p in zip(frame["system"], frame["partition"])})
    times = frame["time"].dropna()
    dates = ""
    if not times.empty:
        first, last = times.min().strftime("%Y-%m-%d"), times.max().strftime("%Y-%m-%d")
        dates = first if first == last else f"{first} to {last}"
    return {
        "systems": ", ".join(systems),
        "nodes": ", ".join(_unique(frame, "node")),
        "GPUs": ", ".join(_unique(frame, "gpu_model")),
        "host links": ", ".join(_unique(frame, "host_link")),
        "drivers": ", ".join(_unique(frame, "driver_version")),
        "CUDA (driver)": ", ".join(_unique(frame, "cuda_version")),
        "CUDA runtime": ", ".join(_unique(frame, "cuda_runtime_version")),
        "dates": dates,
    }


def coverage_text(frame: pd.DataFrame) -> str:
    return " | ".join(f"{k}: {v}" for k, v in coverage(frame).items() if v)


def _footer(fig, frame: pd.DataFrame, extra: str = "") -> None:
    text = coverage_text(frame)
    if extra:
        text += "\n" + extra
    fig.text(0.01, 0.005, text, fontsize=8, color="#444444", ha="left", va="bottom", wrap=True)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


_SERIES_PREFIX = {
    "node": "node ",
    "driver_version": "driver ",
    "cuda_version": "CUDA ",
    "cuda_runtime_version": "runtime ",
}


def _series_labels(frame: pd.DataFrame, varying: list[str]) -> pd.Series:
    """'NVIDIA H100 80GB HBM3, driver 580.159.04, CUDA 13.0': what tells sets of runs apart."""
    if not varying:
        return pd.Series("all runs", index=frame.index)
    parts = [
        _SERIES_PREFIX.get(f, "") + frame[f].astype(str).replace({"none": "no GPU"} if f == "gpu_model" else {})
        for f in varying
    ]
    label = parts[0]
    for part in parts[1:]:
        label = label + ", " + part
    return label


def _layout(fig, top: float = 0.95, right: float = 1.0) -> None:
    """tight_layout that leaves room for the footer (about 0.6 inch)."""
    fig.tight_layout(rect=(0, min(0.3, 0.6 / fig.get_figheight()), right, top))


def _inch_margins(fig, top: float, bottom: float) -> None:
    """Fixed room in inches above the panels (titles, legend) and below them
    (footer), whatever the figure's height."""
    fig.subplots_adjust(top=1 - top / fig.get_figheight())
    fig.subplots_adjust(bottom=max(fig.subplotpars.bottom, bottom / fig.get_figheight()))


def _save(fig, outdir: Path, name: str) -> str:
    fig.savefig(outdir / name, dpi=DPI)
    plt.close(fig)
    return name


def _key_name(prefix: str, key) -> str:
    return f"{prefix}-{_slug('-'.join(map(str, key)))}.png"


def _varying(frame: pd.DataFrame, fields: list[str]) -> list[str]:
    return [f for f in fields if f in frame and frame[f].nunique(dropna=False) > 1]


# --- Unified Memory reprex ---------------------------------------------------

UM_TEST = "um_bandwidth"
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


def _group_keys() -> list[str]:
    return ["system", "partition", "gpu_model", "host_link", "driver_version", "cuda_version", "cuda_runtime_version"]


def _link_sol(group: pd.DataFrame) -> sol.SpeedOfLight | None:
    first = group.iloc[0]
    return sol.host_link(first["system"], first["partition"], first["host_link"], group)


def _copy_engine(group: pd.DataFrame, op: str) -> float | None:
    values = group.loc[(group["perf_var"] == "copy_engine_bw") & (group["op"] == op), "value"]
    return float(values.median()) if not values.empty else None


def um_per_run(frame: pd.DataFrame, outdir: Path) -> list[Figure]:
    """Every run's throughput per case, panels by allocator and op, lines by advice and touch."""
    data = _um_cases(frame[frame["test"] == UM_TEST])
    figures = []
    for key, group in data.groupby(_group_keys() + ["size_class"], dropna=False):
        runs = group[group["perf_var"].str.fullmatch(r"run\d+_bw")].copy()
        if runs.empty:
            continue
        runs["run"] = runs["perf_var"].str.extract(r"run(\d+)_bw", expand=False).astype(int)
        ops = [op for op in ("read", "write") if op in set(runs["op"])]
        allocators = [a for a in _ALLOCATORS if a in set(runs["allocator"])]
        allocators += sorted(set(runs["allocator"]) - set(allocators))
        link = _link_sol(group)
        fig, axes = plt.subplots(
            len(ops), len(allocators), figsize=(3.6 * len(allocators) + 2.6, 3.3 * len(ops) + 1.3),
            sharex=True, sharey=True, squeeze=False,
        )  # fmt: skip
        positive = runs.loc[runs["value"] > 0, "value"]
        low, high = positive.min() * 0.6, positive.max() * 1.8
        if link:
            high = max(high, link.bytes_per_s / GiB * 1.5)
        for i, op in enumerate(ops):
            engine = _copy_engine(group, op)
            for j, allocator in enumerate(allocators):
                ax = axes[i][j]
                panel = runs[(runs["op"] == op) & (runs["allocator"] == allocator)]
                lines = list(panel.groupby(["advice", "touch_on_host"]))
                for n, ((advice, touch), case) in enumerate(lines):
                    stats = case.groupby("run")["value"].agg(["median", "min", "max", "count"])
                    # Lines that coincide (touch or not, on the link) are set a little apart.
                    stats.index = stats.index + 0.04 * (n - (len(lines) - 1) / 2)
                    style, marker = _TOUCH_STYLE.get(touch, (":", "^"))
                    color = _ADVICE_COLORS.get(advice, "#7f7f7f")
                    ax.plot(stats.index, stats["median"], linestyle=style, marker=marker, color=color, ms=4)
                    if stats["count"].max() > 1:
                        ax.fill_between(stats.index, stats["min"], stats["max"], color=color, alpha=0.15)
                if link:
                    gib = link.bytes_per_s / GiB
                    ax.axhline(gib, color="black", linestyle="--", linewidth=1)
                    if j == len(allocators) - 1:
                        ax.text(0.98, gib * 1.08, f"link {gib:.1f}", transform=ax.get_yaxis_transform(), fontsize=7,
                                ha="right")  # fmt: skip
                if engine:
                    ax.axhline(engine, color="#7f7f7f", linestyle=":", linewidth=1.5)
                    if j == len(allocators) - 1:
                        ax.text(0.98, engine / 1.08, f"CE {engine:.1f}", transform=ax.get_yaxis_transform(),
                                fontsize=7, va="top", ha="right", color="#555555")  # fmt: skip
                ax.set_yscale("log")
                ax.set_ylim(low, high)
                ax.grid(True, which="major", alpha=0.3)
                ax.set_title(f"{allocator}, {op}" + ("" if not panel.empty else " (not run)"), fontsize=10)
                if j == 0:
                    ax.set_ylabel("kernel throughput (GiB/s, log scale)")
                if i == len(ops) - 1:
                    ax.set_xlabel("run")
                ax.set_xticks(sorted(runs["run"].unique()))
        handles = [
            Line2D([], [], color=_ADVICE_COLORS[a], label=f"advice: {a}") for a in _ADVICE if a in set(runs["advice"])
        ]
        handles += [
            Line2D([], [], color="black", linestyle=s, marker=m, label=t.replace("notouch", "no touch on host"))
            for t, (s, m) in _TOUCH_STYLE.items()
            if t in set(runs["touch_on_host"])
        ]
        notes = []
        if link:
            gib = link.bytes_per_s / GiB
            handles.append(
                Line2D([], [], color="black", linestyle="--", label=f"host link speed of light {gib:.1f} GiB/s")
            )
            notes.append(f"speed of light: {link.source}")
        handles.append(
            Line2D([], [], color="#7f7f7f", linestyle=":", label="copy engine, same run (H2D read / D2H write)")
        )
        fig.legend(handles=handles, loc="center right", fontsize=8, frameon=False)
        info = dict(zip(_group_keys() + ["size_class"], key))
        fig.suptitle(
            f"Unified Memory reprex: throughput of every kernel run, {info['size_class']} "
            f"({info['system']}:{info['partition']}, {info['gpu_model']})\n"
            "above the dashed line the data is in GPU memory (migrated or device), not read over the link",
            fontsize=11,
        )
        _footer(fig, group, "; ".join(notes + ["shaded: min to max over repeated executions of the case"]))
        _layout(fig, 0.94, 1 - 2.3 / fig.get_figwidth())
        name = _save(fig, outdir, _key_name("um-per-run", key))
        caption = f"{coverage_text(group)}. " + (f"Speed of light from {link.source}." if link else "")
        figures.append(Figure(UM_TEST, outdir / name, f"Per-run throughput, {info['size_class']}", caption))
    return figures


def um_steady(frame: pd.DataFrame, outdir: Path) -> list[Figure]:
    """Steady-state and first-run throughput per case against the link and the copy engine.

    A linear axis up to a little past the link's speed of light, where the
    differences between the link-bound cases show; cases whose data ends up
    in GPU memory run off the axis and say so with their value.
    """
    data = _um_cases(frame[frame["test"] == UM_TEST])
    figures = []
    for key, group in data.groupby(_group_keys() + ["size_class"], dropna=False):
        cases = group[group["perf_var"].isin(["steady_bw", "first_run_bw"])]
        if cases.empty:
            continue
        table = cases.pivot_table(
            index=["op", "allocator", "advice", "touch_on_host"], columns="perf_var", values="value", aggfunc="median"
        )
        ops = [op for op in ("read", "write") if op in table.index.get_level_values("op")]
        link = _link_sol(group)
        link_gib = link.bytes_per_s / GiB if link else None
        engines = {op: _copy_engine(group, op) for op in ops}
        bound = [v for v in (link_gib, *engines.values()) if v]
        if bound:
            limit = 1.3 * max(bound)
        else:
            steady_values = table.get("steady_bw", pd.Series(dtype=float)).dropna()
            limit = 1.1 * steady_values.median() if not steady_values.empty else 1.0
        rows = max(len(table.xs(op, level="op")) for op in ops)
        fig, axes = plt.subplots(1, len(ops), figsize=(7.4 * len(ops), 0.42 * rows + 2.8), squeeze=False)
        for ax, op in zip(axes[0], ops):
            part = table.xs(op, level="op")
            order = sorted(
                part.index,
                key=lambda k: (
                    _ALLOCATORS.index(k[0]) if k[0] in _ALLOCATORS else 9,
                    _ADVICE.index(k[1]) if k[1] in _ADVICE else 9,
                    k[2],
                ),
            )[::-1]
            part = part.loc[order]
            labels = [
                f"{a}{'' if adv == 'none' else '+' + adv}, {t.replace('notouch', 'no touch')}" for a, adv, t in order
            ]
            y = list(range(len(part)))
            colors = [_ADVICE_COLORS.get(adv, "#7f7f7f") for _, adv, _ in order]
            steady = part["steady_bw"] if "steady_bw" in part else pd.Series(math.nan, index=part.index)
            ax.barh(y, steady.clip(upper=limit), color=colors, alpha=0.8)
            if "first_run_bw" in part:
                ax.plot(part["first_run_bw"].clip(upper=limit), y, "kx", ms=7)
            engine = engines[op]
            firsts = part["first_run_bw"] if "first_run_bw" in part else steady
            for yi, value, first in zip(y, steady, firsts):
                if value != value:
                    continue
                if value > limit:
                    ax.text(limit * 0.98, yi, f"{value:.0f} GiB/s: data in GPU memory \u2192", va="center",
                            ha="right", fontsize=7, color="white", fontweight="bold")  # fmt: skip
                    continue
                shares = [f"{value / b:.0%} of {n}" for b, n in ((link_gib, "link"), (engine, "CE")) if b]
                inside = value > 0.45 * limit  # short bars: the text goes past the bar and its first-run mark
                at = limit * 0.04 if inside else max(value, min(first, limit) if first == first else 0) + limit * 0.02
                ax.text(at, yi, f"{value:.3g} GiB/s" + (f" ({', '.join(shares)})" if shares else ""),
                        va="center", fontsize=7, color="black")  # fmt: skip
            if link_gib:
                ax.axvline(link_gib, color="black", linestyle="--", linewidth=1)
            if engine:
                ax.axvline(engine, color="#555555", linestyle=":", linewidth=1.5)
            ax.set_yticks(y, labels, fontsize=8)
            ax.set_xlim(0, limit)
            ax.set_ylim(-0.6, len(y) - 0.4)
            ax.set_xlabel("throughput (GiB/s)")
            ax.set_title(f"{op}: the kernel {'reads' if op == 'read' else 'writes'} the buffer", fontsize=10)
            ax.grid(True, axis="x", alpha=0.3)
        handles = [
            Line2D([], [], color="#1f77b4", linewidth=8, alpha=0.8, label="steady state (median of runs 2..N)"),
            Line2D([], [], color="black", marker="x", linestyle="", label="first run"),
            Line2D([], [], color="#555555", linestyle=":", label="copy engine (CE), same run"),
        ]
        if link_gib:
            handles.insert(
                2, Line2D([], [], color="black", linestyle="--", label=f"host link speed of light {link_gib:.1f} GiB/s")
            )
        fig.legend(
            handles=handles,
            loc="upper center",
            ncol=len(handles),
            fontsize=8,
            frameon=False,
            bbox_to_anchor=(0.5, 0.95),
        )
        info = dict(zip(_group_keys() + ["size_class"], key))
        fig.suptitle(
            f"Unified Memory reprex: steady state against the host link, {info['size_class']} "
            f"({info['system']}:{info['partition']}, {info['gpu_model']}, {info['host_link']})",
            fontsize=11,
        )
        _footer(fig, group, f"speed of light: {link.source}" if link else "")
        _layout(fig, 0.92)
        name = _save(fig, outdir, _key_name("um-steady", key))
        caption = f"{coverage_text(group)}. " + (f"Speed of light from {link.source}." if link else "")
        figures.append(Figure(UM_TEST, outdir / name, f"Steady state vs speed of light, {info['size_class']}", caption))
    return figures


# --- Host bandwidth per NUMA node --------------------------------------------

HOST_TEST = "host_bandwidth"


def host_numa(frame: pd.DataFrame, outdir: Path) -> list[Figure]:
    """Read and write bandwidth of each NUMA node, a group of bars per node and set of runs."""
    data = frame[(frame["test"] == HOST_TEST) & frame["perf_var"].str.fullmatch(r"(read|write)_bw_node\d+")].copy()
    if data.empty:
        return []
    parts = data["perf_var"].str.extract(r"(?P<op>read|write)_bw_node(?P<numa>\d+)")
    data["op"], data["numa"] = parts["op"], parts["numa"].astype(int)
    varying = _varying(data, SERIES_FIELDS) or ["system", "node"]
    data["series"] = _series_labels(data, varying)
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
    ax.set_ylabel("bandwidth (GiB/s)")
    ax.set_xlim(-0.8, len(groups) - 0.2)
    ax.set_title(
        "Host memory bandwidth per NUMA node\nthreads bound to the node, memory on it; median of the program's runs",
        fontsize=10,
    )
    ax.legend(title="operation", fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_ylim(0, stats["max"].max() * 1.2)
    _footer(fig, data, "error bars: min to max over repeated executions" if stats["count"].max() > 1 else "")
    _layout(fig, 1.0)
    name = _save(fig, outdir, "host-bandwidth-numa.png")
    return [Figure(HOST_TEST, outdir / name, "Host memory bandwidth per NUMA node", coverage_text(data) + ".")]


# --- DAXPY inner/outer-loop study ------------------------------------------------

DAXPY_TEST = "daxpy"
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
    from checks.daxpy import case_label, parse_perf_var

    data = frame[(frame["test"] == DAXPY_TEST) & frame["value"].notna()].copy()
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
    """checks.daxpy Points of one set of runs, each value the median over repeated executions."""
    from checks.daxpy import Point

    medians = group.groupby(["allocator", "prefetch", "size", "inner", "outer", "metric"])["value"].median()
    points = []
    for (alloc, prefetch, size, inner, outer), values in medians.groupby(level=[0, 1, 2, 3, 4]):
        metrics = {key[-1]: float(v) for key, v in values.items()}
        points.append(Point(alloc, prefetch, int(size), int(inner), int(outer), metrics))
    return points


def _plain_log_ticks(axis) -> None:
    """Log-axis ticks at 1, 2, 5 times powers of ten, written as plain numbers."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def _size_label(size: int) -> str:
    for unit, factor in (("MB", 10**6), ("kB", 10**3)):
        if size >= factor and size % (factor // 10 or 1) == 0:
            return f"{size / factor:g} {unit}"
    return f"{size} B"


def daxpy_crossovers(group: pd.DataFrame) -> dict:
    """checks.daxpy.crossovers() at outer = 4 on the kernel time, for one set of runs."""
    from checks.daxpy import FIXED_OUTER, crossovers

    return crossovers(daxpy_points(group), outer=FIXED_OUTER)


def daxpy_crossover_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per set of runs and data size, checks.daxpy.crossovers() at outer = 4 on the kernel time:
    the smallest inner count from which the first case stays faster than the second;
    '—' where it never does, 'not run' where either case has no records."""
    from checks.daxpy import COMPARISONS

    data = _daxpy_table(frame)
    columns = [f"{c} vs {b}" for c, b in COMPARISONS]
    rows = []
    if data.empty:
        return pd.DataFrame(columns=["set of runs", "data size (B per block)", *columns])
    for key, group in data.groupby(_group_keys(), dropna=False):
        info = dict(zip(_group_keys(), key))
        found = daxpy_crossovers(group)
        for size in sorted(group["size"].unique()):
            row = {
                "set of runs": f"{info['system']}:{info['partition']}, {info['gpu_model']}, "
                f"driver {info['driver_version']}, CUDA {info['cuda_version']}",
                "data size (B per block)": int(size),
            }
            for column in columns:
                by_size = found[column]
                row[column] = ("—" if by_size[size] is None else str(by_size[size])) if size in by_size else "not run"
            rows.append(row)
    return pd.DataFrame(rows)


def daxpy_figures(frame: pd.DataFrame, outdir: Path) -> list[Figure]:
    """The paper's figures 1 to 8: a panel per data size, a line per case (median, min-max shaded)."""
    data = _daxpy_table(frame)
    figures = []
    if data.empty:
        return figures
    for key, group in data.groupby(_group_keys(), dropna=False):
        info = dict(zip(_group_keys(), key))
        stats = group.groupby(["case", "size", "metric", "inner", "outer"])["value"].agg(
            ["median", "min", "max", "count"]
        )
        stats = stats.reset_index()
        sizes = sorted(stats["size"].unique())
        present = [c for c in _DAXPY_CASES if c in set(stats["case"])]
        present += sorted(set(stats["case"]) - set(present))
        missing = [c for c in ("system", "system+prefetch") if c not in present]
        found = daxpy_crossovers(group)
        for spec in DAXPY_FIGURES:
            other = "outer" if spec.x == "inner" else "inner"
            sel = stats[(stats["metric"] == spec.metric) & (stats[other] == spec.fixed)]
            if sel.empty:
                continue
            # Figures that share a metric and axis share each panel's y range (the paper's 3 and 4).
            same_axes = stats[(stats["metric"] == spec.metric) & (stats[other] == spec.fixed)]
            positive = same_axes.loc[same_axes["min"] > 0, "min"]
            log = not positive.empty and (same_axes["max"].max() / positive.min() > 8)
            fig, axes = plt.subplots(1, len(sizes), figsize=(3.7 * len(sizes) + 0.6, 4.4), squeeze=False)
            for ax, size in zip(axes[0], sizes):
                panel = sel[sel["size"] == size]
                for case in present:
                    prefetched = case.endswith("+prefetch")
                    faint = (spec.cases == "plain" and prefetched) or (
                        spec.cases == "prefetch" and not prefetched and case != "explicit"
                    )
                    if spec.cases == "plain" and prefetched:
                        continue
                    line = panel[panel["case"] == case].sort_values(spec.x)
                    if line.empty:
                        continue
                    color = _DAXPY_COLORS.get(case.split("+")[0], "#7f7f7f")
                    style = dict(linestyle="--" if prefetched else "-", marker="s" if prefetched else "o")
                    alpha = 0.3 if faint else 1.0
                    ax.plot(line[spec.x], line["median"], color=color, ms=3.5, lw=1 if faint else 1.6,
                            alpha=alpha, **style)  # fmt: skip
                    if line["count"].max() > 1:
                        ax.fill_between(line[spec.x], line["min"], line["max"], color=color, alpha=0.12 * alpha)
                axis = same_axes[same_axes["size"] == size]
                if log:
                    ax.set_yscale("log")
                    ax.set_ylim(axis["min"].min() / 1.4, axis["max"].max() * 1.4)
                    _plain_log_ticks(ax.yaxis)
                else:
                    ax.set_ylim(0, axis["max"].max() * 1.1)
                ticks = sorted(panel[spec.x].unique())
                if spec.x == "outer":
                    ax.set_xscale("log", base=2)
                    ax.set_xticks(ticks, [str(t) for t in ticks])
                else:
                    ax.set_xticks([t for t in ticks if t in (1, 2, 4, 6, 8, 10, 12, 14, 16)])
                ax.minorticks_off() if spec.x == "outer" else None
                ax.grid(True, which="major", alpha=0.3)
                ax.set_title(f"data size {_size_label(int(size))} per thread block", fontsize=9)
                if spec.metric == "kernel_us" and spec.x == "inner":  # the crossover's own axes: mark it
                    wanted = "plain" if spec.cases == "plain" else "prefetch"
                    marks = [
                        (inner, label)
                        for label, by_size in found.items()
                        if (label.split(" vs ")[0].endswith("+prefetch")) == (wanted == "prefetch")
                        and by_size.get(size) is not None
                        for inner in [by_size[size]]
                    ]
                    for n, (inner, label) in enumerate(sorted(marks)):
                        color = _DAXPY_COLORS.get(label.split(" vs ")[1].split("+")[0], "#7f7f7f")
                        ax.axvline(inner, color=color, linestyle=":", lw=1.2)
                        right = inner > (ticks[0] + ticks[-1]) / 2  # text on the line's inner side
                        ax.text(inner + (-0.3 if right else 0.3), 0.97 - 0.1 * n,
                                label.replace(" vs ", " faster than ") + f"\nfrom inner={inner}",
                                transform=ax.get_xaxis_transform(), fontsize=6.5, va="top",
                                ha="right" if right else "left", zorder=5,
                                bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.8))  # fmt: skip
                ax.set_xlabel(
                    f"{spec.x} ({'consecutive kernels' if spec.x == 'inner' else 'CPU touches'}"
                    f"{', log2 scale' if spec.x == 'outer' else ''})",
                    fontsize=8,
                )
            label = _DAXPY_METRIC_LABEL[spec.metric]
            axes[0][0].set_ylabel(label[:-1] + ", log scale)" if log else label, fontsize=9)
            shown = [c for c in present if not (spec.cases == "plain" and c.endswith("+prefetch"))]
            handles = []
            for case in shown:
                prefetched = case.endswith("+prefetch")
                faint = spec.cases == "prefetch" and not prefetched and case != "explicit"
                handles.append(
                    Line2D([], [], color=_DAXPY_COLORS.get(case.split("+")[0], "#7f7f7f"),
                           linestyle="--" if prefetched else "-", marker="s" if prefetched else "o", ms=4,
                           alpha=0.3 if faint else 1.0,
                           label=case + (" (no prefetch, for comparison)" if faint else ""))
                )  # fmt: skip
            fig.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize=8, frameon=False,
                       bbox_to_anchor=(0.5, 1 - 0.3 / fig.get_figheight()))  # fmt: skip
            fig.suptitle(
                f"DAXPY study, figure {spec.number}: {spec.title} ({info['system']}:{info['partition']}, "
                f"{info['gpu_model']}, {info['host_link']})",
                fontsize=11,
            )
            notes = [_DAXPY_METRIC_NOTE[spec.metric] + "; median of executions, shaded min to max"]
            if missing:
                notes.append(
                    f"{' and '.join(missing)}: no records (the check skips system memory where the node has "
                    "neither ATS nor HMM)"
                )
            _footer(fig, group, "\n".join(notes))
            _layout(fig, 1 - 0.55 / fig.get_figheight())
            _inch_margins(fig, top=0.85, bottom=1.25)
            name = _save(fig, outdir, _key_name(f"daxpy-fig{spec.number}", key))
            caption = f"{coverage_text(group)}. {notes[0][0].upper() + notes[0][1:]}." + (
                f" {notes[1][0].upper() + notes[1][1:]}." if len(notes) > 1 else ""
            )
            figures.append(Figure(DAXPY_TEST, outdir / name, f"Figure {spec.number}: {spec.title}", caption))
    return figures


# --- Small-copy latency --------------------------------------------------------

LATENCY_TEST = "copy_latency"
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


def _bytes(size: float) -> str:
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= factor:
            return f"{size / factor:g} {unit}"
    return f"{size:g} B"


def latency_curves(group: pd.DataFrame) -> pd.DataFrame:
    """method, direction, size, median, min, max, count of one set of runs' latency records."""
    data = group[group["perf_var"].str.fullmatch(_LAT_VAR.pattern) & group["value"].notna()]
    parts = data["perf_var"].str.extract(_LAT_VAR.pattern)
    data = data.assign(method=parts["method"], direction=parts["direction"], size=parts["size"].astype(int))
    return data.groupby(["method", "direction", "size"])["value"].agg(["median", "min", "max", "count"]).reset_index()


def latency_crossovers(stats: pd.DataFrame) -> dict:
    """checks.copy_latency.crossovers() on the median curves: {'crossover_<dir>_<b>_over_<a>': size}."""
    from checks.copy_latency import crossovers

    curves = {
        (m, d): dict(zip(part["size"], part["median"])) for (m, d), part in stats.groupby(["method", "direction"])
    }
    return crossovers(curves)


def latency_figure(frame: pd.DataFrame, outdir: Path) -> list[Figure]:
    """Latency against size per method, a panel per direction, crossovers marked, link-limited time dashed."""
    data = frame[frame["test"] == LATENCY_TEST]
    figures = []
    for key, group in data.groupby(_group_keys(), dropna=False):
        stats = latency_curves(group)
        if stats.empty:
            continue
        info = dict(zip(_group_keys(), key))
        directions = [d for d in ("h2d", "d2h") if d in set(stats["direction"])]
        methods = [m for m in _LAT_METHODS if m in set(stats["method"])] + sorted(
            set(stats["method"]) - set(_LAT_METHODS)
        )
        found = latency_crossovers(stats)
        link = _link_sol(group)
        fig, axes = plt.subplots(1, len(directions), figsize=(6.6 * len(directions), 5.6), sharey=True, squeeze=False)
        low, high = stats["min"].min() / 2, stats["max"].max() * 2
        sizes = sorted(stats["size"].unique())
        for ax, direction in zip(axes[0], directions):
            for method in methods:
                curve = stats[(stats["method"] == method) & (stats["direction"] == direction)].sort_values("size")
                if curve.empty:
                    continue
                color = _LAT_COLORS.get(method, "#9467bd")
                ax.plot(
                    curve["size"], curve["median"], marker="o", ms=3, color=color, label=_LAT_LABELS.get(method, method)
                )
                if curve["count"].max() > 1:
                    ax.fill_between(curve["size"], curve["min"], curve["max"], color=color, alpha=0.15)
            if link:
                xs = [s for s in sizes if s / link.bytes_per_s * 1e6 >= low / 4] or sizes[-1:]
                ax.plot(xs, [s / link.bytes_per_s * 1e6 for s in xs], color="black", linestyle="--", lw=1,
                        label=f"size / link speed of light ({link.bytes_per_s / 1e9:.1f} GB/s)")  # fmt: skip
            marks = sorted(
                ((size, name.split("_")[2], name.split("_")[4]) for name, size in found.items()
                 if name.split("_")[1] == direction)
            )  # fmt: skip
            for n, (size, b, a) in enumerate(marks):
                at = stats[(stats["method"] == b) & (stats["direction"] == direction) & (stats["size"] == size)]
                y = float(at["median"].iloc[0]) if not at.empty else high / 2
                ax.axvline(size, color=_LAT_COLORS.get(b, "#9467bd"), linestyle=":", lw=1.2)
                ax.plot([size], [y], marker="o", ms=9, mfc="none", mec="black", mew=1.2)
                ax.text(size * 1.08, high / 1.15 / (2.2**n), f"{b} faster than {a}\nfrom {_bytes(size)} on", fontsize=7,
                        va="top", ha="left", color="black", zorder=5,
                        bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="none", alpha=0.8))  # fmt: skip
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_ylim(low, high)
            _plain_log_ticks(ax.yaxis)
            ticks = [s for s in sizes if math.log2(s) % 4 == 0]
            ax.set_xticks(ticks, [_bytes(s) for s in ticks], fontsize=8)
            ax.set_xlabel("copy size (bytes, log2 scale)")
            ax.grid(True, which="major", alpha=0.3)
            ax.set_title(f"{_DIRECTION_TITLES.get(direction, direction)} ({direction})"
                         + ("" if marks else ": no crossover"), fontsize=10)  # fmt: skip
        axes[0][0].set_ylabel("latency, median (µs, log scale)")
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper center", ncol=3, fontsize=8, frameon=False,
                   bbox_to_anchor=(0.5, 1 - 0.42 / fig.get_figheight()))  # fmt: skip
        fig.suptitle(
            f"Small-copy latency: one copy of each size ({info['system']}:{info['partition']}, "
            f"{info['gpu_model']}, {info['host_link']})",
            fontsize=11,
        )
        notes = ["circles and dotted lines: crossovers, the size from which the first method stays faster"]
        if link:
            notes.append(f"dashed: the time the host link needs at its speed of light ({link.source})")
        skipped = _unique(group, "skipped_legs")
        if skipped and any(skipped):
            notes.append("not run: " + "; ".join(s for s in skipped if s))
        _footer(fig, group, "; ".join(notes))
        _layout(fig, 1 - 0.8 / fig.get_figheight())
        _inch_margins(fig, top=1.05, bottom=1.05)
        name = _save(fig, outdir, _key_name("latency", key))
        caption = f"{coverage_text(group)}. " + (f"Speed of light from {link.source}." if link else "")
        figures.append(Figure(LATENCY_TEST, outdir / name, "Latency against copy size", caption))
    return figures


# --- Multi-GPU random-access scan ---------------------------------------------

SCAN_TEST = "mem_scan"
PINGPONG_TEST = "p2p_pingpong"
_SCAN_VAR = re.compile(r"(?P<kind>gbs|agg_gbs|sol)_s(?P<segment>\d+)_w(?P<width>\d+)")
_SCAN_OPS = ["read", "write", "atomic"]
_SCAN_MODES = ["single", "chunked", "multiprocess"]
_SCAN_MODE_LABELS = {
    "single": "single: one VMM range over the GPUs",
    "chunked": "chunked: table of chunk pointers",
    "multiprocess": "multiprocess: a process per GPU, CUDA IPC",
}
_SCAN_STYLE = {
    "single": ("#1f77b4", "-", "o"),
    "chunked": ("#ff7f0e", "--", "s"),
    "multiprocess": ("#2ca02c", ":", "^"),
}
#: The check's plateau: segments of this many bytes and more (checks.multi_gpu.PLATEAU_FROM).
SCAN_PLATEAU_FROM = 128


def scan_points(group: pd.DataFrame) -> pd.DataFrame:
    """mode, op, segment, width, kind (gbs, agg_gbs, sol), time, value of one set of runs' scan points."""
    data = group[group["perf_var"].str.fullmatch(_SCAN_VAR.pattern) & group["value"].notna()]
    parts = data["perf_var"].str.extract(_SCAN_VAR.pattern)
    return data.assign(kind=parts["kind"], segment=parts["segment"].astype(int), width=parts["width"].astype(int))[
        ["mode", "op", "segment", "width", "kind", "time", "value"]
    ]


def scan_speed_of_light(group: pd.DataFrame) -> tuple[float, int] | None:
    """(per-GPU speed of light in GB/s, GPU count) from the perflog itself: the check logged each
    point's GB/s and its fraction of the speed of light, and the node's aggregate."""
    points = scan_points(group)
    keys = ["mode", "op", "segment", "width", "time"]
    wide = points.pivot_table(index=keys, columns="kind", values="value", aggfunc="median")
    if not {"gbs", "sol"} <= set(wide.columns):
        return None
    usable = wide[(wide["sol"] > 0) & (wide["gbs"] > 0)]
    if usable.empty:
        return None
    # The latest run's: the speed of light is system data, which may have been corrected since.
    usable = usable.xs(usable.index.get_level_values("time").max(), level="time", drop_level=False)
    gpus = round(float((usable["agg_gbs"] / usable["gbs"]).median())) if "agg_gbs" in usable else 0
    return float((usable["gbs"] / usable["sol"]).median()), gpus


def scan_link_limits(group: pd.DataFrame) -> dict[str, float]:
    """Per op, the scan's limit from the link yardstick its latest runs measured
    (link_limit_gbs; reads and writes have one), median over the modes."""
    data = group[(group["perf_var"] == "link_limit_gbs") & group["value"].notna()]
    if data.empty:
        return {}
    latest = data[data["time"] == data.groupby(["mode", "op"])["time"].transform("max")]
    return latest.groupby("op")["value"].median().to_dict()


def scan_curves(group: pd.DataFrame) -> pd.DataFrame:
    """Per mode, op and segment: the best width's per-GPU GB/s (median over executions) and the
    spread over widths, as the check's summaries take each segment at its best width."""
    points = scan_points(group)
    points = points[points["kind"] == "gbs"]
    by_width = points.groupby(["mode", "op", "segment", "width"])["value"].median().reset_index()
    return (
        by_width.groupby(["mode", "op", "segment"])["value"]
        .agg(best="max", worst="min")
        .join(
            by_width.loc[by_width.groupby(["mode", "op", "segment"])["value"].idxmax()]
            .set_index(["mode", "op", "segment"])["width"]
            .rename("best_width")
        )
        .reset_index()
    )


def _by_gpu_count(group: pd.DataFrame) -> list[tuple[int, pd.DataFrame]]:
    """The executions of one set of runs split by how many GPUs they spread the
    buffer over (each point's aggregate over its per-GPU GB/s): the speed of
    light, N/(N-1) times the link, differs with N."""
    points = scan_points(group)
    wide = points.pivot_table(index=["time", "mode", "op", "segment", "width"], columns="kind", values="value")
    if not {"gbs", "agg_gbs"} <= set(wide.columns):
        return [(0, group)]
    gpus = (wide["agg_gbs"] / wide["gbs"]).groupby(level="time").median().round().astype(int)
    counts = group["time"].map(gpus).fillna(0).astype(int)
    return [(int(n), group[counts == n]) for n in sorted(counts.unique())]


def _by_buffer(group: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The executions split by buffer size (the check's memory_fraction of the
    GPUs' memory): small random segments depend on it."""
    if "memory_fraction" not in group or group["memory_fraction"].isna().all():
        return [("", group)]
    fractions = group["memory_fraction"].astype(str)
    return [(f, group[fractions == f]) for f in sorted(fractions.unique(), key=float)]


def scan_figure(frame: pd.DataFrame, outdir: Path) -> list[Figure]:
    """Per op a panel of per-GPU GB/s against segment size, a line per mode, the speed of light drawn in."""
    data = frame[frame["test"] == SCAN_TEST]
    figures = []
    sets = [
        ((*key, f"{n}gpus" + (f"-{fraction}x" if fraction else "")), part, fraction)
        for key, group in data.groupby(_group_keys(), dropna=False)
        for n, sub in _by_gpu_count(group)
        for fraction, part in _by_buffer(sub)
    ]
    for key, group, fraction in sets:
        curves = scan_curves(group)
        if curves.empty:
            continue
        info = dict(zip(_group_keys(), key[:-1]))
        limits = scan_link_limits(group)
        found = scan_speed_of_light(group)
        sol_gbs, gpus = found if found else (None, 0)
        ops = [o for o in _SCAN_OPS if o in set(curves["op"])] + sorted(set(curves["op"]) - set(_SCAN_OPS))
        modes = [m for m in _SCAN_MODES if m in set(curves["mode"])] + sorted(set(curves["mode"]) - set(_SCAN_MODES))
        segments = sorted(curves["segment"].unique())
        fig, axes = plt.subplots(1, len(ops), figsize=(5.4 * len(ops), 5.6), sharey=True, squeeze=False)
        low = curves["worst"].min() / 1.6
        high = max(curves["best"].max(), sol_gbs or 0) * 1.6
        for ax, op in zip(axes[0], ops):
            panel = curves[curves["op"] == op]
            ax.axvspan(SCAN_PLATEAU_FROM / 2**0.5, segments[-1] * 1.3, color="#f2f2f2", zorder=0)
            for n, mode in enumerate(modes):
                curve = panel[panel["mode"] == mode].sort_values("segment")
                if curve.empty:
                    continue
                color, style, marker = _SCAN_STYLE.get(mode, ("#9467bd", "-.", "D"))
                ax.plot(curve["segment"], curve["best"], color=color, linestyle=style, marker=marker, ms=4 + n,
                        mfc="none" if n else color, lw=1.4, label=_SCAN_MODE_LABELS.get(mode, mode))  # fmt: skip
                if (curve["worst"] < curve["best"]).any():
                    ax.fill_between(curve["segment"], curve["worst"], curve["best"], color=color, alpha=0.12)
            if sol_gbs:
                ax.axhline(sol_gbs, color="black", linestyle="--", lw=1.2)
                ax.text(segments[0], sol_gbs * 1.06, f"speed of light {sol_gbs:.0f} GB/s", fontsize=8, va="bottom")
            if op in limits:
                ax.axhline(limits[op], color="#d62728", linestyle=":", lw=1.2)
                ax.text(segments[0], limits[op] / 1.06, f"link limit {limits[op]:.0f} GB/s (same run)", fontsize=8,
                        va="top", color="#d62728")  # fmt: skip
            lines = []
            for mode in modes:
                plateau = panel[(panel["mode"] == mode) & (panel["segment"] >= SCAN_PLATEAU_FROM)]["best"]
                if plateau.empty:
                    continue
                share = f" = {plateau.min() / sol_gbs:.1%}" if sol_gbs else ""
                lines.append(f"{mode}: {plateau.min():.0f} GB/s{share}")
            if lines:
                title = "plateau (lowest from 128 B)" + (", of speed of light" if sol_gbs else "")
                ax.text(0.97, 0.04, title + ":\n" + "\n".join(lines), transform=ax.transAxes, fontsize=8,
                        ha="right", va="bottom", family="monospace",
                        bbox=dict(boxstyle="round,pad=0.3", fc="white", ec="#999999", alpha=0.9))  # fmt: skip
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_ylim(low, high)
            _plain_log_ticks(ax.yaxis)
            ax.set_xticks(segments, [_bytes(s).replace(" ", "\u2009") for s in segments], fontsize=7.5)
            ax.set_xlim(segments[0] / 1.3, segments[-1] * 1.3)
            ax.set_xlabel("segment size (bytes, log2 scale)")
            ax.grid(True, which="major", alpha=0.3)
            widths = sorted(group.loc[group["op"] == op, "perf_var"].str.extract(r"_w(\d+)$")[0].dropna().astype(int)
                            .unique())  # fmt: skip
            ax.set_title(f"{op}" + (f" (widths {', '.join(map(str, widths))} B per thread)" if widths else ""),
                         fontsize=10)  # fmt: skip
        axes[0][0].set_ylabel("per-GPU GB/s, mean of the GPUs (log scale)")
        handles, labels = axes[0][0].get_legend_handles_labels()
        if sol_gbs:
            link = f"{sol_gbs * (gpus - 1) / gpus:.0f} GB/s" if gpus > 1 else "?"
            handles.append(Line2D([], [], color="black", linestyle="--"))
            labels.append(
                f"speed of light {sol_gbs:.0f} GB/s: per-GPU GPU-GPU (NVLink) bandwidth per direction {link} "
                f"x N/(N-1), N = {gpus}"
            )
        if limits:
            handles.append(Line2D([], [], color="#d62728", linestyle=":"))
            labels.append("link limit: every GPU streaming from its peers at once, x N/(N-1), measured in the run")
        fig.legend(handles, labels, loc="upper center", ncol=2, fontsize=8, frameon=False,
                   bbox_to_anchor=(0.5, 1 - 0.38 / fig.get_figheight()))  # fmt: skip
        fig.suptitle(
            f"Random-access scan over {gpus or 'all'} GPUs: per-GPU bandwidth against segment size "
            f"({info['system']}:{info['partition']}, {info['gpu_model']}"
            + (f", buffer {fraction} of GPU memory" if fraction else "")
            + ")",
            fontsize=11,
        )
        notes = [
            "each segment at its best width (median of executions), shaded: spread over widths; grey: the plateau",
            "speed of light derived from the perflog: GB/s over its logged fraction of the speed of light "
            "(1/N of a GPU's segments are its own)",
        ]
        _footer(fig, group, "\n".join(notes))
        _layout(fig, 1 - 0.8 / fig.get_figheight())
        _inch_margins(fig, top=1.25, bottom=1.25)
        name = _save(fig, outdir, _key_name("scan", key))
        caption = f"{coverage_text(group)}. " + (f"Buffer: {fraction} of the GPUs' memory. " if fraction else "")
        if sol_gbs:
            caption += f"Speed of light {sol_gbs:.0f} GB/s per GPU, from the perflog (GB/s over fraction of it)."
        if limits:
            caption += " Link limit measured in the run: " + ", ".join(f"{op} {v:.0f} GB/s" for op, v in limits.items())
            caption += "."
        figures.append(Figure(SCAN_TEST, outdir / name, "Random-access scan: bandwidth against segment size", caption))
    return figures


# --- Any other check ---------------------------------------------------------


def generic(frame: pd.DataFrame, outdir: Path, test: str, per_figure: int = 8) -> list[Figure]:
    """One horizontal bar chart per performance variable: median per case, min-max whiskers."""
    data = frame[(frame["test"] == test) & frame["value"].notna()].copy()
    if data.empty:
        return []
    data["case"] = data["params"].fillna("").str.replace(" ", "\n").replace("", "(no parameters)")
    varying = _varying(data, SERIES_FIELDS)
    data["series"] = _series_labels(data, varying)
    variables = list(dict.fromkeys(data["perf_var"]))
    series = list(dict.fromkeys(data["series"]))
    cases = list(dict.fromkeys(data["case"]))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    figures = []
    for start in range(0, len(variables), per_figure):
        chunk = variables[start : start + per_figure]
        ncols = min(4, len(chunk))
        nrows = math.ceil(len(chunk) / ncols)
        lines_per_case = max(1, max(c.count("\n") + 1 for c in cases))
        height = max(2.6, (0.22 * len(series) + 0.12 * lines_per_case) * len(cases) + 1.2)
        fig, axes = plt.subplots(nrows, ncols, figsize=(4.4 * ncols + 1.5, height * nrows + 1.2), squeeze=False)
        for ax, var in zip(axes.flat, chunk):
            rows = data[data["perf_var"] == var]
            unit = ", ".join(_unique(rows, "unit")) or "no unit"
            bar = 0.8 / len(series)
            for s, name in enumerate(series):
                part = rows[rows["series"] == name].groupby("case")["value"].agg(["median", "min", "max", "count"])
                part = part.reindex(cases)
                y = [i + (s - (len(series) - 1) / 2) * bar for i in range(len(cases))]
                err = [part["median"] - part["min"], part["max"] - part["median"]]
                ax.barh(y, part["median"], bar, xerr=err, capsize=2, color=colors[s % len(colors)], label=name)
            refs = rows[(rows["ref"].fillna(0) != 0)]
            for _, ref in refs.drop_duplicates(["case", "ref"]).iterrows():
                ax.plot(ref["ref"], cases.index(ref["case"]), "k|", ms=14)
            if "fraction" in unit:
                ax.axvline(1.0, color="black", linestyle="--", linewidth=1)
            positive = rows.loc[rows["value"] > 0, "value"]
            log = not positive.empty and positive.max() / positive.min() > 100
            if log:
                ax.set_xscale("log")
            ax.set_yticks(range(len(cases)), cases, fontsize=7)
            ax.invert_yaxis()
            ax.set_title(var, fontsize=9)
            ax.set_xlabel(unit + (" (log scale)" if log else ""), fontsize=8)
            ax.grid(True, axis="x", alpha=0.3)
        for ax in list(axes.flat)[len(chunk) :]:
            ax.set_visible(False)
        if len(series) > 1:
            handles, labels = axes[0][0].get_legend_handles_labels()
            fig.legend(handles, labels, loc="upper center", ncol=min(3, len(series)), fontsize=8, frameon=False,
                       bbox_to_anchor=(0.5, 1 - 0.45 / fig.get_figheight()))  # fmt: skip
        page = (
            f" ({start // per_figure + 1}/{math.ceil(len(variables) / per_figure)})"
            if len(variables) > per_figure
            else ""
        )
        fig.suptitle(f"{test}: every performance variable, median per case{page}", fontsize=11)
        _footer(fig, data, "whiskers: min to max over repeated executions; '|': reference where the check sets one")
        _layout(fig, 1 - (0.4 + 0.2 * math.ceil(len(series) / 3) * (len(series) > 1)) / fig.get_figheight())
        name = _save(fig, outdir, f"generic-{_slug(test)}-{start // per_figure + 1}.png")
        figures.append(
            Figure(test, outdir / name, f"{test}: every performance variable{page}", coverage_text(data) + ".")
        )
    return figures


#: Checks with figures of their own; the others get the generic one.
SPECIAL = {
    UM_TEST: [um_per_run, um_steady],
    HOST_TEST: [host_numa],
    DAXPY_TEST: [daxpy_figures],
    LATENCY_TEST: [latency_figure],
    SCAN_TEST: [scan_figure],
}

#: Checks whose figures show every performance variable: no generic figure even on request
#: (it would be hundreds of bars, one per point of a curve), or whose table says it all.
NO_GENERIC = {DAXPY_TEST, LATENCY_TEST, SCAN_TEST, PINGPONG_TEST}


def render_all(frame: pd.DataFrame, outdir: Path, generic_for_all: bool = False) -> list[Figure]:
    outdir.mkdir(parents=True, exist_ok=True)
    figures = []
    for test in sorted(frame["test"].dropna().unique()):
        special = SPECIAL.get(test, [])
        for render in special:
            figures += render(frame, outdir)
        if test not in NO_GENERIC and (not special or generic_for_all):
            figures += generic(frame, outdir, test)
    return figures
