"""The host a node's GPUs sit in: its CPUs, NUMA layout, memory, kernel,
firmware and hypervisor, as the node's facts record them (``machine``: the
facts' ``host`` is already the node's name, which drain.txt reads).

A GPU's memory paths run through its host: the same GPUs in a host of
another CPU, another memory speed or under another hypervisor measure other
host-side figures. Detected from /sys and /proc without root (their roots
are parameters, for a fake tree in tests); ``lscpu`` names an Arm CPU that
/proc/cpuinfo does not; memory speed only ``dmidecode`` gives, which
usually needs root. Nothing here may fail: what cannot be read is
'unknown', and ``notes`` says why.

``differences`` says how a night's host differs from the accepted runs'
on what changes performance (COMPARED); the nightly says so first, and
does not drain a node for paths that moved on another host (runner/nightly.py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .detect import first_cpu

UNKNOWN = "unknown"

#: The firmware's and maker's names, each readable without root.
DMI_FIELDS = ("bios_vendor", "bios_version", "bios_date", "sys_vendor", "product_name")

#: The maker a cloud's or hypervisor's virtual machine names itself by (DMI's sys_vendor, product_name).
VIRTUAL_MAKERS = {
    "QEMU": "qemu",
    "Amazon EC2": "amazon",
    "Microsoft Corporation": "microsoft",
    "VMware, Inc.": "vmware",
    "Xen": "xen",
    "Google": "google",
    "OpenStack Foundation": "openstack",
    "innotek GmbH": "oracle",
}

#: A host's memory of another size by more than this is another host's (MemTotal moves a little with
#: the kernel's reservations, and between virtual machines of one type).
MEMORY_SIZE_TOLERANCE = 0.05

#: A command's (exit status, stdout, stderr); exit None where the program is not there.
Command = Callable[[list[str]], tuple[int | None, str, str]]


def run_command(argv: list[str], timeout_s: float = 10) -> tuple[int | None, str, str]:
    """A program's exit status and output; None where it is absent, cannot start or hangs."""
    if shutil.which(argv[0]) is None:
        return None, "", f"{argv[0]} is not installed"
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError) as err:
        return None, "", str(err)
    return done.returncode, done.stdout, done.stderr


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


def _cpuinfo(proc: Path) -> tuple[dict[str, str], set[str]]:
    """The first processor's fields of cpuinfo (detect.py reads them alike), and its flags."""
    fields = first_cpu(proc / "cpuinfo")
    return fields, set(fields.get("flags", "").split())


def cpu_of(sysfs: Path, proc: Path, command: Command, notes: list[str]) -> dict[str, Any]:
    """The CPU's model, sockets, cores a socket and threads a core, from
    the CPUs' topology in sysfs and cpuinfo (lscpu's model name where
    cpuinfo has none: an Arm CPU's)."""
    packages, cores, logical = set(), set(), 0
    for topo in sysfs.glob("devices/system/cpu/cpu[0-9]*/topology"):
        pkg, core = _read(topo / "physical_package_id"), _read(topo / "core_id")
        logical += 1
        if pkg is not None and core is not None:
            packages.add(pkg)
            cores.add((pkg, core))
    fields, _ = _cpuinfo(proc)
    model = fields.get("model name") or fields.get("cpu") or _lscpu_model(command)
    if not model and fields.get("CPU implementer"):
        model = f"implementer {fields['CPU implementer']} part {fields.get('CPU part', '?')}"
    if not model:
        model = UNKNOWN
        notes.append(f"CPU model unknown: neither {proc / 'cpuinfo'} nor lscpu names it")
    if not cores:
        notes.append(f"CPU topology unknown: no readable {sysfs / 'devices/system/cpu/cpu*/topology'}")
        return {"model": model, "cpus": logical or UNKNOWN, "sockets": UNKNOWN, "cores": UNKNOWN,
                "threads_per_core": UNKNOWN}  # fmt: skip
    return {
        "model": model,
        "cpus": logical,
        "sockets": len(packages),
        "cores": len(cores),
        "threads_per_core": max(1, logical // len(cores)),
    }


def _lscpu_model(command: Command) -> str | None:
    status, out, _ = command(["lscpu"])
    if status != 0:
        return None
    found = re.search(r"^Model name:\s*(.+)$", out, re.M)
    return found.group(1).strip() if found and found.group(1).strip() != "-" else None


def _kib(text: str | None, key: str) -> int | None:
    """A meminfo line's kB (MemTotal, 'Node 0 MemTotal'), or None."""
    found = re.search(rf"{key}:\s*(\d+) kB", text or "")
    return int(found.group(1)) if found else None


def _gib(kib: int) -> float:
    return round(kib / 2**20, 1)


def numa_of(sysfs: Path, notes: list[str]) -> dict[str, Any]:
    """The NUMA nodes with CPUs (a GPU's memory node has none, and comes and
    goes with its driver), each with its CPUs and memory; memory-only nodes listed apart."""
    layout = {}
    for path in sorted(sysfs.glob("devices/system/node/node[0-9]*"), key=lambda p: int(p.name[4:])):
        kib = _kib(_read(path / "meminfo"), r"Node \d+ MemTotal")
        layout[path.name[4:]] = {
            "cpus": _read(path / "cpulist") or "",
            "memory_gib": UNKNOWN if kib is None else _gib(kib),
        }
    if not layout:
        notes.append(f"NUMA layout unknown: no {sysfs / 'devices/system/node/node*'}")
        return {"nodes": UNKNOWN, "layout": {}}
    return {"nodes": sum(bool(node["cpus"]) for node in layout.values()), "layout": layout}


def memory_of(proc: Path, command: Command, notes: list[str]) -> dict[str, Any]:
    """The host memory's size (MemTotal) and speed (dmidecode's configured speed, the slowest DIMM's)."""
    kib = _kib(_read(proc / "meminfo"), "MemTotal")
    if kib is None:
        notes.append(f"memory size unknown: no MemTotal in {proc / 'meminfo'}")
    memory: dict[str, Any] = {"size_gib": UNKNOWN if kib is None else _gib(kib), "speed_mts": UNKNOWN}
    status, out, err = command(["dmidecode", "-t", "memory"])
    if status is None:
        notes.append(f"memory speed unknown: {err}")
        return memory
    if status != 0:
        why = (err.strip().splitlines() or [f"exit {status}"])[-1]
        notes.append(f"memory speed unknown: dmidecode refused ({why}): it usually needs root")
        return memory
    speeds = [int(s) for s in re.findall(r"^\s*Configured (?:Memory|Clock) Speed:\s*(\d+)", out, re.M)]
    speeds = speeds or [int(s) for s in re.findall(r"^\s*Speed:\s*(\d+)", out, re.M)]
    if speeds:
        memory["speed_mts"] = min(speeds)
        types = sorted(set(re.findall(r"^\s*Type:\s*(DDR\w*|LPDDR\w*|HBM\w*)", out, re.M)))
        if types:
            memory["type"] = "/".join(types)
    else:
        notes.append("memory speed unknown: dmidecode lists no DIMM speed (a virtual machine's often has none)")
    return memory


def firmware_of(sysfs: Path, notes: list[str]) -> dict[str, str]:
    """The BIOS and the maker, as DMI gives them (readable without root)."""
    dmi = sysfs / "class/dmi/id"
    found = {name: _read(dmi / name) or UNKNOWN for name in DMI_FIELDS}
    missing = [name for name, value in found.items() if value == UNKNOWN]
    if missing:
        notes.append(f"firmware unknown: no {', '.join(missing)} in {dmi}")
    return found


def hypervisor_of(sysfs: Path, flags: set[str], firmware: dict[str, str], command: Command) -> str:
    """The hypervisor the node runs under, 'none' on bare metal: what
    systemd-detect-virt --vm says (a container's is no hypervisor), else
    /sys/hypervisor/type, else the maker DMI names, else cpuinfo's
    `hypervisor` flag (one not named)."""
    status, out, _ = command(["systemd-detect-virt", "--vm"])
    if status is not None and out.strip():
        return out.strip()  # 'none' with exit 1 on bare metal
    named = _read(sysfs / "hypervisor/type")
    if named:
        return named
    for maker, name in VIRTUAL_MAKERS.items():
        if firmware.get("sys_vendor") == maker or firmware.get("product_name", "").startswith(maker):
            return name
    if "hypervisor" in flags:
        return "present (not named)"
    return "none"


def host_facts(
    sysfs: Path = Path("/sys"), proc: Path = Path("/proc"), command: Command = run_command
) -> dict[str, Any]:
    """This node's host, for its facts (systems/health.py's node_facts):
    CPU, NUMA layout, memory, kernel release, firmware and hypervisor, and
    `notes`, why each 'unknown' is unknown."""
    notes: list[str] = []
    _, flags = _cpuinfo(proc)
    firmware = firmware_of(sysfs, notes)
    kernel = _read(proc / "sys/kernel/osrelease")
    if not kernel:
        notes.append(f"kernel release unknown: no {proc / 'sys/kernel/osrelease'}")
    return {
        "cpu": {"arch": os.uname().machine, **cpu_of(sysfs, proc, command, notes)},
        "numa": numa_of(sysfs, notes),
        "memory": memory_of(proc, command, notes),
        "kernel": kernel or UNKNOWN,
        "firmware": firmware,
        "hypervisor": hypervisor_of(sysfs, flags, firmware, command),
        "notes": notes,
    }


# ------------------------------------------------------------- comparison --


def _size(gib: Any) -> str:
    return f"{gib:g} GiB"


#: What a night's host is compared on with the accepted runs' host: what
#: changes a memory path's figures, each (words, where in the facts, how
#: a value is said, whether two values differ). Not compared: the BIOS's
#: vendor and date (its version says it), the maker and product (the CPU,
#: memory and firmware say what matters of them), which CPUs each NUMA
#: node holds (their count says it), and the GPU driver and CUDA, which
#: ./suite upgrade judges (docs/nightly.md).
COMPARED = (
    ("CPU", ("cpu", "model"), str, None),
    ("sockets", ("cpu", "sockets"), str, None),
    ("cores", ("cpu", "cores"), str, None),
    ("threads a core", ("cpu", "threads_per_core"), str, None),
    ("NUMA nodes", ("numa", "nodes"), str, None),
    ("memory", ("memory", "size_gib"), _size, lambda a, b: abs(a - b) > MEMORY_SIZE_TOLERANCE * max(a, b)),
    ("memory speed", ("memory", "speed_mts"), lambda v: f"{v} MT/s", None),
    ("hypervisor", ("hypervisor",), str, None),
    ("BIOS", ("firmware", "bios_version"), str, None),
    ("kernel", ("kernel",), str, None),
)


def _at(facts: dict[str, Any], where: tuple[str, ...]) -> Any:
    for key in where:
        facts = facts.get(key, UNKNOWN) if isinstance(facts, dict) else UNKNOWN
    return facts


def differences(tonight: dict[str, Any], accepted: dict[str, Any]) -> list[str]:
    """How tonight's host differs from the accepted runs', a phrase a fact
    ('CPU X against Y', 'memory 512 GiB against 256 GiB'); a fact unknown on
    either side is not compared."""
    found = []
    for words, where, said, differ in COMPARED:
        now, then = _at(tonight, where), _at(accepted, where)
        if UNKNOWN in (now, then) or None in (now, then):
            continue
        if differ(now, then) if differ else now != then:
            found.append(f"{words} {said(now)} against {said(then)}")
    return found


def differs_line(found: list[str]) -> str:
    """The line a night says first where its host differs."""
    return f"the host differs from the accepted nodes': {'; '.join(found)}"
