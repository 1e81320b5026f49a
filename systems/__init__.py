"""System knowledge of the suite: one YAML file a system, validated at load.

Its names come from systems/data.py when first used: the GPU watch
(python -m systems.watch), started around every case's program, needs none
of them, nor the YAML parser they import.
"""

from importlib import import_module

__all__ = [
    "SystemDataError",
    "features",
    "load_all",
    "load_file",
    "parse_quantity",
    "pcie_bandwidth",
    "nvlink_bandwidth",
    "speed_of_light",
    "validate",
]


def __getattr__(name: str):
    if name in __all__:
        return getattr(import_module(".data", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
