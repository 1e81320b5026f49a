"""The nightly's exit statuses and the acceptance of runs, on synthetic data
(the whole flow through ReFrame is tests/test_fake_gpu.py)."""

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from checks.suite.references import matching_values
from reports import nightly

H100 = {"gpu_model": "NVIDIA H100 80GB HBM3", "host_link": "pcie gen5 x16", "gpu_count": "1"}


def _samples(test, case, figure, unit, runs: list[list[float]], **facts) -> list[dict]:
    common = {"test": test, "case": case, "environ": "gnu", "system": "local", "partition": "default", **H100,
              **facts, "figure": figure, "unit": unit}  # fmt: skip
    return [
        {**common, "run": r, "sample": k + 1, "value": v} for r, values in enumerate(runs) for k, v in enumerate(values)
    ]


def test_tolerance_covers_the_spread_between_runs_and_within_them():
    # Three runs whose medians differ by about 2%: four standard deviations of them.
    runs = [np.array([100.0, 100.1, 99.9]), np.array([102.0, 102.1, 101.9]), np.array([98.0, 98.1, 97.9])]
    ref, spread = nightly.tolerance(runs, minimum=0.03, better="higher")
    assert ref == pytest.approx(100.0) and spread == pytest.approx(4 * 0.02, rel=1e-3)
    # Quiet runs: the minimum.
    quiet = [np.array([50.0, 50.01, 49.99])] * 3
    assert nightly.tolerance(quiet, minimum=0.03, better="higher") == (pytest.approx(50.0), 0.03)
    # Noisy samples within each run: three robust standard deviations of them.
    noisy = [np.array([9.0, 9.5, 10.0, 10.5, 11.0])] * 3  # MAD 0.5, median 10
    assert nightly.tolerance(noisy, 0.03, "higher")[1] == pytest.approx(3 * 1.4826 * 0.05)
    wild = [np.array([1.0, 3.0, 5.0]), np.array([2.0, 6.0, 9.0]), np.array([0.5, 1.0, 9.0])]
    assert nightly.tolerance(wild, 0.03, "higher")[1] == nightly.MAX_RATE_TOLERANCE  # a rate's bound stays above 0
    assert nightly.tolerance(wild, 0.03, "lower")[1] > 1.0  # a time may take several times longer


def test_accepted_runs_become_one_entry_per_case_and_node(tmp_path):
    rows = _samples("UnifiedMemoryBandwidth", "memory=pinned op=read size=1G", "steady_bw", "GiB/s",
                    [[47.5, 47.4, 47.6], [47.3, 47.3, 47.4], [47.7, 47.6, 47.8]])  # fmt: skip
    rows += _samples("UnifiedMemoryBandwidth", "memory=pinned op=read size=1G", "steady_bw", "GiB/s",
                     [[40.0] * 3] * 3, gpu_count="2", gpu_model="NVIDIA H200")  # fmt: skip
    rows += _samples("SmallCopyLatency", "device=0", "lat_us_pinned_h2d_8", "us", [[7.0, 7.01, 6.99]] * 3)
    entries = nightly.reference_entries(pd.DataFrame(rows), minimum=0.03, detected=True, directory=tmp_path)
    um = {e["where"]["gpu_model"]: e for e in entries["UnifiedMemoryBandwidth"]}
    assert um["NVIDIA H100 80GB HBM3"]["where"] == {"gpu_model": "NVIDIA H100 80GB HBM3", "host_link": "pcie gen5 x16",
                                                     "gpu_count": 1}  # fmt: skip
    assert um["NVIDIA H100 80GB HBM3"]["case"] == {"memory": "pinned", "op": "read", "size": "1G"}
    ref, lower, upper, unit = um["NVIDIA H100 80GB HBM3"]["values"]["steady_bw"]
    assert ref == pytest.approx(47.5) and lower == -0.03 and upper is None and unit == "GiB/s"  # upper: physics
    assert um["NVIDIA H200"]["values"]["steady_bw"][0] == 40.0
    [lat] = entries["SmallCopyLatency"]
    assert lat["values"]["lat_us_pinned_h2d_8"][1:] == [None, 0.03, "us"]  # a time's bound is above it


def test_a_declared_system_keeps_its_name_and_partition(tmp_path):
    rows = _samples("HostMemoryBandwidth", "buffer_size=1G", "read_bw_node0", "GiB/s", [[60.0] * 3] * 3,
                    system="summit", partition="batch")  # fmt: skip
    [entry] = nightly.reference_entries(pd.DataFrame(rows), 0.03, detected=False, directory=tmp_path)[
        "HostMemoryBandwidth"
    ]
    assert entry["where"] == {"system": "summit", "partition": "batch"}


def test_a_wider_justified_tolerance_is_kept(tmp_path):
    where = "{gpu_model: NVIDIA H100 80GB HBM3, host_link: pcie gen5 x16}"
    (tmp_path / "HostMemoryBandwidth.yaml").write_text(
        f"- where: {where}\n  values: {{read_bw_node0: [68, -0.25, 0.25, GiB/s]}}\n"
    )
    rows = _samples("HostMemoryBandwidth", "buffer_size=1G", "read_bw_node0", "GiB/s", [[68.0, 68.1, 67.9]] * 3)
    [entry] = nightly.reference_entries(pd.DataFrame(rows), 0.03, True, tmp_path)["HostMemoryBandwidth"]
    assert entry["values"]["read_bw_node0"][1:] == [-0.25, None, "GiB/s"]


def test_written_references_keep_the_header_and_replace_the_last_acceptance(tmp_path):
    entries = {
        "X": [{"where": {"gpu_model": "G"}, "case": {"op": "read"}, "values": {"bw": [1.0, -0.1, None, "GB/s"]}}]
    }
    (tmp_path / "X.yaml").write_text("# hand-written header\n- where: {system: summit}\n  values: {}\n")
    for _ in range(2):  # accepting again replaces the section, it does not pile up
        nightly.write_references(entries, "the runs A, B, C", tmp_path)
    text = (tmp_path / "X.yaml").read_text()
    assert text.startswith("# hand-written header") and text.count("# --- written by ./suite accept") == 1
    values = matching_values(yaml.safe_load(text), {"gpu_model": "G"}, {"op": "read", "size": "1G"})
    assert values == {"bw": [1.0, -0.1, None, "GB/s"]}


def test_an_empty_reference_list_takes_entries(tmp_path):
    (tmp_path / "X.yaml").write_text("# header\n[]\n# template: - where: ...\n")
    nightly.write_references(
        {"X": [{"where": {"system": "a"}, "values": {"bw": [1.0, -0.1, None, "GB/s"]}}]}, "s", tmp_path
    )
    assert yaml.safe_load((tmp_path / "X.yaml").read_text()) == [
        {"where": {"system": "a"}, "values": {"bw": [1.0, -0.1, None, "GB/s"]}}
    ]


# --- exit statuses ---------------------------------------------------------------


def _result(*verdicts):
    return pd.DataFrame({"verdict": list(verdicts)})


@pytest.mark.parametrize(
    "failed, moved, verdicts, node, allow, status",
    [
        ([], [], ["pass", "pass"], True, False, 0),
        ([], [], ["pass", "improvement"], True, False, 0),
        (["x"], ["y"], ["regression"], True, False, 1),  # a failed check outranks everything
        ([], ["y"], ["pass"], True, False, 2),  # out of its reference
        ([], [], ["pass", "regression", "unjudged"], True, False, 2),  # flagged, even with something unjudged
        ([], [], ["pass", "unjudged"], True, False, 3),
        ([], [], ["pass", "unjudged"], True, True, 0),
        ([], [], ["pass"], False, False, 3),  # the node's facts were never accepted
        ([], [], None, True, False, 3),  # no baseline at all
    ],
)
def test_exit_statuses(failed, moved, verdicts, node, allow, status):
    found = {"passed": [], "skipped": [], "failed": failed, "moved": moved}
    result = _result(*verdicts) if verdicts is not None else None
    assert nightly.nightly_status(found, result, node, allow) == status


def test_run_report_outcomes(tmp_path):
    cases = [
        {"display_name": "A", "result": "pass"},
        {"display_name": "B", "result": "skip"},
        {
            "display_name": "C %op=read",
            "result": "fail",
            "fail_phase": "performance",
            "fail_reason": "failed to meet\n reference",
            "perfvalues": {
                "local:default:bw": [1, 2, -0.1, None, "GB/s", "fail"],
                "local:default:bw.s1": [1, 0, None, None, "GB/s", "pass"],
            },
        },
        {"display_name": "D", "result": "fail", "fail_phase": "sanity", "fail_reason": "a GPU fault"},
        {"display_name": "E", "result": "fail_deps"},
    ]
    report = tmp_path / "run-report.json"
    report.write_text(json.dumps({"runs": [{"testcases": cases}]}))
    found = nightly.outcomes(report)
    assert found["passed"] == ["A"] and found["skipped"] == ["B"]
    assert found["moved"] == ["C %op=read: failed to meet reference"] and found["moved"][0].figures == ["bw"]
    assert found["failed"] == ["D (sanity): a GPU fault", "E: not run, a test it depends on (the build) failed"]
    assert nightly.outcomes(tmp_path / "missing.json")["failed"]


def test_references_need_three_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(nightly, "NIGHTLY_DIR", tmp_path)
    for stamp in ("2026-11-20T03:00:00", "2026-11-21T03:00:00"):
        run = tmp_path / "local" / stamp.replace(":", "")
        run.mkdir(parents=True)
        (run / "run.json").write_text(json.dumps({"stamp": stamp, "start": stamp, "end": stamp, "checks": "pass",
                                                  "health": "pass"}))  # fmt: skip
    args = nightly.parser().parse_args(["accept", "2026-11-20T03:00:00", "2026-11-21T03:00:00", "--write-references"])
    assert nightly.accept(args) == 2
    assert "at least 3 runs on separately started nodes, 2 given" in capsys.readouterr().err


def test_earlier_runs_of_a_case_widen_its_tolerance(tmp_path):
    """Records older than the case field match by their logged fields; their spread counts."""
    facts = {"system": "local", "partition": "default", **H100}
    history = pd.DataFrame(
        [
            {**facts, "test": "SmallCopyLatency", "environ": "gnu", "case": "", "case_logged": False, "device": "0",
             "figure": "lat_us_pinned_h2d_8", "sample": None, "value": v, "time": t}
            for t, v in (("2026-11-22T10:00", 8.5), ("2026-11-22T11:00", 8.9))
        ]
        + [{**facts, "test": "SmallCopyLatency", "environ": "gnu", "case": "", "case_logged": False, "device": "1",
            "figure": "lat_us_pinned_h2d_8", "sample": None, "value": 99.0, "time": "2026-11-22T12:00"}]
    ).astype({"sample": "Int64"})  # fmt: skip
    rows = _samples("SmallCopyLatency", "device=0", "lat_us_pinned_h2d_8", "us", [[7.0, 7.01, 6.99]] * 3)
    samples = pd.DataFrame(rows)
    alone = nightly.reference_entries(samples, 0.03, True, tmp_path)["SmallCopyLatency"][0]
    widened = nightly.reference_entries(samples, 0.03, True, tmp_path, history=history)["SmallCopyLatency"][0]
    assert alone["values"]["lat_us_pinned_h2d_8"][2] == 0.03
    # 8.5 and 8.9 us against 7.0: four times their RMS deviation (device=1's 99 us is another case).
    deviations = [0, 0, 0, 8.5 / 7 - 1, 8.9 / 7 - 1]
    expected = 4 * (sum(d * d for d in deviations) / 4) ** 0.5
    assert widened["values"]["lat_us_pinned_h2d_8"][2] == pytest.approx(expected, abs=1e-4)


def test_the_gate_decides_where_it_judged_a_figure_out_of_its_reference():
    miss = nightly.ReferenceMiss("C %op=read", "failed to meet reference(s): bw=1 GB/s", ["bw"])
    other = nightly.ReferenceMiss("C %op=write", "failed to meet reference(s): curve=1 GB/s", ["curve"])
    records = pd.DataFrame({"display_name": ["C %op=read", "C %op=write"], "case": ["op=read", "op=write"]})

    def result(verdict):
        return pd.DataFrame([{"test": "C", "case": "op=read", "figure": "bw", "verdict": verdict}])

    # Judged and passed: the median left its bounds within the noise; reported, not a move.
    assert nightly.decided_by_the_gate([miss], result("pass"), records) == ([], [miss])
    # Flagged: the gate's regression makes the move (exit 2 through the result).
    assert nightly.decided_by_the_gate([miss], result("regression"), records) == ([], [])
    # Not judged (no samples, another figure, or no gate at all): the reference decides.
    assert nightly.decided_by_the_gate([miss], result("unjudged"), records) == ([miss], [])
    assert nightly.decided_by_the_gate([other], result("pass"), records) == ([other], [])
    assert nightly.decided_by_the_gate([miss], None, records) == ([miss], [])
