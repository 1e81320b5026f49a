"""The verdict's rules beside its statistics (judge/verdict.py's Rules): the
guard rail, one case moving alone, and a program changed since the accepted
runs. On nights drawn from the committed one-H100 baseline's spread
(tests/test_verdict.py's model); each test runs in seconds."""

import numpy as np
import pandas as pd
import pytest
from test_verdict import HOST_LINK, _one_path_table, model

from experiments import code as fingerprints
from experiments.paths import load_rules
from judge import status, verdict
from runner import nightly, power

DAXPY = "DAXPY with explicit copies, GPU 0"
#: One case of the Unified Memory advice matrix: read through the host link, mapped where accessed.
ONE_CASE = "memory=managed+accessed-by op=read"


def judged(base, night, rules=verdict.ALL_RULES):
    return verdict.judge_values(pd.concat([base, night], ignore_index=True), rules=rules)


def quiet_night(seed: int):
    """A simulated night whose every path passes without the rules beside the statistics."""
    rng = np.random.default_rng(seed)
    while True:
        base, night = model().baseline_and_night(rng)
        if not judged(base, night).flagged_paths():
            return base, night


def test_every_kind_of_path_has_a_guard_above_its_floor():
    kinds, _ = load_rules()
    for name, kind in kinds.items():
        assert kind["floor"] < kind["guard"] < 1, name


def test_a_path_twice_as_slow_is_flagged_by_the_guard_where_its_spread_hides_it():
    base, night = quiet_night(34)
    slow = power.plant(night, DAXPY, 0.5)
    statistics = judged(base, slow, verdict.Rules(guard=False, figures=False))
    assert DAXPY not in statistics.flagged_paths(), "the statistics alone see it: plant where they do not"
    row = judged(base, slow).paths.set_index("path").loc[DAXPY]
    assert row["verdict"] == "moved" and "guard" in row["flagged_by"]
    assert "beyond the guard rail of 25%" in row["reason"]


def test_the_guard_rail_is_data_a_site_may_set():
    base, night = quiet_night(34)
    slow = power.plant(night, DAXPY, 0.5)
    table = pd.concat([base, slow], ignore_index=True)
    table.loc[table["path"] == DAXPY, "guard"] = 0.9  # a site's own guard, as attach_paths reads it from paths.yaml
    assert DAXPY not in verdict.judge_values(table, rules=verdict.Rules(figures=False)).flagged_paths()


def test_a_rerun_within_the_guard_clears_what_the_guard_flagged():
    base, night = quiet_night(34)
    first = judged(base, power.plant(night, DAXPY, 0.5))
    assert DAXPY in first.flagged_paths()
    again = verdict.confirm(first, judged(base, night))
    assert again.paths.set_index("path").loc[DAXPY, "verdict"] == "transient"
    lasting = verdict.confirm(first, judged(base, power.plant(night, DAXPY, 0.5)))
    assert lasting.paths.set_index("path").loc[DAXPY, "verdict"] == "moved"


def _one_case_slower(night: pd.DataFrame, by: float) -> pd.DataFrame:
    night = night.copy()
    on = (
        (night["test"] == "um_bandwidth")
        & night["case"].str.contains(ONE_CASE, regex=False)
        & (night["path"] == HOST_LINK)
    )
    assert on.sum() >= 2, "the case's figures on the host link"
    night.loc[on, "value"] *= 1 - by
    return night


def test_one_case_seven_percent_slower_flags_its_path_and_names_the_case():
    base, night = quiet_night(32)
    slower = _one_case_slower(night, 0.07)
    result = judged(base, slower)
    path = result.paths.set_index("path").loc[HOST_LINK]
    assert abs(path["change_pct"]) < path["floor_pct"], "the path's median does not move"
    assert path["verdict"] == "moved" and "figures" in path["flagged_by"]
    assert "a case moved" in path["reason"] and "memory=managed+accessed-by" in path["reason"]
    # Before, the path hid it: the case was named, and nothing flagged.
    before = judged(base, slower, verdict.Rules(figures=False)).paths.set_index("path").loc[HOST_LINK]
    assert before["verdict"] == "pass" and "a figure moved, the path did not" in before["reason"]
    # The rerun must show the same case moved again.
    cleared = verdict.confirm(result, judged(base, night))
    assert cleared.paths.set_index("path").loc[HOST_LINK, "verdict"] == "transient"
    confirmed = verdict.confirm(result, judged(base, _one_case_slower(night, 0.07)))
    assert confirmed.paths.set_index("path").loc[HOST_LINK, "verdict"] == "moved"


def _with_codes(table: pd.DataFrame, accepted: str, tonight: str) -> pd.DataFrame:
    return table.assign(code=np.where(table["run"].str.startswith("tonight"), tonight, accepted))


def test_a_case_another_program_measured_is_not_judged_but_named_for_re_acceptance():
    base, night = quiet_night(33)
    moved = power.plant(night, DAXPY, 0.8)  # the new program measures something else: -80% is no fault
    table = _with_codes(pd.concat([base, moved], ignore_index=True), "a1b2c3d4e5f6", "0f9e8d7c6b5a")
    result = verdict.judge_values(table)
    figures = result.figures[result.figures["path"] == DAXPY]
    assert set(figures["verdict"]) == {"unjudged"}
    assert figures["reason"].str.contains("another program").all() and figures["reason"].str.contains("re-accept").all()
    assert DAXPY not in result.flagged_paths()
    assert "other-program" in nightly.unjudged_reasons(result, True, True)
    assert nightly.nightly_status({"failed": []}, result, ["other-program"], False) == status.UNJUDGED


@pytest.mark.parametrize("accepted, tonight", [("unknown", "0f9e8d7c6b5a"), ("a1b2c3d4e5f6", "unknown")])
def test_runs_from_before_fingerprints_were_kept_are_judged_as_before(accepted, tonight):
    base, night = quiet_night(33)
    table = _with_codes(pd.concat([base, power.plant(night, DAXPY, 0.8)], ignore_index=True), accepted, tonight)
    assert DAXPY in verdict.judge_values(table).flagged_paths()


def test_the_same_program_is_judged():
    table = _one_path_table({**{f"r{i}": [55.0 * (1 + 0.002 * (i % 3 - 1))] for i in range(5)}, "tonight": [40.0]})
    table = _with_codes(table, "a1b2c3d4e5f6", "a1b2c3d4e5f6")
    assert verdict.judge_values(table).paths["verdict"].tolist() == ["moved"]


def test_a_fingerprint_changes_with_the_programs_source_its_build_options_and_the_checks_version(tmp_path):
    for folder in ("src/daxpy", "src/common", "src/cmake"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "src/daxpy/daxpy.cu").write_text("kernel v1")
    (tmp_path / "src/common/record.hpp").write_text("record")
    (tmp_path / "src/CMakeLists.txt").write_text("cmake")
    facts = "cuda_toolkit=13.0\ncuda_compiler=NVIDIA 13.0.88\ncuda_architectures=90\nbuild_type=Release\n"
    first = fingerprints.fingerprint("daxpy", facts, 1, str(tmp_path))
    assert len(first) == fingerprints.DIGITS and fingerprints.known(first)
    # The toolkit and compiler are software facts an upgrade changes, not the program.
    assert fingerprints.fingerprint("daxpy", facts.replace("13.0", "13.1"), 1, str(tmp_path)) == first
    assert fingerprints.fingerprint("daxpy", facts.replace("=90", "=80;90"), 1, str(tmp_path)) != first
    assert fingerprints.fingerprint("daxpy", facts, 2, str(tmp_path)) != first
    (tmp_path / "src/common/record.hpp").write_text("record, changed")
    fingerprints.source_digest.cache_clear()
    assert fingerprints.fingerprint("daxpy", facts, 1, str(tmp_path)) != first
    assert not fingerprints.known("unknown") and not fingerprints.known(float("nan"))


def test_an_upgrade_whose_sides_another_program_measured_is_not_judged():
    table = _one_path_table({**{f"old{i}": [55.0] for i in range(1, 4)}, **{f"new{i}": [40.0] for i in range(1, 4)}})
    pairs = [(f"old{i}", f"new{i}") for i in range(1, 4)]
    same = verdict.judge_pair_values(table.assign(code="a1b2c3d4e5f6"), pairs)
    assert same.paths["verdict"].tolist() == ["moved"]
    codes = np.where(table["run"].str.startswith("new"), "0f9e8d7c6b5a", "a1b2c3d4e5f6")
    other = verdict.judge_pair_values(table.assign(code=codes), pairs)
    assert other.figures["verdict"].tolist() == ["unjudged"]
    assert other.figures["reason"].iloc[0].startswith("measured by another program on each side")


def test_a_rerun_confirms_a_case_by_that_case_not_by_another_point_of_the_path():
    """DAXPY on demand: the case at 800 KB twice as slow flags the path; one
    kernel time of the case at 80 MB, three times as slow, moved too but
    alone of its case's figures. In the rerun the 800 KB case is back and
    the lone point still out: the flag is not confirmed by that point."""
    path = "DAXPY on managed memory on demand, GPU 0"
    base, night = quiet_night(34)

    def slow(rows, case, by, figure=None):
        rows = rows.copy()
        on = (rows["path"] == path) & rows["case"].str.contains(case, regex=False)
        on &= rows["figure"] == figure if figure else True
        rows.loc[on, "value"] *= 1 + by
        return rows

    point = slow(night, "data_size=80000 ", 2.0, "kernel_us_i4_o4")
    first = judged(base, slow(point, "data_size=800 ", 1.0))
    row = first.paths.set_index("path").loc[path]
    assert row["verdict"] == "moved" and row["flagged_by"] == "figures"
    assert path not in judged(base, point).flagged_paths()  # the lone point flags nothing
    assert verdict.confirm(first, judged(base, point)).paths.set_index("path").loc[path, "verdict"] == "transient"


def test_a_change_held_over_the_nights_on_a_path_another_program_measured_is_that_programs():
    from judge.changepoints import Change

    base, night = quiet_night(33)
    table = _with_codes(pd.concat([base, night], ignore_index=True), "a1b2c3d4e5f6", "0f9e8d7c6b5a")
    table.loc[table["path"] != DAXPY, "code"] = "a1b2c3d4e5f6"  # only DAXPY's program changed
    result = verdict.judge_values(table)
    reasons = nightly.unjudged_reasons(result, True, True)
    assert reasons == ["other-program"]
    step = Change(DAXPY, "2026-12-01T00:00:00", 3, 40.0, 5.0)  # the new program's level, three nights on
    assert nightly.nightly_status({"failed": []}, result, reasons, False, [step]) == status.UNJUDGED
    elsewhere = Change(HOST_LINK, "2026-12-01T00:00:00", 3, 5.0, 3.0)
    assert nightly.nightly_status({"failed": []}, result, reasons, False, [step, elsewhere]) == status.MOVED
