"""The nightly gate and the acceptance of a run, on synthetic perflogs."""

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from checks.suite.references import matching_values
from reports import nightly

HEADER = (
    "job_completion_time|reframe version|display_name|name|system|partition|environ|job_nodelist|"
    "gpu_model|host_link|runs|result|perf_var|perf_value|perf_unit|perf_ref|perf_lower_thres|perf_upper_thres"
)


def _lines(start_minute: int, mean: float, rng) -> list[str]:
    lines = []
    for run in range(0, 6):  # the median (run 0 here), then each run
        value = mean + rng.normal(0, 0.2) if run else mean
        var = f"read_bw_node0_run{run}" if run else "read_bw_node0"
        lines.append(
            f"2026-11-20T03:{start_minute:02d}:00|reframe 4.10.4|HostMemoryBandwidth|HostMemoryBandwidth|local|"
            f"default|gnu|n1|NVIDIA H100 80GB HBM3|pcie gen5 x16|5|pass|{var}|{value:.4f}|"
            "GiB/s|0|null|null"
        )
    return lines


@pytest.fixture
def perflogs(tmp_path, monkeypatch):
    monkeypatch.setattr(nightly, "PERFLOGS", tmp_path / "perflogs")
    (tmp_path / "perflogs" / "local" / "default").mkdir(parents=True)
    return tmp_path / "perflogs"


def _write(perflogs, base_mean: float, new_mean: float, seed: int = 1):
    rng = np.random.default_rng(seed)
    lines = [HEADER, *_lines(0, base_mean, rng), *_lines(30, new_mean, rng)]
    (perflogs / "local" / "default" / "HostMemoryBandwidth.log").write_text("\n".join(lines) + "\n")
    accepted = {"stamp": "2026-11-20T03:00:00", "start": "2026-11-20T03:00:00", "end": "2026-11-20T03:10:00"}
    (perflogs / "local" / "accepted.json").write_text(json.dumps(accepted))


NEW_RUN = {"stamp": "2026-11-20T03:30:00", "start": "2026-11-20T03:25:00", "end": "2026-11-20T03:35:00"}


def test_a_known_drop_fails_the_gate(perflogs, tmp_path):
    _write(perflogs, base_mean=68.0, new_mean=60.0)
    assert nightly.compare_with_accepted("local", NEW_RUN, tmp_path, threshold=5) == 2
    table = (tmp_path / "compare.csv").read_text()
    assert "read_bw_node0_runs" in table and "regression" in table


def test_noise_passes_the_gate(perflogs, tmp_path):
    _write(perflogs, base_mean=68.0, new_mean=68.0, seed=7)
    assert nightly.compare_with_accepted("local", NEW_RUN, tmp_path, threshold=5) == 0


def test_a_drop_below_the_threshold_passes(perflogs, tmp_path):
    _write(perflogs, base_mean=68.0, new_mean=66.0)  # -3%, significant but under 5%
    assert nightly.compare_with_accepted("local", NEW_RUN, tmp_path, threshold=5) == 0


def test_no_accepted_run_passes_and_says_how_to_accept(perflogs, tmp_path, capsys):
    assert nightly.compare_with_accepted("local", NEW_RUN, tmp_path, threshold=5) == 0
    assert "./suite accept 2026-11-20T03:30:00" in capsys.readouterr().out


def test_accepted_medians_become_references(perflogs, tmp_path):
    _write(perflogs, base_mean=68.0, new_mean=60.0)
    rows = nightly.run_rows("local", "2026-11-20T03:00:00", "2026-11-20T03:10:00")
    refs = tmp_path / "refs"
    refs.mkdir()
    entries = nightly.reference_entries(rows, tolerance=5, directory=refs)
    [entry] = entries["HostMemoryBandwidth"]
    assert entry["where"] == {"gpu_model": "NVIDIA H100 80GB HBM3", "host_link": "pcie gen5 x16"}
    assert entry["case"] == {"runs": "5"}
    assert entry["values"]["read_bw_node0"][1:] == [-0.05, 0.05, "GiB/s"]
    assert "read_bw_node0_run1" not in entry["values"]  # samples are not references

    (refs / "HostMemoryBandwidth.yaml").write_text("# hand-written header\n- where: {system: summit}\n  values: {}\n")
    for _ in range(2):  # accepting again replaces the section, it does not pile up
        nightly.write_references(entries, "2026-11-20T03:00:00", refs)
    text = (refs / "HostMemoryBandwidth.yaml").read_text()
    assert text.startswith("# hand-written header")
    assert text.count("# --- written by ./suite accept") == 1
    loaded = yaml.safe_load(text)
    facts = {
        "system": "local",
        "partition": "default",
        "gpu_model": "NVIDIA H100 80GB HBM3",
        "host_link": "pcie gen5 x16",
    }
    values = matching_values(loaded, facts, {"runs": 5})
    assert values["read_bw_node0"][0] == pytest.approx(68.0, abs=1.0)


def test_a_wider_justified_tolerance_is_kept(perflogs, tmp_path):
    _write(perflogs, base_mean=68.0, new_mean=60.0)
    rows = nightly.run_rows("local", "2026-11-20T03:00:00", "2026-11-20T03:10:00")
    refs = tmp_path / "refs"
    refs.mkdir()
    where = "{gpu_model: NVIDIA H100 80GB HBM3, host_link: pcie gen5 x16}"
    (refs / "HostMemoryBandwidth.yaml").write_text(
        f"- where: {where}\n  values: {{read_bw_node0: [1, -0.5, 0.3, GiB/s]}}\n"
    )
    [entry] = nightly.reference_entries(rows, tolerance=5, directory=refs)["HostMemoryBandwidth"]
    assert entry["values"]["read_bw_node0"][1:] == [-0.5, 0.3, "GiB/s"]


def test_an_empty_reference_list_takes_entries(tmp_path):
    (tmp_path / "X.yaml").write_text("# header\n[]\n# template: - where: ...\n")
    nightly.write_references(
        {"X": [{"where": {"system": "a"}, "values": {"bw": [1.0, -0.1, 0.1, "GB/s"]}}]}, "s", tmp_path
    )
    assert yaml.safe_load((tmp_path / "X.yaml").read_text()) == [
        {"where": {"system": "a"}, "values": {"bw": [1.0, -0.1, 0.1, "GB/s"]}}
    ]


def test_one_case_on_two_machines_gives_an_entry_each(tmp_path):
    def rows(gpus, values):
        return [
            {"test": "Scan", "display_name": "Scan %op=read", "system": "local", "partition": "default",
             "gpu_model": "NVIDIA H200", "gpu_count": gpus, "host_link": "pcie gen5 x16", "op": "read",
             "perf_var": "best_gbs", "value": v, "unit": "GB/s"}
            for v in values
        ]  # fmt: skip

    frame = pd.DataFrame(rows(2, [668.0, 670.0, 669.0]) + rows(4, [424.0, 425.0, 426.0]))
    entries = nightly.reference_entries(frame, tolerance=10, directory=tmp_path)["Scan"]
    medians = {e["where"]["gpu_count"]: e["values"]["best_gbs"][0] for e in entries}
    assert medians == {2: 669.0, 4: 425.0}
