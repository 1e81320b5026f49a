"""Run-time description of the node, on recorded NVML and CUDA readings."""

import pytest
from fake_nvml import FakeCuda, FakeGpu, FakeNvml

from systems import data, features
from systems.detect import detect_node
from systems.rfm import site_configuration


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
    assert node["gpu_link"] == {"type": "nvlink", "generation": 4, "links": 18}
    assert data.speed_of_light(node)["gpu_gpu"] == pytest.approx(450e9)  # NVIDIA's 900 GB/s, both ways
    assert {"gpu", "multigpu", "nvlink"} <= set(features(node))


def test_what_nvml_does_not_say_is_left_out_never_made_up():
    """No memory clock, no NVLink version, two GPUs over PCIe: no HBM figure,
    no NVLink generation, no PCIe generation for the peers (their limit is the
    host link's), each unknown named in the notes, and no limit computed."""
    nvlinked = [FakeGpu(mem_clock=0, nvlinks=[0] * 18, uuid=f"GPU-{i}") for i in range(2)]
    found = _detect(FakeNvml(nvlinked))
    assert "hbm_bandwidth" not in found.node["gpus"]
    assert found.node["gpu_link"] == {"type": "nvlink", "links": 18}
    assert data.speed_of_light(found.node)["hbm"] is None
    assert data.speed_of_light(found.node)["gpu_gpu"] is None
    assert any("HBM bandwidth unknown" in n for n in found.notes)
    assert any("NVLink generation unknown" in n for n in found.notes)
    pcie = _detect(FakeNvml([FakeGpu(uuid=f"GPU-{i}") for i in range(2)])).node
    assert pcie["gpu_link"] == {"type": "pcie"}
    assert data.speed_of_light(pcie)["gpu_gpu"] == data.speed_of_light(pcie)["host_link"]


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
    assert local["extras"]["speed_of_light"].keys() == {"host_link", "gpu_gpu", "hbm"}
