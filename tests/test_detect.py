"""Run-time description of the node, on recorded NVML and CUDA readings."""

import pytest
from fake_nvml import FakeCuda, FakeGpu, FakeNvml

from rfmconfig.settings import site_configuration
from systems import data, features
from systems.detect import detect_node


def _detect(nvml, cuda=None):
    return detect_node(nvml=nvml, cuda_factory=lambda: cuda or FakeCuda())


def test_one_h100_on_pcie_gen5_without_hmm():
    found = _detect(FakeNvml([FakeGpu()]))
    node = found.node
    assert node["gpus"]["count"] == 1
    assert node["gpus"]["model"] == "NVIDIA H100 80GB HBM3"
    assert node["gpus"]["compute_capability"] == "9.0"
    # The maximum link, not the idle one it trained down to.
    assert node["host_link"] == {"type": "pcie", "generation": 5, "width": 16}
    gpu = found.info["gpus"][0]
    assert gpu["pcie_current"] == [1, 16] and gpu["pcie_max"] == [5, 16]
    assert gpu["persistence_mode"] is True and gpu["ecc"] is True
    assert node["addressing"] == "none"
    assert "gpu_link" not in node
    assert found.info["driver_version"] == "580.159.04"
    assert found.info["cuda_driver_version"] == "13.0"
    sol = data.speed_of_light(node)
    assert sol["host_link"] == pytest.approx(63.0e9, rel=1e-3)
    assert sol["hbm"] == pytest.approx(3352e9, rel=1e-3)
    assert "gpu" in features(node)
    assert not {"ats", "hmm", "nvlink", "multigpu"} & set(features(node))


def test_two_h200_joined_by_nv18():
    # NVML's version enum says 6 for NVLink 4.0.
    gpus = [FakeGpu(name="NVIDIA H200", nvlinks=[6] * 18, uuid=f"GPU-{i}") for i in range(2)]
    node = _detect(FakeNvml(gpus)).node
    assert node["gpu_link"] == {"type": "nvlink", "generation": 4, "links_per_peer": 18}
    sol = data.speed_of_light(node)
    assert sol["gpu_peer"] == sol["gpu_fabric"] == pytest.approx(450e9)  # NVIDIA's 900 GB/s, both ways
    assert {"gpu", "multigpu", "nvlink"} <= set(features(node))


def test_links_to_nvswitch_reach_every_peer():
    gpus = [FakeGpu(name="NVIDIA H200", nvlinks=[6] * 18, nvlink_remotes=[2] * 18, uuid=f"GPU-{i}") for i in range(4)]
    node = _detect(FakeNvml(gpus)).node
    assert node["gpu_link"] == {"type": "nvswitch", "generation": 4, "links_per_gpu": 18}
    assert data.every_pair_joined(node)
    assert data.speed_of_light(node)["gpu_peer"] == pytest.approx(450e9)


def test_a_power9_v100s_links_to_its_cpu_are_its_host_link():
    # A Summit V100: 2 links to the POWER9's NPU, 2 to each of two peers.
    remotes = [1, 1, 0, 0, 0, 0]
    gpus = [
        FakeGpu(name="Tesla V100-SXM2-16GB", cc=(7, 0), nvlinks=[2] * 6, nvlink_remotes=remotes, uuid=f"GPU-{i}")
        for i in range(6)
    ]
    found = _detect(FakeNvml(gpus), FakeCuda(1, 1))
    node = found.node
    assert node["host_link"] == {"type": "nvlink", "links": 2, "generation": 2}
    assert data.speed_of_light(node)["host_link"] == pytest.approx(50e9)
    # Which peers the 4 GPU links join is not read: no pair limit, a per-GPU one.
    assert node["gpu_link"] == {"type": "nvlink", "generation": 2, "links_per_gpu": 4}
    assert data.speed_of_light(node)["gpu_peer"] is None
    assert data.speed_of_light(node)["gpu_fabric"] == pytest.approx(100e9)
    assert any("pairs not read" in n for n in found.notes)
    assert node["addressing"] == "ats"


def test_what_nvml_does_not_say_is_left_out_never_made_up():
    """No memory clock, no NVLink version, two GPUs over PCIe: no HBM figure,
    no NVLink generation, no PCIe generation for the peers (their limit is the
    host link's), each unknown named in the notes, and no limit computed."""
    nvlinked = [FakeGpu(mem_clock=0, nvlinks=[0] * 18, uuid=f"GPU-{i}") for i in range(2)]
    found = _detect(FakeNvml(nvlinked))
    assert "hbm_bandwidth" not in found.node["gpus"]
    assert found.node["gpu_link"] == {"type": "nvlink", "links_per_peer": 18}
    assert data.speed_of_light(found.node)["hbm"] is None
    assert data.speed_of_light(found.node)["gpu_peer"] is None
    assert any("HBM bandwidth unknown" in n for n in found.notes)
    assert any("NVLink generation unknown" in n for n in found.notes)
    pcie = _detect(FakeNvml([FakeGpu(uuid=f"GPU-{i}") for i in range(2)])).node
    assert pcie["gpu_link"] == {"type": "pcie"}
    assert data.speed_of_light(pcie)["gpu_peer"] == data.speed_of_light(pcie)["host_link"]


@pytest.mark.parametrize("pageable, host_tables, mode", [(0, 0, "none"), (1, 0, "hmm"), (1, 1, "ats")])
def test_addressing_mode_from_the_cuda_driver(pageable, host_tables, mode):
    node = _detect(FakeNvml([FakeGpu()]), FakeCuda(pageable, host_tables)).node
    assert node["addressing"] == mode
    assert (mode in features(node)) == (mode != "none")


def test_no_driver_means_no_gpu_and_says_why():
    found = _detect(FakeNvml([], fail_init="Driver Not Loaded"))
    assert found.node["gpus"] == {"count": 0}
    assert found.node["host_link"] == {"type": "none"}
    assert any("Driver Not Loaded" in note for note in found.notes)
    assert "gpu" not in features(found.node)


def test_gpu_numa_affinity_extends_the_numa_nodes():
    gpus = [FakeGpu(numa=0), FakeGpu(numa=1)]
    node = _detect(FakeNvml(gpus)).node
    assert node["gpus"]["numa_affinity"] == [0, 1]
    assert 1 in node["numa_nodes"]


def test_configuration_builds_on_this_machine():
    config = site_configuration()
    names = [s["name"] for s in config["systems"]]
    assert names[-1] == "local"  # the catch-all comes last
    local = config["systems"][-1]["partitions"][0]
    assert "detected" in local["features"]
    assert local["extras"]["speed_of_light"].keys() == {
        "host_link",
        "host_all_gpus",
        "gpu_peer",
        "gpu_fabric",
        "hbm",
        "host_memory",
    }


def test_a_power9_node_whose_driver_gives_no_nvlink_version_still_configures():
    # NVLink links to the CPU, but no version: the host link is NVLink with an
    # unknown limit, and the configuration (which validates it) still builds.
    gpus = [
        FakeGpu(
            name="Tesla V100-SXM2-16GB", cc=(7, 0), nvlinks=[0] * 6, nvlink_remotes=[1, 1, 0, 0, 0, 0], uuid=f"GPU-{i}"
        )
        for i in range(6)
    ]
    found = _detect(FakeNvml(gpus), FakeCuda(1, 1))
    assert found.node["host_link"] == {"type": "nvlink", "links": 2}
    assert data.speed_of_light(found.node)["host_link"] is None
    data._check_node(found.node, "detected")  # what rfm.detected_node() validates
    assert any("NVLink generation unknown" in n for n in found.notes)


def test_links_whose_far_end_nvml_cannot_name_are_taken_as_peers_with_a_note():
    gpus = [FakeGpu(name="NVIDIA H200", nvlinks=[6] * 18, uuid=f"GPU-{i}") for i in range(2)]
    found = _detect(FakeNvml(gpus))
    assert any("does not say what each NVLink link leads to" in n for n in found.notes)


#: /proc/cpuinfo's first processor on the H100 machines: the hypervisor hides the model name.
_EMERALD_RAPIDS_VM = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 207
model name\t: Intel(R) Xeon(R) Processor
stepping\t: 2

processor\t: 1
vendor_id\t: GenuineIntel
"""


def test_host_memorys_bound_comes_from_the_cpus_family_and_model_whatever_its_name(tmp_path):
    from systems.detect import _cpu

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(_EMERALD_RAPIDS_VM)
    cpu = _cpu(tmp_path, cpuinfo)
    # Emerald Rapids: 8 channels of DDR5-5600 a socket.
    assert cpu["model"] == "Intel(R) Xeon(R) Processor" and cpu["memory_bandwidth"] == "358.4 GB/s"
    assert data.speed_of_light({"cpu": cpu, "gpus": {"count": 0}, "host_link": {"type": "none"}})[
        "host_memory"
    ] == pytest.approx(358.4e9)
    cpuinfo.write_text(_EMERALD_RAPIDS_VM.replace("207", "999"))
    assert "memory_bandwidth" not in _cpu(tmp_path, cpuinfo)  # an unlisted CPU: no bound, not a guess
    cpuinfo.unlink()
    assert _cpu(tmp_path, cpuinfo)["model"] == "unknown"
