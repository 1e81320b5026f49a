"""The random-access scan against segment size and its speed of light."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from experiments.mem_scan import NAME, PLATEAU_FROM
from reports.figures.axes import bytes_label, plain_log_ticks
from reports.figures.common import Figure, coverage_text, finish, group_keys, key_name, medians, runs_label, sets_of

# --- Multi-GPU random-access scan ---------------------------------------------

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
#: The check's plateau: segments of this many bytes and more, as the check defines it.
SCAN_PLATEAU_FROM = PLATEAU_FROM


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
    ratio = wide["agg_gbs"] / wide["gbs"]
    ratio = ratio[np.isfinite(ratio) & (ratio > 0)]  # a rate of 0 tells no GPU count
    gpus = ratio.groupby(level="time").median().round()
    counts = group["time"].map(gpus).fillna(0).astype(int)
    return [(int(n), group[counts == n]) for n in sorted(counts.unique())]


def _by_buffer(group: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The executions split by buffer size (the check's memory_fraction of the
    GPUs' memory): small random segments depend on it."""
    if "memory_fraction" not in group or group["memory_fraction"].isna().all():
        return [("", group)]
    fractions = group["memory_fraction"].astype(str)
    return [(f, group[fractions == f]) for f in sorted(fractions.unique(), key=float)]


def _scan_sets(frame: pd.DataFrame) -> list:
    """The scan's records by machine, GPU count and buffer size: one figure each."""
    return [
        ((*key, f"{n}gpus" + (f"-{fraction}x" if fraction else "")), part, fraction)
        for key, group in sets_of(frame, NAME)
        for n, sub in _by_gpu_count(group)
        for fraction, part in _by_buffer(sub)
    ]


def scan_plateaus(panel: pd.DataFrame, modes: list) -> dict:
    """Per mode, the plateau of one op's curves: the lowest best-width rate from SCAN_PLATEAU_FROM up."""
    found = {}
    for mode in modes:
        plateau = panel[(panel["mode"] == mode) & (panel["segment"] >= SCAN_PLATEAU_FROM)]["best"]
        if not plateau.empty:
            found[mode] = float(plateau.min())
    return found


def _draw_mode_curves(ax, panel: pd.DataFrame, modes: list) -> None:
    for n, mode in enumerate(modes):
        curve = panel[panel["mode"] == mode].sort_values("segment")
        if curve.empty:
            continue
        color, style, marker = _SCAN_STYLE.get(mode, ("#9467bd", "-.", "D"))
        ax.plot(
            curve["segment"],
            curve["best"],
            color=color,
            linestyle=style,
            marker=marker,
            ms=4 + n,
            mfc="none" if n else color,
            lw=1.4,
            label=_SCAN_MODE_LABELS.get(mode, mode),
        )
        if (curve["worst"] < curve["best"]).any():
            ax.fill_between(curve["segment"], curve["worst"], curve["best"], color=color, alpha=0.12)


def _draw_scan_limits(ax, first_segment: int, sol_gbs: float | None, link: float | None) -> None:
    if sol_gbs:
        ax.axhline(sol_gbs, color="black", linestyle="--", lw=1.2)
        ax.text(first_segment, sol_gbs * 1.06, f"speed of light {sol_gbs:.0f} GB/s", fontsize=8, va="bottom")
    if link:
        ax.axhline(link, color="#d62728", linestyle=":", lw=1.2)
        ax.text(
            first_segment, link / 1.06, f"link limit {link:.0f} GB/s (same run)", fontsize=8, va="top", color="#d62728"
        )


def _plateau_box(ax, plateaus: dict, sol_gbs: float | None) -> None:
    if not plateaus:
        return
    lines = [f"{mode}: {v:.0f} GB/s" + (f" = {v / sol_gbs:.1%}" if sol_gbs else "") for mode, v in plateaus.items()]
    title = "plateau (lowest from 128 B)" + (", of speed of light" if sol_gbs else "")
    ax.text(
        0.97,
        0.04,
        title + ":\n" + "\n".join(lines),
        transform=ax.transAxes,
        fontsize=8,
        ha="right",
        va="bottom",
        family="monospace",
        bbox=dict(boxstyle="round,pad=0.3", fc="white", ec="#999999", alpha=0.9),
    )


def _scan_axes(ax, op: str, segments: list, low: float, high: float, group: pd.DataFrame) -> None:
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_ylim(low, high)
    plain_log_ticks(ax.yaxis)
    ax.set_xticks(segments, [bytes_label(s).replace(" ", "\u2009") for s in segments], fontsize=7.5)
    ax.set_xlim(segments[0] / 1.3, segments[-1] * 1.3)
    ax.set_xlabel("segment size (bytes, log2 scale)")
    ax.grid(True, which="major", alpha=0.3)
    widths = sorted(group.loc[group["op"] == op, "perf_var"].str.extract(r"_w(\d+)$")[0].dropna().astype(int).unique())
    ax.set_title(f"{op}" + (f" (widths {', '.join(map(str, widths))} B per thread)" if widths else ""), fontsize=10)


def _scan_legend(fig, axes, sol_gbs: float | None, gpus: int, limits: dict) -> None:
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
    fig.legend(
        handles,
        labels,
        loc="upper center",
        ncol=2,
        fontsize=8,
        frameon=False,
        bbox_to_anchor=(0.5, 1 - 0.38 / fig.get_figheight()),
    )


def _draw_scan(curves: pd.DataFrame, group: pd.DataFrame, sol_gbs: float | None, limits: dict):
    ops = [o for o in _SCAN_OPS if o in set(curves["op"])] + sorted(set(curves["op"]) - set(_SCAN_OPS))
    modes = [m for m in _SCAN_MODES if m in set(curves["mode"])] + sorted(set(curves["mode"]) - set(_SCAN_MODES))
    segments = sorted(curves["segment"].unique())
    fig, axes = plt.subplots(1, len(ops), figsize=(5.4 * len(ops), 5.6), sharey=True, squeeze=False)
    low, high = curves["worst"].min() / 1.6, max(curves["best"].max(), sol_gbs or 0) * 1.6
    for ax, op in zip(axes[0], ops):
        panel = curves[curves["op"] == op]
        ax.axvspan(SCAN_PLATEAU_FROM / 2**0.5, segments[-1] * 1.3, color="#f2f2f2", zorder=0)
        _draw_mode_curves(ax, panel, modes)
        _draw_scan_limits(ax, segments[0], sol_gbs, limits.get(op))
        _plateau_box(ax, scan_plateaus(panel, modes), sol_gbs)
        _scan_axes(ax, op, segments, low, high, group)
    axes[0][0].set_ylabel("per-GPU GB/s, mean of the GPUs (log scale)")
    return fig, axes


def _scan_caption(group: pd.DataFrame, fraction, sol_gbs: float | None, limits: dict) -> str:
    caption = f"{coverage_text(group)}. " + (f"Buffer: {fraction} of the GPUs' memory. " if fraction else "")
    if sol_gbs:
        caption += f"Speed of light {sol_gbs:.0f} GB/s per GPU, from the perflog (GB/s over fraction of it)."
    if limits:
        caption += " Link limit measured in the run: " + ", ".join(f"{op} {v:.0f} GB/s" for op, v in limits.items())
        caption += "."
    return caption


def scan_figure(frame: pd.DataFrame, outdir: Path) -> list[Figure]:
    """Per op a panel of per-GPU GB/s against segment size, a line per mode, the speed of light drawn in."""
    figures = []
    for key, group, fraction in _scan_sets(frame):
        curves = scan_curves(group)
        if curves.empty:
            continue
        info = dict(zip(group_keys(), key[:-1]))
        limits = scan_link_limits(group)
        found = scan_speed_of_light(group)
        sol_gbs, gpus = found if found else (None, 0)
        fig, axes = _draw_scan(curves, group, sol_gbs, limits)
        _scan_legend(fig, axes, sol_gbs, gpus, limits)
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
        name = finish(
            fig,
            group,
            "\n".join(notes),
            outdir,
            key_name("scan", key),
            top=1 - 0.8 / fig.get_figheight(),
            margins=(1.25, 1.25),
        )
        caption = _scan_caption(group, fraction, sol_gbs, limits)
        figures.append(Figure(NAME, outdir / name, "Random-access scan: bandwidth against segment size", caption))
    return figures


def table(frame: pd.DataFrame) -> pd.DataFrame:
    """The scan's summaries per mode and op (median over executions), one row per set of runs and case."""

    rows = []
    for key, group in sets_of(frame, NAME):
        table = medians(group, ["mode", "op"])
        order = sorted(
            table.index,
            key=lambda k: (
                _SCAN_MODES.index(k[0]) if k[0] in _SCAN_MODES else 9,
                _SCAN_OPS.index(k[1]) if k[1] in _SCAN_OPS else 9,
            ),
        )
        for mode, op in order:
            values = table.loc[(mode, op)]
            row = {"set of runs": runs_label(dict(zip(group_keys(), key))), "mode": mode, "op": op}
            for name, column in (
                ("seg64_gbs", "64 B segments (GB/s)"),
                ("plateau_gbs", "plateau, from 128 B (GB/s)"),
                ("best_gbs", "best (GB/s)"),
                ("best_segment", "best at segment (B)"),
            ):
                row[column] = values.get(name)
            share = values.get("plateau_of_sol")
            row["plateau, % of speed of light"] = f"{share:.1%}" if share == share and share is not None else ""
            rows.append(row)
    table = pd.DataFrame(rows)
    if not table.empty:
        segment = pd.to_numeric(table["best at segment (B)"], errors="coerce")
        table["best at segment (B)"] = segment.where(np.isfinite(segment)).astype("Int64")  # a size, or blank
        if table["set of runs"].nunique() == 1:
            table = table.drop(columns="set of runs")
    return table


#: The figures of its own the report draws.
FIGURES = [scan_figure]
#: No generic bars even on request: its figures and table show every variable.
GENERIC = False
