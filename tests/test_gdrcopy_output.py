"""GDRCopy's sanity, version and copybw outputs parsed strictly, and their checks
on the seed's and GDRCopy 2.5's and 2.6's outputs; every broken output fails
quoting the line and its number in the job's output."""

import re

import pytest
import reframe.utility.sanity as sn
from gdrcopy_outputs import (
    NUMA0,
    NUMA1,
    fixture_text,
    job_output,
    names,
    replace_once,
)
from reframe.core.exceptions import SanityError

from checks.gdrcopy import (
    _copybw_complete,
    _sanity_passes,
)
from checks.suite.gdrcopy_runs import (
    copybw_runs,
    copylat_statistic,
    installed_version,
    version_loaded,
)
from experiments.gdrcopy import (
    BANDWIDTH_UNIT,
    GdrCopyOutputError,
    parse_alloc_fn,
    parse_copybw,
    parse_gdrcopy_version,
    parse_sanity,
    sanity_failure,
)


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
    assert sn.evaluate(version_loaded(str(out), "unknown"))
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
        sn.evaluate(version_loaded(str(out), "unknown"))


def test_the_version_is_the_installed_librarys_and_the_test_must_load_it(tmp_path):
    """Known before the run from the installation (and with it copylat's
    statistic); a test that loaded another libgdrapi fails."""
    (tmp_path / "lib64").mkdir()
    (tmp_path / "lib64" / "libgdrapi.so.2.4.4").write_text("")
    (tmp_path / "lib64" / "libgdrapi.so.2.6.0").write_text("")  # a leftover the loader does not take
    (tmp_path / "lib64" / "libgdrapi.so.2").symlink_to("libgdrapi.so.2.4.4")
    assert installed_version(str(tmp_path)) == "2.4.4"
    multiarch = tmp_path / "usr" / "lib" / "x86_64-linux-gnu"
    multiarch.mkdir(parents=True)
    (multiarch / "libgdrapi.so.2.5").write_text("")
    (multiarch / "libgdrapi.so.2").symlink_to("libgdrapi.so.2.5")
    assert installed_version(str(tmp_path / "usr")) == "2.5"
    assert installed_version(str(tmp_path / "none")) == installed_version(None) == "unknown"
    assert [copylat_statistic(v) for v in ("2.4.4", "2.5", "2.6", "3.0", "unknown")] == [
        "average",
        "average",
        "median",
        "median",
        "unknown",
    ]
    out = tmp_path / "rfm_job.out"
    out.write_text(job_output("closing gdrdrv\n", libgdrapi=f"libgdrapi: {tmp_path}/lib64/libgdrapi.so.2.4.4\n"))
    assert sn.evaluate(version_loaded(str(out), "2.4.4"))
    with pytest.raises(SanityError, match="loaded libgdrapi 2.4.4, the installation under its prefix is 2.6"):
        sn.evaluate(version_loaded(str(out), "2.6"))


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
        match=rf"copybw run 2: {names(text, 'read BW: -nanMB/s')}: read bandwidth '-nan' is not a finite unsigned",
    ):
        copybw_runs(text, 2, 65536, 0, "cuMemAlloc")


@pytest.mark.parametrize(
    "line, why",
    [
        ("write BW: 11.81GB/s", "unit 'GB/s', not copybw's 'MB/s'"),
        ("write BW: 12093.4 MB/s", "unit ' MB/s', not copybw's 'MB/s'"),
        ("write BW: 12093.4MiB/s", "unit 'MiB/s', not copybw's 'MB/s'"),
        ("write BW: infMB/s", "write bandwidth 'inf' is not a finite unsigned number"),
        ("write BW: -12093.4MB/s", "write bandwidth '-12093.4' is not a finite unsigned number"),
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
