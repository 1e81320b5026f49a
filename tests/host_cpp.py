"""Small C++ drivers of src/'s host code, built on the host for the tests
(the size parser, the checksums, the record writer)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"


def build_driver(tmp: Path, source: str, include: tuple[str, ...] = ("common",), flags: tuple[str, ...] = ()) -> Path:
    """`source` compiled as C++17 with src/<include> on the include path into
    tmp/driver; the test is skipped where the host has no C++ compiler."""
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler")
    (tmp / "driver.cpp").write_text(source)
    dirs = [arg for name in include for arg in ("-I", str(SRC / name))]
    subprocess.run(
        [compiler, "-std=c++17", "-O2", *flags, *dirs, str(tmp / "driver.cpp"), "-o", str(tmp / "driver")], check=True
    )
    return tmp / "driver"
