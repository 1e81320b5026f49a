"""The tables the figures are drawn from (reports/figures/<name>.py), on the
committed perflogs of the H100 and the H200 pair."""

import pytest
from committed import PERFLOGS

from reports.figures.copy_latency import latency_crossovers, latency_curves, latency_marks
from reports.figures.daxpy import _daxpy_table, daxpy_stats
from reports.figures.generic import generic_table
from reports.figures.mem_scan import SCAN_PLATEAU_FROM, scan_curves, scan_plateaus
from reports.figures.um_bandwidth import _um_cases, um_run_stats, um_steady_table
from reports.load import load

H100 = "NVIDIA H100 80GB HBM3"

#: Every test here reads the whole committed history (13 s to parse on two
#: cores, the first time after a clone): the quick tier leaves them out.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def frame():
    loaded = load([PERFLOGS], warn=None).frame
    return loaded[loaded["sample"].isna()]


def _h100(frame, test):
    return frame[(frame["test"] == test) & (frame["gpu_model"] == H100)]


def test_um_run_stats_give_every_run_of_every_case(frame):
    group = _um_cases(_h100(frame, "um_bandwidth"))
    group = group[group["size_class"] == "small"]
    stats = um_run_stats(group)
    assert list(stats.columns) == ["op", "allocator", "advice", "touch_on_host", "run", "median", "min", "max", "count"]
    assert sorted(stats["run"].unique()) == [1, 2, 3, 4, 5]
    pinned = stats[(stats["allocator"] == "pinned") & (stats["op"] == "read")]
    assert (pinned["min"] <= pinned["median"]).all() and (pinned["median"] <= pinned["max"]).all()
    assert pinned["median"].between(40, 50).all()  # GiB/s: the link, every run


def test_um_steady_table_has_both_figures_per_case(frame):
    table = um_steady_table(_um_cases(_h100(frame, "um_bandwidth")))
    assert {"steady_bw", "first_run_bw"} <= set(table.columns)
    assert table.index.names == ["op", "allocator", "advice", "touch_on_host"]
    # Managed memory read in place after its first run: HBM, far above the link.
    managed = table.loc[("read", "managed", "none", "notouch")]
    assert managed["steady_bw"] > 10 * managed["first_run_bw"]


def test_daxpy_stats_cover_every_case_size_and_loop_count(frame):
    stats = daxpy_stats(_daxpy_table(_h100(frame, "daxpy")))
    assert {"managed", "managed+prefetch", "explicit"} <= set(stats["case"])
    assert stats["inner"].max() == 16 and (stats["count"] >= 1).all()


def test_scan_plateaus_are_the_lowest_best_rate_from_128_bytes(frame):
    scan = frame[(frame["test"] == "mem_scan") & (frame["gpu_model"] == "NVIDIA H200")]
    curves = scan_curves(scan)
    panel = curves[curves["op"] == "read"]
    plateaus = scan_plateaus(panel, ["single", "chunked", "multiprocess"])
    for mode, value in plateaus.items():
        rows = panel[(panel["mode"] == mode) & (panel["segment"] >= SCAN_PLATEAU_FROM)]
        assert value == rows["best"].min()
    assert scan_plateaus(panel[panel["segment"] < SCAN_PLATEAU_FROM], ["single"]) == {}


def test_latency_marks_are_one_directions_crossovers_by_size(frame):
    stats = latency_curves(_h100(frame, "copy_latency"))
    found = latency_crossovers(stats)
    marks = latency_marks(found, "h2d")
    assert marks == sorted(marks)
    assert all(len(m) == 3 and m[1] != m[2] for m in marks)
    one = {"crossover_h2d_pinned_over_pageable": 64}
    assert latency_marks(one, "h2d") == [(64, "pinned", "pageable")]
    assert latency_marks(one, "d2h") == []


def test_generic_table_names_each_case_and_series(frame):
    table = generic_table(frame, "host_bandwidth")
    assert not table.empty and table["case"].str.len().gt(0).all() and table["series"].notna().all()
    assert generic_table(frame, "no_such_test").empty


# draws figures (slow, as the module)
def test_the_per_run_legend_sits_beside_the_panels_not_over_them(monkeypatch, tmp_path):
    """On the committed set of runs with the most runs: the longest legend."""
    from reports.figures import common, um_bandwidth

    kept = []
    monkeypatch.setattr(common, "_save", lambda fig, outdir, name: kept.append(fig) or name)
    frame = load([PERFLOGS / "default" / "um_bandwidth.log"], warn=None).frame
    _, most = max(common.sets_of(frame, "um_bandwidth"), key=lambda found: found[1]["time"].nunique())
    assert um_bandwidth.um_per_run(most, tmp_path) and kept
    for fig in kept:
        renderer = fig.canvas.get_renderer()
        (legend,) = fig.legends
        left = legend.get_window_extent(renderer).x0
        assert all(ax.get_window_extent(renderer).x1 <= left for ax in fig.axes if ax.get_visible())


def test_the_latency_figure_keeps_its_bands_and_notes_inside_its_axes(frame, tmp_path):
    """The latency page showed one min-max band filling a panel up to 2,000 us and crossover notes running
    past the axes: the band is the runs' middle half, the panel sized to it, each note inside its panel."""
    from matplotlib import pyplot as plt
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from reports.figures import copy_latency

    drawn, curves = [], []
    real_finish, real_curves = copy_latency.finish, copy_latency.latency_curves
    copy_latency.finish = lambda fig, *a, **k: (drawn.append(fig), real_finish(fig, *a, **k))[1]
    copy_latency.latency_curves = lambda group: curves.append(real_curves(group)) or curves[-1]
    try:
        figures = copy_latency.latency_figure(_h100(frame, "copy_latency"), tmp_path)
    finally:
        copy_latency.finish, copy_latency.latency_curves = real_finish, real_curves
    assert figures and len(drawn) == len(curves)
    # The committed runs have slow ones: a min-max band would reach past the panel the middle halves size.
    assert any(stats["max"].max() > stats["q75"].max() * 2 for stats in curves)
    for fig, stats in zip(drawn, curves):
        canvas = FigureCanvasAgg(fig)  # finish saved and closed it: drawn again as it was saved
        canvas.draw()
        renderer = canvas.get_renderer()
        for ax in fig.axes:
            box = ax.get_window_extent(renderer)
            low, high = ax.get_ylim()
            notes = [t for t in ax.texts if "faster than" in t.get_text()]
            for note in notes:
                extent = note.get_window_extent(renderer)
                assert box.x0 <= extent.x0 and extent.x1 <= box.x1 + 1, f"{note.get_text()!r} runs past its axes"
                assert box.y0 <= extent.y0 and extent.y1 <= box.y1 + 1, f"{note.get_text()!r} runs past its axes"
            for band in ax.collections:
                for path in band.get_paths():
                    ys = path.vertices[:, 1]
                    assert low <= ys.min() and ys.max() <= high, "a band runs past its panel"
                    assert stats["q25"].min() <= ys.min() and ys.max() <= stats["q75"].max(), "not the middle half"
        plt.close(fig)
