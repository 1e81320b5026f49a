"""The reprex's output, the seed's and this program's, parsed alike."""

import re
from pathlib import Path

import pytest

from experiments.um_bandwidth import parse_throughputs, steady_state

DATA = Path(__file__).parent / "data"


def seed_runs() -> dict:
    """The seed's measurement blocks, by their section heading."""
    text = (DATA / "um_reprex_seed.md").read_text()
    blocks = re.findall(r"^### (.*?)\n\*\*Parameters\*\*: .*?\n```sh\n(.*?)```", text, re.DOTALL | re.MULTILINE)
    return {heading.strip(): output for heading, output in blocks}


def test_every_seed_block_has_five_runs():
    runs = seed_runs()
    assert len(runs) == 9
    for output in runs.values():
        assert output.startswith("Running on device 0 with grid dim 160 and block dim 128")
        assert len(parse_throughputs(output)) == 5


def test_seed_numa_baseline():
    output = seed_runs()["Baseline: NUMA-local memory"]
    runs = parse_throughputs(output)
    assert runs[0] == pytest.approx(63.4921)
    assert steady_state(runs) == pytest.approx((63.5397 + 63.5517) / 2)


def test_seed_small_data_caches_after_the_first_run():
    output = seed_runs()["Small data: Slow, but expected"]
    runs = parse_throughputs(output)
    assert runs[0] == pytest.approx(5.23589)
    assert steady_state(runs) == pytest.approx((207.346 + 207.523) / 2)


def test_seed_accessed_by_dip_is_outvoted_by_the_median():
    output = seed_runs()["Small data with tuning: Fast, and slightly strange"]
    assert "cudaMemAdviseSetAccessedBy enabled" in output
    runs = parse_throughputs(output)
    assert runs[1] == pytest.approx(13.9365)
    assert steady_state(runs) == pytest.approx((197.721 + 198.054) / 2)


def test_x86_control_group_with_tuning_reaches_the_link():
    runs = parse_throughputs(seed_runs()["Control group: x86-64 with tuning"])
    assert steady_state(runs) == pytest.approx((10.8055 + 11.0659) / 2)


def test_this_programs_output_parses_the_same_way():
    output = (DATA / "um_bandwidth_h100_numa_read.txt").read_text()
    assert "Running on device 0 with grid dim 160 and block dim 128" in output
    assert "System memory enabled" in output
    runs = parse_throughputs(output)
    assert len(runs) == 5
    assert all(40 < bw < 60 for bw in runs)
    copy_engine = float(re.search(r"^Copy engine host-to-device: (\S+) GiB/s", output, re.M).group(1))
    assert steady_state(runs) / copy_engine == pytest.approx(0.92, abs=0.05)


def test_steady_state_needs_two_runs():
    with pytest.raises(ValueError):
        steady_state([1.0])


def test_advice_the_driver_rejects_skips_the_case_with_its_reason(tmp_path):
    """An unsupported feature is a skip with the reason, raised by the sanity
    (no output is read in a hook); accepted advice passes."""
    import reframe.utility.sanity as sn
    from reframe.core.exceptions import SkipTestError

    from checks.um_bandwidth import _advice_accepted

    out = tmp_path / "out"
    out.write_text("Advice rejected by the driver: cudaMemAdviseSetAccessedBy (operation not supported)\n")
    with pytest.raises(SkipTestError, match="the driver rejects accessed-by: cudaMemAdviseSetAccessedBy"):
        sn.evaluate(_advice_accepted(str(out), "accessed-by"))
    out.write_text("Running read kernel\n")
    assert sn.evaluate(_advice_accepted(str(out), "accessed-by"))
