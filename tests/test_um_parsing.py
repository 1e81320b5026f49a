"""The reprex's output: the seed's prose (and this program's before its
records), and this program's records, each parsed by experiments/um_bandwidth.py."""

import re
from pathlib import Path

import pytest

from experiments.um_bandwidth import parse_output, parse_seed_throughputs, steady_state

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
        assert len(parse_seed_throughputs(output)) == 5


def test_seed_numa_baseline():
    output = seed_runs()["Baseline: NUMA-local memory"]
    runs = parse_seed_throughputs(output)
    assert runs[0] == pytest.approx(63.4921)
    assert steady_state(runs) == pytest.approx((63.5397 + 63.5517) / 2)


def test_seed_small_data_caches_after_the_first_run():
    output = seed_runs()["Small data: Slow, but expected"]
    runs = parse_seed_throughputs(output)
    assert runs[0] == pytest.approx(5.23589)
    assert steady_state(runs) == pytest.approx((207.346 + 207.523) / 2)


def test_seed_accessed_by_dip_is_outvoted_by_the_median():
    output = seed_runs()["Small data with tuning: Fast, and slightly strange"]
    assert "cudaMemAdviseSetAccessedBy enabled" in output
    runs = parse_seed_throughputs(output)
    assert runs[1] == pytest.approx(13.9365)
    assert steady_state(runs) == pytest.approx((197.721 + 198.054) / 2)


def test_x86_control_group_with_tuning_reaches_the_link():
    runs = parse_seed_throughputs(seed_runs()["Control group: x86-64 with tuning"])
    assert steady_state(runs) == pytest.approx((10.8055 + 11.0659) / 2)


def test_this_programs_output_before_its_records_reads_as_the_seeds():
    output = (DATA / "um_bandwidth_h100_numa_read.txt").read_text()
    assert "Running on device 0 with grid dim 160 and block dim 128" in output
    assert "System memory enabled" in output
    runs = parse_seed_throughputs(output)
    assert len(runs) == 5
    assert all(40 < bw < 60 for bw in runs)
    copy_engine = float(re.search(r"^Copy engine host-to-device: (\S+) GiB/s", output, re.M).group(1))
    assert steady_state(runs) / copy_engine == pytest.approx(0.92, abs=0.05)


#: This program's records for two repeats of three runs (src/um_bandwidth: its header names them).
RECORDS = """Running on device 0 with grid dim 160 and block dim 128
CopyEngine: direction=h2d gibs=51.2 samples=3 values=51.1,51.2,51.3
CopyEngine: direction=d2h gibs=51.4 samples=3 values=51.4,51.4,51.5
Kernel: op=read
Repeat: 1 of 2
Throughput: repeat=1 run=1 gibs=6.5
Throughput: repeat=1 run=2 gibs=47.1
Throughput: repeat=1 run=3 gibs=47.3
Repeat: 2 of 2
Throughput: repeat=2 run=1 gibs=6.1
Throughput: repeat=2 run=2 gibs=47.2
Throughput: repeat=2 run=3 gibs=47.4
Verified: kernel=read runs=6
"""


def test_this_programs_records_give_every_run_and_the_copy_engines_samples():
    output = parse_output(RECORDS)
    assert output.op == "read" and output.verified == {"kernel": "read", "runs": "6"}
    assert output.per_repeat(2, 3) == [[6.5, 47.1, 47.3], [6.1, 47.2, 47.4]]
    assert output.copy_engine_samples("read") == (51.1, 51.2, 51.3)  # the read's data flows host to device
    assert output.copy_engine_samples("write") == (51.4, 51.4, 51.5)
    with pytest.raises(ValueError, match=r"5 Throughput records for 2 repeats of 3 runs \(missing \[\(2, 3\)\]\)"):
        parse_output(RECORDS.replace("Throughput: repeat=2 run=3 gibs=47.4\n", "")).per_repeat(2, 3)
    with pytest.raises(ValueError, match="CopyEngine h2d: samples=4 but 3 values"):
        parse_output(RECORDS.replace("samples=3 values=51.1", "samples=4 values=51.1"))


def test_the_check_holds_the_records_to_its_case_and_takes_the_sample_count_from_them(tmp_path):
    import reframe.utility.sanity as sn

    from checks.um_bandwidth import copy_engine_samples, measured_as_asked, output_of

    out = tmp_path / "out"
    out.write_text(RECORDS)
    output = output_of(str(out))
    assert sn.evaluate(measured_as_asked(output, "read", 3, 2, "none"))
    assert sn.evaluate(copy_engine_samples(output, "read")) == [51.1, 51.2, 51.3]
    with pytest.raises(sn.SanityError, match="the kernel ran 'read', not 'write'"):
        sn.evaluate(measured_as_asked(output, "write", 3, 2, "none"))
    with pytest.raises(sn.SanityError, match="Verified record .* not"):
        sn.evaluate(measured_as_asked(output, "read", 3, 3, "none"))


def test_steady_state_needs_two_runs():
    with pytest.raises(ValueError):
        steady_state([1.0])


def test_advice_the_driver_rejects_skips_the_case_with_its_reason(tmp_path):
    """An unsupported feature is a skip with the reason, raised by the sanity
    (no output is read in a hook); accepted advice passes."""
    import reframe.utility.sanity as sn
    from reframe.core.exceptions import SkipTestError

    from checks.um_bandwidth import measured_as_asked, output_of

    out = tmp_path / "out"
    out.write_text("AdviceRejected: reason=operation not supported\n")
    with pytest.raises(SkipTestError, match="the driver rejects accessed-by: operation not supported"):
        sn.evaluate(measured_as_asked(output_of(str(out)), "read", 3, 2, "accessed-by"))
    out.write_text(RECORDS)
    assert sn.evaluate(measured_as_asked(output_of(str(out)), "read", 3, 2, "accessed-by"))
