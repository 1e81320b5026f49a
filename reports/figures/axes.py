"""Axes' scales and labels the figures share: log ticks written as plain
numbers, log limits with room around the data, sizes as axes and tables
write them."""

from __future__ import annotations

import pandas as pd


def plain_log_ticks(axis) -> None:
    """Log-axis ticks at 1, 2, 5 times powers of ten, written as plain numbers."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def log_limits(values: pd.Series, below: float, above: float) -> tuple[float, float] | None:
    """Limits of a log axis around the positive values, None if there are none."""
    positive = values[values > 0]
    return None if positive.empty else (positive.min() * below, positive.max() * above)


def bytes_label(size: float) -> str:
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= factor:
            return f"{size / factor:g} {unit}"
    return f"{size:g} B"


def size_label(size: int) -> str:
    """A size in B, KiB or MiB, as tables show it."""
    for unit, factor in (("MiB", 2**20), ("KiB", 2**10)):
        if size >= factor:
            return f"{size // factor} {unit}"
    return f"{size} B"
