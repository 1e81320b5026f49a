"""Site settings (-S) are checked at setup: each bad value refused before a
job script is written, naming the check, the variable and what it may be."""

import math
import os
import re
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from checks.suite.settings import (
    Choice,
    Count,
    CountOr,
    Decimal,
    Device,
    Each,
    NumaNode,
    Real,
    Size,
    Unreadable,
    Whole,
    size_bytes,
)
from runner.rfm import reframe_command

REPO = Path(__file__).resolve().parent.parent


def _test(gpus: int = 2, numa_nodes=(0, 1)):
    node = {"gpus": {"count": gpus}, "numa_nodes": list(numa_nodes)}
    return SimpleNamespace(node=node, current_partition=SimpleNamespace(fullname="site:gpu"))


@pytest.mark.parametrize(
    ("rule", "good", "bad"),
    [
        (Count(2, 20), [2, 5, 20], [0, 1, 21, -1, 2.5, "5", True, None]),
        (Real(0.01, 10), [0.01, 0.5, 10, 3], [math.nan, math.inf, -1.0, 0.0, 11, "0.5", None]),
        (
            Size(8 << 10, 64 << 30),
            ["8K", "1G", "64G", "1.5M", "1GiB"],
            ["nan", "-1x", "12abc", "1e30", "4K", "65G", ""],
        ),
        (Size(8 << 10, 64 << 30, multiple=(0.001, 0.9)), ["0.25x", "1G"], ["1x", "-1x", "0x", "nanx"]),
        (Size(2 << 20, 1 << 40, words=2 << 20, also=("chunk",)), ["chunk", "2M", "64M"], ["3M", "1M", "chunky"]),
        (Choice(("plain", "bulk")), ["plain", "bulk"], ["Plain", "", None]),
        (CountOr(1, 1024, ("auto",)), ["auto", "160", 160], ["abc", "0", "-5", "1e3", "2000"]),
        (Each(Count(1, 64), most=3), [[1], [1, 64, 2]], [[], [0], [1, 2, 3, 4], 5, [1, "2"]]),
    ],
)
def test_each_rule_takes_what_it_says_and_refuses_the_rest(rule, good, bad):
    test = _test()
    for value in good:
        assert rule.problem(value, test) is None, value
    for value in bad:
        assert rule.problem(value, test), value


def test_devices_and_numa_nodes_are_held_to_the_systems_data():
    two = _test(gpus=2)
    assert Device().problem(1, two) is None
    assert Device().problem(2, two) == "a GPU of site:gpu: 0 to 1 (2 GPU(s) in its data)"
    assert Device().problem(-1, two)  # not Python's last GPU
    assert Device().problem(99, _test(gpus=1)) == "a GPU of site:gpu: 0 (1 GPU(s) in its data)"
    assert NumaNode().problem(1, two) is None
    assert NumaNode().problem(8, two) == "a NUMA node of site:gpu: 0, 1"
    assert NumaNode(optional=True).problem(None, two) is None
    assert NumaNode().problem(None, two)


def test_text_that_is_no_number_is_kept_for_the_rule_to_refuse():
    assert Whole("7") == 7 and isinstance(Whole("7"), int)
    assert Decimal("0.5") == 0.5
    for bad in (Whole("abc"), Whole("1.5"), Decimal("x")):
        assert isinstance(bad, Unreadable)
    assert Count(1, 9).problem(Whole("abc"), _test())
    assert Real(0, 1).problem(Decimal("x"), _test())


def test_sizes_read_as_the_programs_read_them():
    assert size_bytes("16M") == 16 << 20
    assert size_bytes("1.5K") == 1536
    assert size_bytes("2GiB") == 2 << 30
    for bad in ("0.1K", "12abc", "-1", "nan", "1e30"):
        with pytest.raises(ValueError):
            size_bytes(bad)


#: The bad values a site might set, and what each message must name.
BAD = {
    "um_bandwidth.small_size=nan": "small_size='nan' must be a size",
    "um_bandwidth.runs=100000": "runs=100000 must be a whole number from 2 to 20",
    "um_bandwidth.grid=abc": "grid='abc' must be a whole number",
    "um_bandwidth.oversubscription_factor=-1": "oversubscription_factor=-1.0 must be a finite number",
    "mem_scan.reps=0": "reps=0 must be a whole number from 5",
    "host_bandwidth.buffer_size=12abc": "buffer_size='12abc' must be a size",
    "p2p_pingpong.iters=-1": "iters=-1 must be a whole number from 1",
    "path_matrix.size=1e30": "size='1e30' must be a size",
    "daxpy.rows=-5": "rows=-5 must be a whole number from 1",
    "copy_latency.case_seconds=inf": "case_seconds=inf must be a finite number",
    "copy_latency.device=99": "device=99 must be a GPU of x86-pcie:gpu: 0 to 1",
    # Text where a number goes: ReFrame alone stops with a traceback.
    "host_bandwidth.runs=abc": "runs='abc' must be a whole number",
    "mem_scan.widths=4,abc": "'abc' is not",
    "copy_latency.sample_us=x": "sample_us='x' must be a number",
    "p2p_pingpong.samples=five": "samples='five' must be a whole number",
}


@pytest.fixture(scope="module")
def refused(tmp_path_factory):
    """A dry run of one case of each check on x86-pcie with every bad value set."""
    tmp = tmp_path_factory.mktemp("settings")
    env = dict(os.environ, RFM_RESOLVE_MODULE_CONFLICTS="n")
    selection = [
        "-n",
        "um_bandwidth.*memory=device.*notouch.*op=read.*small",
        "-n",
        "mem_scan.*single.*read",
        "-n",
        "host_bandwidth",
        "-n",
        "p2p_pingpong.*baseline",
        "-n",
        "path_matrix.*host-ce",
        "-n",
        "daxpy.*explicit.*prefetch=off.*data_size=8000$",
        "-n",
        "copy_latency",
    ]
    settings = [arg for value in BAD for arg in ("-S", value)]
    cmd = reframe_command(
        "x86-pcie",
        "-p",
        "cuda",
        "--prefix",
        str(tmp),
        "--perflogdir",
        str(tmp / "perflogs"),
        "--dry-run",
        *selection,
        *settings,
    )
    start = time.monotonic()
    result = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
    return result, time.monotonic() - start, tmp


def test_every_bad_setting_is_refused_at_setup_naming_it(refused):
    result, _, tmp = refused
    out = result.stdout + result.stderr
    assert result.returncode != 0
    for value, message in BAD.items():
        assert message in out, f"{value}: {message!r} not in the output"
    assert out.count("Failing phase: setup") >= 7
    # Nothing reached a job script.
    assert not list((tmp / "stage").rglob("rfm_job.sh")), "a job script was written"


def test_a_huge_count_is_refused_in_seconds(refused):
    _, seconds, _ = refused
    assert seconds < 120


def test_what_the_settings_ask_for_together_is_bounded():
    """The ping-pong's bytes moved and round trips, the latency sweep's time."""
    from checks.p2p_pingpong import p2p_pingpong

    test = SimpleNamespace(size="1G", iters=10000, samples=5)
    (why,) = p2p_pingpong.settings_problems(test)
    assert "moves 98 TiB, over the 64 TiB" in why
    assert p2p_pingpong.settings_problems(SimpleNamespace(size="64M", iters=10000, samples=5)) == []
    assert Count(32, 1024, step=32).problem(33, _test()) == "a multiple of 32 from 32 to 1024"
    assert size_bytes("16MiB") == 16 << 20
    with pytest.raises(ValueError):
        size_bytes("16MIB")  # the programs' parser takes a lowercase i only


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["um_bandwidth.runs=abc", "daxpy.inner_axis=1,abc"])
def test_text_where_a_number_goes_is_refused_by_name_in_every_case_not_dropped_at_load(tmp_path, setting):
    # ReFrame reads a -S value once and hands the later cases what it read: each must take it, for its rule.
    check = setting.split(".")[0]
    cmd = reframe_command("x86-pcie", "-p", "cuda", "--prefix", str(tmp_path), "--dry-run", "-n", check, "-S", setting)
    env = dict(os.environ, RFM_RESOLVE_MODULE_CONFLICTS="n")
    result = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = result.stdout + result.stderr
    assert "skipping test" not in out, out[:3000]
    ran = re.search(r"Ran (\d+)/\d+ test case\(s\) from \d+ check\(s\) \((\d+) failure", out)
    builds = out.count("FAILURE INFO for Suite")  # none: the build fixtures take no setting
    assert ran and int(ran[2]) >= 10 and builds == 0, out[-3000:]
    assert out.count("setting error") == int(ran[2])
