"""The generic figure: one bar chart per performance variable, for checks without figures of their own."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from reports.figures.common import (
    SERIES_FIELDS,
    Figure,
    coverage_text,
    finish,
    references,
    series_labels,
    slug,
    unique,
    varying_fields,
)

# --- Any other check ---------------------------------------------------------


def generic_table(frame: pd.DataFrame, test: str) -> pd.DataFrame:
    """The records the generic figure draws: one test's values, each with its
    case (its parameters, one per line) and its series (the fields that vary)."""
    data = frame[(frame["test"] == test) & frame["value"].notna()].copy()
    if data.empty:
        return data
    data["case"] = data["params"].fillna("").str.replace(" ", "\n").replace("", "(no parameters)")
    data["series"] = series_labels(data, varying_fields(data, SERIES_FIELDS))
    return data


def _draw_variable(ax, rows: pd.DataFrame, var: str, series: list, cases: list, colors: list) -> None:
    unit = ", ".join(unique(rows, "unit")) or "no unit"
    bar = 0.8 / len(series)
    for s, name in enumerate(series):
        part = rows[rows["series"] == name].groupby("case")["value"].agg(["median", "min", "max", "count"])
        part = part.reindex(cases)
        y = [i + (s - (len(series) - 1) / 2) * bar for i in range(len(cases))]
        err = [part["median"] - part["min"], part["max"] - part["median"]]
        ax.barh(y, part["median"], bar, xerr=err, capsize=2, color=colors[s % len(colors)], label=name)
    refs = rows.loc[references(rows).index]
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


def _draw_page(data: pd.DataFrame, chunk: list, series: list, cases: list):
    ncols = min(4, len(chunk))
    nrows = math.ceil(len(chunk) / ncols)
    lines_per_case = max(1, max(c.count("\n") + 1 for c in cases))
    height = max(2.6, (0.22 * len(series) + 0.12 * lines_per_case) * len(cases) + 1.2)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.4 * ncols + 1.5, height * nrows + 1.2), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, var in zip(axes.flat, chunk):
        _draw_variable(ax, data[data["perf_var"] == var], var, series, cases, colors)
    for ax in list(axes.flat)[len(chunk) :]:
        ax.set_visible(False)
    if len(series) > 1:
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(
            handles,
            labels,
            loc="upper center",
            ncol=min(3, len(series)),
            fontsize=8,
            frameon=False,
            bbox_to_anchor=(0.5, 1 - 0.45 / fig.get_figheight()),
        )
    return fig


def generic(frame: pd.DataFrame, outdir: Path, test: str, per_figure: int = 8) -> list[Figure]:
    """One horizontal bar chart per performance variable: median per case, min-max whiskers."""
    data = generic_table(frame, test)
    if data.empty:
        return []
    variables = list(dict.fromkeys(data["perf_var"]))
    series, cases = list(dict.fromkeys(data["series"])), list(dict.fromkeys(data["case"]))
    figures = []
    pages = math.ceil(len(variables) / per_figure)
    for start in range(0, len(variables), per_figure):
        fig = _draw_page(data, variables[start : start + per_figure], series, cases)
        page = f" ({start // per_figure + 1}/{pages})" if len(variables) > per_figure else ""
        fig.suptitle(f"{test}: every performance variable, median per case{page}", fontsize=11)
        name = finish(
            fig,
            data,
            "whiskers: min to max over repeated executions; '|': reference where the check sets one",
            outdir,
            f"generic-{slug(test)}-{start // per_figure + 1}.png",
            top=1 - (0.4 + 0.2 * math.ceil(len(series) / 3) * (len(series) > 1)) / fig.get_figheight(),
        )
        figures.append(
            Figure(test, outdir / name, f"{test}: every performance variable{page}", coverage_text(data) + ".")
        )
    return figures
