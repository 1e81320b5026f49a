"""Each night's levels kept in the store when it is judged (runner/histories.py): the change points read
them instead of every night's records, and they are the levels the whole history gives."""

import pandas as pd
import pytest

from judge import changepoints
from reports import runs, store
from reports.load import load
from runner import histories

KINDS = ("1 x NVIDIA H100 80GB HBM3", "1 x NVIDIA H200")


@pytest.fixture
def own_store(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "STORES", tmp_path / "stores")
    return tmp_path / "stores"


def whole_history_levels(accepted: dict) -> pd.DataFrame:
    """The levels as the nightly computed them before they were kept: over every record of the system."""
    nights = histories.kind_nights("hopper-vm", accepted)
    frame = load(runs.PERFLOGS / "hopper-vm", warn=None).frame
    table = changepoints.path_levels(frame, "hopper-vm", nights, [r["stamp"] for r in accepted["runs"]])
    return table.reset_index(drop=True)


@pytest.mark.long
@pytest.mark.parametrize("kind", KINDS)
def test_the_levels_kept_a_few_nights_at_a_time_are_those_of_the_whole_history(own_store, monkeypatch, kind):
    accepted = runs.read_accepted("hopper-vm", kind)
    monkeypatch.setattr(histories, "LEVEL_BATCH", 7)  # nights computed from windows a few at a time
    kept = histories.night_levels("hopper-vm", accepted)
    expected = whole_history_levels(accepted)
    assert len(expected) > 100
    pd.testing.assert_frame_equal(kept[expected.columns], expected, check_dtype=False, atol=1e-12)
    computed = []
    monkeypatch.setattr(histories, "_levels_of", lambda *args: computed.append(args) or pd.DataFrame())
    again = histories.night_levels("hopper-vm", accepted)  # read back: nothing computed again
    assert computed == [] and again.equals(kept)


@pytest.mark.long
def test_a_night_judged_again_or_a_new_baseline_computes_its_levels_again(own_store, monkeypatch):
    accepted = runs.read_accepted("hopper-vm", KINDS[0])
    histories.night_levels("hopper-vm", accepted)
    nights = histories.kind_nights("hopper-vm", accepted)
    computed = []
    levels_of = histories._levels_of
    monkeypatch.setattr(
        histories, "_levels_of", lambda *a: computed.append([r["stamp"] for r in a[3]]) or levels_of(*a)
    )
    last = {**nights[-1], "paths": {"host memory": {"verdict": "transient"}}}  # its verdicts as judged again
    histories.night_levels("hopper-vm", accepted, tonight=last)
    assert computed == [[last["stamp"]]]
    fewer = {**accepted, "runs": accepted["runs"][:-1]}  # another baseline: every night against it
    histories.night_levels("hopper-vm", fewer)
    assert sorted(s for batch in computed[1:] for s in batch) == sorted(r["stamp"] for r in nights)
