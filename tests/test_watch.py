"""The NVML watch around every GPU program: faults during the run, injected
through the fake NVML, name the GPU and the field; the program's status
passes through."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_nvml import FakeGpu, FakeNvml

from experiments.gpu_use import parse
from systems.gpu_use import CASE_TOKEN, GpuUse, Other, carries, descends, record_lines, sample
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
        ({"replays": 4}, "GMP-313 gpu1 pcie_replays: 3 during the run"),
        ({"ecc_uncorrected": 2}, "GMP-320 gpu1 ecc_uncorrected: 2 during the run"),
        ({"remapped_rows": (0, 1, 1, 0)}, "GMP-321 gpu1 remap_pending: became true during the run"),
        (
            {"clock_events": CLOCK_EVENTS["hw_thermal_slowdown"]},
            "GMP-326 gpu1 clock_events: hw_thermal_slowdown during the run",
        ),
        ({"clock_events": CLOCK_EVENTS["sw_power_cap"] | 1}, "GMP-326 gpu1 clock_events: sw_power_cap during the run"),
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
    host = r"HostMemory: [^\n]*\n(HostUse: [^\n]*\n)*"  # the host's (tests/test_host_use.py): the machine's others
    summary = r"Watch: 1 GPU\(s\) watched for \d+\.\d s, 0 fault\(s\)\n"
    assert re.fullmatch(rf"measured\nGpuUse: gpu=0 [^\n]*\n{host}{summary}", out)
    assert run(["--", sys.executable, "-c", "raise SystemExit(3)"], nvml=nvml, environ={}) == 3


def test_no_nvml_is_a_fault_not_a_pass(capsys):
    assert run(["--", sys.executable, "-c", "pass"], nvml=FakeNvml([], fail_init="Driver Not Loaded"), environ={}) == 0
    out = capsys.readouterr().out
    assert "Watch: FAIL no GPU watched: NVML could not be read (Driver Not Loaded)" in out
    assert "Watch: 0 GPU(s) watched" in out and "1 fault(s)" in out


# --- who else used the GPUs ----------------------------------------------------

#: A program that holds the GPU a while, and starts a rank of its own (as mem_scan --spawn does).
_PROGRAM_WITH_A_RANK = (
    "import subprocess, sys, time; r = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1.2)']); "
    "time.sleep(1.2); r.wait()"
)


def test_another_process_on_a_gpu_is_named_and_the_programs_own_ranks_are_not(capfd):
    gpus = [FakeGpu(), FakeGpu(uuid="GPU-1", others=[(4999999, "copier", 3 << 30)], pcie_kbps=(50_000_000, 49_000_000))]
    assert run(["--", sys.executable, "-c", _PROGRAM_WITH_A_RANK], nvml=FakeNvml(gpus), environ={}) == 0
    text = capfd.readouterr().out
    uses, others = parse(text)
    assert [u.gpu for u in uses] == [0, 1] and all(u.own and u.samples >= 2 for u in uses)
    assert uses[1].pcie_rx_gbs == pytest.approx(49.0) and uses[1].pcie_tx_gbs == pytest.approx(50.0)
    [other] = others  # the program and its rank are its own: one other process, on GPU 1
    assert (other.gpu, other.pid, other.name, other.used_mib) == (1, 4999999, "copier", 3072)
    assert other.seen == other.samples >= 2
    assert "0 fault(s)" in text  # another's process is no fault of the GPU


def test_nvlink_traffic_is_every_links_counter_and_pcie_the_throughput_samples():
    """On four H200s (driver 580) scope 0 of the NVLink counters is one link of
    eighteen, and the PCIe byte counters are 32 bits wide (they wrap every
    tenth of a second at 50 GB/s): neither may stand for the GPU's traffic."""
    links = range(18)
    gpu = FakeGpu(
        counters={197: 0, 198: 0, **{(f, k): 0 for f in (138, 139) for k in links}}, pcie_kbps=(10**7, 2 * 10**7)
    )
    nvml = FakeNvml([gpu])
    watch = Watch(nvml, allowed_mask([]), 0.005, visible=None)
    sample(nvml, gpu, watch.uses[0], root=None)  # one reading of the processes and the throughput
    # Over 2 s: 1 GiB through each link one way, none the other; a PCIe counter that wrapped.
    gpu.counters = {197: 5, 198: 2**31, **{(138, k): 2**20 for k in links}, **{(139, k): 0 for k in links}}
    [line] = watch.use_lines(2.0)
    assert "pcie_rx_gbs=20.00 pcie_tx_gbs=10.00 nvlink_rx_gbs=0.00 nvlink_tx_gbs=9.66" in line


def test_a_gpu_whose_processes_nvml_cannot_list_has_no_contention():
    class NoProcesses(FakeNvml):
        def nvmlDeviceGetComputeRunningProcesses(self, g):
            raise RuntimeError("Not Supported")

    watch = Watch(NoProcesses([FakeGpu(others=[(4999999, "copier", 1)])]), allowed_mask([]), 0.005, visible=None)
    watch.root = 1
    watch.start()
    time.sleep(0.02)
    assert watch.stop() == [] and watch.use_lines(0.02) == ["GpuUse: gpu=0 own=no samples=0"]


def test_descent_is_read_from_proc(tmp_path):
    for pid, parent in ((10, 1), (11, 10), (12, 11), (20, 1)):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (a (b) c) S {parent} 0 0")
    assert descends(12, 10, str(tmp_path)) and descends(10, 10, str(tmp_path))
    assert not descends(20, 10, str(tmp_path)) and not descends(99, 10, str(tmp_path))


def wait_for_exec(pid: int, name: str, timeout: float = 10.0) -> None:
    """Until process `pid` runs `name` (its /proc comm)."""
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}/comm").read_text().strip() != name:
        assert time.monotonic() < deadline, f"process {pid} did not start {name}"
        time.sleep(0.01)


def test_the_other_ranks_of_the_same_launch_carry_its_token_and_are_the_programs_own(tmp_path):
    """srun and jsrun start each rank beside the others, each under a watch of its own: a rank of
    this launch carries the case's token in its environment; another's process does not."""
    env = {**os.environ, CASE_TOKEN: "launch-1"}
    with (
        subprocess.Popen(["sleep", "30"], env=env) as rank,
        subprocess.Popen(["sleep", "30"], env=env) as sibling,
        subprocess.Popen(["sleep", "30"], env={**env, CASE_TOKEN: "launch-2"}) as stranger,
    ):
        try:
            # A process is on a GPU only once it runs its program; until its exec
            # /proc shows the parent's environment, without the token.
            for p in (rank, sibling, stranger):
                wait_for_exec(p.pid, "sleep")
            gpu = FakeGpu(list_children=False, others=[(p.pid, "x", 1 << 30) for p in (rank, sibling, stranger)])
            use = GpuUse(0)
            for _ in range(2):
                sample(FakeNvml([gpu]), gpu, use, root=rank.pid, token="launch-1")
            assert use.own and set(use.others) == {stranger.pid} and use.others[stranger.pid].name == "sleep"
            assert not carries(stranger.pid, None) and not carries(999_999_999, "launch-1")
        finally:
            for p in (rank, sibling, stranger):
                p.kill()


def test_a_process_seen_for_a_moment_of_the_run_is_no_contention():
    use = GpuUse(
        0, samples=10, others={7: Other(7, "blip", seen=2, visible=True), 8: Other(8, "copier", seen=6, visible=True)}
    )
    lines = record_lines([use], [{}], 1.0)
    assert [line.split(" pid=")[1].split()[0] for line in lines if line.startswith("Contention:")] == ["8"]


def test_a_counter_is_read_as_the_driver_typed_it():
    """A 32-bit counter's upper half is not part of it (nvmlFieldValue_t's valueType)."""
    from types import SimpleNamespace

    from systems.gpu_use import field_value

    union = SimpleNamespace(uiVal=7, ullVal=(5 << 32) + 7, dVal=2.5)
    assert field_value(SimpleNamespace(valueType=1, value=union)) == 7
    assert field_value(SimpleNamespace(valueType=3, value=union)) == (5 << 32) + 7
    assert field_value(SimpleNamespace(value=union)) == (5 << 32) + 7
