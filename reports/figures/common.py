"""What every figure shares: its record, footer, layout and file name."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from experiments import keys  # noqa: E402
from experiments.references import is_bound_only  # noqa: E402
from reports import sol  # noqa: E402

GiB = 2**30
#: The one unit of bandwidth on every page and figure (docs/glossary.md): decimal GB/s.
GB = 1e9
#: Units a program records (its seed's) that the pages show as GB/s, by their factor to it.
TO_GB_PER_S = {"GiB/s": GiB / GB, "MiB/s": 2**20 / GB, "MB/s": 1e6 / GB}
DPI = 90

#: What distinguishes one set of runs from another in a figure's series.
SERIES_FIELDS = list(keys.SERIES_FIELDS)


@dataclass
class Figure:
    test: str
    path: Path
    title: str
    caption: str  # what the figure covers and where its speed-of-light lines come from


def unique(frame: pd.DataFrame, column: str) -> list[str]:
    return sorted({str(v) for v in frame[column].dropna().unique()}) if column in frame else []


#: The columns coverage reads: a table narrowed to them first is cheap to cut (a year's table is wide).
COVERAGE_FIELDS = [
    "system",
    "partition",
    "node",
    "gpu_model",
    "host_link",
    "driver_version",
    "cuda_version",
    "cuda_runtime_version",
    "time",
]


def coverage(frame: pd.DataFrame) -> dict[str, str]:
    """What a figure or table covers, field by field."""
    # The pairs told apart first: a year's records are a million rows and a few pairs, and every figure says them.
    pairs = frame[["system", "partition"]].drop_duplicates()
    systems = sorted({f"{s}:{p}" for s, p in zip(pairs["system"], pairs["partition"])})
    times = frame["time"].dropna()
    dates = ""
    if not times.empty:
        first, last = times.min().strftime("%Y-%m-%d"), times.max().strftime("%Y-%m-%d")
        dates = first if first == last else f"{first} to {last}"
    return {
        "systems": ", ".join(systems),
        "nodes": ", ".join(unique(frame, "node")),
        "GPUs": ", ".join(unique(frame, "gpu_model")),
        "host links": ", ".join(unique(frame, "host_link")),
        "drivers": ", ".join(unique(frame, "driver_version")),
        "CUDA (driver)": ", ".join(unique(frame, "cuda_version")),
        "CUDA runtime": ", ".join(unique(frame, "cuda_runtime_version")),
        "dates": dates,
    }


def coverage_text(frame: pd.DataFrame) -> str:
    return " | ".join(f"{k}: {v}" for k, v in coverage(frame).items() if v)


def _footer(fig, frame: pd.DataFrame, extra: str = "") -> None:
    text = coverage_text(frame)
    if extra:
        text += "\n" + extra
    fig.text(0.01, 0.005, text, fontsize=8, color="#444444", ha="left", va="bottom", wrap=True)


def stack_label(records: pd.DataFrame) -> str:
    """'driver 580.159.04, CUDA runtime 13.0': what measured a figure's records (each value, where they differ)."""
    parts = []
    for field, word in (("driver_version", "driver"), ("cuda_runtime_version", "CUDA runtime")):
        values = unique(records, field) if field in records else []
        values = [v for v in values if v and v not in ("unknown", "none", "nan")]
        if values:
            parts.append(f"{word} {', '.join(values)}")
    return ", ".join(parts)


def _name_the_stack(fig, records: pd.DataFrame) -> None:
    """The figure's title ends with the driver and CUDA runtime of its records: figures of several runtimes
    on one page once had identical titles, the runtime only in the grey footer."""
    title = fig._suptitle
    stack = stack_label(records)
    if title is not None and stack and stack not in title.get_text():
        title.set_text(f"{title.get_text()}\n{stack}")


def in_gb_per_s(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with every bandwidth in GB/s (its value and reference converted, its unit renamed): the records
    keep the unit their seed states (host_bandwidth's and Unified Memory's GiB/s), the pages show one."""
    if "unit" not in frame or not frame["unit"].isin(list(TO_GB_PER_S)).any():
        return frame
    frame = frame.copy()
    factor = frame["unit"].map(TO_GB_PER_S)
    converted = factor.notna()
    for column in ("value", "ref"):
        if column in frame:
            numbers = pd.to_numeric(frame.loc[converted, column], errors="coerce")
            frame[column] = frame[column].astype(object)
            frame.loc[converted, column] = numbers * factor[converted]
            if column == "value":
                frame[column] = pd.to_numeric(frame[column], errors="coerce")
    frame.loc[converted, "unit"] = "GB/s"
    return frame


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


_SERIES_PREFIX = {
    "node": "node ",
    "driver_version": "driver ",
    "cuda_version": "CUDA ",
    "cuda_runtime_version": "runtime ",
}


def series_labels(frame: pd.DataFrame, varying: list[str]) -> pd.Series:
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


def key_name(prefix: str, key) -> str:
    return f"{prefix}-{slug('-'.join(map(str, key)))}.png"


def varying_fields(frame: pd.DataFrame, fields: list[str]) -> list[str]:
    return [f for f in fields if f in frame and frame[f].nunique(dropna=False) > 1]


def group_keys() -> list[str]:
    return list(keys.GROUP_FIELDS)


def sets_of(frame: pd.DataFrame, test: str):
    """Each set of runs of `test` (a kind of node under one software stack,
    group_keys): its key and its records."""
    data = frame[frame["test"] == test]
    yield from data.groupby(group_keys(), dropna=False)


def link_sol(group: pd.DataFrame) -> sol.SpeedOfLight | None:
    first = group.iloc[0]
    return sol.host_link(first["system"], first["partition"], first["host_link"], group)


def finish(
    fig,
    records: pd.DataFrame,
    note: str,
    outdir: Path,
    filename: str,
    top: float,
    right: float = 1.0,
    margins: tuple | None = None,
) -> str:
    """The title's software stack, footer, layout (and `margins` inches above and below the axes), the
    file written under `outdir`; returns the file's name."""
    _name_the_stack(fig, records)
    _footer(fig, records, note)
    _layout(fig, top, right)
    if margins:
        _inch_margins(fig, top=margins[0], bottom=margins[1])
    return _save(fig, outdir, filename)


def runs_label(info: dict) -> str:
    """A set of runs as a table's rows name it, its CUDA runtime too (the driver's CUDA alone labelled
    twelve DAXPY rows alike that three runtimes measured)."""
    runtime = info.get("cuda_runtime_version")
    stack = f", CUDA runtime {runtime}" if runtime and runtime == runtime and runtime not in ("unknown", "none") else ""
    return f"{info['system']}:{info['partition']}, {info['gpu_model']}, driver {info['driver_version']}{stack}"


def medians(group: pd.DataFrame, index: list[str]) -> pd.DataFrame:
    """Each performance variable's median per `index`."""
    return group.pivot_table(index=index, columns="perf_var", values="value", aggfunc="median")


def finite(frame: pd.DataFrame) -> pd.DataFrame:
    """The records a figure can draw: those with a finite value (a NaN or an
    infinity stays in the tables, where it shows as what it is)."""
    return frame[np.isfinite(pd.to_numeric(frame["value"], errors="coerce"))]


#: A perflog line's reference, as experiments/references.py's bound_of reads it.
BOUND_COLUMNS = ("unit", "ref", "lower_thres", "upper_thres")


def references(rows: pd.DataFrame) -> pd.Series:
    """The rows' reference values a figure draws as what was accepted: none
    where the line's reference is a physical bound alone (a kind's first
    nights carry their limits so, experiments/references.py), or zero."""
    if "ref" not in rows:
        return pd.Series(dtype=float)
    columns = [rows[c] if c in rows else pd.Series(math.nan, index=rows.index) for c in BOUND_COLUMNS]
    measured = [not is_bound_only(*line) for line in zip(*(c.tolist() for c in columns))]
    refs = rows["ref"][measured]
    return refs[refs.fillna(0) != 0].dropna()
