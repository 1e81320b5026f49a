"""The NVML watch around every GPU program: faults during the run, injected
through the fake NVML, name the GPU and the field; the program's status
passes through."""

import re
import sys
import time

import pytest
from fake_nvml import FakeGpu, FakeNvml

from systems.watch import CLOCK_EVENTS, Watch, allowed_mask, run


def _watch(nvml, allowed=("",)):
    watch = Watch(nvml, allowed_mask([a for a in allowed if a]), period=0.005, visible=None)
    watch.start()
    return watch


def test_a_quiet_run_has_no_fault():
    watch = _watch(FakeNvml([FakeGpu(), FakeGpu(uuid="GPU-1")]))
    time.sleep(0.02)
    assert watch.stop() == []


@pytest.mark.parametrize(
    "change, fault",
    [
        ({"replays": 4}, "gpu1 pcie_replays: 3 during the run"),
        ({"ecc_uncorrected": 2}, "gpu1 ecc_uncorrected: 2 during the run"),
        ({"remapped_rows": (0, 1, 1, 0)}, "gpu1 remap_pending: became true during the run"),
        (
            {"clock_events": CLOCK_EVENTS["hw_thermal_slowdown"]},
            "gpu1 clock_events: hw_thermal_slowdown during the run",
        ),
        ({"clock_events": CLOCK_EVENTS["sw_power_cap"] | 1}, "gpu1 clock_events: sw_power_cap during the run"),
    ],
)
def test_what_happens_during_the_run_is_a_fault(change, fault):
    gpus = [FakeGpu(), FakeGpu(uuid="GPU-1")]
    watch = _watch(FakeNvml(gpus))
    for name, value in change.items():
        setattr(gpus[1], name, value)
    time.sleep(0.03)
    assert watch.stop() == [fault]


def test_a_throttle_reason_the_system_allows_is_no_fault():
    gpus = [FakeGpu(clock_events=CLOCK_EVENTS["sw_power_cap"])]
    watch = _watch(FakeNvml(gpus), allowed=("sw_power_cap",))
    time.sleep(0.02)
    assert watch.stop() == []
    with pytest.raises(ValueError, match="unknown clock event reason 'too_hot'"):
        allowed_mask(["too_hot"])


def test_only_the_gpus_cuda_sees_are_watched():
    gpus = [FakeGpu(uuid="GPU-aaa"), FakeGpu(uuid="GPU-bbb", clock_events=CLOCK_EVENTS["hw_slowdown"])]
    watch = Watch(FakeNvml(gpus), allowed_mask([]), 0.005, visible="GPU-aa")
    watch.start()
    time.sleep(0.02)
    assert len(watch.handles) == 1 and watch.stop() == []


def test_the_programs_status_passes_through_and_a_summary_is_printed(capfd):
    nvml = FakeNvml([FakeGpu()])
    assert run(["--", sys.executable, "-c", "print('measured')"], nvml=nvml, environ={}) == 0
    out = capfd.readouterr().out
    assert re.fullmatch(r"measured\nWatch: 1 GPU\(s\) watched for \d+\.\d s, 0 fault\(s\)\n", out)
    assert run(["--", sys.executable, "-c", "raise SystemExit(3)"], nvml=nvml, environ={}) == 3


def test_no_nvml_is_a_fault_not_a_pass(capsys):
    assert run(["--", sys.executable, "-c", "pass"], nvml=FakeNvml([], fail_init="Driver Not Loaded"), environ={}) == 0
    out = capsys.readouterr().out
    assert "Watch: FAIL no GPU watched: NVML could not be read (Driver Not Loaded)" in out
    assert "Watch: 0 GPU(s) watched" in out and "1 fault(s)" in out
