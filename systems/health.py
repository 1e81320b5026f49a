"""Node health: what NVML reads on this node against what is expected of it.

    python -m systems.health --system NAME --partition NAME [--accepted FILE] [--facts-dir DIR]

What is expected comes from the system's data for a declared system, and
from the node facts of the accepted run (``--accepted``, the system's
perflogs/<system>/accepted.json) for a system described at run time. Either
way: the GPU count and each GPU's model, its PCIe generation and width as
trained (read while a copy loads the link: links train down when idle),
its NVLink links up and their generation, its NUMA node, its persistence
and ECC modes; declared systems also give the driver and CUDA minimum, the
addressing mode and gdrdrv. Faults that need no baseline are judged on every
node: a PCIe link trained below the GPU's maximum as NVML reports it, even
where the baseline holds no link (not where the GPU reaches its CPU over
NVLink: the copy does not load its PCIe link), uncorrected ECC errors since
the driver loaded, rows pending remapping or a failed remapping, pages
pending retirement, a clock event reason other than idle and those the
system's ``health.clock_events_allowed`` lists (as systems/watch.py judges
them during a run), PCIe replays counted while the copy loaded the link; the
replays since the driver loaded are reported, not judged (an old replay is
no fault now). One line per finding, naming the GPU and the field; the exit
status is 1 when anything failed. A detected node with fewer GPUs than
accepted, none visible, or GPUs of another model fails; only where nothing
is expected (a detected system with no accepted run) are the facts
reported, the faults still judged, and the summary says so. Where NVML
cannot start, a node with NVIDIA hardware (its device files, its GPUs on
PCI) fails; one without says so in one line.

``--facts-dir`` writes this node's facts as the acceptance stores them, its
host's among them (``machine``: CPU, NUMA, memory, kernel, firmware,
hypervisor; systems/host.py), as node-<host>.json, the host named where the program runs: a job script's
$(hostname) is the launch node's under jsrun.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import data
from .detect import Detected, detect_node
from .finding_codes import code_of
from .host import UNKNOWN, host_facts
from .watch import allowed_mask, reason_names


@dataclass
class Finding:
    field: str
    ok: bool
    expected: Any
    found: Any
    gpu: int | None = None

    def __post_init__(self) -> None:
        self.code = code_of("health", self.field).code  # a field the catalogue lacks fails here, in every test

    def line(self) -> str:
        """'PASS gpu0 model: ...', or 'FAIL GMP-312 gpu0 pcie_width: expected x16, found x8': a failure's code
        first, where a drain reason and a ticket key on it (systems/findings/codes.yaml)."""
        where = f"gpu{self.gpu} " if self.gpu is not None else ""
        if self.ok:
            return f"PASS {where}{self.field}: {self.found}"
        return f"FAIL {self.code} {where}{self.field}: expected {self.expected}, found {self.found}"


def _version(text: str) -> tuple:
    return tuple(int(part) for part in str(text).split(".") if part.isdigit())


def _at_least(field: str, minimum: str | None, found: str | None) -> list[Finding]:
    if minimum is None:
        return []
    ok = found is not None and _version(found) >= _version(minimum)
    return [Finding(field, ok, f">= {minimum}", found)]


# ------------------------------------------------------------ expectations --


def declared_expectation(system: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    """What a declared system's partition holds its nodes to, the oldest
    driver its environments' toolkits need included."""
    health = {**part.get("health", {}), "driver_min": data.driver_min(system, part)}
    return expected_from_declared(part["node"], health, f"systems/{system['name']}.yaml")


def expected_from_declared(node: dict[str, Any], health: dict[str, Any], source: str) -> dict[str, Any]:
    """What a declared system's data says each GPU of a node is."""
    gpus, link = node["gpus"], node["host_link"]
    pcie = (
        [link["generation"], link["width"]]
        if link["type"] == "pcie" and {"generation", "width"} <= link.keys()
        else None
    )
    affinity = gpus.get("numa_affinity") or []
    return {
        "source": source,
        "gpu_count": gpus["count"],
        "addressing": node["addressing"],
        "gdrdrv": node.get("gdrdrv", False),
        "driver_min": health.get("driver_min"),
        "cuda_min": health.get("cuda_min"),
        "gpus": [
            {
                "model": gpus.get("model"),
                "pcie": pcie,
                # Every NVLink link of the GPU, to its CPU and its peers, as NVML counts them.
                "nvlinks": data.nvlinks_of(node, i) or None,
                "nvlink_version": nvlink_generation(node),
                "numa": affinity[i] if i < len(affinity) else None,
                "persistence_mode": health.get("persistence_mode"),
                "ecc": health.get("ecc"),
            }
            for i in range(gpus["count"])
        ],
    }


def nvlink_generation(node: dict[str, Any]) -> int | None:
    """The NVLink generation of a node's links, to peers or to the CPU."""
    for link in (node.get("gpu_link", {}), node["host_link"]):
        if link.get("type") in ("nvlink", "nvswitch") and "generation" in link:
            return link["generation"]
    return None


def node_facts(detected: Detected, machine: dict[str, Any] | None = None) -> dict[str, Any]:
    """This node as an accepted run records it, and as later runs are held to;
    with `machine` (systems/host.py's host_facts), its host too, with the GPU
    driver and CUDA detected (recorded, not compared: ./suite upgrade judges those)."""
    node = detected.node
    facts = {
        "gpu_count": node["gpus"]["count"],
        "addressing": node["addressing"],
        "gdrdrv": node["gdrdrv"],
        "gpus": [
            {
                "model": gpu["model"],
                "pcie": gpu["pcie_trained"],
                "nvlinks": gpu["nvlinks"],
                "nvlink_version": gpu["nvlink_version"],
                "numa": gpu["numa"],
                "persistence_mode": gpu["persistence_mode"],
                "ecc": gpu["ecc"],
            }
            for gpu in detected.info.get("gpus", [])
        ],
    }
    if machine is not None:
        versions = {k: detected.info.get(k) or UNKNOWN for k in ("driver_version", "cuda_driver_version")}
        facts["machine"] = {**machine, **versions}
    return facts


def expected_from_accepted(accepted: dict[str, Any], partition: str, source: str) -> dict[str, Any] | None:
    """The node facts an accepted run recorded for this partition, or None."""
    facts = (accepted.get("node") or {}).get(partition)
    if not facts:
        return None
    return {"source": source, "driver_min": None, "cuda_min": None, **facts}


def kind_of(facts: dict[str, Any]) -> str:
    """'2 x NVIDIA H100 80GB HBM3': a node's GPUs, counted by model, what tells
    kinds of node apart; each kind has a baseline of its own."""
    models = Counter(gpu["model"] for gpu in facts.get("gpus", []))
    return ", ".join(f"{count} x {model}" for model, count in sorted(models.items())) or "no GPU"


def same_kind(accepted: dict[str, Any], facts: dict[str, Any]) -> bool:
    """Whether a node is of the kind an accepted run ran on: the same GPUs, counted by model."""
    return kind_of(accepted) == kind_of(facts)


def baselines_in(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The baselines of an accepted.json by kind of node ({kind: {accepted,
    runs, node}}); a record of one baseline (its runs and node facts at the
    top, as written before kinds) is the baseline of its node's kind."""
    if "kinds" in record:
        return record["kinds"]
    if "runs" not in record:  # older still: one run
        record = {"runs": [record], "node": {}}
    facts = next(iter((record.get("node") or {}).values()), {})
    return {kind_of(facts) if facts else "unknown": {k: v for k, v in record.items() if k != "system"}}


def baseline_for(
    baselines: dict[str, dict[str, Any]], partition: str, facts: dict[str, Any], declared: Iterable[str] = ()
) -> str | None:
    """The kind whose baseline a node is held to: its own kind's; else, for a
    node with fewer GPUs than an accepted kind of its models (or none
    visible), the smallest such kind, so that a node that lost a GPU fails
    its count rather than passing unjudged; None otherwise: a node of other
    models, or of more GPUs than any accepted kind, is another kind of node,
    not judged until its own runs are accepted. (Where the system has a
    baseline of the smaller count too, a node that lost a GPU is of that
    kind: only a system's data, not detection, can say how many it should
    have.) A node of a kind the system `declared` (its data's `node_kinds`)
    is of that kind: None where none of its runs is accepted yet."""
    own = kind_of(facts)
    if own in baselines and partition in (baselines[own].get("node") or {}):
        return own
    if own in declared:
        return None
    models, count = {gpu["model"] for gpu in facts.get("gpus", [])}, len(facts.get("gpus", []))
    larger = [
        (len(node.get("gpus", [])), kind)
        for kind, baseline in baselines.items()
        if (node := (baseline.get("node") or {}).get(partition))
        and len(node.get("gpus", [])) > count
        and (not models or {gpu["model"] for gpu in node.get("gpus", [])} == models)
    ]
    return min(larger)[1] if larger else None


# -------------------------------------------------------------- judgement --


#: What health allows a GPU's clocks without a system's say: idling.
IDLE_ONLY = allowed_mask([])


def faults(detected: Detected, allowed: int = IDLE_ONLY) -> list[Finding]:
    """What fails a node whatever it is expected to be: errors it has
    counted, clocks slowed for a reason not `allowed`, PCIe replays during
    health's load of the link."""
    found = []
    for gpu in detected.info.get("gpus", []):
        counters, i = gpu.get("counters") or {}, gpu["index"]
        if counters.get("ecc_uncorrected"):
            found.append(Finding("ecc_uncorrected", False, 0, counters["ecc_uncorrected"], i))
        for field in ("remap_pending", "remap_failure", "retired_pending"):
            if counters.get(field):
                found.append(Finding(field, False, False, True, i))
        found += [_clock_events(gpu, allowed), _replays(gpu)]
    return found


def _clock_events(gpu: dict[str, Any], allowed: int) -> Finding:
    """The GPU's clock event reasons, as the watch judges them during a run (systems/watch.py)."""
    reasons, i = gpu.get("clock_events"), gpu["index"]
    expected = f"none but {', '.join(reason_names(allowed))}"
    if reasons is None:  # as the watch does: a GPU nobody could read is not passed
        return Finding("clock_events", False, expected, "unreadable by NVML", i)
    extra = reasons & ~allowed
    if extra:
        return Finding("clock_events", False, expected, ",".join(reason_names(extra)), i)
    return Finding("clock_events", True, expected, ",".join(reason_names(reasons)) or "none", i)


def _replays(gpu: dict[str, Any]) -> Finding:
    """Replays counted while health loaded the link fail the GPU; the count
    since the driver loaded is only reported: a link may have replayed long
    ago, harmlessly, and what matters is its growth during a run."""
    total, grew, i = (gpu.get("counters") or {}).get("pcie_replays"), gpu.get("pcie_replays_under_load"), gpu["index"]
    since = f"{'unknown' if total is None else total} since the driver loaded"
    if grew is None:
        return Finding("pcie_replays", True, None, f"{since}, not read under load", i)
    if grew:
        return Finding("pcie_replays", False, "0 during health's load of the link", f"{grew} ({since})", i)
    return Finding("pcie_replays", True, None, f"{since}, 0 during health's load of the link", i)


def _same(field: str, expected: Any, found: Any, gpu: int) -> list[Finding]:
    return [] if expected is None else [Finding(field, found == expected, expected, found, gpu)]


def _pcie_wanted(expected: list | None, gpu: dict[str, Any]) -> list[tuple[int | None, bool]]:
    """The generation and width a GPU's link must train to under load, each
    with whether NVML's maximum set it: what is expected, and never less than
    the maximum NVML reports (that of the GPU and its slot), so that a
    baseline holding none, or a lower one, leaves no link unjudged. Where the
    GPU reaches its CPU over NVLink, the copy does not load the PCIe link,
    and only what is expected is wanted of it."""
    remotes = gpu.get("nvlink_remotes") or {}
    maximum = [None, None] if remotes.get("cpu") else gpu.get("pcie_max") or [None, None]
    wanted = []
    for base, most in zip(expected or [None, None], maximum, strict=True):
        known = [value for value in (base, most) if value is not None]
        wanted.append((max(known) if known else None, most is not None and (base is None or most > base)))
    return wanted


def _pcie(expected: list | None, gpu: dict[str, Any]) -> list[Finding]:
    """The PCIe link as trained under load against what it must train to."""
    i, trained = gpu["index"], gpu.get("pcie_trained")
    (gen, gen_max), (width, width_max) = _pcie_wanted(expected, gpu)
    if gen is None and width is None:
        if (gpu.get("nvlink_remotes") or {}).get("cpu"):
            return [Finding("pcie_link", True, None, "not judged: the GPU reaches its CPU over NVLink", i)]
        return [Finding("pcie_link", False, "a generation and width to hold it to", "none from NVML or expected", i)]
    if trained is None:
        link = f"gen{'?' if gen is None else gen} x{'?' if width is None else width}"
        return [Finding("pcie_link", False, link, gpu.get("pcie_trained_unknown"), i)]
    found = []
    if gen is not None:
        found.append(Finding("pcie_generation", trained[0] == gen, _wanted(gen, gen_max), trained[0], i))
    if width is not None:
        found.append(Finding("pcie_width", trained[1] == width, _wanted(f"x{width}", width_max), f"x{trained[1]}", i))
    return found


def _wanted(value: Any, by_max: bool) -> str:
    """What a link must train to, saying where NVML's maximum set it, not the baseline."""
    return f"{value} (its maximum)" if by_max else str(value)


def _per_gpu(expected: dict[str, Any], gpu: dict[str, Any]) -> list[Finding]:
    i = gpu["index"]
    found = _same("model", expected.get("model"), gpu["model"], i)
    if found and not found[0].ok:  # the rest of what is expected is another model's
        return found + _pcie(None, gpu)
    found += _pcie(expected.get("pcie"), gpu)
    found += _same("nvlinks_up", expected.get("nvlinks"), gpu["nvlinks"], i)
    if expected.get("nvlinks"):
        found += _same("nvlink_version", expected.get("nvlink_version"), gpu["nvlink_version"], i)
    for field, reading in (("numa_node", "numa"), ("persistence_mode", "persistence_mode"), ("ecc", "ecc")):
        found += _same(field, expected.get(reading), gpu[reading], i)
    return found


def evaluate(expected: dict[str, Any] | None, detected: Detected, allowed: int = IDLE_ONLY) -> list[Finding]:
    """Every finding for this node; `expected` is None where nothing is
    expected; `allowed`, the clock event reasons that are no fault."""
    if expected is None:
        return nvml_started(detected) + _report_only(detected) + faults(detected, allowed)
    node, info = detected.node, detected.info
    count = node["gpus"]["count"]
    findings = nvml_started(detected)
    findings.append(Finding("gpu_count", count == expected["gpu_count"], expected["gpu_count"], count))
    findings += _at_least("driver_version", expected.get("driver_min"), info.get("driver_version"))
    findings += _at_least("cuda_driver_version", expected.get("cuda_min"), info.get("cuda_driver_version"))
    if count and expected.get("addressing") is not None:
        findings.append(
            Finding(
                "addressing", node["addressing"] == expected["addressing"], expected["addressing"], node["addressing"]
            )
        )
    per_gpu = expected.get("gpus", [])
    for gpu in info.get("gpus", []):  # a GPU more than expected still has its link judged
        findings += _per_gpu(per_gpu[gpu["index"]] if gpu["index"] < len(per_gpu) else {}, gpu)
    if expected.get("gdrdrv"):
        findings.append(Finding("gdrdrv", node["gdrdrv"], "/dev/gdrdrv", "present" if node["gdrdrv"] else "absent"))
    return findings + faults(detected, allowed)


def nvml_started(detected: Detected) -> list[Finding]:
    """Whether NVML could read this node. Where it could not, a node with
    NVIDIA hardware fails (every GPU went unread, none may pass unjudged);
    one without has no GPU to check, and one line says so."""
    why = detected.info.get("nvml_error")
    if why is None:
        return []
    hardware = detected.info.get("nvidia_hardware") or []
    if hardware:
        shown = ", ".join(hardware[:4]) + (", ..." if len(hardware) > 4 else "")
        return [Finding("nvml", False, f"NVML running on a node with NVIDIA hardware ({shown})", why)]
    return [
        Finding(
            "nvml",
            True,
            None,
            f"{why}; no NVIDIA hardware on this node (no /dev/nvidia*, no NVIDIA "
            "display controller on PCI): no GPU to check",
        )
    ]


def _report_only(detected: Detected) -> list[Finding]:
    node, info = detected.node, detected.info
    findings = [Finding("gpu_count", True, None, node["gpus"]["count"])]
    findings += [Finding(k, True, None, info[k]) for k in ("driver_version", "cuda_driver_version") if k in info]
    findings.append(Finding("addressing", True, None, node["addressing"]))
    for gpu in info.get("gpus", []):
        i = gpu["index"]
        findings.append(Finding("model", True, None, gpu["model"], i))
        findings += _pcie(None, gpu)  # judged with nothing expected: against NVML's maximum
        findings.append(Finding("nvlinks_up", True, None, gpu["nvlinks"], i))
        findings.append(Finding("numa_node", True, None, gpu["numa"], i))
    return findings


# ------------------------------------------------------------------ main --


def declared_partition(system: dict[str, Any], partition: str) -> dict[str, Any]:
    for part in system["partitions"]:
        if part["name"] == partition:
            return part
    raise data.SystemDataError(f"{system['name']}: no partition named {partition!r}")


def expectations(
    system: dict[str, Any], part: dict[str, Any], accepted: Path | None, detected: Detected
) -> tuple[dict | None, str]:
    """What this node is held to, and a line that says by what. A system
    described at run time is held to its accepted run's node facts: a node
    with fewer GPUs, none visible, or GPUs of another model fails them, and
    is never passed as one with nothing to be judged against."""
    if not system.get("detect"):
        source = f"systems/{system['name']}.yaml"
        return declared_expectation(system, part), f"against {source}"
    if accepted is None or not accepted.exists():
        return None, "nothing to judge the node's facts against: no accepted run (./suite accept)"
    try:
        record = json.loads(accepted.read_text())
    except (ValueError, OSError) as err:  # the suite's file, not the node: the nightly names it and judges nothing
        return None, f"nothing to judge the node's facts against: {accepted} is damaged ({err})"
    baselines, this = baselines_in(record), node_facts(detected)
    kind = baseline_for(baselines, part["name"], this, system.get("node_kinds", ()))
    if kind is None:
        kinds = "; ".join(sorted(baselines)) or "none"
        declared = (
            f", a kind systems/{system['name']}.yaml declares" if kind_of(this) in system.get("node_kinds", ()) else ""
        )
        return None, (
            f"nothing to judge the node's facts against: {accepted} has no node facts of {part['name']} with "
            f"{kind_of(this)}{declared} (accepted kinds: {kinds})"
        )
    found = expected_from_accepted(baselines[kind], part["name"], str(accepted))
    basis = f"against the accepted runs of {kind} ({accepted})"
    if not same_kind(found, this):
        basis += f", this node has {kind_of(this)}"
    return found, basis


def facts_file_name(host: str) -> str:
    """node-<host>.json, named on the node the health program runs on (its short name)."""
    return f"node-{host}.json"


def main(argv: list[str] | None = None, detect=detect_node, describe_host=host_facts) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", required=True)
    parser.add_argument("--partition", required=True)
    parser.add_argument("--systems-dir", type=Path, default=data.SYSTEMS_DIR)
    parser.add_argument("--accepted", type=Path, help="accepted.json of a detected system (its node facts)")
    parser.add_argument("--facts-dir", type=Path, help="write this node's facts here, as node-<host>.json")
    parser.add_argument(
        "--name-host",
        action="store_true",
        help="begin every line with '<host>: ' (one job checking many nodes at once)",
    )
    args = parser.parse_args(argv)
    host = socket.gethostname().split(".")[0]
    say = (lambda line: print(f"{host}: {line}", flush=True)) if args.name_host else print

    system = data.load_file(args.systems_dir / f"{args.system}.yaml")
    part = declared_partition(system, args.partition)
    detected = detect(load_links=True)
    expected, basis = expectations(system, part, args.accepted, detected)
    allowed = allowed_mask(part.get("health", {}).get("clock_events_allowed", []))
    findings = evaluate(expected, detected, allowed)
    for note in detected.notes:
        say(f"NOTE {note}")
    for finding in findings:
        say(finding.line())
    if args.facts_dir:
        machine = describe_host()  # read where the facts are kept: what each night is compared on (systems/host.py)
        for note in machine["notes"]:
            say(f"NOTE host: {note}")
        args.facts_dir.mkdir(parents=True, exist_ok=True)
        facts = {"host": socket.gethostname(), "partition": args.partition, **node_facts(detected, machine)}
        (args.facts_dir / facts_file_name(host)).write_text(json.dumps(facts, indent=1) + "\n")
    failures = sum(not f.ok for f in findings)
    say(f"Health: {len(findings)} checks, {failures} failures, {basis}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
