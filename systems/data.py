"""Load the system descriptions under systems/ and derive what checks need.

Each system is one YAML file validated against ``schema.json``; a file that
does not match fails with its path and the offending field. Quantities are
written with units ("16 GiB", "65.65 GiB/s", "300 GB/s") and read as bytes or
bytes per second, so every figure is written once, in the unit of its source.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import Any

import yaml

from . import cuda_drivers

SYSTEMS_DIR = Path(__file__).resolve().parent
SCHEMA_FILE = SYSTEMS_DIR / "schema.json"

_UNITS = {
    "": 1,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}
_QUANTITY = re.compile(r"^(?P<value>[0-9]+(?:\.[0-9]+)?) ?(?P<prefix>[KMGT]i?)?B(?P<rate>/s)?$")

# PCIe: transfer rate per lane (GT/s) and line-code efficiency by generation.
_PCIE_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
_PCIE_ENCODING = {1: 8 / 10, 2: 8 / 10, 3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 242 / 256}

# NVLink: one link's data rate per direction (GB/s) by generation, as NVIDIA
# publishes it: half of the per-link bidirectional figure (NVLink3 50 GB/s,
# NVLink4 50 GB/s, NVLink5 100 GB/s). This is the basis of the seed's 300 GB/s
# per DGX-A100 GPU (12 x 25); the signalling rates of NVLink4 and 5 (26.5625
# and 53.125 GB/s) include the line code and FEC, as PCIe's GT/s do before
# _PCIE_ENCODING.
_NVLINK_GBS = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}


class SystemDataError(ValueError):
    """A system file is missing, malformed or inconsistent."""


def parse_quantity(text: str) -> float:
    """'16 GiB' -> 17179869184.0; '65.65 GiB/s' -> bytes per second."""
    match = _QUANTITY.match(text.strip())
    if not match:
        raise ValueError(f"not a quantity with a unit such as '16 GiB' or '300 GB/s': {text!r}")
    return float(match["value"]) * _UNITS[match["prefix"] or ""]


def pcie_bandwidth(generation: int, width: int) -> float:
    """A PCIe link's line rate per direction after encoding (8b/10b, 128b/130b),
    in bytes per second: what the link carries, framing and headers included;
    what TLPs deliver as payload is less (docs/results/um_bandwidth.md, PCIe framing)."""
    if generation not in _PCIE_GTS:
        raise ValueError(f"unknown PCIe generation {generation}")
    return _PCIE_GTS[generation] * 1e9 * _PCIE_ENCODING[generation] * width / 8


def nvlink_bandwidth(generation: int, links: int) -> float:
    """Bandwidth per direction of `links` NVLink links, in bytes per second."""
    if generation not in _NVLINK_GBS:
        raise ValueError(f"unknown NVLink generation {generation}")
    return _NVLINK_GBS[generation] * 1e9 * links


def _schema() -> dict[str, Any]:
    return json.loads(SCHEMA_FILE.read_text())


def _field_path(error) -> str:
    """Where in the description a jsonschema.ValidationError points."""
    path = ""
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "(top level)"


def validate(data: Any, source: str) -> dict[str, Any]:
    """Validate one system description; errors name the file and the field."""
    # Imported here: a tenth of a second that every case's watch (systems/watch.py), which validates nothing,
    # would pay at its start.
    import jsonschema

    validator = jsonschema.Draft202012Validator(_schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"{source}: {_field_path(e)}: {e.message}" for e in errors]
        raise SystemDataError("invalid system description:\n  " + "\n  ".join(lines))
    _check_consistency(data, source)
    return data


def _drivers_needed(system: dict[str, Any]) -> dict[str, str]:
    """The oldest driver each environment's toolkit needs, by environment (those that name one)."""
    return {env["name"]: cuda_drivers.minimum_driver(env["cuda"]) for env in system["environments"] if env.get("cuda")}


def driver_min(system: dict[str, Any], part: dict[str, Any]) -> str | None:
    """The oldest driver a partition's nodes may run: what the toolkits of its
    environments need (cuda_drivers.py), or the newer one its health data names."""
    needed = _drivers_needed(system)
    return cuda_drivers.newest(part.get("health", {}).get("driver_min"), *(needed.get(n) for n in part["environments"]))


def _check_toolkits(system: dict[str, Any], source: str) -> None:
    """An environment that loads a CUDA module builds with that CUDA, one the
    driver table knows; a partition's own driver_min is never older than its
    toolkits need."""
    for i, env in enumerate(system["environments"]):
        for module in env.get("modules", []):
            found = re.fullmatch(r"cuda/(\d+\.\d+(?:\.\d+)*)", module)
            if found and env.get("cuda") != found[1]:
                raise SystemDataError(
                    f"{source}: environments[{i}].cuda: the module {module} builds with CUDA "
                    f"{found[1]}, the environment says {env.get('cuda')}"
                )
        try:
            if env.get("cuda"):
                cuda_drivers.minimum_driver(env["cuda"])
        except ValueError as err:
            raise SystemDataError(f"{source}: environments[{i}].cuda: {err}") from None
    needed, cuda = _drivers_needed(system), {env["name"]: env.get("cuda") for env in system["environments"]}
    for i, part in enumerate(system["partitions"]):
        declared = part.get("health", {}).get("driver_min")
        for name in part["environments"]:
            if declared and name in needed and cuda_drivers.newest(declared, needed[name]) != declared:
                raise SystemDataError(
                    f"{source}: partitions[{i}].health.driver_min: {declared} is older than the "
                    f"{needed[name]} that environment {name}'s CUDA {cuda[name]} needs "
                    "(drop it: it follows from the toolkit)"
                )


def _check_consistency(system: dict[str, Any], source: str) -> None:
    env_names = {env["name"] for env in system["environments"]}
    _check_toolkits(system, source)
    for i, part in enumerate(system["partitions"]):
        where = f"{source}: partitions[{i}]"
        for env in part["environments"]:
            if env not in env_names:
                raise SystemDataError(f"{where}.environments: no environment named {env!r} in this file")
        if "node" not in part and not system.get("detect"):
            raise SystemDataError(f"{where}.node: required unless the system sets 'detect: true'")
        node = part.get("node")
        if node:
            _check_node(node, f"{where}.node")


def _check_node(node: dict[str, Any], where: str) -> None:
    gpus = node["gpus"]
    affinity = gpus.get("numa_affinity")
    if affinity is not None and len(affinity) != gpus["count"]:
        raise SystemDataError(f"{where}.gpus.numa_affinity: {len(affinity)} entries for {gpus['count']} GPUs")
    for numa in affinity or []:
        if numa not in node["numa_nodes"]:
            raise SystemDataError(f"{where}.gpus.numa_affinity: NUMA node {numa} is not in numa_nodes")
    link = node["host_link"]
    if link["type"] == "pcie" and "bandwidth" not in link and not {"generation", "width"} <= link.keys():
        raise SystemDataError(f"{where}.host_link: PCIe needs generation and width (or a bandwidth)")
    # An NVLink host link needs its links; without a generation (a driver
    # that does not say) its limit is unknown, never guessed.
    if link["type"] == "nvlink" and "bandwidth" not in link and "links" not in link:
        raise SystemDataError(f"{where}.host_link: NVLink needs links (or a bandwidth)")
    if link["type"] == "nvlink-c2c" and "bandwidth" not in link:
        raise SystemDataError(f"{where}.host_link.bandwidth: required for an nvlink-c2c host link")
    _check_gpu_link(node, f"{where}.gpu_link")
    if gpus["count"] > 0:
        for field in ("model", "memory", "hbm_bandwidth"):
            if field not in gpus:
                raise SystemDataError(f"{where}.gpus.{field}: required when count > 0")


def socket_of(node: dict[str, Any], numa: int) -> int:
    """The CPU socket of a NUMA node: the NUMA nodes split evenly over the
    sockets, in order (NPS4 gives a socket four)."""
    nodes = node["numa_nodes"]
    return nodes.index(numa) * node["cpu"]["sockets"] // len(nodes)


def _check_gpu_link(node: dict[str, Any], where: str) -> None:
    link, count = node.get("gpu_link", {"type": "none"}), node["gpus"]["count"]
    affinity = node["gpus"].get("numa_affinity")
    if link["type"] == "pcie" and affinity and count > 1:
        pairs = link.get("pairs") or [(a, b) for a in range(count) for b in range(a + 1, count)]
        for a, b in pairs:
            if max(a, b) >= count:
                continue  # named below, with the pairs
            if socket_of(node, affinity[a]) != socket_of(node, affinity[b]):
                raise SystemDataError(
                    f"{where}: GPUs {a} and {b} hang off different sockets, whose link x86 root complexes do not "
                    "route peer-to-peer: name the pairs under one socket (pairs), or type none"
                )
    seen = set()
    for pair in link.get("pairs", []):
        if pair[0] == pair[1] or max(pair) >= count:
            raise SystemDataError(f"{where}.pairs: {pair} is not a pair of the node's {count} GPUs")
        if tuple(sorted(pair)) in seen:
            raise SystemDataError(f"{where}.pairs: {pair} is given twice")
        seen.add(tuple(sorted(pair)))
    if link["type"] == "nvswitch" and "links_per_peer" in link:
        raise SystemDataError(
            f"{where}.links_per_peer: through NVSwitch a GPU's links reach every peer; give links_per_gpu"
        )
    if link["type"] == "nvlink" and "pairs" in link and "links_per_peer" not in link:
        raise SystemDataError(f"{where}.links_per_peer: required with pairs (the links joining each pair)")
    if link["type"] == "nvswitch" and "pairs" in link:
        raise SystemDataError(f"{where}.pairs: every pair meets through NVSwitch; give links_per_gpu")


def parse_yaml(text: str) -> Any:
    """YAML text as data, safely, by libyaml where PyYAML was built with it:
    the tests and a dry run read the system files hundreds of times, and
    PyYAML's pure-Python scanner is ten times slower."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _read(path: Path) -> Any:
    try:
        return parse_yaml(path.read_text())
    except yaml.YAMLError as err:
        raise SystemDataError(f"{path}: not valid YAML: {err}") from err
    except OSError as err:
        raise SystemDataError(f"{path}: {err.strerror}") from err


def merged(base: Any, over: Any) -> Any:
    """`over` laid on `base`: mappings key by key, lists of named entries
    (partitions, environments) entry by entry by name, anything else replaced."""
    if isinstance(base, dict) and isinstance(over, dict):
        return {**base, **{k: merged(base[k], v) if k in base else v for k, v in over.items()}}
    named = lambda items: isinstance(items, list) and all(isinstance(i, dict) and "name" in i for i in items)  # noqa: E731
    if named(base) and named(over):
        extra = {i["name"]: i for i in over}
        return [merged(i, extra.pop(i["name"])) if i["name"] in extra else i for i in base] + list(extra.values())
    return over


def _raw_system(path: Path, seen: tuple = ()) -> Any:
    """A system file as written, or, with 'extends: NAME', NAME's file with this one laid on it."""
    raw = _read(path)
    if not isinstance(raw, dict) or "extends" not in raw:
        return raw
    base = path.parent / f"{raw['extends']}.yaml"
    if base in seen:
        raise SystemDataError(f"{path}: extends: {raw['extends']} extends this file again")
    return merged(_raw_system(base, (*seen, path)), {k: v for k, v in raw.items() if k != "extends"})


def load_file(path: Path) -> dict[str, Any]:
    system = validate(_raw_system(path), str(path))
    if system["name"] != path.stem:
        raise SystemDataError(f"{path}: name: {system['name']!r} must match the file name {path.stem!r}")
    return system


def load_all(directory: Path = SYSTEMS_DIR) -> dict[str, dict[str, Any]]:
    """Every system file in `directory`, by name, in file-name order."""
    files = sorted(directory.glob("*.yaml"))
    if not files:
        raise SystemDataError(f"{directory}: no system files (*.yaml)")
    return {path.stem: load_file(path) for path in files}


#: Known names listed in full up to this many; more are counted.
LISTED = 20


def unknown(option: str, word: str, known) -> str:
    """A usage error's message for a word no known name matches, with the nearest known ones:
    "--system 'sumit': not known (did you mean summit?); known: ac922, ..."."""
    known = sorted(set(known))
    near = difflib.get_close_matches(word, known, n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(near)}?)" if near else ""
    listed = ", ".join(known) if len(known) <= LISTED else f"{len(known)} names"
    return f"{option} {word!r}: not known{hint}; known: {listed}"


def known_system(name: str, systems: dict[str, dict[str, Any]] | None = None, partition: bool = True) -> str:
    """`name` ('summit', or 'summit:batch' as ReFrame takes it where `partition`), or SystemExit naming
    it and the nearest declared systems: a typo'd system is a usage error (exit 3), never a night of an
    unknown node."""
    systems = load_all() if systems is None else systems
    system, colon, part = name.partition(":")
    if colon and not partition:
        raise SystemExit(f"--system {name!r}: a system's name ({system}); a partition's night takes --partition")
    if system not in systems:
        raise SystemExit(unknown("--system", system, systems))
    partitions = [p["name"] for p in systems[system].get("partitions", [])]
    if part and partitions and part not in partitions:
        raise SystemExit(unknown(f"--system {system}: partition", part, partitions))
    return name


def system_for_host(systems: dict[str, dict[str, Any]], host: str) -> str | None:
    """The system ReFrame picks for `host`: the first whose host names match,
    a catch-all ('.*', local) only where no other does."""
    for system in sorted(systems.values(), key=lambda s: ".*" in s["hostnames"]):
        if any(re.match(pattern, host) for pattern in system["hostnames"]):
            return system["name"]
    return None


def host_link_bandwidth(node: dict[str, Any]) -> float | None:
    """One GPU's link to its CPU, per direction, bytes per second."""
    host = node["host_link"]
    if "bandwidth" in host:
        return parse_quantity(host["bandwidth"])
    if host["type"] == "pcie" and {"generation", "width"} <= host.keys():
        return pcie_bandwidth(host["generation"], host["width"])
    if host["type"] == "nvlink" and {"generation", "links"} <= host.keys():
        return nvlink_bandwidth(host["generation"], host["links"])
    return None


def gpu_pairs(node: dict[str, Any]) -> list[tuple[int, int]]:
    """The pairs of GPUs joined by links of their own, through a switch or
    through PCIe: every pair unless the data names them, none where NVLink
    links are known per GPU only."""
    count = node["gpus"]["count"]
    link = node.get("gpu_link", {"type": "none"})
    if link["type"] == "none" or count < 2:
        return []
    if "pairs" in link:
        return sorted(tuple(sorted(pair)) for pair in link["pairs"])
    if link["type"] == "nvlink" and count > 2 and not {"links_per_peer", "bandwidth"} & link.keys():
        return []  # links to peers whose pairs are not known
    return [(a, b) for a in range(count) for b in range(a + 1, count)]


def every_pair_joined(node: dict[str, Any]) -> bool:
    count = node["gpus"]["count"]
    return count > 1 and len(gpu_pairs(node)) == count * (count - 1) // 2


def _peers(node: dict[str, Any], gpu: int) -> int:
    return sum(gpu in pair for pair in gpu_pairs(node))


def gpu_links_of(node: dict[str, Any], gpu: int) -> int | None:
    """NVLink links GPU `gpu` has to its peers or their switches."""
    link = node.get("gpu_link", {"type": "none"})
    if link["type"] not in ("nvlink", "nvswitch"):
        return 0
    if "links_per_gpu" in link:
        return link["links_per_gpu"]
    if "links_per_peer" in link:
        return link["links_per_peer"] * _peers(node, gpu)
    return None


def nvlinks_of(node: dict[str, Any], gpu: int) -> int | None:
    """Every NVLink link of one GPU, to its CPU and to its peers: what NVML
    counts as active (six on a Summit V100: two to the CPU, two to each of
    two peers). None where the data does not say; 0 where there are none."""
    gpu_links = gpu_links_of(node, gpu)
    host = node["host_link"]
    host_links = host.get("links") if host["type"] == "nvlink" else 0
    if gpu_links is None or host_links is None:
        return None
    return gpu_links + host_links


def peer_bandwidth(node: dict[str, Any], a: int = 0, b: int = 1) -> float | None:
    """GPU `a` to GPU `b`, per direction, bytes per second, where they are
    joined: their own NVLink links, every link of a GPU through NVSwitch, or
    the PCIe fabric at the host link's rate. None where they are not joined
    or the data does not say."""
    link = node.get("gpu_link", {"type": "none"})
    if tuple(sorted((a, b))) not in gpu_pairs(node):
        return None
    if "bandwidth" in link:
        return parse_quantity(link["bandwidth"])
    if link["type"] == "pcie":
        return host_link_bandwidth(node)
    if "generation" not in link:
        return None
    if link["type"] == "nvswitch" and "links_per_gpu" in link:
        return nvlink_bandwidth(link["generation"], link["links_per_gpu"])
    if link["type"] == "nvlink" and "links_per_peer" in link:
        return nvlink_bandwidth(link["generation"], link["links_per_peer"])
    if link["type"] == "nvlink" and "links_per_gpu" in link and node["gpus"]["count"] == 2:
        return nvlink_bandwidth(link["generation"], link["links_per_gpu"])  # every link to the one peer
    return None


def fabric_bandwidth(node: dict[str, Any]) -> float | None:
    """One GPU to all its peers at once, per direction, bytes per second: the
    least any GPU of the node has (None where unknown)."""
    link = node.get("gpu_link", {"type": "none"})
    count = node["gpus"]["count"]
    if count < 2 or link["type"] == "none":
        return None
    if link["type"] == "pcie":
        return host_link_bandwidth(node)  # peers meet through the PCIe fabric
    if "bandwidth" in link:  # one pair's: a GPU has it to each of its peers
        peers = min(_peers(node, gpu) for gpu in range(count)) if link["type"] == "nvlink" else 1
        return parse_quantity(link["bandwidth"]) * peers or None
    if "generation" not in link:
        return None
    links = [gpu_links_of(node, gpu) for gpu in range(count)]
    if None in links or not all(links):
        return None
    return nvlink_bandwidth(link["generation"], min(links))


def host_all_gpus_bandwidth(node: dict[str, Any]) -> float | None:
    """Every GPU copying to or from the host at once, per direction, bytes
    per second, summed over the node: GPUs behind one upstream link share it."""
    per_link = host_link_bandwidth(node)
    count = node["gpus"]["count"]
    if per_link is None or count == 0:
        return None
    shared_by = node["host_link"].get("shared_by", 1)
    return per_link * -(-count // shared_by)


def speed_of_light(node: dict[str, Any]) -> dict[str, float | None]:
    """Physical limits per direction, bytes per second, None where unknown:
    one GPU's host link, all GPUs' host links at once, one joined pair of
    GPUs (GPUs 0 and 1), one GPU to all its peers at once, HBM, and one
    socket's memory (what bounds any NUMA node's: each is within a socket)."""
    hbm = node["gpus"].get("hbm_bandwidth")
    host_memory = node.get("cpu", {}).get("memory_bandwidth")
    return {
        "host_link": host_link_bandwidth(node),
        "host_all_gpus": host_all_gpus_bandwidth(node),
        "gpu_peer": peer_bandwidth(node, 0, 1),
        "gpu_fabric": fabric_bandwidth(node),
        "hbm": parse_quantity(hbm) if hbm else None,
        "host_memory": parse_quantity(host_memory) if host_memory else None,
    }


def features(node: dict[str, Any]) -> list[str]:
    """Partition features that checks select on (valid_systems '+feature')."""
    feats = ["cpu"]
    count = node["gpus"]["count"]
    if count > 0:
        feats.append("gpu")
    if count > 1:
        feats.append("multigpu")
    if node["addressing"] in ("ats", "hmm"):
        feats.append(node["addressing"])
    link_types = {node["host_link"]["type"], node.get("gpu_link", {}).get("type")}
    if link_types & {"nvlink", "nvlink-c2c", "nvswitch"}:
        feats.append("nvlink")
    if node["libnuma"]:
        feats.append("numa")
    if node.get("gdrdrv"):
        feats.append("gdrdrv")
    if node.get("managed_oversubscription"):
        feats.append("oversubscription")
    return feats
