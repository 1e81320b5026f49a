"""System knowledge of the suite: one YAML file a system, validated at load."""

from .data import (
    SystemDataError,
    features,
    load_all,
    load_file,
    nvlink_bandwidth,
    parse_quantity,
    pcie_bandwidth,
    speed_of_light,
    validate,
)

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
