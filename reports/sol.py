"""Speed-of-light figures for the records of a perflog, in bytes per second.

Declared systems (a systems/NAME.yaml with a node description) take theirs
from systems/ data; machines described at run time (``local``) from the host
link the record names ('pcie gen5 x16'), and failing that from the ratio the
check itself logged (steady_bw / steady_of_link).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import pandas as pd

_PCIE = re.compile(r"pcie gen(?P<gen>\d+) x(?P<width>\d+)")


@dataclass(frozen=True)
class SpeedOfLight:
    bytes_per_s: float
    source: str  # where the figure comes from, for captions


@lru_cache(maxsize=1)
def _declared_systems() -> dict:
    try:
        from systems import data

        return {name: s for name, s in data.load_all().items() if not s.get("detect")}
    except Exception:  # no jsonschema or PyYAML, or broken system files: fall back to the records
        return {}


def _declared(system: str, partition: str, link: str) -> SpeedOfLight | None:
    from systems import data

    for part in _declared_systems().get(system, {}).get("partitions", []):
        if part["name"] == partition and "node" in part:
            value = data.speed_of_light(part["node"]).get(link)
            if value:
                return SpeedOfLight(value, f"systems/{system}.yaml")
    return None


def host_link(system: str, partition: str, link_text: str, records: pd.DataFrame | None = None) -> SpeedOfLight | None:
    """The host link's limit per direction for records of one system and partition."""
    found = _declared(system, partition, "host_link")
    if found:
        return found
    match = _PCIE.search(str(link_text).lower())
    if match:
        from systems.data import pcie_bandwidth

        gen, width = int(match["gen"]), int(match["width"])
        return SpeedOfLight(pcie_bandwidth(gen, width), f"PCIe Gen{gen} x{width}, systems.data.pcie_bandwidth")
    if records is not None:
        ratio = _from_ratio(records)
        if ratio:
            return SpeedOfLight(ratio, "steady_bw / steady_of_link in the perflog")
    return None


def _from_ratio(records: pd.DataFrame) -> float | None:
    """steady_bw (GiB/s) / steady_of_link, the check's own speed of light."""
    cases = records.pivot_table(index=["display_name", "time"], columns="perf_var", values="value", aggfunc="first")
    if not {"steady_bw", "steady_of_link"} <= set(cases.columns):
        return None
    ratio = (cases["steady_bw"] * 2**30 / cases["steady_of_link"]).replace([float("inf")], float("nan")).dropna()
    ratio = ratio[ratio > 0]
    return float(ratio.median()) if not ratio.empty else None
