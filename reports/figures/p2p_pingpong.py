"""The ping-pong's table: its figures are few, a table says them all."""

from __future__ import annotations

import pandas as pd

from experiments.p2p_pingpong import NAME
from reports.figures.common import group_keys, medians, runs_label, sets_of

#: Figures of its own: none; the generic bars would say no more than the table.
FIGURES: list = []
GENERIC = False


def table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per variant its time and bandwidth (median over executions) and the slowdown against the
    baseline of the same run."""

    rows = []
    for key, group in sets_of(frame, NAME):
        table = medians(group, ["variant"])
        order = sorted(table.index, key=lambda v: (v != "baseline", v))
        for variant in order:
            values = table.loc[variant]
            baseline = values.get("time") if variant == "baseline" else values.get("baseline_time")
            rows.append(
                {
                    "set of runs": runs_label(dict(zip(group_keys(), key))),
                    "variant": variant,
                    "time (s)": values.get("time"),
                    "bandwidth (GB/s)": values.get("bandwidth"),
                    "slowdown vs baseline (x)": values.get("slowdown"),
                    "baseline in the same job (s)": baseline,
                }
            )
    table = pd.DataFrame(rows)
    if not table.empty and table["set of runs"].nunique() == 1:
        table = table.drop(columns="set of runs")
    return table
