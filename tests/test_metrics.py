"""Records to a time-series database (experiments/metrics.py): what ReFrame's
httpjson handler sends, and the nightly's verdict per path. The whole way,
through VictoriaMetrics on localhost, is tested on the fake GPU
(tests/test_fake_gpu.py)."""

import json
from types import SimpleNamespace

import pandas as pd

from experiments import metrics
from rfmconfig import settings as rfm


def _record(**extra):
    fields = {
        "check_display_name": "host_bandwidth",
        "check_system": "site",
        "check_partition": "gpu",
        "check_environ": "gnu",
        "check_job_nodelist": ["node7"],
        "check_case": "buffer_size=1G",
        "check_gpu_model": "NVIDIA H100 80GB HBM3",
        "check_gpu_count": 1,
        "check_host_link": "pcie gen5 x16",
        "check_driver_version": "580.159.04",
        "check_cuda_version": "13.0",
        "check_cuda_runtime_version": "13.0",
        "check_job_completion_time_unix": 1764000000.5,
        "check_perf_var": "read_bw_node0.s2",
        "check_perf_value": 63.06,
        "check_perf_unit": "GiB/s",
    }
    return SimpleNamespace(**{**fields, **extra})


def test_a_figure_goes_with_its_path_case_node_and_versions(monkeypatch):
    monkeypatch.setenv(metrics.NIGHT_VARIABLE, "2026-12-01T03:00:00")
    (line,) = metrics.victoria_lines(_record(), {}, []).splitlines()
    sent = json.loads(line)
    assert sent["values"] == [63.06] and sent["timestamps"] == [1764000000500]
    assert sent["metric"] == {
        "__name__": "gpu_mempaths_figure",
        "system": "site",
        "partition": "gpu",
        "environ": "gnu",
        "node": "node7",
        "case": "buffer_size=1G",
        "gpu_model": "NVIDIA H100 80GB HBM3",
        "gpu_count": "1",
        "host_link": "pcie gen5 x16",
        "driver_version": "580.159.04",
        "cuda_version": "13.0",
        "cuda_runtime_version": "13.0",
        "test": "host_bandwidth",
        "night": "2026-12-01T03:00:00",
        "figure": "read_bw_node0",
        "sample": "2",
        "unit": "GiB/s",
        "path": "host memory read, NUMA node 0",
    }


def test_a_record_without_a_number_sends_nothing():
    assert metrics.victoria_lines(_record(check_perf_value=None), {}, []) is None
    assert metrics.victoria_lines(_record(check_perf_value=float("nan")), {}, []) is None


def test_the_verdict_of_each_path_is_a_code_and_a_change():
    paths = pd.DataFrame(
        [{"path": "GPU memory of GPU 0", "kind": "gpu-memory", "verdict": "moved", "change_pct": -7.5}]
    )
    lines = [json.loads(line) for line in metrics.verdict_lines("site", "2026-12-01T03:00:00", paths, 1).splitlines()]
    assert [(x["metric"]["__name__"], x["values"]) for x in lines] == [
        ("gpu_mempaths_path_verdict", [2]),
        ("gpu_mempaths_path_change_pct", [-7.5]),
    ]
    assert {x["metric"]["finding"] for x in lines} == {"GMP-101"}  # the catalogue's code: an alert keys on it


def test_the_nights_exit_status_is_a_series_judged_or_not(monkeypatch):
    # A night whose health failed judged nothing: its status (1) is still the series an alert reads.
    from runner import nightly

    sent = []
    monkeypatch.setattr(metrics, "endpoint", lambda system: "http://tsdb:8428/api/v1/import")
    monkeypatch.setattr(metrics, "post", lambda url, lines: sent.append(lines))
    run = {"stamp": "2026-12-01T03:00:00", "end": "2026-12-01T03:04:00", "kind": "1 x NVIDIA H100 80GB HBM3"}
    nightly.send_verdict("site", run, None, [], 1)
    [line] = [json.loads(x) for x in sent[0].splitlines()]
    assert line["metric"]["__name__"] == "gpu_mempaths_night_exit" and line["values"] == [1]
    assert line["metric"]["meaning"] == "a check failed" and line["metric"]["kind"] == run["kind"]


def test_an_unreachable_endpoint_is_named():
    why = metrics.post("http://127.0.0.1:9/api/v1/import", "{}", timeout=2)
    assert why and why.startswith("http://127.0.0.1:9/api/v1/import: ")


def test_only_a_system_that_names_an_endpoint_sends(monkeypatch):
    monkeypatch.delenv(metrics.URL_VARIABLE, raising=False)
    systems = {"a": {"metrics": {"url": "http://db:8428/api/v1/import"}}, "b": {}}
    base = {"handlers_perflog": [{"type": "filelog"}]}
    (entry,) = rfm.metrics_logging(systems, base)
    assert entry["target_systems"] == ["a"]
    assert [h["type"] for h in entry["handlers_perflog"]] == ["filelog", "httpjson"]
    assert entry["handlers_perflog"][1]["url"] == "http://db:8428/api/v1/import"


def test_an_endpoint_that_does_not_answer_is_named_once_and_sent_nothing(capsys):
    formatter = metrics.formatter_for("http://127.0.0.1:9/api/v1/import")
    assert formatter(_record(), {}, []) is None and formatter(_record(), {}, []) is None
    assert capsys.readouterr().err.count("metrics endpoint http://127.0.0.1:9/api/v1/import: ") == 1


def test_a_partitions_night_sends_each_node_by_path_with_the_node_a_label():
    """A dashboard's path across nodes: each node's deviation from its siblings
    and its verdict, the node a label; the partition's change once per path."""
    cells = pd.DataFrame(
        {
            "node": ["n1", "n2"],
            "path": ["host memory read, NUMA node 0"] * 2,
            "verdict": ["pass", "node fault"],
            "vs_siblings_pct": [0.4, -48.0],
        }
    )
    fleet = pd.DataFrame({"path": ["host memory read, NUMA node 0"], "verdict": ["pass"], "change_pct": [-0.3]})
    lines = [json.loads(x) for x in metrics.partition_lines("s", "2026-11-26T08:00:00", cells, fleet, 1).splitlines()]
    deviations = {
        x["metric"]["node"]: x["values"][0] for x in lines if x["metric"]["__name__"] == metrics.NODE_VS_SIBLINGS
    }
    codes = {x["metric"]["node"]: x["values"][0] for x in lines if x["metric"]["__name__"] == metrics.NODE_VERDICT}
    assert deviations == {"n1": 0.4, "n2": -48.0} and codes == {"n1": 0, "n2": 2}
    findings = {x["metric"]["node"]: x["metric"]["finding"] for x in lines if "node" in x["metric"]}
    assert findings == {"n1": "GMP-210", "n2": "GMP-211"}
    (change,) = [x for x in lines if x["metric"]["__name__"] == metrics.FLEET_CHANGE]
    assert "node" not in change["metric"] and change["values"] == [-0.3]


def test_another_process_on_a_gpu_and_what_it_explains_are_series_of_their_own():
    seen = [{"node": "n1", "gpu": 0, "pid": 4242, "name": "python3", "used_gib": 2.0, "cases": 7, "tests": ["x"]}]
    lines = [
        json.loads(line) for line in metrics.contention_lines("vm", "night", seen, {"p": "pid 4242"}, 5).split("\n")
    ]
    assert lines[0]["metric"] == {
        "__name__": metrics.CONTENTION,
        "system": "vm",
        "night": "night",
        "node": "n1",
        "gpu": "0",
        "pid": "4242",
        "process": "python3",
    }
    assert lines[0]["values"] == [7] and lines[1]["metric"]["__name__"] == metrics.CONTENDED
    assert (lines[1]["metric"]["path"], lines[1]["metric"]["by"], lines[1]["values"]) == ("p", "pid 4242", [1])
