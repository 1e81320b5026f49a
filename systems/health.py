"""Node health: what NVML reads on this node against what the system declares.

    python -m systems.health --system dgx-a100 --partition gpu

Compares GPU count and model, driver and CUDA versions (at least the declared
minimum), each GPU's host link (generation and width: a GPU that trained at
Gen3 x8 instead of Gen5 x16 is the classic failure), its NVLink links, the
addressing mode, each GPU's NUMA node, persistence mode, ECC, and the gdrdrv
device where GDRCopy is declared. One line per finding, naming the GPU and
the field; the exit status is 1 when anything failed. On a system described at
run time (``local``) nothing is declared: it reports what it found and passes.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import data
from .detect import Detected, detect_node


@dataclass
class Finding:
    field: str
    ok: bool
    expected: Any
    found: Any
    gpu: int | None = None

    def line(self) -> str:
        where = f"gpu{self.gpu} " if self.gpu is not None else ""
        if self.ok:
            return f"PASS {where}{self.field}: {self.found}"
        return f"FAIL {where}{self.field}: expected {self.expected}, found {self.found}"


def _version(text: str) -> tuple:
    return tuple(int(part) for part in str(text).split(".") if part.isdigit())


def _at_least(field: str, minimum: str | None, found: str | None) -> list[Finding]:
    if minimum is None:
        return []
    ok = found is not None and _version(found) >= _version(minimum)
    return [Finding(field, ok, f">= {minimum}", found)]


def _per_gpu(declared: dict[str, Any], health: dict[str, Any], gpu: dict[str, Any]) -> list[Finding]:
    i = gpu["index"]
    gpus, link = declared["gpus"], declared["host_link"]
    found: list[Finding] = [Finding("model", gpu["model"] == gpus.get("model"), gpus.get("model"), gpu["model"], i)]
    if link["type"] == "pcie" and "generation" in link:
        max_gen, _ = gpu["pcie_max"]
        cur_gen, cur_width = gpu["pcie_current"]
        # The generation is read as the most the link can train to (it drops
        # at idle to save power); the width is read as it is now.
        found.append(Finding("pcie_generation", max_gen == link["generation"], link["generation"], max_gen, i))
        found.append(Finding("pcie_width", cur_width == link["width"], f"x{link['width']}", f"x{cur_width}", i))
    gpu_link = declared.get("gpu_link", {})
    if gpu_link.get("type") in ("nvlink", "nvswitch") and "links" in gpu_link:
        found.append(Finding("nvlinks_up", gpu["nvlinks"] == gpu_link["links"], gpu_link["links"], gpu["nvlinks"], i))
        if "generation" in gpu_link:
            version = gpu["nvlink_version"]
            found.append(
                Finding("nvlink_version", version == gpu_link["generation"], gpu_link["generation"], version, i)
            )
    affinity = gpus.get("numa_affinity")
    if affinity is not None and i < len(affinity):
        found.append(Finding("numa_node", gpu["numa"] == affinity[i], affinity[i], gpu["numa"], i))
    for field in ("persistence_mode", "ecc"):
        if field in health:
            found.append(Finding(field, gpu[field] == health[field], health[field], gpu[field], i))
    return found


def evaluate(declared: dict[str, Any] | None, health: dict[str, Any], detected: Detected) -> list[Finding]:
    """Every finding for this node; `declared` is None where nothing is declared."""
    node, info = detected.node, detected.info
    if declared is None:
        return _report_only(detected)
    count = node["gpus"]["count"]
    findings = [Finding("gpu_count", count == declared["gpus"]["count"], declared["gpus"]["count"], count)]
    findings += _at_least("driver_version", health.get("driver_min"), info.get("driver_version"))
    findings += _at_least("cuda_driver_version", health.get("cuda_min"), info.get("cuda_driver_version"))
    if count:
        findings.append(Finding("addressing", node["addressing"] == declared["addressing"], declared["addressing"],
                                node["addressing"]))  # fmt: skip
    for gpu in info.get("gpus", []):
        findings += _per_gpu(declared, health, gpu)
    if declared.get("gdrdrv"):
        findings.append(Finding("gdrdrv", node["gdrdrv"], "/dev/gdrdrv", "present" if node["gdrdrv"] else "absent"))
    return findings


def _report_only(detected: Detected) -> list[Finding]:
    node, info = detected.node, detected.info
    findings = [Finding("gpu_count", True, None, node["gpus"]["count"])]
    findings += [Finding(k, True, None, info[k]) for k in ("driver_version", "cuda_driver_version") if k in info]
    findings.append(Finding("addressing", True, None, node["addressing"]))
    for gpu in info.get("gpus", []):
        i = gpu["index"]
        findings.append(Finding("model", True, None, gpu["model"], i))
        gen, width = gpu["pcie_max"]
        findings.append(Finding("pcie_max", True, None, f"gen{gen} x{width}", i))
        findings.append(Finding("nvlinks_up", True, None, gpu["nvlinks"], i))
        findings.append(Finding("numa_node", True, None, gpu["numa"], i))
    return findings


def declared_partition(system: dict[str, Any], partition: str) -> dict[str, Any]:
    for part in system["partitions"]:
        if part["name"] == partition:
            return part
    raise data.SystemDataError(f"{system['name']}: no partition named {partition!r}")


def main(argv: list[str] | None = None, detect=detect_node) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", required=True)
    parser.add_argument("--partition", required=True)
    parser.add_argument("--systems-dir", type=Path, default=data.SYSTEMS_DIR)
    args = parser.parse_args(argv)

    system = data.load_file(args.systems_dir / f"{args.system}.yaml")
    part = declared_partition(system, args.partition)
    detected = detect()
    declared = None if system.get("detect") else part["node"]
    findings = evaluate(declared, part.get("health", {}), detected)
    for note in detected.notes:
        print(f"NOTE {note}")
    for finding in findings:
        print(finding.line())
    failures = sum(not f.ok for f in findings)
    print(f"Health: {len(findings)} checks, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
