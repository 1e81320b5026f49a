"""GDRCopy's test outputs, the seed's exactly, parsed as checks/gdrcopy.py does.

tests/data/gdrcopy_seed_tests.md holds the seed's "Tests" and "NUMA effects"
sections verbatim: real outputs of sanity, copybw, copylat and apiperf on a
node with eight Tesla V100-SXM2-32GB.
"""

import re
from pathlib import Path

import pytest
import reframe.utility.sanity as sn
from reframe.core.exceptions import SanityError

from checks.gdrcopy import (
    COPYLAT_ROWS,
    COPYLAT_SIZES,
    _copylat_complete,
    _sanity_passes,
    apiperf_rows,
    parse_apiperf,
    parse_copybw,
    parse_copylat,
    parse_sanity,
    remote_numa_node,
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
    out.write_text(seed["sanity"])
    assert sn.evaluate(_sanity_passes(str(out)))
    out.write_text(seed["sanity"].replace("Failures: 0", "Failures: 3"))
    with pytest.raises(SanityError, match="3 failures"):
        sn.evaluate(_sanity_passes(str(out)))


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


def test_the_checks_bandwidth_patterns_match_the_seed(seed):
    from checks.gdrcopy import _BW

    assert float(re.search(rf"^write BW: {_BW}", seed["copybw"], re.M)["bw"]) == 9638.54
    assert float(re.search(rf"^read BW: {_BW}", seed["copybw"], re.M)["bw"]) == 530.135


# ------------------------------------------------------------------ copylat --

SIZES = [2**k for k in range(25)]


def test_seed_copylat_tables(seed):
    table = parse_copylat(seed["copylat"])
    assert set(table) == {"gdr_copy_to_mapping", "gdr_copy_from_mapping"}
    assert sorted(table["gdr_copy_to_mapping"]) == SIZES
    assert sorted(table["gdr_copy_from_mapping"]) == SIZES
    to, frm = table["gdr_copy_to_mapping"], table["gdr_copy_from_mapping"]
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
    # The seed's version prints averages only: no Min. Time(us) column.
    assert parse_copylat(seed["copylat"], "min") == {}


def test_newer_copylat_rows_with_median_min_and_cumemcpy():
    # GDRCopy 2.6 with -c: printf("%s \t %8zu \t %11.4f \t %11.4f\n", ...).
    text = (
        "cuMemcpy_H2D num iters for each size: 10000\n"
        "Test \t\t Size(B) \t Median Time(us) \t Min. Time(us)\n"
        "cuMemcpy_H2D \t        8 \t      2.1000 \t      1.9000\n"
        "\ncuMemcpy_D2H num iters for each size: 100\n"
        "Test \t\t Size(B) \t Median Time(us) \t Min. Time(us)\n"
        "cuMemcpy_D2H \t        8 \t      2.5000 \t      2.3000\n"
        "Test \t\t\t Size(B) \t Median Time(us) \t Min. Time(us)\n"
        "gdr_copy_to_mapping \t        8 \t      0.0700 \t      0.0650\n"
    )
    assert parse_copylat(text) == {
        "cuMemcpy_H2D": {8: 2.1},
        "cuMemcpy_D2H": {8: 2.5},
        "gdr_copy_to_mapping": {8: 0.07},
    }
    assert parse_copylat(text, "min")["gdr_copy_to_mapping"] == {8: 0.065}
    assert {COPYLAT_ROWS[row] for row in parse_copylat(text)} == {
        ("cumemcpy", "h2d"),
        ("cumemcpy", "d2h"),
        ("gdrcopy", "h2d"),
    }


def _repeated(text: str, repeats: int) -> str:
    return "".join(f"Repeat: {k} of {repeats}\n{text}" for k in range(1, repeats + 1))


def test_the_copylat_check_needs_every_chosen_size_in_every_run(seed, tmp_path):
    out = tmp_path / "rfm_job.out"
    out.write_text(_repeated(seed["copylat"], 3))
    gdr_rows = ["gdr_copy_to_mapping", "gdr_copy_from_mapping"]
    assert sn.evaluate(_copylat_complete(str(out), gdr_rows, COPYLAT_SIZES, 3))
    assert split_repeats(out.read_text())[2] == seed["copylat"]
    # The seed ran copylat without -c: no cuMemcpy rows.
    with pytest.raises(SanityError, match=r"copylat run 1: no cuMemcpy_H2D row for sizes \[8, 4096, 65536, 1048576\]"):
        sn.evaluate(_copylat_complete(str(out), [*gdr_rows, "cuMemcpy_H2D"], COPYLAT_SIZES, 3))
    with pytest.raises(SanityError, match=r"copylat: 3 runs in the output, 5 asked for"):
        sn.evaluate(_copylat_complete(str(out), gdr_rows, COPYLAT_SIZES, 5))


# ------------------------------------------------------------------ apiperf --


def test_seed_apiperf(seed):
    assert parse_apiperf(seed["apiperf -s 8"]) == {
        65536: {"pin": 1346.034060, "map": 3.603800, "get_info": 0.340270, "unmap": 4.700930, "unpin": 676.612800}
    }


def test_apiperf_rows_per_maximum_size():
    assert apiperf_rows(8) == 1  # the seed's -s 8: one GPU page
    assert apiperf_rows(65536) == 1
    assert apiperf_rows(2**20) == 5  # 64 KiB .. 1 MiB
    assert apiperf_rows(2**20 + 1) == 5


# -------------------------------------------------------------- references --


def test_bandwidth_references_are_the_seed_figures(seed):
    entries = load_entries("GdrCopyBandwidth")
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
    values = matching_values(load_entries("GdrCopyLatency"), SEED_NODE, {"memory": "device", "placement": "remote"})
    table = parse_copylat(seed["copylat"])
    for size in COPYLAT_SIZES:
        assert values[f"lat_us_gdrcopy_h2d_{size}"][0] == table["gdr_copy_to_mapping"][size]
        assert values[f"lat_us_gdrcopy_d2h_{size}"][0] == table["gdr_copy_from_mapping"][size]
    assert values["lat_us_gdrcopy_h2d_8"][0] == pytest.approx(0.09, abs=0.002)  # the issue's 0.09 us
    api = matching_values(load_entries("GdrCopyApiPerf"), SEED_NODE, {"placement": "local"})
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
