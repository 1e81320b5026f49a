"""Each experiment's one home, free of ReFrame: what its program prints and
how those records become figures (parsing, derivations, the curves' figures),
with what the checks and the reports share about cases, paths and
references. checks/<name>.py runs an experiment through ReFrame and
reports/ draw it; both import experiments/<name>.py, and the reports run
where ReFrame is not installed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType

from experiments.roots import REPO as _REPO

REPO = str(_REPO)


#: The experiments, in the order README lists them.
NAMES = (
    "host_bandwidth",
    "um_bandwidth",
    "daxpy",
    "copy_latency",
    "gdrcopy",
    "mem_scan",
    "p2p_pingpong",
    "path_matrix",
)


def every() -> list[ModuleType]:
    return [importlib.import_module(f"experiments.{name}") for name in NAMES]


def find(test: str) -> ModuleType | None:
    """The experiment a test belongs to, or None (node_health, the builds)."""
    name = "gdrcopy" if test.startswith("gdrcopy_") else test
    return importlib.import_module(f"experiments.{name}") if name in NAMES else None


def module_of(test: str) -> ModuleType:
    """The experiment a test belongs to (GDRCopy's four tests: gdrcopy)."""
    found = find(test)
    if found is None:
        raise KeyError(f"{test} is no experiment's test")
    return found


def curve_figures(test: str) -> Callable[[list[str], dict], dict]:
    """The function that reads a test's kept curve back as figures:
    ``(curve lines, the run's logged figures) -> {figure: (value, unit)}``."""
    found = getattr(module_of(test), "CURVE_FIGURES", {}).get(test)
    if found is None:
        raise KeyError(f"{test} keeps no curve")
    return found
