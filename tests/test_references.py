"""Reference selection from systems/references/*.yaml."""

from pathlib import Path

import pytest
import yaml

from checks.suite.references import REFERENCES_DIR, load_entries, matching_values

ENTRIES = [
    {"where": {"system": "summit"}, "values": {"steady_bw": [63.5, -0.05, 0.05, "GiB/s"]}},
    {
        "where": {"system": "summit"},
        "case": {"allocator": "managed"},
        "values": {"steady_bw": [1.5, -0.5, 0.5, "GiB/s"]},
    },
    {
        "where": {"gpu_model": "NVIDIA H100 80GB HBM3", "host_link": "pcie gen5 x16"},
        "values": {"steady_bw": [47.5, -0.1, 0.1, "GiB/s"]},
    },
]


def _facts(**kw):
    return {"system": "local", "partition": "default", "gpu_model": "none", "host_link": "none", **kw}


def test_declared_system_matches_by_name():
    assert matching_values(ENTRIES, _facts(system="summit"), {"allocator": "numa"}) == {
        "steady_bw": [63.5, -0.05, 0.05, "GiB/s"]
    }


def test_later_entries_refine_earlier_ones():
    values = matching_values(ENTRIES, _facts(system="summit"), {"allocator": "managed"})
    assert values["steady_bw"][0] == 1.5


def test_detected_machine_matches_by_gpu_and_link_only():
    h100 = _facts(gpu_model="NVIDIA H100 80GB HBM3", host_link="pcie gen5 x16")
    assert matching_values(ENTRIES, h100, {})["steady_bw"][0] == 47.5
    h100_gen4 = _facts(gpu_model="NVIDIA H100 80GB HBM3", host_link="pcie gen4 x16")
    assert matching_values(ENTRIES, h100_gen4, {}) == {}


def test_malformed_entries_are_reported(tmp_path):
    (tmp_path / "X.yaml").write_text(yaml.safe_dump([{"where": {"system": "a"}, "values": {"bw": [1, 2]}}]))
    with pytest.raises(ValueError, match=r"X\.yaml: entry 0: bw: expected \[reference, lower, upper, unit\]"):
        load_entries("X", str(tmp_path))


@pytest.mark.parametrize("path", sorted(Path(REFERENCES_DIR).glob("*.yaml")), ids=lambda p: p.name)
def test_every_references_file_is_readable(path):
    entries = load_entries(path.stem, str(path.parent))
    assert isinstance(entries, list)


def test_gpu_count_keeps_a_pairs_figures_off_a_four_gpu_node():
    entries = [
        {"where": {"gpu_model": "NVIDIA H200", "gpu_count": 2}, "values": {"plateau_gbs": [668, -0.1, 0.1, "GB/s"]}}
    ]
    pair = _facts(gpu_model="NVIDIA H200", gpu_count=2)
    four = _facts(gpu_model="NVIDIA H200", gpu_count=4)
    assert matching_values(entries, pair, {}) and not matching_values(entries, four, {})


def _accepted_node_kinds(frame, system: str, accepted: dict) -> set:
    """The kinds of node (model, count, link) the accepted runs ran on."""
    from reports.nightly import run_rows

    rows = frame[run_rows(frame, system, accepted["runs"])]
    return set(map(tuple, rows[["gpu_model", "gpu_count", "host_link"]].drop_duplicates().values))


def test_every_case_run_on_an_accepted_machine_has_a_reference_for_each_headline_figure():
    import json

    from checks.suite.keys import parse_case
    from reports.load import load

    perflogs = Path(REFERENCES_DIR).parent.parent / "perflogs"
    missing, judged = [], 0
    for accepted_file in sorted(perflogs.glob("*/accepted.json")):
        system, accepted = accepted_file.parent.name, json.loads(accepted_file.read_text())
        if "runs" not in accepted:
            continue  # a record from before samples: nothing keyed on cases yet
        frame = load(perflogs / system, warn=None).frame
        kinds = _accepted_node_kinds(frame, system, accepted)
        heads = frame[frame["sample"].notna() & (frame["case"] != frame["params"])]
        keys = ["test", "case", "system", "partition", "gpu_model", "gpu_count", "host_link"]
        for (test, case, *facts), group in heads.groupby(keys):
            facts = dict(zip(keys[2:], facts))
            if (facts["gpu_model"], facts["gpu_count"], facts["host_link"]) not in kinds:
                continue
            values = matching_values(load_entries(test), facts, parse_case(case))
            for figure in sorted(group["figure"].unique()):
                judged += 1
                if figure not in values:
                    missing.append(f"{system} {facts['gpu_model']}: {test} {case} {figure}")
    assert judged > 0, "no accepted machine's cases found: the test checked nothing"
    assert not missing, f"{len(missing)} of {judged} headline figures have no reference:\n" + "\n".join(missing[:20])
