"""GDRCopy's copylat and apiperf outputs parsed strictly and their checks, the
references from the seed's figures, and where the remote placement runs."""

import re

import pytest
import reframe.utility.sanity as sn
from gdrcopy_outputs import (
    ALL_ROWS,
    GDR_ROWS,
    NUMA0,
    NUMA1,
    SEED_NODE,
    SIZES_16M,
    fixture_text,
    job_output,
    names,
    replace_once,
)
from reframe.core.exceptions import SanityError

from checks.gdrcopy import (
    _apiperf_complete,
    _copylat_complete,
)
from checks.suite.gdrcopy_runs import (
    apiperf_runs,
    copylat_runs,
)
from checks.suite.placement import (
    remote_numa_node,
)
from experiments.gdrcopy import (
    APIPERF_OPS,
    COPYLAT_ROWS,
    COPYLAT_SIZES,
    GdrCopyOutputError,
    apiperf_curve_figures,
    apiperf_sizes,
    copylat_curve_figures,
    copylat_sizes,
    parse_apiperf,
    parse_copybw,
    parse_copylat,
    repeat_outputs,
    split_repeats,
)
from experiments.references import load_entries, matching_values


def test_seed_copylat_tables(seed):
    result = parse_copylat(seed["copylat"])
    assert result.statistic == "average"  # the seed's GDRCopy prints Avg.Time(us)
    assert set(result.tables) == set(GDR_ROWS)
    to, frm = result.curve("gdr_copy_to_mapping"), result.curve("gdr_copy_from_mapping")
    assert sorted(to) == sorted(frm) == SIZES_16M
    assert (to[1], to[8], to[4096], to[65536], to[1048576], to[16777216]) == (
        0.0889,
        0.0884,
        0.4366,
        6.4906,
        103.8028,
        1661.3285,
    )
    assert (frm[1], frm[8], frm[16], frm[4096], frm[65536], frm[1048576], frm[16777216]) == (
        0.9069,
        1.7164,
        0.8601,
        7.9783,
        114.1008,
        1970.7057,
        36758.8342,
    )


def test_copylat_of_gdrcopy_2_5_averages():
    result = parse_copylat(fixture_text("copylat_2.5.txt"))
    assert result.statistic == "average"
    assert list(result.tables) == ["cuMemcpy_H2D", "cuMemcpy_D2H", "gdr_copy_to_mapping", "gdr_copy_from_mapping"]
    assert all(sorted(table) == SIZES_16M for table in result.tables.values())
    assert result.curve("cuMemcpy_H2D")[8] == 2.2581
    assert result.curve("cuMemcpy_D2H")[4096] == 2.7092
    assert result.curve("gdr_copy_to_mapping")[8] == 0.0616
    assert result.curve("gdr_copy_from_mapping")[4096] == 2.7225


def test_copylat_of_gdrcopy_2_6_medians_and_minima():
    result = parse_copylat(fixture_text("copylat_2.6.txt"))
    assert result.statistic == "median"
    assert all(sorted(table) == SIZES_16M for table in result.tables.values())
    assert result.curve("cuMemcpy_H2D")[8] == 2.2723
    assert result.curve("cuMemcpy_H2D", "min")[8] == 2.1719
    assert result.tables["gdr_copy_to_mapping"][4096] == {"median": 0.3957, "min": 0.3737}
    assert result.curve("gdr_copy_from_mapping")[8] == 0.5503
    assert {COPYLAT_ROWS[row] for row in result.tables} == {
        ("cumemcpy", "h2d"),
        ("cumemcpy", "d2h"),
        ("gdrcopy", "h2d"),
        ("gdrcopy", "d2h"),
    }


@pytest.mark.parametrize("name, statistic", [("copylat_2.5.txt", "average"), ("copylat_2.6.txt", "median")])
def test_the_copylat_check_on_gdrcopy_2_5_and_2_6(name, statistic, tmp_path):
    text = fixture_text(name)
    out = tmp_path / "rfm_job.out"
    out.write_text(job_output(text, text, text))
    assert sn.evaluate(_copylat_complete(str(out), 3, ALL_ROWS, SIZES_16M, "cuMemAlloc", statistic))
    runs = copylat_runs(out.read_text(), 3, ALL_ROWS, SIZES_16M, "cuMemAlloc")
    assert [r.statistic for r in runs] == [statistic] * 3
    # Tables of another statistic than the installed version prints fail.
    other = {"average": "median", "median": "average"}[statistic]
    with pytest.raises(SanityError, match=f"copylat printed {statistic}s; its GDRCopy's version prints {other}s"):
        sn.evaluate(_copylat_complete(str(out), 3, ALL_ROWS, SIZES_16M, "cuMemAlloc", other))


def test_an_unknown_layout_fails_naming_the_header():
    text = fixture_text("copylat_unknown_layout.txt")
    header = "Test \t\t\t Size(B) \t Mean Time(us) \t P99 Time(us)"
    with pytest.raises(GdrCopyOutputError, match=rf"{names(text, header)}: unknown copylat layout"):
        parse_copylat(text)


@pytest.mark.parametrize(
    "row, broken, why",
    [
        # 2.6's median of a size it could not time.
        (
            "gdr_copy_to_mapping \t     4096 \t      0.3957 \t      0.3737",
            "gdr_copy_to_mapping \t     4096 \t        -nan \t      0.3737",
            "median time '-nan' is not a finite",
        ),
        (
            "gdr_copy_to_mapping \t     4096 \t      0.3957 \t      0.3737",
            "gdr_copy_to_mapping \t     4096 \t     -0.3957 \t      0.3737",
            "median time '-0.3957' is not a finite",
        ),
        (
            "gdr_copy_to_mapping \t     4096 \t      0.3957 \t      0.3737",
            "gdr_copy_to_mapping \t     4096 \t      0.3957",
            "not a copylat row '<test> <size> <median> <min>'",
        ),
        (
            "cuMemcpy_D2H \t     4096 \t      2.7719 \t      2.4880",
            "cuMemcpy_D2H \t     4096 \t      2.7719 \t      2.4880 \t 3.1",
            "not a copylat row",
        ),
        (
            "cuMemcpy_D2H \t     4096 \t      2.7719 \t      2.4880",
            "cuMemcpy_D2H \t     4 KiB \t      2.7719 \t      2.4880",
            "not a copylat row",
        ),
        (
            "gdr_copy_from_mapping \t     4096 \t      2.7006 \t      2.6067",
            "gdr_copy_from_mapping_v2 \t     4096 \t      2.7006 \t      2.6067",
            "unknown copylat test",
        ),
        (
            "gdr_copy_from_mapping \t     4096 \t      2.7006 \t      2.6067",
            "gdr_copy_to_mapping \t     4096 \t      2.7006 \t      2.6067",
            "a gdr_copy_to_mapping row in the gdr_copy_from_mapping table",
        ),
        (
            "gdr_copy_from_mapping \t     4096 \t      2.7006 \t      2.6067",
            "gdr_copy_from_mapping \t     2048 \t      2.7006 \t      2.6067",
            "size 2048 a second time",
        ),
        (
            "gdr_copy_from_mapping \t     4096 \t      2.7006 \t      2.6067",
            "Assertion `gdr_copy_from_mapping' failed",
            "not a copylat row",
        ),
    ],
)
def test_a_broken_row_fails_naming_the_line(row, broken, why, tmp_path):
    text = fixture_text("copylat_2.6.txt")
    job = job_output(text, replace_once(text, row, broken))
    with pytest.raises(GdrCopyOutputError, match=rf"copylat run 2: {names(job, broken)}: {re.escape(why)}"):
        copylat_runs(job, 2, ALL_ROWS, SIZES_16M, "cuMemAlloc")
    out = tmp_path / "rfm_job.out"
    out.write_text(job)
    with pytest.raises(SanityError, match=rf"copylat run 2: {names(job, broken)}"):
        sn.evaluate(_copylat_complete(str(out), 2, ALL_ROWS, SIZES_16M, "cuMemAlloc", "unknown"))


def test_a_row_outside_the_tables_fails_naming_it():
    # A header GDRCopy renamed would leave its rows outside any table.
    text = fixture_text("copylat_2.5.txt")
    header = "Test \t\t\t Size(B) \t Avg.Time(us)\ngdr_copy_from"
    broken = replace_once(text, header, "Name \t Bytes \t us\ngdr_copy_from")
    first = re.search(r"^gdr_copy_from_mapping \t        1 \t .*$", broken, re.M)[0]
    with pytest.raises(GdrCopyOutputError, match=rf"{names(broken, first)}: a copylat row with no 'Test  Size\(B\)"):
        parse_copylat(broken)


def test_every_table_needs_rows_one_layout_and_each_size():
    text = fixture_text("copylat_2.6.txt")
    header = "Test \t\t Size(B) \t Median Time(us) \t Min. Time(us)"
    empty = re.sub(r"\ncuMemcpy_D2H \t.*", "", text)
    with pytest.raises(GdrCopyOutputError, match=rf"{names(empty, header, 2)}: a copylat table with no row"):
        parse_copylat(empty)
    # 2.5's cuMemcpy tables, then 2.6's gdr_copy tables.
    older = fixture_text("copylat_2.5.txt")
    mixed = older[: older.index("map_d_ptr")] + text[text.index("map_d_ptr") :]
    median = "Test \t\t\t Size(B) \t Median Time(us) \t Min. Time(us)"
    with pytest.raises(GdrCopyOutputError, match=rf"{names(mixed, median)}: a layout other than the first table's"):
        parse_copylat(mixed)
    short = "".join(line for line in text.splitlines(keepends=True) if "16777216 \t" not in line)
    with pytest.raises(
        GdrCopyOutputError,
        match=r"copylat run 1 \(from line 3\): the cuMemcpy_H2D table lacks sizes \[16777216\] and has sizes \[\]",
    ):
        copylat_runs(job_output(short), 1, ALL_ROWS, SIZES_16M, "cuMemAlloc")


def test_the_copylat_check_on_the_seed_output(seed, tmp_path):
    out = tmp_path / "rfm_job.out"
    out.write_text(job_output(seed["copylat"], seed["copylat"], seed["copylat"]))
    assert sn.evaluate(_copylat_complete(str(out), 3, GDR_ROWS, SIZES_16M, "cuMemAlloc", "unknown"))
    assert split_repeats(out.read_text())[2] == seed["copylat"]
    # Each run's first line: after the libgdrapi line and its own "Repeat" line.
    lines = len(seed["copylat"].splitlines()) + 1
    assert [first for first, _ in repeat_outputs(out.read_text())] == [3, 3 + lines, 3 + 2 * lines]
    # The seed ran copylat without -c: no cuMemcpy tables.
    with pytest.raises(SanityError, match=r"copylat run 1 \(from line 3\): tables \[.*\], not \[.*'cuMemcpy_H2D'\]"):
        sn.evaluate(_copylat_complete(str(out), 3, [*GDR_ROWS, "cuMemcpy_H2D"], SIZES_16M, "cuMemAlloc", "unknown"))
    with pytest.raises(SanityError, match=r"copylat: 3 runs in the output, 5 asked for"):
        sn.evaluate(_copylat_complete(str(out), 5, GDR_ROWS, SIZES_16M, "cuMemAlloc", "unknown"))


def test_copylat_sizes_are_gdrcopys():
    assert copylat_sizes(16 * 2**20) == [2**k for k in range(25)]
    assert copylat_sizes(8) == [2**k for k in range(17)]  # one GPU page
    assert set(COPYLAT_SIZES) <= set(copylat_sizes(16 * 2**20))


# ------------------------------------------------------------------ apiperf --


def test_seed_apiperf(seed):
    # The seed's README wraps the header before unpin.Time(us).
    assert parse_apiperf(seed["apiperf -s 8"]) == {
        65536: {"pin": 1346.034060, "map": 3.603800, "get_info": 0.340270, "unmap": 4.700930, "unpin": 676.612800}
    }


@pytest.mark.parametrize(
    "name, first, last",
    [
        (
            "apiperf_2.5.txt",
            [315.533384, 5.754890, 0.224646, 4.726621, 190.372694],
            [640.456515, 6.150222, 0.204003, 10.836053, 313.913788],
        ),
        (
            "apiperf_2.6.txt",
            [339.688139, 5.501528, 0.214450, 4.631411, 187.538140],
            [645.366973, 5.753753, 0.195477, 10.117837, 311.899393],
        ),
    ],
)
def test_apiperf_of_gdrcopy_2_5_and_2_6(name, first, last, tmp_path):
    text = fixture_text(name)
    rows = parse_apiperf(text)
    assert sorted(rows) == apiperf_sizes(2**20)
    assert rows[65536] == dict(zip(APIPERF_OPS, first))
    assert rows[1048576] == dict(zip(APIPERF_OPS, last))
    out = tmp_path / "rfm_job.out"
    out.write_text(job_output(text, text))
    assert sn.evaluate(_apiperf_complete(str(out), 2, apiperf_sizes(2**20)))


def test_apiperf_errors_name_the_line():
    text = fixture_text("apiperf_2.6.txt")
    row = "131072\t364.018130\t6.590595\t0.230119\t5.496810\t191.483528"
    for broken, why in [
        ("131072\t364.018130\t-nan\t0.230119\t5.496810\t191.483528", "map time '-nan' is not a finite unsigned number"),
        ("131072\t364.018130\t6.590595\t0.230119\t5.496810", "not apiperf's row '<size> <pin> <map>"),
        ("131072\t-364.018130\t6.590595\t0.230119\t5.496810\t191.483528", "pin time '-364.018130' is not a finite"),
    ]:
        job = job_output(text, replace_once(text, row, broken))
        with pytest.raises(GdrCopyOutputError, match=rf"apiperf run 2: {names(job, broken)}: {re.escape(why)}"):
            apiperf_runs(job, 2, apiperf_sizes(2**20))
    header = "Size(B)\tpin.Time(us)\tmap.Time(us)\tget_info.Time(us)\tunmap.Time(us)\tunpin.Time(us)"
    other = text.replace(header, header + "\tmin.Time(us)")
    with pytest.raises(GdrCopyOutputError, match=rf"{names(other, header + chr(9) + 'min.Time(us)')}: unknown apiperf"):
        parse_apiperf(other)
    headless = replace_once(text, f"{header}\n{row}", row)
    with pytest.raises(GdrCopyOutputError, match=rf"{names(headless, row)}: an apiperf row with no 'Size\(B\) "):
        parse_apiperf(headless)


def test_apiperf_rows_name_the_sizes_missing(seed):
    # Today's "sanity error: 0 != 5" becomes the sizes printed and expected.
    with pytest.raises(
        GdrCopyOutputError,
        match=r"apiperf run 1 \(from line 3\): rows for sizes \[65536\], not \[65536, 131072, 262144, 524288, "
        r"1048576\] \(64 KiB doubled to 1048576 B\)",
    ):
        apiperf_runs(job_output(seed["apiperf -s 8"]), 1, apiperf_sizes(2**20))


def test_apiperf_sizes_per_maximum_size():
    assert apiperf_sizes(8) == [65536]  # the seed's -s 8: one GPU page
    assert apiperf_sizes(65536) == [65536]
    assert apiperf_sizes(2**20) == [65536 << k for k in range(5)]  # 64 KiB .. 1 MiB
    assert apiperf_sizes(2**20 + 1) == [65536 << k for k in range(5)]


# -------------------------------------------------------------- references --


def test_bandwidth_references_are_the_seed_figures(seed):
    entries = load_entries("gdrcopy_copybw")
    for command, size, placement in [("copybw", 131072, "local"), (NUMA0, 65536, "local"), (NUMA1, 65536, "remote")]:
        params = {"copy_size": str(size), "memory": "device", "placement": placement}
        values = matching_values(entries, SEED_NODE, params)
        write, read = parse_copybw(seed[command])
        assert values["write_bw"][0] == write["bw"]
        assert values["read_bw"][0] == read["bw"]
    # No other GPU takes them.
    other = {**SEED_NODE, "gpu_model": "Tesla V100-SXM2-16GB"}
    assert matching_values(entries, other, {"copy_size": "65536", "memory": "device", "placement": "local"}) == {}


def test_latency_and_apiperf_references_are_the_seed_figures(seed):
    result = parse_copylat(seed["copylat"])
    case = {"memory": "device", "placement": "remote", "statistic": result.statistic}
    values = matching_values(load_entries("gdrcopy_copylat"), SEED_NODE, case)
    # The seed's averages never judge GDRCopy 2.6's medians.
    assert not matching_values(load_entries("gdrcopy_copylat"), SEED_NODE, {**case, "statistic": "median"})
    for size in COPYLAT_SIZES:
        assert values[f"lat_us_gdrcopy_h2d_{size}"][0] == result.curve("gdr_copy_to_mapping")[size]
        assert values[f"lat_us_gdrcopy_d2h_{size}"][0] == result.curve("gdr_copy_from_mapping")[size]
    assert values["lat_us_gdrcopy_h2d_8"][0] == pytest.approx(0.09, abs=0.002)  # the issue's 0.09 us
    api = matching_values(load_entries("gdrcopy_apiperf"), SEED_NODE, {"placement": "local"})
    for op, us in parse_apiperf(seed["apiperf -s 8"])[65536].items():
        assert api[f"{op}_us_65536"][0] == pytest.approx(us)


# -------------------------------------------------------------- placement --


def _node(numa_nodes, sockets):
    return {"numa_nodes": numa_nodes, "cpu": {"sockets": sockets}}


def test_remote_numa_node_is_on_the_other_socket():
    assert remote_numa_node(_node([0, 1], 2), 0) == 1  # the seed's node: GPU 0 on node 0, -N 1
    assert remote_numa_node(_node([0, 8], 2), 8) == 0  # summit
    assert remote_numa_node(_node(list(range(8)), 2), 3) == 4  # dgx-a100, NPS4: GPU 0 on node 3
    assert remote_numa_node(_node(list(range(8)), 2), 5) == 0
    assert remote_numa_node(_node([0, 1], 1), 0) == 1  # one socket, two nodes (SNC)


def test_copylat_and_apiperf_curves_give_every_row_and_size_median_over_the_repeats(tmp_path):
    """The figures the perflog had for every size (checks/suite/curves.py),
    from the curve records: the median over the repeats."""
    from statistics import median

    from checks.suite.gdrcopy_runs import apiperf_curve, copylat_curve

    out = tmp_path / "rfm_job.out"
    texts = [fixture_text("copylat_2.6.txt")] * 3
    out.write_text(job_output(*texts))
    runs = copylat_runs(out.read_text(), 3, ALL_ROWS, SIZES_16M, "cuMemAlloc")
    figures = copylat_curve_figures(sn.evaluate(copylat_curve(str(out), 3, ALL_ROWS, SIZES_16M, "cuMemAlloc")), {})
    assert len(figures) == len(ALL_ROWS) * len(SIZES_16M)
    for row in ALL_ROWS:
        method, direction = COPYLAT_ROWS[row]
        for size in SIZES_16M:
            assert figures[f"lat_us_{method}_{direction}_{size}"] == (median(r.curve(row)[size] for r in runs), "us")
    out.write_text(job_output(fixture_text("apiperf_2.5.txt"), fixture_text("apiperf_2.6.txt")))
    sizes = apiperf_sizes(2**20)
    runs = apiperf_runs(out.read_text(), 2, sizes)
    figures = apiperf_curve_figures(sn.evaluate(apiperf_curve(str(out), 2, sizes)), {})
    assert figures == {
        f"{op}_us_{size}": (median(r[size][op] for r in runs), "us") for size in sizes for op in APIPERF_OPS
    }


def test_apiperf_rows_under_one_header_are_refused_not_read_as_the_first_alone():
    # One header, its rows indented: each row but the first has no header of its own.
    text = fixture_text("apiperf_2.6.txt")
    header = "Size(B)\tpin.Time(us)\tmap.Time(us)\tget_info.Time(us)\tunmap.Time(us)\tunpin.Time(us)"
    rows = [line for line in text.splitlines() if line[:1].isdigit()]
    table = "\n".join([header, *(f"    {row}" for row in rows)]) + "\n"
    with pytest.raises(
        GdrCopyOutputError, match=r"line 3: '    131072.*': an apiperf row with no 'Size\(B\) \.\.\.' header"
    ):
        parse_apiperf(table)
