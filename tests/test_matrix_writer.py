"""The matrices a program's output ends with (src/common/matrix.hpp), as nvbandwidth's: the median of each
cell's samples in GB/s with two decimals, rows by columns, '-' where a cell was not measured; and none of
their lines a record the checks' parser would read. Built on the host with the C++ compiler
(tests/host_cpp.py)."""

import subprocess

from host_cpp import build_driver

from experiments.records import records

DRIVER = r"""
#include "matrix.hpp"

int main() {
    suite::Matrices m;
    m.add("host h2d, by the copy engine", "NUMA node", "GPU", 0, 0, {55.0, 55.2, 55.1});
    m.add("host h2d, by the copy engine", "NUMA node", "GPU", 0, 1, {54.98});
    m.add("host h2d, by the copy engine", "NUMA node", "GPU", 1, 0, {52.0, 52.02});
    m.add("peer read, one way, by the SMs", "GPU", "GPU", 0, 1, {350.123, 351.0, 349.0, 352.0});
    m.add("peer read, one way, by the SMs", "GPU", "GPU", 1, 0, {});  // no samples: no cell
    std::printf("Verified: cells=4 samples=3\n");
    m.print();
}
"""

EXPECTED = """Verified: cells=4 samples=3

host h2d, by the copy engine: median GB/s, NUMA node (row) x GPU (column)
                GPU 0      GPU 1
node 0          55.10      54.98
node 1          52.01          -

peer read, one way, by the SMs: median GB/s, GPU (row) x GPU (column)
                GPU 1
GPU 0          350.56
"""


def test_the_matrices_are_the_medians_rows_by_columns_and_no_record(tmp_path):
    driver = build_driver(tmp_path, DRIVER)
    out = subprocess.run([str(driver)], capture_output=True, text=True, check=True).stdout
    assert out == EXPECTED
    for tag in ("Verified", "Cell", "host h2d, by the copy engine", "GPU 0", "node 0"):
        assert records(out, tag) == ([{"cells": "4", "samples": "3"}] if tag == "Verified" else [])


def test_the_path_matrixs_output_on_one_h100_ends_with_its_records_medians():
    """The path matrix's job output of a night on one H100 (committed): every Cell record still read, and
    each matrix's value the median of its cell's samples, to the two decimals printed."""
    import re
    import statistics
    from pathlib import Path

    night = Path(__file__).resolve().parent.parent / "perflogs/hopper-vm/logs/night-codes-h100x1-2026-12-06T1032"
    out = (night / "night" / "path_matrix-rfm_job.out").read_text()
    [verified] = records(out, "Verified")
    cells = records(out, "Cell")
    assert len(cells) == int(verified["cells"]) * int(verified["samples"])
    printed = dict(re.findall(r"^host (\S+), by the SMs: .*\n.*\nnode 0\s+([\d.]+)$", out, re.MULTILINE))
    assert set(printed) == {"h2d", "d2h", "h2d-both", "d2h-both"}
    for direction, value in printed.items():
        samples = [float(c["gbs"]) for c in cells if c["dir"] == direction and c["engine"] == "sm"]
        assert abs(float(value) - statistics.median(samples)) <= 0.005 + 1e-9, direction  # printed to 2 decimals
