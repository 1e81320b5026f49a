"""The run's plan (runner/plan.py) and the cases' expected times (experiments/budget.py)."""

import json

import pytest

from experiments import budget
from runner import plan as plans


def _case(name, result="pass", expected=0.0, **more):
    return {"display_name": name, "result": result, "expected_s": expected, "fixture": False, **more}


def test_the_plan_totals_the_cases_and_says_each_reason_once():
    over = f"over the case budget of 2 min 00 s (-S case_budget_s=SECONDS runs it){budget.EXPECTED}"
    report = {
        "runs": [
            {
                "testcases": [
                    _case("um_bandwidth %memory=managed", expected=30.0),
                    _case("um_bandwidth %memory=pinned", expected=40.0, sized_down="repeats 5 -> 3: 3 min -> 1 min"),
                    _case("path_matrix %paths=host-ce", expected=50.0),
                    _case("um_bandwidth %size_class=oversubscribed", "skip", left_out_because=over + "9 min 53 s"),
                    _case(
                        "um_bandwidth %size_class=oversubscribed %op=write",
                        "skip",
                        left_out_because=over + "3 min 10 s",
                    ),
                    _case("gdrcopy_sanity", "skip", left_out_because="no gdrdrv"),
                    {**_case("SuiteBuild ~p+gnu"), "fixture": True},
                ]
            }
        ]
    }
    plan = plans.read_plan(json.loads(json.dumps(report)))
    assert plan.cases == 3 and plan.builds == 1 and plan.total_s == 120.0
    lines = plans.plan_lines(plan)
    # 3 cases and 1 build run, 3 left out: the 7 of ReFrame's "Ran 4/7", said so.
    assert lines[0] == (
        "plan: 3 case(s) and 1 build(s), expected 2 min 00 s: um_bandwidth 2 (1 min 10 s), path_matrix 1 (50 s)"
    )
    assert "plan: sized down (um_bandwidth x1): repeats 5 -> 3: 3 min -> 1 min" in lines
    assert f"plan: left out (um_bandwidth x2): {over}3 min 10 s to 9 min 53 s" in lines
    assert "plan: left out (gdrcopy_sanity x1): no gdrdrv" in lines


def test_a_dry_run_that_fails_is_a_plan_that_says_so():
    assert plans.plan_lines(plans.Plan(error="the dry run wrote no report")) == [
        "plan: none: the dry run wrote no report"
    ]


def test_a_case_is_sized_down_to_what_fits_and_never_below_its_least():
    assert budget.fewer(5, 3, fixed_s=10.0, each_s=30.0, budget_s=120.0) == 3
    assert budget.fewer(5, 3, fixed_s=10.0, each_s=50.0, budget_s=120.0) is None  # two fit: under the least
    assert budget.fewer(5, 3, fixed_s=10.0, each_s=20.0, budget_s=120.0) is None  # all five fit


def test_minutes_read_as_a_plan_prints_them():
    assert budget.minutes(38.4) == "38 s" and budget.minutes(245) == "4 min 05 s"
    assert plans._seconds("4 min 05 s") == 245 and plans._seconds("38 s") == 38


@pytest.mark.slow
@pytest.mark.parametrize("system, gpus", [("dgx-a100", 8), ("summit", 6)])
def test_a_plan_of_a_node_of_many_gpus_fits_its_cases_to_the_budget(system, gpus):
    """Summit's six GPUs and the DGX's eight, from their data: every case
    that runs is expected within the case budget, the rest left out or sized
    down with the reason, and the total is the sum of what runs."""
    plan = plans.make_plan(system, ["--mode", "nightly"])
    assert not plan.error and plan.cases > 50
    assert all(0 < s <= budget.CASE_BUDGET_S for values in plan.seconds.values() for s in values)
    lines = plans.plan_lines(plan)
    assert any("um_bandwidth x" in line and ("over the case budget" in line or "sized down" in line) for line in lines)
    assert {"path_matrix", "mem_scan", "p2p_pingpong"} <= set(plan.seconds)
