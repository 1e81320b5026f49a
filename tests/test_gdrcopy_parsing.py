"""GDRCopy's test outputs parsed as checks/gdrcopy.py does, strictly.

tests/data/gdrcopy_seed_tests.md holds the seed's "Tests" and "NUMA effects"
sections verbatim: real outputs of sanity, copybw, copylat and apiperf on a
node with eight Tesla V100-SXM2-32GB. tests/data/gdrcopy/ holds outputs of
GDRCopy 2.5 and 2.6 as their printf formats write them (its README says how
they were made). Every broken output must fail with a message that quotes
the line and gives its number in the job's output.
"""

import re
from pathlib import Path

import pytest
import reframe.utility.sanity as sn
from reframe.core.exceptions import SanityError

from checks.gdrcopy import (
    APIPERF_OPS,
    BANDWIDTH_UNIT,
    COPYLAT_ROWS,
    COPYLAT_SIZES,
    GdrCopyOutputError,
    _apiperf_complete,
    _copybw_complete,
    _copylat_complete,
    _sanity_passes,
    _version_known,
    apiperf_runs,
    apiperf_sizes,
    copybw_runs,
    copylat_runs,
    copylat_sizes,
    parse_alloc_fn,
    parse_apiperf,
    parse_copybw,
    parse_copylat,
    parse_gdrcopy_version,
    parse_sanity,
    remote_numa_node,
    repeat_outputs,
    sanity_failure,
    split_repeats,
)
from checks.suite.references import load_entries, matching_values

DATA = Path(__file__).parent / "data"
SEED_NODE = {
    "system": "local",
    "partition": "default",
    "gpu_model": "Tesla V100-SXM2-32GB",
    "host_link": "pcie gen3 x16",
}
GDR_ROWS = ["gdr_copy_to_mapping", "gdr_copy_from_mapping"]
ALL_ROWS = [*GDR_ROWS, "cuMemcpy_H2D", "cuMemcpy_D2H"]
SIZES_16M = copylat_sizes(16 * 2**20)
LIBGDRAPI = "libgdrapi: /opt/gdrcopy/lib/libgdrapi.so.2.6\n"


def seed_outputs() -> dict:
    """The seed's outputs by the command line that printed them."""
    outputs, command, lines = {}, None, []
    for line in (DATA / "gdrcopy_seed_tests.md").read_text().splitlines():
        if line.startswith("$ "):
            if command:
                outputs[command] = "\n".join(lines).rstrip("\n") + "\n"
            command, lines = line[2:].strip(), []
        elif line.startswith("```"):
            if command:
                outputs[command] = "\n".join(lines).rstrip("\n") + "\n"
            command, lines = None, []
        elif command:
            lines.append(line)
    return outputs


def fixture_text(name: str) -> str:
    return (DATA / "gdrcopy" / name).read_text()


def job_output(*runs: str, libgdrapi: str = LIBGDRAPI) -> str:
    """A job's output as the checks' scripts write it: the libgdrapi line,
    then each run after its "Repeat: k of n" line."""
    return libgdrapi + "".join(f"Repeat: {k} of {len(runs)}\n{run}" for k, run in enumerate(runs, start=1))


def line_number(text: str, line: str, occurrence: int = 1) -> int:
    """The number of the `occurrence`-th line of `text` that is `line`."""
    numbers = [n for n, found in enumerate(text.splitlines(), start=1) if found == line]
    return numbers[occurrence - 1]


def names(text: str, line: str, occurrence: int = 1) -> str:
    """The pattern of an error that names that line as the parsers do."""
    return re.escape(f"line {line_number(text, line, occurrence)}: {line!r}")


def replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


NUMA0 = "numactl -N 0 -l copybw -d 0 -s $((64 * 1024)) -o $((0 * 1024)) -c $((64 * 1024))"
NUMA1 = "numactl -N 1 -l copybw -d 0 -s $((64 * 1024)) -o $((0 * 1024)) -c $((64 * 1024))"


@pytest.fixture(scope="module")
def seed():
    return seed_outputs()


def test_the_seed_has_every_test(seed):
    assert list(seed) == ["sanity", "copybw", "copylat", "apiperf -s 8", NUMA0, NUMA1]


# ------------------------------------------------------------------- sanity --


def test_seed_sanity_passes(seed):
    summary = parse_sanity(seed["sanity"])
    assert summary == {"checks": 27, "failures": 0, "errors": 0}
    assert sanity_failure(summary) is None


@pytest.mark.parametrize(
    "line, why",
    [
        ("96%: Checks: 27, Failures: 1, Errors: 0", "1 failures and 0 errors in 27 checks"),
        ("96%: Checks: 27, Failures: 0, Errors: 1", "0 failures and 1 errors in 27 checks"),
        ("0%: Checks: 0, Failures: 0, Errors: 0", "libcheck ran no test"),
        ("Running suite(s): Sanity", "no summary line"),
        # GDRCopy 2.4 and later: its own test suite's summary.
        ("Total: 30, Passed: 28, Failed: 2, Waived: 0", "2 of 30 tests failed"),
        ("Total: 0, Passed: 0, Failed: 0, Waived: 0", "no test passed"),
    ],
)
def test_sanity_fails_unless_every_check_passes(line, why):
    assert why in sanity_failure(parse_sanity(f"Running suite(s): Sanity\n{line}\n"))


def test_newer_sanity_summary_passes_with_waived_tests():
    summary = parse_sanity("Total: 30, Passed: 29, Failed: 0, Waived: 1\n\nList of waived tests:\n    basic_vmm\n")
    assert summary == {"total": 30, "passed": 29, "failed": 0, "waived": 1}
    assert sanity_failure(summary) is None


def test_the_sanity_check_on_the_seed_output(seed, tmp_path):
    out = tmp_path / "rfm_job.out"
    out.write_text(job_output(seed["sanity"]))
    assert sn.evaluate(_sanity_passes(str(out)))
    assert sn.evaluate(_version_known(str(out)))
    out.write_text(job_output(seed["sanity"].replace("Failures: 0", "Failures: 3")))
    with pytest.raises(SanityError, match="3 failures"):
        sn.evaluate(_sanity_passes(str(out)))


# ------------------------------------------------------------------ version --


@pytest.mark.parametrize(
    "path, version",
    [
        ("/opt/gdrcopy/lib/libgdrapi.so.2.6", "2.6"),
        ("/usr/lib/x86_64-linux-gnu/libgdrapi.so.2.5", "2.5"),
        ("/spack/opt/gdrcopy-2.4.4-abc/lib64/libgdrapi.so.2.4", "2.4"),
    ],
)
def test_gdrcopys_version_is_its_librarys(path, version):
    assert parse_gdrcopy_version(job_output("closing gdrdrv\n", libgdrapi=f"libgdrapi: {path}\n")) == version


def test_an_unknown_version_fails_naming_the_line(tmp_path):
    # ldd found no libgdrapi: the job's line is empty.
    text = job_output("closing gdrdrv\n", libgdrapi="libgdrapi: \n")
    with pytest.raises(GdrCopyOutputError, match=r"line 1: 'libgdrapi: ': no GDRCopy version"):
        parse_gdrcopy_version(text)
    out = tmp_path / "rfm_job.out"
    out.write_text(job_output("closing gdrdrv\n", libgdrapi=""))
    with pytest.raises(SanityError, match=r"no 'libgdrapi: ' line before the test's output"):
        sn.evaluate(_version_known(str(out)))


# ------------------------------------------------------------------- copybw --


def test_seed_copybw_default_run(seed):
    assert parse_copybw(seed["copybw"]) == [
        {"direction": "write", "size": 131072, "offset": 0, "iters": 10000, "bw": 9638.54},
        {"direction": "read", "size": 131072, "offset": 0, "iters": 100, "bw": 530.135},
    ]


@pytest.mark.parametrize("command, write, read", [(NUMA0, 9768.3, 548.423), (NUMA1, 9224.36, 521.262)])
def test_seed_copybw_numa_runs(seed, command, write, read):
    assert parse_copybw(seed[command]) == [
        {"direction": "write", "size": 65536, "offset": 0, "iters": 1000, "bw": write},
        {"direction": "read", "size": 65536, "offset": 0, "iters": 1000, "bw": read},
    ]
    assert parse_alloc_fn(seed[command]) == "cuMemAlloc"


@pytest.mark.parametrize(
    "name, size, write, read",
    [("copybw_2.5.txt", 65536, 12093.4, 1834.27), ("copybw_2.6.txt", 131072, 12387.1, 1851.06)],
)
def test_copybw_of_gdrcopy_2_5_and_2_6(name, size, write, read):
    text = fixture_text(name)
    assert copybw_runs(job_output(text, text), 2, size, 0, "cuMemAlloc") == [{"write": write, "read": read}] * 2


def test_copybw_bandwidths_are_mib_per_second():
    # copybw.cpp: woMBps = Bps / 1024.0 / 1024.0, printed as "MB/s".
    assert BANDWIDTH_UNIT == "MiB/s"


def test_a_nan_bandwidth_fails_naming_the_line():
    text = job_output(fixture_text("copybw_2.5.txt"), fixture_text("copybw_nan.txt"))
    with pytest.raises(
        GdrCopyOutputError,
        match=rf"copybw run 2: {names(text, 'read BW: -nanMB/s')}: read bandwidth '-nan' is not a finite number",
    ):
        copybw_runs(text, 2, 65536, 0, "cuMemAlloc")


@pytest.mark.parametrize(
    "line, why",
    [
        ("write BW: 11.81GB/s", "unit 'GB/s', not copybw's 'MB/s'"),
        ("write BW: 12093.4 MB/s", "unit ' MB/s', not copybw's 'MB/s'"),
        ("write BW: 12093.4MiB/s", "unit 'MiB/s', not copybw's 'MB/s'"),
        ("write BW: infMB/s", "write bandwidth 'inf' is not a finite number"),
        ("write BW: 0MB/s", "write bandwidth 0 MB/s: nothing was copied"),
        ("write BW: fastMB/s", "not copybw's '<write|read> BW: <number>MB/s'"),
    ],
)
def test_another_unit_or_figure_fails_naming_the_line(line, why):
    text = job_output(replace_once(fixture_text("copybw_2.5.txt"), "write BW: 12093.4MB/s", line))
    with pytest.raises(GdrCopyOutputError, match=rf"copybw run 1: {names(text, line)}: {re.escape(why)}"):
        copybw_runs(text, 1, 65536, 0, "cuMemAlloc")


def test_copybw_lines_must_pair_up_and_match_the_case():
    text = fixture_text("copybw_2.5.txt")
    broken = replace_once(text, "reading test, size=65536 offset=0 num_iters=100\n", "")
    with pytest.raises(GdrCopyOutputError, match=rf"{names(broken, 'read BW: 1834.27MB/s')}: no 'reading test, "):
        parse_copybw(broken)
    odd = replace_once(text, "writing test, size=65536 offset=0 num_iters=10000", "writing test, size=65536")
    with pytest.raises(GdrCopyOutputError, match=rf"{names(odd, 'writing test, size=65536')}: not copybw's"):
        parse_copybw(odd)
    with pytest.raises(
        GdrCopyOutputError, match=r"copybw run 1 \(from line 3\): measured .* not a write and a read of 131072 B"
    ):
        copybw_runs(job_output(text), 1, 131072, 0, "cuMemAlloc")
    with pytest.raises(GdrCopyOutputError, match=r"copybw: 1 runs in the output, 5 asked for"):
        copybw_runs(job_output(text), 5, 65536, 0, "cuMemAlloc")


def test_copybw_checks_the_memory_it_mapped(tmp_path):
    text = replace_once(fixture_text("copybw_2.6.txt"), "gpu alloc fn: cuMemAlloc", "gpu alloc fn: cuMemCreate")
    with pytest.raises(GdrCopyOutputError, match=r"copybw run 1: memory from cuMemCreate, not cuMemAlloc"):
        copybw_runs(job_output(text), 1, 131072, 0, "cuMemAlloc")
    # GDRCopy before 2.3 names no allocation function (and has no -a).
    old = replace_once(fixture_text("copybw_2.6.txt"), "gpu alloc fn: cuMemAlloc\n", "")
    with pytest.raises(GdrCopyOutputError, match=r"copybw run 1: 0 'gpu alloc fn: ' lines in the run from line 3"):
        copybw_runs(job_output(old), 1, 131072, 0, "cuMemAlloc")


def test_the_copybw_check_on_the_seeds_numa_runs(seed, tmp_path):
    out = tmp_path / "rfm_job.out"
    out.write_text(job_output(seed[NUMA0], seed[NUMA1]))
    assert sn.evaluate(_copybw_complete(str(out), 2, 65536, 0, "cuMemAlloc"))
    assert copybw_runs(out.read_text(), 2, 65536, 0, "cuMemAlloc") == [
        {"write": 9768.3, "read": 548.423},
        {"write": 9224.36, "read": 521.262},
    ]
    out.write_text(job_output(seed[NUMA0], seed[NUMA1].replace("read BW: 521.262MB/s", "read BW: -nanMB/s")))
    with pytest.raises(SanityError, match=r"copybw run 2: line \d+: 'read BW: -nanMB/s'"):
        sn.evaluate(_copybw_complete(str(out), 2, 65536, 0, "cuMemAlloc"))


# ------------------------------------------------------------------ copylat --


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
    assert sn.evaluate(_copylat_complete(str(out), 3, ALL_ROWS, SIZES_16M, "cuMemAlloc"))
    runs = copylat_runs(out.read_text(), 3, ALL_ROWS, SIZES_16M, "cuMemAlloc")
    assert [r.statistic for r in runs] == [statistic] * 3


def test_an_unknown_layout_fails_naming_the_header():
    text = fixture_text("copylat_unknown_layout.txt")
    header = "Test \t\t\t Size(B) \t Mean Time(us) \t P99 Time(us)"
    with pytest.raises(GdrCopyOutputError, match=rf"{names(text, header)}: unknown copylat layout"):
        parse_copylat(text)


@pytest.mark.parametrize(
    "row, broken, why",
    [
        # 2.6's median of a size it could not time.
        ("gdr_copy_to_mapping \t     4096 \t      0.3957 \t      0.3737",
         "gdr_copy_to_mapping \t     4096 \t        -nan \t      0.3737", "median time '-nan' is not a finite number"),
        ("gdr_copy_to_mapping \t     4096 \t      0.3957 \t      0.3737",
         "gdr_copy_to_mapping \t     4096 \t      0.3957", "not a copylat row '<test> <size> <median> <min>'"),
        ("cuMemcpy_D2H \t     4096 \t      2.7719 \t      2.4880",
         "cuMemcpy_D2H \t     4096 \t      2.7719 \t      2.4880 \t 3.1", "not a copylat row"),
        ("cuMemcpy_D2H \t     4096 \t      2.7719 \t      2.4880",
         "cuMemcpy_D2H \t     4 KiB \t      2.7719 \t      2.4880", "not a copylat row"),
        ("gdr_copy_from_mapping \t     4096 \t      2.7006 \t      2.6067",
         "gdr_copy_from_mapping_v2 \t     4096 \t      2.7006 \t      2.6067", "unknown copylat test"),
        ("gdr_copy_from_mapping \t     4096 \t      2.7006 \t      2.6067",
         "gdr_copy_to_mapping \t     4096 \t      2.7006 \t      2.6067",
         "a gdr_copy_to_mapping row in the gdr_copy_from_mapping table"),
        ("gdr_copy_from_mapping \t     4096 \t      2.7006 \t      2.6067",
         "gdr_copy_from_mapping \t     2048 \t      2.7006 \t      2.6067", "size 2048 a second time"),
        ("gdr_copy_from_mapping \t     4096 \t      2.7006 \t      2.6067",
         "Assertion `gdr_copy_from_mapping' failed", "not a copylat row"),
    ],
)  # fmt: skip
def test_a_broken_row_fails_naming_the_line(row, broken, why, tmp_path):
    text = fixture_text("copylat_2.6.txt")
    job = job_output(text, replace_once(text, row, broken))
    with pytest.raises(GdrCopyOutputError, match=rf"copylat run 2: {names(job, broken)}: {re.escape(why)}"):
        copylat_runs(job, 2, ALL_ROWS, SIZES_16M, "cuMemAlloc")
    out = tmp_path / "rfm_job.out"
    out.write_text(job)
    with pytest.raises(SanityError, match=rf"copylat run 2: {names(job, broken)}"):
        sn.evaluate(_copylat_complete(str(out), 2, ALL_ROWS, SIZES_16M, "cuMemAlloc"))


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
    assert sn.evaluate(_copylat_complete(str(out), 3, GDR_ROWS, SIZES_16M, "cuMemAlloc"))
    assert split_repeats(out.read_text())[2] == seed["copylat"]
    # Each run's first line: after the libgdrapi line and its own "Repeat" line.
    lines = len(seed["copylat"].splitlines()) + 1
    assert [first for first, _ in repeat_outputs(out.read_text())] == [3, 3 + lines, 3 + 2 * lines]
    # The seed ran copylat without -c: no cuMemcpy tables.
    with pytest.raises(SanityError, match=r"copylat run 1 \(from line 3\): tables \[.*\], not \[.*'cuMemcpy_H2D'\]"):
        sn.evaluate(_copylat_complete(str(out), 3, [*GDR_ROWS, "cuMemcpy_H2D"], SIZES_16M, "cuMemAlloc"))
    with pytest.raises(SanityError, match=r"copylat: 3 runs in the output, 5 asked for"):
        sn.evaluate(_copylat_complete(str(out), 5, GDR_ROWS, SIZES_16M, "cuMemAlloc"))


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
        ("apiperf_2.5.txt", [315.533384, 5.754890, 0.224646, 4.726621, 190.372694],
         [640.456515, 6.150222, 0.204003, 10.836053, 313.913788]),
        ("apiperf_2.6.txt", [339.688139, 5.501528, 0.214450, 4.631411, 187.538140],
         [645.366973, 5.753753, 0.195477, 10.117837, 311.899393]),
    ],
)  # fmt: skip
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
        ("131072\t364.018130\t-nan\t0.230119\t5.496810\t191.483528", "map time '-nan' is not a finite number"),
        ("131072\t364.018130\t6.590595\t0.230119\t5.496810", "not apiperf's row '<size> <pin> <map>"),
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
