"""The system files: schema validation, derived limits and features."""

import copy
from pathlib import Path

import pytest
import yaml

from systems import SystemDataError, data, features, load_all, load_file, parse_quantity, speed_of_light

GiB = 2**30


@pytest.fixture(scope="module")
def systems():
    return load_all()


def test_every_system_file_loads(systems):
    assert set(systems) == {
        "ac922",
        "summit",
        "dgx-a100",
        "dgx-a100-320g",
        "x86-pcie",
        "local",
        "hopper-vm",
        "ci-slurm",
    }


@pytest.mark.parametrize(
    "text, expected",
    [("16 GiB", 16 * GiB), ("65.65 GiB/s", 65.65 * GiB), ("300 GB/s", 300e9), ("2 TiB", 2 * 2**40), ("512B", 512)],
)
def test_quantities_keep_their_units(text, expected):
    assert parse_quantity(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["16", "16 GiBs", "fast", "1e3 GB"])
def test_quantities_without_a_unit_are_rejected(text):
    with pytest.raises(ValueError):
        parse_quantity(text)


def test_pcie_speed_of_light():
    assert data.pcie_bandwidth(5, 16) == pytest.approx(63.0e9, rel=1e-3)  # the H100's Gen5 x16
    assert data.pcie_bandwidth(3, 16) == pytest.approx(15.75e9, rel=1e-3)
    assert data.pcie_bandwidth(4, 8) == pytest.approx(15.75e9, rel=1e-3)


def _node(systems, name):
    return systems[name]["partitions"][0]["node"]


def test_summit_has_two_bricks_to_its_cpu_and_to_each_peer_of_its_socket(systems):
    node = _node(systems, "summit")
    sol = speed_of_light(node)
    assert sol["host_link"] == pytest.approx(50e9)  # 46.6 GiB/s: below the seed's 63.5
    assert sol["host_link"] < 63.5 * GiB
    assert sol["gpu_peer"] == pytest.approx(50e9)
    assert sol["gpu_fabric"] == pytest.approx(100e9)  # two peers, two bricks each
    assert sol["hbm"] == pytest.approx(900e9)
    # NVML counts six links on each GPU: two to the CPU, two to each peer.
    assert [data.nvlinks_of(node, i) for i in range(6)] == [6] * 6
    assert not data.every_pair_joined(node)  # sockets meet through the CPUs
    assert data.peer_bandwidth(node, 0, 3) is None


def test_the_seeds_four_gpu_ac922_has_three_bricks(systems):
    node = _node(systems, "ac922")
    sol = speed_of_light(node)
    assert sol["host_link"] == pytest.approx(75e9)
    assert 63.5 * GiB < sol["host_link"]  # what the seed measured fits
    assert [data.nvlinks_of(node, i) for i in range(4)] == [6] * 4
    assert data.gpu_pairs(node) == [(0, 1), (2, 3)]


def test_dgx_a100_nvlink3_is_300_gb_per_direction_to_any_peer(systems):
    node = _node(systems, "dgx-a100")
    sol = speed_of_light(node)
    assert sol["gpu_peer"] == sol["gpu_fabric"] == pytest.approx(300e9)
    assert data.every_pair_joined(node)
    assert [data.nvlinks_of(node, i) for i in range(8)] == [12] * 8
    assert sol["host_link"] == pytest.approx(data.pcie_bandwidth(4, 16))
    # Two GPUs share each switch's uplink: eight copying at once get four links.
    assert sol["host_all_gpus"] == pytest.approx(4 * data.pcie_bandwidth(4, 16))


def test_every_declared_link_names_its_source(systems):
    """docs/systems.md's table of links shows these: a link limit without a source is a guess."""
    for name, system in systems.items():
        for part in system["partitions"]:
            node = part.get("node") or {}
            links = [node.get("host_link", {}), node.get("gpu_link", {})]
            for link in links:
                if link.get("type") in ("nvlink", "nvswitch") or link is links[0] and link.get("type") == "pcie":
                    assert link.get("source"), f"{name}:{part['name']}: {link} has no source"


def test_features_follow_the_node(systems):
    summit = features(systems["summit"]["partitions"][0]["node"])
    assert {"gpu", "multigpu", "ats", "nvlink", "numa", "oversubscription"} <= set(summit)
    x86 = features(systems["x86-pcie"]["partitions"][0]["node"])
    assert "ats" not in x86 and "hmm" not in x86 and "nvlink" not in x86


def _write(tmp_path: Path, system: dict, name: str = None) -> Path:
    path = tmp_path / f"{name or system['name']}.yaml"
    path.write_text(yaml.safe_dump(system))
    return path


def test_a_missing_field_names_file_and_field(tmp_path, systems):
    broken = copy.deepcopy(systems["dgx-a100"])
    del broken["partitions"][0]["node"]["gpus"]["count"]
    path = _write(tmp_path, broken)
    with pytest.raises(SystemDataError, match=r"dgx-a100\.yaml: partitions\[0\]\.node\.gpus: 'count' is a required"):
        load_file(path)


def test_a_wrong_type_names_file_and_field(tmp_path, systems):
    broken = copy.deepcopy(systems["summit"])
    broken["partitions"][0]["node"]["gpus"]["count"] = "six"
    with pytest.raises(SystemDataError, match=r"summit\.yaml: partitions\[0\]\.node\.gpus\.count: 'six' is not"):
        load_file(_write(tmp_path, broken))


def test_a_rate_without_unit_is_rejected(tmp_path, systems):
    broken = copy.deepcopy(systems["summit"])
    broken["partitions"][0]["node"]["host_link"]["bandwidth"] = "65.65"
    with pytest.raises(SystemDataError, match=r"host_link\.bandwidth"):
        load_file(_write(tmp_path, broken))


def test_numa_affinity_must_name_existing_nodes(tmp_path, systems):
    broken = copy.deepcopy(systems["summit"])
    broken["partitions"][0]["node"]["gpus"]["numa_affinity"] = [0, 0, 0, 1, 1, 1]
    with pytest.raises(SystemDataError, match=r"numa_affinity: NUMA node 1 is not in numa_nodes"):
        load_file(_write(tmp_path, broken))


def test_partitions_name_declared_environments(tmp_path, systems):
    broken = copy.deepcopy(systems["x86-pcie"])
    broken["partitions"][0]["environments"].append("intel")
    with pytest.raises(SystemDataError, match=r"environments: no environment named 'intel'"):
        load_file(_write(tmp_path, broken))


def test_nvlink_host_link_needs_its_links(tmp_path, systems):
    broken = copy.deepcopy(systems["summit"])
    del broken["partitions"][0]["node"]["host_link"]["links"]
    with pytest.raises(SystemDataError, match=r"host_link: NVLink needs links \(or a bandwidth\)"):
        load_file(_write(tmp_path, broken))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"pairs": [[0, 6]]}, r"gpu_link\.pairs: \[0, 6\] is not a pair of the node's 6 GPUs"),
        ({"pairs": [[2, 2]]}, r"gpu_link\.pairs: \[2, 2\] is not a pair"),
        ({"links_per_peer": None}, r"gpu_link\.links_per_peer: required with pairs"),
    ],
)
def test_gpu_pairs_are_checked(tmp_path, systems, change, message):
    broken = copy.deepcopy(systems["summit"])
    link = broken["partitions"][0]["node"]["gpu_link"]
    for key, value in change.items():
        link.pop(key) if value is None else link.__setitem__(key, value)
    with pytest.raises(SystemDataError, match=message):
        load_file(_write(tmp_path, broken))


def test_file_name_and_system_name_agree(tmp_path, systems):
    with pytest.raises(SystemDataError, match=r"must match the file name 'other'"):
        load_file(_write(tmp_path, systems["summit"], name="other"))


def test_a_declared_system_needs_its_node(tmp_path, systems):
    broken = copy.deepcopy(systems["x86-pcie"])
    del broken["partitions"][0]["node"]
    with pytest.raises(SystemDataError, match=r"partitions\[0\]\.node: required unless"):
        load_file(_write(tmp_path, broken))


def test_spack_data_requires_each_systems_cuda_archs(systems):
    from rfmconfig.settings import DEFAULT_CUDA_ARCHS

    """`spack -e "$GPU_MEMPATHS_ROOT" install` concretizes as written: the
    GPU architectures come from the system's Spack data, and they are the
    ones its systems/<name>.yaml builds for."""
    spack_dir = Path(data.SYSTEMS_DIR) / "spack"
    for name, system in systems.items():
        spack_file = spack_dir / f"{name}.yaml"
        uses_spack = any("spack" in env.get("features", []) for env in system["environments"])
        if not uses_spack and not spack_file.exists():
            continue
        assert spack_file.exists(), f"{name} builds with Spack but has no {spack_file}"
        packages = yaml.safe_load(spack_file.read_text())["packages"]
        required = packages["gpu-mempaths"]["require"]
        (arch,) = [r.removeprefix("cuda_arch=") for r in required if r.startswith("cuda_arch=")]
        spack_archs = tuple(int(a) for a in arch.split(","))
        archs = {part.get("cuda_archs") and tuple(part["cuda_archs"]) for part in system["partitions"]} - {None}
        if archs:
            assert archs == {spack_archs}, f"{spack_file}: cuda_arch={arch}, not {archs}"
        else:  # described at run time: what a build covers by default
            assert set(spack_archs) <= set(DEFAULT_CUDA_ARCHS), f"{spack_file}: cuda_arch={arch}"
        # CUDA 13 no longer targets Volta (sm_70).
        cuda = packages["cuda"]["externals"][0]["spec"]
        if int(cuda.split("@")[1].split(".")[0]) >= 13:
            assert 70 not in spack_archs, f"{spack_file}: sm_70 with {cuda}"


def test_spacks_build_link_in_the_checkout_is_ignored():
    import subprocess

    repo = Path(data.SYSTEMS_DIR).parent
    link = "build-linux-ubuntu22.04-zen2-abcdefg"  # what an in-place develop build leaves
    assert subprocess.run(["git", "check-ignore", "-q", link], cwd=repo).returncode == 0


def test_the_docs_give_each_declared_systems_links_with_their_source(systems):
    import re

    readme = (Path(data.SYSTEMS_DIR).parent / "docs" / "systems.md").read_text()
    table = readme[readme.index("Their links, per direction") :].split("\n\n")[1]
    rows = {m[1]: m[0] for m in re.finditer(r"^\| `([\w-]+)` \|.*$", table, re.MULTILINE)}
    declared = {n: s for n, s in systems.items() if not s.get("detect")}
    assert set(rows) == set(declared)
    for name, system in declared.items():
        cells = [c.strip() for c in rows[name].strip("|").split("|")]
        host = speed_of_light(system["partitions"][0]["node"])["host_link"]
        stated = [float(x) for x in re.findall(r"([0-9.]+) GB/s", cells[1])]
        assert any(abs(x * 1e9 / host - 1) < 0.01 for x in stated), f"{name}: {cells[1]} is not {host / 1e9:g} GB/s"
        assert cells[-1], f"{name}: no source"


def _with_gpu_link(systems, name, link, count=None):
    node = copy.deepcopy(_node(systems, name))
    node["gpu_link"] = link
    if count:
        node["gpus"]["count"], node["gpus"]["numa_affinity"] = count, [node["numa_nodes"][0]] * count
    return node


def test_a_declared_pair_bandwidth_is_used(systems):
    node = _with_gpu_link(systems, "summit", {"type": "nvlink", "bandwidth": "50 GB/s"})
    assert data.peer_bandwidth(node, 0, 5) == pytest.approx(50e9)  # every pair, at the declared rate
    assert data.fabric_bandwidth(node) == pytest.approx(250e9)


def test_two_gpus_with_links_per_gpu_are_one_joined_pair(systems):
    node = _with_gpu_link(systems, "x86-pcie", {"type": "nvlink", "generation": 4, "links_per_gpu": 18})
    assert data.gpu_pairs(node) == [(0, 1)]
    assert data.peer_bandwidth(node) == pytest.approx(450e9)


@pytest.mark.parametrize(
    "link, message",
    [
        (
            {"type": "nvlink", "generation": 2, "links_per_peer": 2, "pairs": [[0, 1], [1, 0]]},
            r"\[1, 0\] is given twice",
        ),
        ({"type": "nvswitch", "generation": 3, "links_per_peer": 12}, r"links_per_peer: through NVSwitch"),
    ],
)
def test_pairs_given_twice_and_per_peer_links_through_a_switch_are_rejected(tmp_path, systems, link, message):
    broken = copy.deepcopy(systems["summit"])
    broken["partitions"][0]["node"]["gpu_link"] = link
    with pytest.raises(SystemDataError, match=message):
        load_file(_write(tmp_path, broken))


def test_pcie_peers_across_sockets_are_refused():
    """x86 root complexes route no peer-to-peer traffic between sockets."""
    import copy

    from systems import data

    x86 = copy.deepcopy(data.load_all()["x86-pcie"])
    assert data.gpu_pairs(x86["partitions"][0]["node"]) == []
    x86["partitions"][0]["node"]["gpu_link"] = {"type": "pcie"}
    with pytest.raises(data.SystemDataError, match="GPUs 0 and 1 hang off different sockets"):
        data.validate(x86, "x86-pcie.yaml")
    x86["partitions"][0]["node"]["gpus"]["numa_affinity"] = [0, 0]  # under one socket's switch
    data.validate(x86, "x86-pcie.yaml")


def test_a_variant_extends_its_system_and_overrides_what_differs(systems):
    big, small = systems["dgx-a100"], systems["dgx-a100-320g"]
    gpus = small["partitions"][0]["node"]["gpus"]
    assert (gpus["model"], gpus["memory"], gpus["hbm_bandwidth"]) == ("NVIDIA A100-SXM4-40GB", "40 GiB", "1555 GB/s")
    assert gpus["numa_affinity"] == big["partitions"][0]["node"]["gpus"]["numa_affinity"]
    assert small["environments"] == big["environments"] and small["hostnames"] == []
    assert small["partitions"][0]["node"]["gpu_link"] == big["partitions"][0]["node"]["gpu_link"]


def test_merging_lays_named_entries_on_their_namesakes():
    from systems.data import merged

    base = {"a": 1, "parts": [{"name": "x", "v": {"p": 1, "q": 2}}, {"name": "y"}], "l": [1, 2]}
    over = {"parts": [{"name": "x", "v": {"q": 3}}, {"name": "z"}], "l": [3]}
    assert merged(base, over) == {
        "a": 1,
        "parts": [{"name": "x", "v": {"p": 1, "q": 3}}, {"name": "y"}, {"name": "z"}],
        "l": [3],
    }


def test_a_host_name_selects_its_system_and_the_catch_all_comes_last(systems):
    from systems.data import system_for_host

    assert system_for_host(systems, "x86-pcie01") == "x86-pcie"  # 'local' (.*) sorts first by name, matches last
    assert system_for_host(systems, "dgx07") == "dgx-a100"
    assert system_for_host(systems, "laptop") == "local"
