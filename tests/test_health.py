"""Node health decisions on recorded NVML readings."""

import copy

import pytest
from fake_nvml import FakeCuda, FakeGpu, FakeNvml

from systems import load_all
from systems.detect import detect_node
from systems.health import evaluate, main


@pytest.fixture(scope="module")
def dgx():
    part = load_all()["dgx-a100"]["partitions"][0]
    return part["node"], part["health"]


def _a100(i, **kw):
    numa = [3, 3, 1, 1, 7, 7, 5, 5][i]
    base = dict(name="NVIDIA A100-SXM4-80GB", cc=(8, 0), numa=numa, pcie_max=(4, 16), pcie_current=(4, 16),
                nvlinks=[4] * 12, uuid=f"GPU-{i}")  # fmt: skip
    base.update(kw)
    return FakeGpu(**base)


def _readings(gpus, driver="535.104.05", cuda=12020):
    return detect_node(nvml=FakeNvml(gpus, driver=driver, cuda=cuda), cuda_factory=FakeCuda)


def _failures(findings):
    return [f.line() for f in findings if not f.ok]


def test_healthy_dgx_a100_passes(dgx):
    node, health = dgx
    findings = evaluate(node, health, _readings([_a100(i) for i in range(8)]))
    assert _failures(findings) == []
    assert len(findings) > 8 * 6


def test_degraded_link_names_the_gpu_and_field(dgx):
    node, health = dgx
    gpus = [_a100(i) for i in range(8)]
    gpus[5] = _a100(5, pcie_max=(3, 16), pcie_current=(3, 8))
    assert _failures(evaluate(node, health, _readings(gpus))) == [
        "FAIL gpu5 pcie_generation: expected 4, found 3",
        "FAIL gpu5 pcie_width: expected x16, found x8",
    ]


def test_idle_link_generation_is_not_a_failure(dgx):
    node, health = dgx
    gpus = [_a100(i, pcie_current=(1, 16)) for i in range(8)]  # power saving at idle
    assert _failures(evaluate(node, health, _readings(gpus))) == []


def test_missing_gpu(dgx):
    node, health = dgx
    failures = _failures(evaluate(node, health, _readings([_a100(i) for i in range(7)])))
    assert failures == ["FAIL gpu_count: expected 8, found 7"]


def test_old_driver(dgx):
    node, health = dgx
    failures = _failures(evaluate(node, health, _readings([_a100(i) for i in range(8)], driver="460.32.03")))
    assert failures == ["FAIL driver_version: expected >= 470.82, found 460.32.03"]


def test_nvlink_down_persistence_off_and_ecc_off(dgx):
    node, health = dgx
    gpus = [_a100(i) for i in range(8)]
    gpus[2] = _a100(2, nvlinks=[4] * 11, persistence=0, ecc=(0, 0))
    assert _failures(evaluate(node, health, _readings(gpus))) == [
        "FAIL gpu2 nvlinks_up: expected 12, found 11",
        "FAIL gpu2 persistence_mode: expected True, found False",
        "FAIL gpu2 ecc: expected True, found False",
    ]


def test_wrong_numa_affinity(dgx):
    node, health = dgx
    gpus = [_a100(i) for i in range(8)]
    gpus[0] = _a100(0, numa=0)
    node = copy.deepcopy(node)
    assert _failures(evaluate(node, health, _readings(gpus))) == ["FAIL gpu0 numa_node: expected 3, found 0"]


def test_local_reports_and_passes(capsys):
    status = main(["--system", "local", "--partition", "default"],
                  detect=lambda: _readings([FakeGpu()], driver="580.159.04", cuda=13000))  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0
    assert "PASS gpu0 pcie_max: gen5 x16" in out
    assert "PASS driver_version: 580.159.04" in out
    assert out.rstrip().endswith("0 failures")


def test_declared_system_fails_with_exit_status_one(capsys):
    status = main(["--system", "dgx-a100", "--partition", "gpu"], detect=lambda: _readings([FakeGpu()]))
    assert status == 1
    assert "FAIL gpu_count: expected 8, found 1" in capsys.readouterr().out
