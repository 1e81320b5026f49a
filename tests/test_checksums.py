"""The programs' closed-form checksums, on the host: what summing buffers
that hold their own word index must give, for buffers past 32 GiB too (a
141 GB GPU's quarter, or a scan over eight of them)."""

import shutil
import subprocess
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "common"

DRIVER = r"""
#include <cstdio>
#include <cstdlib>
#include "suite.hpp"
int main(int argc, char **argv) {
    for (int i = 1; i < argc; ++i) {
        const unsigned long long n = std::strtoull(argv[i], nullptr, 10);
        std::printf("%llu\n", static_cast<unsigned long long>(suite::triangular_mod64(n)));
    }
}
"""

# Word counts: small, around 2^32 (where n (n - 1) in 64 bits wraps), the
# buffers that failed (35 GiB of 8-byte words), and the largest there are.
COUNTS = [0, 1, 2, 3, 2**32 - 1, 2**32, 2**32 + 1, 2**33, 35 * 2**30 // 8, 2**37 + 12345, 2**40 + 3, 2**64 - 1]


@pytest.fixture(scope="module")
def triangular(tmp_path_factory):
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler")
    tmp = tmp_path_factory.mktemp("checksum")
    (tmp / "driver.cpp").write_text(DRIVER)
    subprocess.run(
        [compiler, "-std=c++17", "-O2", "-I", str(SRC), str(tmp / "driver.cpp"), "-o", str(tmp / "driver")], check=True
    )
    return tmp / "driver"


def test_the_closed_form_is_exact_modulo_2_to_the_64(triangular):
    out = subprocess.run([str(triangular), *map(str, COUNTS)], capture_output=True, text=True, check=True).stdout
    assert [int(v) for v in out.split()] == [n * (n - 1) // 2 % 2**64 for n in COUNTS]


def test_the_naive_form_is_wrong_where_the_h200_found_it():
    n = 35 * 2**30 // 8  # 4.7e9 words: n (n - 1) wraps before the halving
    assert (n * (n - 1) % 2**64) // 2 != n * (n - 1) // 2 % 2**64
