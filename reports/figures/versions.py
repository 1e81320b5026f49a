"""CUDA versions overlaid: where one machine's runs of an experiment span two
CUDA runtimes or compilers (docs/upgrade.md), every headline
figure's samples under each, as a percentage of the oldest one's median. It
shows what ``compare --by cuda_runtime_version`` (or ``--by environ``) judges:
a figure whose samples sit apart from 100% moved, a wide strip is noise."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from reports.figures.common import Figure, coverage_text, finish, key_name

#: What a version is: the runtime the programs loaded and the compiler that built them.
VERSION_FIELDS = ["cuda_runtime_version", "cuda_compiler"]
#: One machine: the versions are compared within it, never across machines.
MACHINE_FIELDS = ["system", "partition", "gpu_model", "host_link", "driver_version"]
_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]


def _release_order(label: str) -> tuple:
    """'12.9, Clang 22.1.8' before '13.0, NVIDIA 13.0.88': by the runtime's numbers, then the compiler."""
    runtime, _, compiler = label.partition(", ")
    numbers = tuple(int(n) for n in re.findall(r"\d+", runtime))
    return numbers, compiler


def version_labels(frame: pd.DataFrame) -> pd.Series:
    """'13.0, NVIDIA 13.0.88' per record; fields a perflog lacks read 'unknown'."""
    parts = [
        frame[f].fillna("unknown").astype(str) if f in frame else pd.Series("unknown", index=frame.index)
        for f in VERSION_FIELDS
    ]
    return parts[0] + ", " + parts[1]


def version_shifts(group: pd.DataFrame) -> pd.DataFrame:
    """Each headline sample of one machine's experiment as a percentage of the
    oldest version's median of its figure; figures the oldest lacks are left out."""
    data = group.assign(version=version_labels(group), figure_key=(group["params"].fillna("") + " " + group["figure"]))
    data["figure_key"] = data["figure_key"].str.strip()
    base = min(data["version"].unique(), key=_release_order)
    medians = data[data["version"] == base].groupby("figure_key")["value"].median()
    data = data[data["figure_key"].isin(medians.index) & data["value"].notna()]
    return data.assign(percent=100 * data["value"] / data["figure_key"].map(medians), base=base)


def _draw(shifts: pd.DataFrame, title: str):
    keys = sorted(shifts["figure_key"].unique())
    versions = sorted(shifts["version"].unique(), key=_release_order)
    fig, ax = plt.subplots(figsize=(9, 1.6 + 0.22 * len(keys)))
    rows = {k: i for i, k in enumerate(keys)}
    for n, version in enumerate(versions):
        part = shifts[shifts["version"] == version]
        offset = (n - (len(versions) - 1) / 2) * 0.25
        ax.plot(
            part["percent"],
            part["figure_key"].map(rows) + offset,
            "o",
            ms=3,
            alpha=0.7,
            color=_COLORS[n % len(_COLORS)],
            label=version,
        )
    ax.axvline(100, color="black", linewidth=1)
    ax.set_yticks(range(len(keys)), keys, fontsize=7)
    ax.set_ylim(len(keys) - 0.5, -0.5)
    ax.set_xlabel(f"% of the median under {versions[0]} (each dot one sample)")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right", title="CUDA runtime, compiler", title_fontsize=8)
    ax.set_title(title, fontsize=10)
    return fig


def versions_figures(frame: pd.DataFrame, outdir: Path) -> list[Figure]:
    """One figure per experiment and machine whose headline samples span two versions or more."""
    samples = frame[frame["sample"].notna()] if "sample" in frame else frame.iloc[0:0]
    # Only records that name both (older perflogs name no compiler; host programs load no runtime).
    known = pd.Series(True, index=samples.index)
    for field in VERSION_FIELDS:
        known &= samples[field].notna() & ~samples[field].isin(["unknown", "none"]) if field in samples else False
    samples = samples[known]
    figures = []
    for key, group in samples.groupby(["test", *MACHINE_FIELDS], dropna=False):
        if version_labels(group).nunique() < 2:
            continue
        shifts = version_shifts(group)
        if shifts["version"].nunique() < 2:
            continue
        test = key[0]
        title = f"{test}: CUDA versions overlaid ({', '.join(str(k) for k in key[1:4])})"
        name = finish(_draw(shifts, title), group, "", outdir, key_name(f"versions-{test}", key[1:]), top=0.95)
        caption = (
            f"Every headline figure's samples under each CUDA runtime and compiler, as a percentage of "
            f"the median under {shifts['base'].iloc[0]}: a figure whose dots sit apart from 100% moved; "
            f"the verdict is ./suite report compare --by cuda_runtime_version or --by environ. "
            f"{coverage_text(group)}."
        )
        figures.append(Figure(test, outdir / name, title, caption))
    return figures
