"""One static HTML page per report: coverage, figures, tables, loader warnings."""

from __future__ import annotations

import datetime
import html
import os
import re
from pathlib import Path

import pandas as pd

from .figures import (
    DAXPY_TEST,
    HOST_TEST,
    LATENCY_TEST,
    PINGPONG_TEST,
    SCAN_TEST,
    UM_TEST,
    Figure,
    coverage,
    coverage_text,
    daxpy_crossover_table,
    latency_crossovers,
    latency_curves,
    render_all,
)
from .figures.versions import versions_figures
from .load import Loaded

#: Columns of a check's table where not every variable is wanted.
TABLE_VARIABLES = {
    UM_TEST: ["first_run_bw", "steady_bw", "copy_engine_bw", "steady_of_copy_engine", "steady_of_link"],
    # A few anchor points of the study; the figures show them all.
    DAXPY_TEST: ["kernel_us_i1_o4", "kernel_us_i4_o4", "kernel_us_i16_o4", "touch_us_i4_o4", "total_us_i4_o4"],
}

#: Sizes of the latency table; the figure has every size.
LATENCY_SIZES = [1, 64, 1024, 4096, 16384, 65536, 2**20, 2**24]

_STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 1500px; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; }
th { background: #f0f0f0; }
td:first-child, th:first-child { text-align: left; }
figure { margin: 1em 0 2em 0; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption, caption { font-size: 0.85em; color: #444; caption-side: bottom; text-align: left; }
.warn { color: #a00; }
"""


def summary_table(frame: pd.DataFrame, test: str) -> pd.DataFrame:
    """Median of each performance variable per case (and per set of runs where they differ)."""
    data = frame[frame["test"] == test]
    wanted = TABLE_VARIABLES.get(test)
    if wanted:
        data = data[data["perf_var"].isin(wanted)]
    series = [
        c for c in ("system", "partition", "node", "driver_version", "cuda_runtime_version") if data[c].nunique() > 1
    ]
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


def latency_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Median latency (us) per method and direction at a few sizes, one row per set of runs and curve."""
    from .figures.common import _group_keys

    rows = []
    data = frame[frame["test"] == LATENCY_TEST]
    for key, group in data.groupby(_group_keys(), dropna=False):
        info = dict(zip(_group_keys(), key))
        stats = latency_curves(group)
        found = latency_crossovers(stats)
        for (method, direction), curve in stats.groupby(["method", "direction"], sort=False):
            by_size = dict(zip(curve["size"], curve["median"]))
            row = {
                "set of runs": f"{info['gpu_model']}, driver {info['driver_version']}",
                "direction": direction,
                "method": method,
            }
            row.update({_size(s): by_size.get(s) for s in LATENCY_SIZES})
            row["overtakes (from size)"] = ", ".join(
                f"{name.split('_')[4]} at {_size(size)}"
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


def _runs_label(info: dict) -> str:
    return f"{info['system']}:{info['partition']}, {info['gpu_model']}, driver {info['driver_version']}"


def _medians(group: pd.DataFrame, index: list[str]) -> pd.DataFrame:
    return group.pivot_table(index=index, columns="perf_var", values="value", aggfunc="median")


def scan_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The scan's summaries per mode and op (median over executions), one row per set of runs and case."""
    from .figures.common import _group_keys
    from .figures.mem_scan import _SCAN_MODES, _SCAN_OPS

    rows = []
    data = frame[frame["test"] == SCAN_TEST]
    for key, group in data.groupby(_group_keys(), dropna=False):
        table = _medians(group, ["mode", "op"])
        order = sorted(
            table.index,
            key=lambda k: (
                _SCAN_MODES.index(k[0]) if k[0] in _SCAN_MODES else 9,
                _SCAN_OPS.index(k[1]) if k[1] in _SCAN_OPS else 9,
            ),
        )
        for mode, op in order:
            values = table.loc[(mode, op)]
            row = {"set of runs": _runs_label(dict(zip(_group_keys(), key))), "mode": mode, "op": op}
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
        table["best at segment (B)"] = table["best at segment (B)"].astype("Int64")
        if table["set of runs"].nunique() == 1:
            table = table.drop(columns="set of runs")
    return table


def pingpong_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per variant its time and bandwidth (median over executions) and the slowdown against the
    baseline of the same run."""
    from .figures.common import _group_keys

    rows = []
    data = frame[frame["test"] == PINGPONG_TEST]
    for key, group in data.groupby(_group_keys(), dropna=False):
        table = _medians(group, ["variant"])
        order = sorted(table.index, key=lambda v: (v != "baseline", v))
        for variant in order:
            values = table.loc[variant]
            baseline = values.get("time") if variant == "baseline" else values.get("baseline_time")
            rows.append(
                {
                    "set of runs": _runs_label(dict(zip(_group_keys(), key))),
                    "variant": variant,
                    "time (s)": values.get("time"),
                    "bandwidth (GiB/s)": values.get("bandwidth"),
                    "slowdown vs baseline (x)": values.get("slowdown"),
                    "baseline in the same job (s)": baseline,
                }
            )
    table = pd.DataFrame(rows)
    if not table.empty and table["set of runs"].nunique() == 1:
        table = table.drop(columns="set of runs")
    return table


def headline_figures(data: pd.DataFrame) -> set:
    """The figures logged with samples: the headline figures (checks/suite/keys.py)."""
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


def _size(size: int) -> str:
    for unit, factor in (("MiB", 2**20), ("KiB", 2**10)):
        if size >= factor:
            return f"{size // factor} {unit}"
    return f"{size} B"


def _table(table: pd.DataFrame, caption: str) -> str:
    text = table.to_html(border=0, float_format="{:.4g}".format, na_rep="", index=False)
    return re.sub(r"(<table[^>]*>)", lambda m: m[1] + f"<caption>{html.escape(caption)}</caption>", text, count=1)


def _img(figure: Figure, outdir: Path) -> str:
    src = html.escape(os.path.relpath(figure.path, outdir))
    return (
        f'<figure><img src="{src}" alt="{html.escape(figure.title)}">'
        f"<figcaption>{html.escape(figure.title)}. {html.escape(figure.caption)}</figcaption></figure>"
    )


#: Checks whose table is their own rather than the medians per case: the
#: table's maker and its caption (the coverage is appended).
DEDICATED_TABLES = {
    LATENCY_TEST: (
        latency_table,
        "Median latency (µs) at a few sizes; 'overtakes': the method is faster than the one named from "
        "that size on (checks.copy_latency.crossovers on the medians).",
    ),
    SCAN_TEST: (
        scan_table,
        "Per-GPU GB/s, median over executions, each segment at its best width: at 64 B segments, the "
        "plateau (the lowest from 128 B on), the best and its segment; the plateau as a share of the "
        "speed of light (GPU-GPU bandwidth per direction x N/(N-1)).",
    ),
    PINGPONG_TEST: (
        pingpong_table,
        "The persistent kernel's ping-pong of 64 MiB between two GPUs, 10000 iterations: time, the "
        "seed's bandwidth (GiB/s) and the slowdown against the baseline run first in the same job; "
        "median over executions.",
    ),
}


def _notes() -> str:
    """What each experiment's figures mean, below the report."""
    return (
        "<h2>Notes</h2><ul>"
        f"<li>{html.escape(UM_TEST)}: 'steady' is the median of runs 2..N; the copy engine is measured by the same "
        "program in the same run (cudaMemcpy from pinned memory); the speed of light is the host link's per "
        "direction.</li>"
        f"<li>{html.escape(DAXPY_TEST)}: the paper's figures 1 to 8 (Gayatri, Gott, Deslippe, PMBS 2019) with "
        "explicit cudaMalloc + cudaMemcpy added; system memory runs only where the node has ATS or HMM. "
        "Variables are &lt;metric&gt;_i&lt;inner&gt;_o&lt;outer&gt;, in µs.</li>"
        f"<li>{html.escape(LATENCY_TEST)}: median of timed copies per size; the dashed line is size divided by the "
        "host link's speed of light per direction.</li>"
        f"<li>{html.escape(SCAN_TEST)}: every GPU reads, writes or atomically adds random segments of a buffer "
        "spread over the node's N GPUs; per-GPU GB/s against segment size, one line per way of spreading it. The "
        "speed of light is the GPU-GPU bandwidth per direction times N/(N-1) (1/N of the segments are local), "
        "derived in the figure from the perflog (each point's GB/s over its logged fraction of it).</li>"
        f"<li>{html.escape(PINGPONG_TEST)}: the NVBit seed's persistent ping-pong kernel; slowdown is against the "
        "baseline of the same job.</li>"
        f"<li>{html.escape(HOST_TEST)}: bandwidth of each NUMA node's memory from threads bound to it.</li>"
        "<li>CUDA (driver) is the CUDA version the driver supports; CUDA runtime is the toolkit the programs "
        "were built with ('unknown' where the perflog predates that field).</li></ul>"
    )


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


def _test_section(test: str, frame: pd.DataFrame, figures: list, headline: pd.DataFrame, outdir: Path) -> list[str]:
    data = frame[frame["test"] == test]
    parts = [f"<h2 id='{html.escape(test)}'>{html.escape(test)}</h2>"]
    if test == DAXPY_TEST:
        parts.append("<h3>Crossovers</h3>")
        parts.append(
            _table(
                daxpy_crossover_table(frame),
                "The smallest inner (consecutive kernels, outer = 4) from which the first case's kernel time "
                "stays below the second's at every larger inner (checks.daxpy.crossovers); '—': never within "
                "inner 1 to 16; 'not run': a case without records. " + coverage_text(data) + ".",
            )
        )
    parts += [_img(f, outdir) for f in figures if f.test == test]
    dedicated = DEDICATED_TABLES.get(test)
    if dedicated:
        make_table, caption = dedicated
        parts.append(_table(make_table(frame), f"{caption} {coverage_text(data)}."))
    else:
        note = " (anchor points; the figures show every point)" if test == DAXPY_TEST else ""
        parts.append(_table(summary_table(frame, test), f"Median per case{note}. {coverage_text(data)}."))
    per_node = node_table(data, headline)
    if per_node is not None:
        parts.append(_table(per_node, "One row per node (medians); a ratio far from 1 marks a node unlike its peers."))
    return parts


def write_report(loaded: Loaded, outdir: Path, title: str, generic_for_all: bool = False) -> Path:
    """Figures and index.html under `outdir`; returns the page's path."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    # The samples of headline figures are for the gate; the report shows their medians.
    headline = headline_figures(loaded.frame)
    frame = loaded.frame[loaded.frame["sample"].isna()]
    # The versions' overlay reads the samples: the spread is what tells a move from noise.
    figures = render_all(frame, outdir, generic_for_all) + versions_figures(loaded.frame, outdir)
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>",
        f"<p>Generated by <code>python -m reports html</code> on "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC from "
        f"{len(loaded.files)} file(s), {len(frame)} performance values.</p>",
        *_coverage_section(loaded, frame),
    ]
    for test in sorted(frame["test"].unique()):
        parts += _test_section(test, frame, figures, headline, outdir)
    parts += [_notes(), "</body></html>"]
    page = outdir / "index.html"
    page.write_text("\n".join(parts))
    return page
