"""The report never stops on values it cannot draw: each check's last
committed run, its values replaced by NaN, infinities, zeros, negatives, or
cut to a single record, still gives a page (the tables show what the figures
leave out)."""

import numpy as np
import pandas as pd
import pytest
from committed import PERFLOGS

from reports.html import write_report
from reports.load import Loaded, load

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def last_runs() -> pd.DataFrame:
    """Each check's last committed execution: every kind of figure, few records."""
    frame = load(PERFLOGS, warn=None).frame
    return frame[frame["time"] == frame.groupby("test")["time"].transform("max")]


def _every_other(values: pd.Series, other) -> pd.Series:
    return values.where(np.arange(len(values)) % 2 == 0, other)


DEGENERATE = {
    "nan": lambda v: np.nan,
    "infinite": lambda v: np.inf,
    "zero": lambda v: 0.0,
    "negative": lambda v: -v,
    "half nan": lambda v: _every_other(v, np.nan),
    "half zero": lambda v: _every_other(v, 0.0),
}


#: Drawn by ./suite test --all only: zeros already give every figure its
#: empty series, and a record per check its single points.
LONG = {"negative", "half zero", "half nan"}


@pytest.mark.parametrize("kind", [pytest.param(k, marks=pytest.mark.long) if k in LONG else k for k in DEGENERATE])
def test_degenerate_values_give_a_page_per_check(last_runs, kind, tmp_path):
    frame = last_runs.assign(value=DEGENERATE[kind](last_runs["value"]))
    report = write_report(Loaded(frame), tmp_path, kind, histories={})
    assert set(report.pages) == set(frame["test"])
    if kind in ("nan", "infinite"):
        assert report.figures == []  # nothing finite to draw


@pytest.mark.parametrize("name", ["single", pytest.param("one per figure", marks=pytest.mark.long)])
def test_one_record_per_check_gives_a_page_per_check(last_runs, tmp_path, name):
    single = pd.concat([last_runs.groupby("test").head(1), last_runs.drop_duplicates(["test", "perf_var"])])
    frame = single.groupby("test").head(1) if name == "single" else single
    report = write_report(Loaded(frame), tmp_path, name, histories={})
    assert set(report.pages) == set(frame["test"]), name


def test_an_infinite_and_a_negative_value_are_named_not_drawn_and_the_axes_kept(last_runs, tmp_path):
    """One impossible latency among real ones: the figure keeps its axis (the real values), the page names
    the two values it left out."""
    latency = last_runs[last_runs["test"] == "copy_latency"].copy()
    rows = latency.index[latency["unit"] == "us"][:2]
    latency.loc[rows, "value"] = [np.inf, -5.0]
    report = write_report(Loaded(latency), tmp_path, "two impossible", histories={})
    page = report.pages["copy_latency"].read_text()
    assert "2 value(s) not drawn nor tabled" in page and ": inf us" in page and ": -5.0 us" in page
    assert report.figures  # the rest drawn
