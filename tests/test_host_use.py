"""Who else used the host's CPUs during a check's program (systems/host_use.py):
read from a /proc tree (a fake one under tmp_path, then the real one); the
watch itself, what it started, its ancestors, the case's other ranks and
the kernel's threads are no other's load."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments.gpu_use import HostContender, parse_host, process_line, process_place
from systems import gpu_use, host_use
from systems.gpu_use import CASE_TOKEN
from systems.host_use import HOST_CPUS, HostUse, MemoryCounters, perf_traffic, read_stat
from systems.watch import run

TICK = host_use._TICK


def put(proc: Path, pid: int, name: str, parent: int, ticks: int = 0, rss_pages: int = 256, flags: int = 0, start=1):
    """A process's /proc/PID/stat (utime `ticks`, stime 0), as Linux writes it (fields 3 on after the comm)."""
    (proc / str(pid)).mkdir(exist_ok=True)
    rest = ["S", parent, 0, 0, 0, -1, flags, 0, 0, 0, 0, ticks, 0, 0, 0, 20, 0, 1, 0, start, 1 << 20, rss_pages]
    (proc / str(pid) / "stat").write_text(f"{pid} ({name}) {' '.join(map(str, rest))}\n")


@pytest.fixture
def proc(tmp_path):
    """A host: init (1), kthreadd (2) and a kernel thread; the suite's ReFrame (100) and the watch (101),
    which started the program (102, and its child 103); a neighbour (200) and an idle daemon (300)."""
    for pid, name, parent in ((1, "init", 0), (100, "reframe", 1), (101, "python3", 100), (102, "prog", 101)):
        put(tmp_path, pid, name, parent)
    put(tmp_path, 2, "kthreadd", 0, flags=host_use.PF_KTHREAD)
    put(tmp_path, 3, "kswapd0", 2, flags=host_use.PF_KTHREAD)
    put(tmp_path, 103, "prog rank", 102)
    put(tmp_path, 200, "stream (x)", 1, rss_pages=2**19)  # 2 GiB of 4 KiB pages
    put(tmp_path, 300, "slurmd", 1)
    return tmp_path


def run_for(proc: Path, seconds: float, busy: dict[int, int], samples: int = 3, **kwargs) -> HostUse:
    """Readings of `proc` over `seconds` in which each process of `busy` used that many ticks."""

    def used(pid, ticks):
        stat = read_stat(pid, str(proc))
        put(proc, pid, stat.name, stat.parent, ticks=ticks, rss_pages=stat.rss_pages, flags=stat.flags)

    for pid in busy:
        used(pid, 0)
    use = HostUse(str(proc), me=101, **kwargs)
    use.sample()
    for pid, ticks in busy.items():
        used(pid, ticks)
    for _ in range(samples - 1):
        use.sample()
    use.span = (0.0, seconds)
    return use


def test_a_neighbour_busy_on_the_cpus_is_named_and_the_suites_own_processes_are_not(proc):
    busy = {pid: 4 * TICK for pid in (1, 3, 100, 101, 102, 103)} | {200: 8 * TICK, 300: TICK // 10}
    use = run_for(proc, 4.0, busy)
    [line] = use.record_lines()
    assert line == "HostUse: pid=200 cpu_s=8.0 cpus=2.00 rss_mib=2048 seen=3 samples=3 name=stream (x)"
    [other] = parse_host(line)  # a name with spaces and parentheses reads back: it is the record's last
    assert other == HostContender(200, "stream (x)", 8.0, 2.0, 2048.0, 3, 3)


def test_a_process_below_half_a_cpu_is_no_contention(proc):
    at = int(HOST_CPUS * 10 * TICK)
    assert [o.pid for o in run_for(proc, 10.0, {200: at - 2}).contenders(10.0)] == []
    assert [o.pid for o in run_for(proc, 10.0, {200: at + 2}).contenders(10.0)] == [200]


def test_a_process_started_during_the_run_counts_its_whole_cpu_time(proc):
    use = HostUse(str(proc), me=101)
    use.sample()
    put(proc, 400, "dd", 1, ticks=3 * TICK, start=5)  # started after the first reading
    put(proc, 200, "stream (x)", 1, start=9)  # pid 200 ended, and another process took its number
    use.sample()
    use.span = (0.0, 2.0)
    assert [(o.pid, o.name, o.cpu_s()) for o in use.contenders(2.0)] == [(400, "dd", 3.0)]


def test_entries_that_vanish_or_read_as_nothing_are_passed_over(proc):
    (proc / "500").mkdir()  # a process whose stat is gone between the listing and the reading
    (proc / "501").mkdir()
    (proc / "501" / "stat").write_text("501 (cut")  # cut short
    (proc / "self").mkdir()
    use = run_for(proc, 1.0, {200: 2 * TICK})
    assert [o.pid for o in use.contenders(1.0)] == [200]
    gone = HostUse(str(proc / "nothing"), me=101)  # no /proc at all: nobody seen, no error
    gone.sample()
    assert gone.record_lines(1.0) == []


def test_the_other_ranks_of_the_launch_are_the_programs_own(proc):
    (proc / "200" / "environ").write_bytes(f"PATH=/bin\0{CASE_TOKEN}=launch-1\0".encode())
    assert run_for(proc, 1.0, {200: 2 * TICK}, token="launch-1").contenders(1.0) == []
    assert [o.pid for o in run_for(proc, 1.0, {200: 2 * TICK}, token="launch-2").contenders(1.0)] == [200]


def test_a_fake_node_sees_only_the_processes_its_test_names(proc):
    assert run_for(proc, 1.0, {200: 2 * TICK, 300: 2 * TICK}, only={300}).contenders(1.0)[0].pid == 300


def test_without_memory_controller_counters_the_record_says_so_once(tmp_path):
    counters = MemoryCounters(pmus=str(tmp_path / "uncore_imc*"))
    counters.start()
    line = counters.stop(1.0)
    assert line.startswith("HostMemory: source=none reason=no memory controller counters (no uncore_imc PMU")
    assert line.endswith(": CPU time stands in")
    (tmp_path / "uncore_imc_0").mkdir()  # counters, but a perf that does not start: said, no error
    counters = MemoryCounters(pmus=str(tmp_path / "uncore_imc*"), perf=str(tmp_path / "perf"))
    counters.start()
    assert counters.stop(1.0).startswith("HostMemory: source=none reason=perf could not start")


def test_perfs_counts_of_the_memory_controllers_are_read_and_written_bytes():
    text = (
        "1024.00,MiB,uncore_imc/cas_count_read/,20002,100.00,,\n512.00,MiB,uncore_imc/cas_count_write/,20002,100.00,,\n"
    )
    assert perf_traffic(text) == (1024 * 2**20, 512 * 2**20)
    assert perf_traffic("<not supported>,,uncore_imc/cas_count_read/,0,100.00,,\n") is None


def test_records_that_do_not_read_are_left_out():
    text = "HostUse: pid=7 cpu_s=2.0 cpus=1.00 rss_mib=10 seen=2 samples=2 name=a\nHostUse: pid=x seen=1\nHostUse: cpu"
    assert [h.pid for h in parse_host(text)] == [7]


def test_a_host_process_is_said_as_the_hosts():
    other = {"gpu": None, "pid": 77, "name": "stream", "cpus": 3.9, "rss_gib": 2.0, "cases": 2, "tests": ["a"]}
    assert process_place(other) == "the host's CPUs"
    assert process_line(other) == "pid 77 (stream, 3.9 CPUs, 2.0 GiB resident) in 2 case(s) of a"


#: A program that starts a child which keeps a CPU busy: the program's own, no contention.
_BUSY_CHILD = (
    "import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', "
    "'import time\\nt = time.time()\\nwhile time.time() - t < 1.5: pass']); print('child', p.pid, flush=True); p.wait()"
)


def test_a_real_neighbour_burning_a_cpu_is_named_and_the_programs_busy_child_is_not(monkeypatch, capfd):
    """The watch beside a busy loop (without a GPU NVML cannot be read: a fault, yet the host is watched):
    the loop is another's load; the program's own busy child is not, nor the watch's parent (this test:
    the suite's own). The loop is no child of this test's process (a shell started it and ended), so
    that the watch, run here, does not take it for one of its own; the threshold is lowered because a
    test machine's other workers share its CPUs with the loop."""
    monkeypatch.setattr(host_use, "HOST_CPUS", 0.2)
    burn = f"{sys.executable} -c 'import time\nt = time.time()\nwhile time.time() - t < 60: pass' >/dev/null 2>&1 &"
    neighbour = int(subprocess.run(["sh", "-c", f"{burn} echo $!"], capture_output=True, text=True).stdout)
    try:
        time.sleep(0.2)
        assert run(["--", sys.executable, "-c", _BUSY_CHILD], nvml=_NoNvml(), environ={}) == 0
    finally:
        os.kill(neighbour, signal.SIGKILL)
    out = capfd.readouterr().out
    found = {h.pid: h for h in parse_host(out)}
    assert neighbour in found and found[neighbour].cpus >= 0.2, out
    assert found[neighbour].seen == found[neighbour].samples >= 3
    [child] = [int(line.split()[1]) for line in out.splitlines() if line.startswith("child ")]
    assert child not in found and os.getpid() not in found
    assert "HostMemory: source=" in out and "Watch: FAIL no GPU watched: NVML could not be read (no driver)" in out


class _NoNvml:
    def nvmlInit(self):
        raise RuntimeError("no driver")


@pytest.mark.parametrize("name", ["x\nWatch: FAIL gpu0 forged", "x\rHostUse: pid=1", "tab\there", "esc\x1b[2J"])
def test_a_neighbours_name_writes_no_line_of_its_own_into_the_output(proc, name):
    put(proc, 200, name, 1, rss_pages=2**19)
    [line] = run_for(proc, 4.0, {200: 8 * TICK}).record_lines()
    assert line.splitlines() == [line] and line.isprintable()
    assert line.endswith("name=" + "".join(c if c.isprintable() else "?" for c in name))
    # NVML's names too (a GPU neighbour's), read from /proc/PID/comm.
    (proc / "200" / "comm").write_text(name + "\n")
    assert gpu_use.process_name(None, 200, str(proc)).isprintable()
