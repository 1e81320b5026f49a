"""Node health decisions on recorded NVML readings, and faults injected
through the fake NVML: each fails with the GPU and the field named."""

import json
import socket
from pathlib import Path

import pytest
from fake_nvml import FakeCuda, FakeGpu, FakeNvml

from systems import health, load_all
from systems.detect import detect_node
from systems.health import declared_expectation, evaluate, expected_from_accepted, main, node_facts
from systems.watch import allowed_mask


@pytest.fixture(scope="module")
def dgx():
    system = load_all()["dgx-a100"]
    return declared_expectation(system, system["partitions"][0])


def _a100(i, **kw):
    numa = [3, 3, 1, 1, 7, 7, 5, 5][i]
    base = dict(
        name="NVIDIA A100-SXM4-80GB",
        cc=(8, 0),
        numa=numa,
        pcie_max=(4, 16),
        pcie_current=(1, 16),
        pcie_loaded=(4, 16),
        nvlinks=[4] * 12,
        uuid=f"GPU-{i}",
        bus_id=f"00000000:{i:02x}:00.0",
    )
    base.update(kw)
    return FakeGpu(**base)


def _readings(gpus, driver="535.104.05", cuda=12020):
    nvml = FakeNvml(gpus, driver=driver, cuda=cuda)
    return detect_node(nvml=nvml, cuda_factory=lambda: FakeCuda(nvml=nvml), load_links=True)


def _failures(findings):
    return [f.line() for f in findings if not f.ok]


def test_healthy_dgx_a100_passes(dgx):
    findings = evaluate(dgx, _readings([_a100(i) for i in range(8)]))
    assert _failures(findings) == []
    assert len(findings) > 8 * 6


def test_a_link_that_trained_down_names_the_gpu_and_field(dgx):
    gpus = [_a100(i) for i in range(8)]
    gpus[5] = _a100(5, pcie_loaded=(3, 8))  # can train to Gen4 x16, trained to Gen3 x8
    assert _failures(evaluate(dgx, _readings(gpus))) == [
        "FAIL GMP-311 gpu5 pcie_generation: expected 4, found 3",
        "FAIL GMP-312 gpu5 pcie_width: expected x16, found x8",
    ]


def test_the_link_is_judged_as_trained_under_load_not_idle(dgx):
    gpus = [_a100(i, pcie_current=(1, 16)) for i in range(8)]  # power saving at idle
    assert _failures(evaluate(dgx, _readings(gpus))) == []


def test_a_link_that_could_not_be_loaded_is_not_passed(dgx):
    nvml = FakeNvml([_a100(i) for i in range(8)], driver="535.104.05", cuda=12020)
    readings = detect_node(nvml=nvml, cuda_factory=FakeCuda, load_links=False)
    failures = _failures(evaluate(dgx, readings))
    assert len(failures) == 8 and failures[0].startswith(
        "FAIL GMP-310 gpu0 pcie_link: expected gen4 x16, found not read"
    )


def test_missing_gpu(dgx):
    failures = _failures(evaluate(dgx, _readings([_a100(i) for i in range(7)])))
    assert failures == ["FAIL GMP-301 gpu_count: expected 8, found 7"]


def test_old_driver(dgx):
    # The oldest driver the DGX's CUDA 12 toolkits run on (systems/cuda_drivers.py).
    failures = _failures(evaluate(dgx, _readings([_a100(i) for i in range(8)], driver="520.61.05")))
    assert failures == ["FAIL GMP-303 driver_version: expected >= 525.60.13, found 520.61.05"]


def test_nvlink_down_persistence_off_and_ecc_off(dgx):
    gpus = [_a100(i) for i in range(8)]
    gpus[2] = _a100(2, nvlinks=[4] * 11, persistence=0, ecc=(0, 0))
    assert _failures(evaluate(dgx, _readings(gpus))) == [
        "FAIL GMP-314 gpu2 nvlinks_up: expected 12, found 11",
        "FAIL GMP-325 gpu2 persistence_mode: expected True, found False",
        "FAIL GMP-324 gpu2 ecc: expected True, found False",
    ]


def test_wrong_numa_affinity(dgx):
    gpus = [_a100(i) for i in range(8)]
    gpus[0] = _a100(0, numa=0)
    assert _failures(evaluate(dgx, _readings(gpus))) == ["FAIL GMP-316 gpu0 numa_node: expected 3, found 0"]


@pytest.mark.parametrize(
    "fault, line",
    [
        ({"ecc_uncorrected": 3}, "FAIL GMP-320 gpu4 ecc_uncorrected: expected 0, found 3"),
        ({"remapped_rows": (0, 1, 1, 0)}, "FAIL GMP-321 gpu4 remap_pending: expected False, found True"),
        ({"remapped_rows": (0, 1, 0, 1)}, "FAIL GMP-322 gpu4 remap_failure: expected False, found True"),
        ({"retired_pending": 1}, "FAIL GMP-323 gpu4 retired_pending: expected False, found True"),
    ],
)
def test_counted_errors_fail_with_or_without_a_baseline(dgx, fault, line):
    gpus = [_a100(i) for i in range(8)]
    gpus[4] = _a100(4, **fault)
    readings = _readings(gpus)
    assert _failures(evaluate(dgx, readings)) == [line]
    assert _failures(evaluate(None, readings)) == [line]  # nothing expected: still a fault


def test_a_gpu_whose_clocks_slow_at_rest_fails_with_or_without_a_baseline(dgx):
    gpus = [_a100(i) for i in range(8)]
    gpus[3] = _a100(3, clock_events=0x41)  # idle, and HW thermal slowdown
    readings = _readings(gpus)
    line = "FAIL GMP-326 gpu3 clock_events: expected none but gpu_idle, found hw_thermal_slowdown"
    assert _failures(evaluate(dgx, readings)) == [line]
    assert _failures(evaluate(None, readings)) == [line]
    assert "PASS gpu2 clock_events: gpu_idle" in [f.line() for f in evaluate(dgx, readings)]


def test_a_clock_event_reason_the_system_allows_is_no_fault(dgx):
    gpus = [_a100(i, clock_events=0x5) for i in range(8)]  # idle, and the software power cap
    readings = _readings(gpus)
    assert _failures(evaluate(dgx, readings, allowed_mask(["sw_power_cap"]))) == []
    assert len(_failures(evaluate(dgx, readings))) == 8


def test_clock_event_reasons_nvml_cannot_read_are_not_passed(dgx):
    gpus = [_a100(i) for i in range(8)]
    gpus[1] = _a100(1, clock_events=None)
    assert _failures(evaluate(dgx, _readings(gpus))) == [
        "FAIL GMP-326 gpu1 clock_events: expected none but gpu_idle, found unreadable by NVML"
    ]


def test_replays_at_rest_are_reported_and_replays_under_the_links_load_fail(dgx):
    gpus = [_a100(i) for i in range(8)]
    gpus[6] = _a100(6, replays=40)  # counted once, long ago
    findings = evaluate(dgx, _readings(gpus))
    assert _failures(findings) == []
    assert "PASS gpu6 pcie_replays: 40 since the driver loaded, 0 during health's load of the link" in [
        f.line() for f in findings
    ]
    gpus[6] = _a100(6, replays=40, replays_under_load=3)
    line = (
        "FAIL GMP-313 gpu6 pcie_replays: expected 0 during health's load of the link, "
        "found 3 (43 since the driver loaded)"
    )
    readings = _readings(gpus)
    assert _failures(evaluate(dgx, readings)) == [line]
    assert _failures(evaluate(None, readings)) == [line]


# --- a simulated Summit node: six V100s, six NVLink2 links each, ATS ---


@pytest.fixture(scope="module")
def summit():
    system = load_all()["summit"]
    return declared_expectation(system, system["partitions"][0])


def _v100(i, **kw):
    # Two links to the POWER9 (NVML's IBM NPU), two to each peer of the socket;
    # NVML's version enum says 2 or 3 for NVLink 2.x.
    base = dict(
        name="Tesla V100-SXM2-16GB",
        cc=(7, 0),
        memory=16911433728,
        numa=[0, 0, 0, 8, 8, 8][i],
        pcie_max=(3, 16),
        nvlinks=[3] * 6,
        nvlink_remotes=[1, 1, 0, 0, 0, 0],
        uuid=f"GPU-{i}",
        bus_id=f"00000000:{0x04 + i:02x}:00.0",
    )
    base.update(kw)
    return FakeGpu(**base)


def _summit_readings(gpus, ats=True):
    nvml = FakeNvml(gpus, driver="525.85.12", cuda=11070)
    return detect_node(nvml=nvml, cuda_factory=lambda: FakeCuda(1, int(ats), nvml=nvml), load_links=True)


def test_a_healthy_summit_node_passes(summit):
    findings = evaluate(summit, _summit_readings([_v100(i) for i in range(6)]))
    assert _failures(findings) == []
    lines = [f.line() for f in findings]
    assert "PASS addressing: ats" in lines
    assert all(f"PASS gpu{i} nvlinks_up: 6" in lines for i in range(6))
    assert "PASS gpu5 nvlink_version: 2" in lines


def test_a_summit_gpu_with_one_brick_down_fails(summit):
    gpus = [_v100(i) for i in range(6)]
    gpus[4] = _v100(4, nvlinks_down=(3,))  # NVML: link 3 (to a peer) inactive
    assert _failures(evaluate(summit, _summit_readings(gpus))) == ["FAIL GMP-314 gpu4 nvlinks_up: expected 6, found 5"]


def test_a_summit_node_without_ats_fails(summit):
    failures = _failures(evaluate(summit, _summit_readings([_v100(i) for i in range(6)], ats=False)))
    assert failures == ["FAIL GMP-305 addressing: expected ats, found hmm"]


# --- systems described at run time: held to the accepted run's node facts ---


def _h200_pair(**gpu1):
    base = dict(name="NVIDIA H200", nvlinks=[6] * 18)
    return [
        FakeGpu(**base, uuid="GPU-0", bus_id="00000000:01:00.0"),
        FakeGpu(**{**base, **gpu1}, uuid="GPU-1", bus_id="00000000:02:00.0"),
    ]


def _accepted(readings, partition="default"):
    record = {"runs": [], "node": {partition: node_facts(readings)}}
    return expected_from_accepted(record, partition, "accepted.json")


def test_the_accepted_nodes_facts_are_what_a_detected_node_is_held_to():
    accepted = _accepted(_readings(_h200_pair()))
    assert accepted["gpus"][1]["pcie"] == [5, 16] and accepted["gpus"][1]["nvlinks"] == 18
    assert _failures(evaluate(accepted, _readings(_h200_pair()))) == []


@pytest.mark.parametrize(
    "change, expected",
    [
        (
            {"pcie_loaded": (3, 8)},
            [
                "FAIL GMP-311 gpu1 pcie_generation: expected 5, found 3",
                "FAIL GMP-312 gpu1 pcie_width: expected x16, found x8",
            ],
        ),
        ({"nvlinks": [6] * 17}, ["FAIL GMP-314 gpu1 nvlinks_up: expected 18, found 17"]),
        (
            {"name": "NVIDIA H100 80GB HBM3"},
            ["FAIL GMP-302 gpu1 model: expected NVIDIA H200, found NVIDIA H100 80GB HBM3"],
        ),
        ({"numa": 1}, ["FAIL GMP-316 gpu1 numa_node: expected 0, found 1"]),
        ({"ecc": (0, 0)}, ["FAIL GMP-324 gpu1 ecc: expected True, found False"]),
        ({"persistence": 0}, ["FAIL GMP-325 gpu1 persistence_mode: expected True, found False"]),
    ],
)
def test_a_detected_node_that_changed_since_its_acceptance_fails(change, expected):
    accepted = _accepted(_readings(_h200_pair()))
    assert _failures(evaluate(accepted, _readings(_h200_pair(**change)))) == expected


def test_a_gpu_gone_since_the_acceptance_fails():
    accepted = _accepted(_readings(_h200_pair()))
    assert _failures(evaluate(accepted, _readings(_h200_pair()[:1]))) == ["FAIL GMP-301 gpu_count: expected 2, found 1"]


def _detect(gpus):
    return lambda load_links=False: _readings(gpus)


def test_local_without_an_accepted_run_reports_and_says_it_judged_nothing(capsys, tmp_path):
    status = main(
        ["--system", "local", "--partition", "default", "--accepted", str(tmp_path / "none.json")],
        detect=_detect([FakeGpu()]),
    )
    out = capsys.readouterr().out
    assert status == 0
    assert "PASS gpu0 pcie_generation: 5" in out and "PASS gpu0 pcie_width: x16" in out
    assert "PASS driver_version: 535.104.05" in out
    assert out.rstrip().endswith(
        "0 failures, nothing to judge the node's facts against: no accepted run (./suite accept)"
    )


def test_local_against_its_accepted_run_and_the_facts_it_writes(capsys, tmp_path):
    assert (
        main(["--system", "local", "--partition", "default", "--facts-dir", str(tmp_path)], detect=_detect([FakeGpu()]))
        == 0
    )
    # Named by the host the program ran on, not by the job script's launch node.
    record = json.loads((tmp_path / f"node-{socket.gethostname().split('.')[0]}.json").read_text())
    assert record["host"] == socket.gethostname()
    accepted = tmp_path / "accepted.json"
    accepted.write_text(
        json.dumps(
            {"runs": [], "node": {"default": {k: v for k, v in record.items() if k not in ("host", "partition")}}}
        )
    )
    capsys.readouterr()
    args = ["--system", "local", "--partition", "default", "--accepted", str(accepted)]
    assert main(args, detect=_detect([FakeGpu()])) == 0
    assert main(args, detect=_detect([FakeGpu(pcie_loaded=(4, 16))])) == 1
    assert "FAIL GMP-311 gpu0 pcie_generation: expected 5, found 4" in capsys.readouterr().out


def test_declared_system_fails_with_exit_status_one(capsys):
    status = main(["--system", "dgx-a100", "--partition", "gpu"], detect=_detect([FakeGpu()]))
    assert status == 1
    assert "FAIL GMP-301 gpu_count: expected 8, found 1" in capsys.readouterr().out


def _accepted_file(tmp_path, gpus):
    """An accepted.json whose node facts are those of a node with `gpus`."""
    main(["--system", "local", "--partition", "default", "--facts-dir", str(tmp_path)], detect=_detect(gpus))
    (facts,) = tmp_path.glob("node-*.json")
    record = {k: v for k, v in json.loads(facts.read_text()).items() if k not in ("host", "partition")}
    accepted = tmp_path / "accepted.json"
    accepted.write_text(json.dumps({"runs": [], "node": {"default": record}}))
    return ["--system", "local", "--partition", "default", "--accepted", str(accepted)]


def test_a_node_of_other_gpus_is_not_judged_and_one_that_lost_a_gpu_fails(capsys, tmp_path):
    """Another kind of node (the nightly says 'other-kind', exit 3) is not held
    to a baseline of other GPUs, nor of fewer; a node with fewer GPUs than
    the accepted kind of its models is held to that kind, and fails its count."""
    args = _accepted_file(tmp_path, _h100_pair())
    capsys.readouterr()
    for gpus, kind in (([FakeGpu(name="NVIDIA H200")], "1 x NVIDIA H200"), (_h100_pair() * 2, "4 x NVIDIA H100")):
        assert main(args, detect=_detect(gpus)) == 0
        out = capsys.readouterr().out
        assert _fails(out) == []
        assert f"with {kind} 80GB HBM3 (accepted kinds: 2 x NVIDIA H100 80GB HBM3)" in out or f"with {kind} (" in out
    assert main(args, detect=_detect([FakeGpu()])) == 1  # the accepted models, a GPU lost
    assert "FAIL GMP-301 gpu_count: expected 2, found 1" in capsys.readouterr().out


def test_a_kind_the_system_declares_is_its_own_not_a_larger_one_that_lost_a_gpu():
    """One H200 alone, where the system declares that kind (hopper-vm's
    node_kinds): not held to the pair of H200 accepted, as a pair that lost
    a GPU would be; undeclared, it is."""
    pair = {"2 x NVIDIA H200": {"node": {"default": {"gpus": [{"model": "NVIDIA H200"}] * 2}}}}
    single = {"gpus": [{"model": "NVIDIA H200"}]}
    assert health.baseline_for(pair, "default", single) == "2 x NVIDIA H200"
    assert health.baseline_for(pair, "default", single, ["1 x NVIDIA H200"]) is None
    own = {**pair, "1 x NVIDIA H200": {"node": {"default": single}}}
    assert health.baseline_for(own, "default", single, ["1 x NVIDIA H200"]) == "1 x NVIDIA H200"
    # A lost GPU of a kind not declared small still fails its count.
    assert health.baseline_for(pair, "default", {"gpus": []}, ["1 x NVIDIA H200"]) == "2 x NVIDIA H200"
    assert "1 x NVIDIA H200" in load_all()["hopper-vm"]["node_kinds"]


def test_each_kind_is_held_to_its_own_baseline(capsys, tmp_path):
    """A system with baselines of one and of two H100s: each node is held to
    its own kind's node facts."""
    single = _accepted_file(tmp_path / "single", [FakeGpu()])
    pair = _accepted_file(tmp_path / "pair", _h100_pair())
    baselines = {}
    for args in (single, pair):
        record = json.loads(Path(args[-1]).read_text())
        baselines.update(health.baselines_in(record))
    both = tmp_path / "accepted.json"
    both.write_text(json.dumps({"system": "local", "kinds": baselines}))
    assert sorted(baselines) == ["1 x NVIDIA H100 80GB HBM3", "2 x NVIDIA H100 80GB HBM3"]
    capsys.readouterr()
    for gpus in ([FakeGpu()], _h100_pair()):
        assert main([*single[:-1], str(both)], detect=_detect(gpus)) == 0
        assert f"against the accepted runs of {len(gpus)} x NVIDIA H100" in capsys.readouterr().out


def _fails(out):
    return [line for line in out.splitlines() if line.startswith("FAIL")]


def _h100_pair():
    return [FakeGpu(), FakeGpu(uuid="GPU-1", bus_id="00000000:02:00.0")]


@pytest.mark.parametrize(
    "gpus, visible, found",
    [
        ([], None, 0),  # NVML sees none
        (_h100_pair(), "", 0),  # the scheduler hid them all
        (_h100_pair(), "1", 1),  # ... or one
    ],
)
def test_a_node_with_hidden_or_missing_gpus_fails_against_its_accepted_run(
    capsys, tmp_path, monkeypatch, gpus, visible, found
):
    args = _accepted_file(tmp_path, _h100_pair())
    capsys.readouterr()
    if visible is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert main(args, detect=_detect(gpus)) == 1
    assert _fails(capsys.readouterr().out) == [f"FAIL GMP-301 gpu_count: expected 2, found {found}"]


def _without_nvml(tmp_path, dev_files=(), pci=()):
    """Detection where NVML does not start, on a node whose /dev and /sys hold
    `dev_files` and PCI devices (address, vendor, class)."""
    dev, sysfs = tmp_path / "dev", tmp_path / "sys"
    dev.mkdir()
    for name in dev_files:
        (dev / name).touch()
    for address, vendor, klass in pci:
        device = sysfs / "bus" / "pci" / "devices" / address
        device.mkdir(parents=True)
        (device / "vendor").write_text(vendor + "\n")
        (device / "class").write_text(klass + "\n")
    nvml = FakeNvml([], fail_init="Driver Not Loaded")
    return lambda load_links=False: detect_node(nvml=nvml, sysfs=sysfs, dev=dev, load_links=load_links)


@pytest.mark.parametrize(
    "hardware, shown",
    [
        ({"dev_files": ["nvidiactl", "nvidia0", "nvidia1"]}, "dev/nvidia0, "),
        ({"pci": [("0000:01:00.0", "0x10de", "0x030200")]}, "PCI 0000:01:00.0"),  # a 3D controller
    ],
)
def test_nvml_that_cannot_start_on_a_node_with_nvidia_gpus_fails(capsys, tmp_path, hardware, shown):
    args = ["--system", "local", "--partition", "default", "--accepted", str(tmp_path / "none.json")]
    assert main(args, detect=_without_nvml(tmp_path, **hardware)) == 1
    (line,) = _fails(capsys.readouterr().out)
    assert line.startswith("FAIL GMP-300 nvml: expected NVML running on a node with NVIDIA hardware (")
    assert shown in line and line.endswith("found NVML could not start (Driver Not Loaded)")


def test_a_node_without_nvidia_hardware_passes_with_a_line_that_says_why(capsys, tmp_path):
    args = ["--system", "local", "--partition", "default", "--accepted", str(tmp_path / "none.json")]
    grace = [("0008:00:00.0", "0x10de", "0x060400"), ("0000:00:02.0", "0x8086", "0x030000")]  # bridges, Intel graphics
    assert main(args, detect=_without_nvml(tmp_path, dev_files=["nvidiactl"], pci=grace)) == 0
    out = capsys.readouterr().out
    assert "PASS nvml: NVML could not start (Driver Not Loaded); no NVIDIA hardware on this node" in out
    assert _fails(out) == []


def test_a_node_without_gpus_fails_where_its_accepted_run_had_some(capsys, tmp_path):
    args = _accepted_file(tmp_path, [FakeGpu()])
    capsys.readouterr()
    assert main(args, detect=_without_nvml(tmp_path)) == 1
    assert _fails(capsys.readouterr().out) == ["FAIL GMP-301 gpu_count: expected 1, found 0"]


def _local_allowing(tmp_path, reasons):
    """The local system's data with clock event reasons its health allows."""
    import yaml

    from systems import data

    system = yaml.safe_load((data.SYSTEMS_DIR / "local.yaml").read_text())
    system["partitions"][0]["health"] = {"clock_events_allowed": reasons}
    (tmp_path / "local.yaml").write_text(yaml.safe_dump(system))
    return ["--systems-dir", str(tmp_path)]


def test_health_allows_the_clock_event_reasons_its_system_lists(capsys, tmp_path):
    args = ["--system", "local", "--partition", "default", "--accepted", str(tmp_path / "none.json")]
    capped = _detect([FakeGpu(clock_events=0x5)])  # idle, and the software power cap
    assert main(args, detect=capped) == 1
    assert "FAIL GMP-326 gpu0 clock_events: expected none but gpu_idle, found sw_power_cap" in capsys.readouterr().out
    assert main(args + _local_allowing(tmp_path, ["sw_power_cap"]), detect=capped) == 0
    assert "PASS gpu0 clock_events: gpu_idle,sw_power_cap" in capsys.readouterr().out


# --- every GPU's PCIe link held to its maximum, whatever the baseline holds ---


def _accepted_with_pcie(tmp_path, pcie):
    """Accepted facts of one H100 whose PCIe link they record as `pcie` ("missing": no such key)."""
    args = _accepted_file(tmp_path, [FakeGpu()])
    accepted = Path(args[-1])
    record = json.loads(accepted.read_text())
    gpu = record["node"]["default"]["gpus"][0]
    if pcie == "missing":
        del gpu["pcie"]
    else:
        gpu["pcie"] = pcie
    accepted.write_text(json.dumps(record))
    return args


@pytest.mark.parametrize(
    "pcie, expected",
    [
        (
            [5, 16],
            [
                "FAIL GMP-311 gpu0 pcie_generation: expected 5, found 4",
                "FAIL GMP-312 gpu0 pcie_width: expected x16, found x8",
            ],
        ),
        (
            None,
            [
                "FAIL GMP-311 gpu0 pcie_generation: expected 5 (its maximum), found 4",
                "FAIL GMP-312 gpu0 pcie_width: expected x16 (its maximum), found x8",
            ],
        ),
        (
            "missing",
            [
                "FAIL GMP-311 gpu0 pcie_generation: expected 5 (its maximum), found 4",
                "FAIL GMP-312 gpu0 pcie_width: expected x16 (its maximum), found x8",
            ],
        ),
        (
            [4, 8],
            [
                "FAIL GMP-311 gpu0 pcie_generation: expected 5 (its maximum), found 4",
                "FAIL GMP-312 gpu0 pcie_width: expected x16 (its maximum), found x8",
            ],
        ),
    ],
)
def test_an_h100_link_trained_at_gen4_x8_fails_naming_the_gpu_and_field(capsys, tmp_path, pcie, expected):
    """An H100 can train to Gen5 x16: at Gen4 x8 it fails against accepted
    facts that say so, that hold no link, or that accepted the link trained down."""
    args = _accepted_with_pcie(tmp_path, pcie)
    capsys.readouterr()
    assert main(args, detect=_detect([FakeGpu()])) == 0
    capsys.readouterr()
    assert main(args, detect=_detect([FakeGpu(pcie_loaded=(4, 8))])) == 1
    assert _fails(capsys.readouterr().out) == expected


def test_an_h100_link_trained_at_gen4_x8_fails_with_nothing_accepted(capsys, tmp_path):
    args = ["--system", "local", "--partition", "default", "--accepted", str(tmp_path / "none.json")]
    assert main(args, detect=_detect([FakeGpu(pcie_loaded=(4, 8))])) == 1
    assert _fails(capsys.readouterr().out) == [
        "FAIL GMP-311 gpu0 pcie_generation: expected 5 (its maximum), found 4",
        "FAIL GMP-312 gpu0 pcie_width: expected x16 (its maximum), found x8",
    ]


def test_a_gpu_more_than_accepted_still_has_its_link_judged(capsys, tmp_path):
    """A node with a GPU more than the accepted kind is a kind of its own (not
    held to the other's facts), and each link is still held to its maximum."""
    args = _accepted_file(tmp_path, [FakeGpu()])
    capsys.readouterr()
    second = FakeGpu(uuid="GPU-1", bus_id="00000000:02:00.0", pcie_loaded=(4, 16))
    assert main(args, detect=_detect([FakeGpu(), second])) == 1
    assert _fails(capsys.readouterr().out) == ["FAIL GMP-311 gpu1 pcie_generation: expected 5 (its maximum), found 4"]


def test_a_link_with_no_maximum_and_nothing_expected_is_not_passed():
    findings = evaluate(None, _readings([FakeGpu(pcie_max=(None, None))]))
    assert _failures(findings) == [
        "FAIL GMP-310 gpu0 pcie_link: expected a generation and width to hold it to, found none from NVML or expected"
    ]


def test_a_link_not_read_under_load_is_not_passed_with_nothing_expected():
    nvml = FakeNvml([FakeGpu()])
    findings = evaluate(None, detect_node(nvml=nvml, cuda_factory=FakeCuda, load_links=False))
    assert _failures(findings) == [
        "FAIL GMP-310 gpu0 pcie_link: expected gen5 x16, found not read under load (no CUDA driver, or not asked for)"
    ]


def test_a_gpu_that_reaches_its_cpu_over_nvlink_is_not_held_to_its_pcie_maximum(summit):
    gpus = [_v100(i, pcie_loaded=(1, 16)) for i in range(6)]  # the copies go over NVLink: PCIe idles
    findings = evaluate(summit, _summit_readings(gpus))
    assert _failures(findings) == []
    assert "PASS gpu0 pcie_link: not judged: the GPU reaches its CPU over NVLink" in [f.line() for f in findings]


def test_many_nodes_name_their_lines_and_each_must_report(capsys, tmp_path):
    """One job checking several nodes: every line names its host; the check
    counts one summary a node and names every failure."""
    import reframe.utility.sanity as sn

    from checks import node_health

    args = ["--system", "local", "--partition", "default", "--accepted", str(tmp_path / "none.json"), "--name-host"]
    main(args, detect=_detect([FakeGpu()]))
    host = socket.gethostname().split(".")[0]
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(line.startswith(f"{host}: ") for line in lines)
    out = tmp_path / "out"
    out.write_text("\n".join(lines + ["other: FAIL GMP-312 gpu0 pcie_width: expected 16, found 8"]) + "\n")
    with pytest.raises(sn.SanityError, match="other: FAIL GMP-312 gpu0 pcie_width: expected 16, found 8"):
        sn.evaluate(node_health._no_failures(str(out)))
    assert sn.evaluate(sn.count(sn.findall(node_health._SUMMARY, str(out)))) == 1
