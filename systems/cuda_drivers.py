"""The oldest Linux driver each CUDA toolkit's programs run on: one table, so
that a system's minimum driver follows from the toolkit it builds with
instead of being typed (and mistyped) beside it.

From CUDA 11 on, a toolkit's programs run on any driver of its major
release's first (minor version compatibility: NVIDIA's CUDA Compatibility
guide, "Minor Version Compatibility"), so one entry per major release; the
programs here are built as SASS for the system's architectures, which is what
that compatibility covers (PTX JIT would need the toolkit's own driver).
Before CUDA 11 each release needed its own driver (CUDA Toolkit Release
Notes, "CUDA Toolkit and Corresponding Driver Versions"). Data-centre GPUs can
run newer toolkits on older drivers through the cuda-compat package; a site
that relies on it names the driver it has in its health data.
"""

from __future__ import annotations

#: (major, minor) or (major,) -> the minimum Linux x86-64 / ppc64le driver.
MINIMUM_DRIVER: dict[tuple[int, ...], str] = {
    (10, 0): "410.48",
    (10, 1): "418.39",
    (10, 2): "440.33",
    (11,): "450.80.02",
    (12,): "525.60.13",
    (13,): "580.65.06",
}


def version_tuple(text: str) -> tuple[int, ...]:
    """'450.80.02' -> (450, 80, 2)."""
    return tuple(int(part) for part in str(text).split("."))


def minimum_driver(cuda: str) -> str:
    """The oldest driver that runs programs built with CUDA `cuda` ('11.7.1')."""
    version = version_tuple(cuda)
    for key in (version[:2], version[:1]):
        if key in MINIMUM_DRIVER:
            return MINIMUM_DRIVER[key]
    known = ", ".join(".".join(map(str, k)) for k in MINIMUM_DRIVER)
    raise ValueError(f"CUDA {cuda}: no minimum driver known (systems/cuda_drivers.py knows {known})")


def newest(*drivers: str | None) -> str | None:
    """The highest of the driver versions given (None where none is)."""
    given = [d for d in drivers if d]
    return max(given, key=version_tuple) if given else None
