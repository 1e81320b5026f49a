"""The catalogue of tiers (systems/tiers/catalogue.yaml, systems/tiers.py) and its command (./suite tiers,
runner/tier_catalogue.py): each case in the first tier that names it, every pattern a case the suite has,
limits that fit their hooks, a malformed catalogue named, and the case times kept from a night's report."""

import json
from pathlib import Path

import pandas as pd
import pytest

from experiments.path_matrix import CASES
from runner import tier_catalogue
from runner.tier_checks import tier_selection
from systems import tiers

REPO = Path(__file__).resolve().parent.parent


def known_cases() -> set[str]:
    """Display names of cases the suite has: every path matrix case, and each case its committed perflogs name."""
    names = {f"path_matrix %paths={'-'.join(case)}" for case in CASES}
    for log in REPO.glob("perflogs/*/*/*.log"):
        header = None
        with open(log) as lines:
            for line in lines:
                fields = line.rstrip("\n").split("|")
                if fields[0] == "job_completion_time":
                    header = fields
                elif header and len(fields) == len(header):
                    names.add(fields[header.index("display_name")])
    return names


def test_every_pattern_of_a_tier_is_a_case_the_suite_has():
    cases = known_cases()
    assert len(cases) > 10
    for tier in tiers.measured_tiers():
        for pattern in tier.cases:
            assert any(tiers.Tier("t", None, "", "", (pattern,)).measures(c) for c in cases), (tier.name, pattern)


def test_a_case_belongs_to_the_first_tier_that_names_it_else_to_the_nightly():
    assert tiers.tier_of("path_matrix %paths=host-ce") == "health"
    assert tiers.tier_of("path_matrix %paths=host-sm") == "epilog"
    assert tiers.tier_of("copy_latency") == "epilog"
    assert tiers.tier_of("daxpy %allocator=managed %prefetch=on %data_size=800000") == "nightly"


def test_the_health_tiers_limit_fits_nhcs_watchdog_and_slurms_health_check():
    health = tiers.tier_named("health")
    assert health.limit_s is not None and health.limit_s < 30  # NHC's watchdog; Slurm's HealthCheckProgram is 60 s
    assert tiers.tier_named("epilog").limit_s <= 120
    with pytest.raises(tiers.TierError, match="no tier 'helth': the tiers are health, epilog"):
        tiers.tier_named("helth")


@pytest.mark.parametrize(
    "entry, said",
    [
        ({"name": "x", "limit_s": "soon", "fits": "", "command": "", "cases": []}, "limit_s 'soon' is not a number"),
        ({"name": "x", "limit_s": 5, "fits": "", "command": ""}, "lacks cases"),
        ({"name": "x", "limit_s": 5, "fits": "", "command": "", "cases": [3]}, "cases must be a list"),
    ],
)
def test_a_malformed_catalogue_is_named_by_its_tier(tmp_path, entry, said):
    path = tmp_path / "catalogue.yaml"
    nightly = {"name": "nightly", "limit_s": None, "fits": "", "command": "", "cases": []}
    path.write_text(json.dumps({"tiers": [entry, nightly]}))
    with pytest.raises(tiers.TierError, match=said):
        tiers.catalogue.__wrapped__(path)


def report(*cases: tuple[str, str, float | None]) -> dict:
    testcases = [
        {"display_name": n, "result": r, "time_run": t, "hashcode": f"h{i}"} for i, (n, r, t) in enumerate(cases)
    ]
    for case in testcases:
        case["case"] = case["display_name"].partition(" ")[2]
    return {"runs": [{"testcases": testcases}]}


def test_the_tier_measures_again_only_the_nights_cases_that_passed():
    night = report(
        ("path_matrix %paths=host-ce", "pass", 1.4),
        ("path_matrix %paths=peer-ce", "skip", None),  # one GPU: nothing to measure again
        ("path_matrix %paths=latency-sm", "fail", 0.9),
        ("daxpy %allocator=managed", "pass", 9.6),
    )
    assert tier_selection(night, tiers.tier_named("health")) == ["-n", "/h0"]


def test_a_nights_case_times_are_kept_and_shown_per_kind_by_tier(tmp_path, monkeypatch):
    monkeypatch.setattr(tier_catalogue, "TIMES_DIR", tmp_path / "tiers")
    for stamp, scale in (("2026-12-06T10:00:00", 1.0), ("2026-12-07T10:00:00", 1.2)):
        night = tmp_path / stamp.replace(":", "")
        night.mkdir()
        run = {"system": "s", "stamp": stamp, "kind": "1 x NVIDIA H100 80GB HBM3"}
        (night / "run.json").write_text(json.dumps(run))
        cases = [("path_matrix %paths=host-ce", "pass", 1.5 * scale), ("daxpy %allocator=managed", "pass", 9.0 * scale)]
        (night / "run-report.json").write_text(json.dumps(report(*cases, ("mem_scan %mode=single", "skip", None))))
        tier_catalogue.record([night])
    tier_catalogue.record([tmp_path / "2026-12-07T100000"])  # recorded again: replaced, not twice
    times = pd.read_csv(tmp_path / "tiers" / "s.csv")
    assert len(times) == 4 and set(times["case"]) == {"path_matrix %paths=host-ce", "daxpy %allocator=managed"}
    table = tier_catalogue.case_table(times)
    assert table["tier"].tolist() == ["health", "nightly"]
    column = "1 x NVIDIA H100 80GB HBM3 (2 nights), s"
    assert table[column].tolist() == pytest.approx([1.65, 9.9])
    assert tier_catalogue.sums_lines(table) == [
        "1 x NVIDIA H100 80GB HBM3 (2 nights): the cases' jobs take health 1.6 s, nightly 9.9 s"
    ]


def test_docs_show_the_catalogue_as_the_command_prints_it_from_the_committed_times(capsys):
    """docs/tiers.md's tables are `./suite tiers --markdown` of results/tiers/: no figure kept twice."""
    assert tier_catalogue.main(tier_catalogue_args(markdown=True)) == 0
    printed = capsys.readouterr().out
    docs = (REPO / "docs" / "tiers.md").read_text()
    for line in printed.splitlines():
        if line.startswith("|") or line.endswith(" s"):
            assert line in docs, line


def tier_catalogue_args(**given):
    import argparse

    return argparse.Namespace(**{"system": None, "markdown": False, "record": None, **given})


def test_a_damaged_times_file_is_named_and_exits_3(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tier_catalogue, "TIMES_DIR", tmp_path)
    (tmp_path / "s.csv").write_text("kind,case\n1 x GPU,a\n")  # a table, not of case times
    assert tier_catalogue.main(tier_catalogue_args(system="s")) == 3
    assert "s.csv lacks the columns system, night, seconds" in capsys.readouterr().err
