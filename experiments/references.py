"""Performance references as data: systems/references/<Check>.yaml.

Each file is a list of entries::

    - where: {system: summit}                  # or partition, gpu_model, gpu_count, host_link
      case: {memory: numa, op: read}           # items of the case (experiments/keys.py); optional
      values:
        steady_bw: [63.5, -0.05, null, GiB/s]  # reference, lower, upper, unit
      source: the reprex seed, baseline run    # where the figure comes from

Declared systems are matched by name; machines described at run time
(``local``) by their GPU model and host link, and by their GPU count where
the figure depends on it, so a figure measured on one H100 on PCIe Gen5
applies to any such node and to no other. An entry applies to a case when
every item of its ``case`` is one of the case's; later entries refine
earlier ones.

A bandwidth's upper bound is its physical limit, not a tolerance: where the
check knows the speed of light of a figure (from systems/), the bound is set
from it whatever the file says; ``null`` leaves a bound open.
"""

from __future__ import annotations

import copy
import functools
import math
import os

from experiments import REPO
from experiments.keys import direction, split_sample
from experiments.paths import US_PER
from systems.data import parse_yaml

REFERENCES_DIR = os.path.join(REPO, "systems", "references")


def load_entries(check_name: str, directory: str = REFERENCES_DIR) -> list:
    """The check's reference entries, checked; a copy of the file as it is now."""
    path = os.path.join(directory, f"{check_name}.yaml")
    if not os.path.exists(path):
        return []
    stat = os.stat(path)
    return copy.deepcopy(_parsed(path, stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=64)
def _parsed(path: str, mtime_ns: int, size: int) -> list:
    """A references file parsed once per version of it: every test case of a
    run reads its check's file (a dry run of every check read them 165 times)."""
    with open(path) as stream:
        entries = parse_yaml(stream.read()) or []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or "where" not in entry or "values" not in entry:
            raise ValueError(f"{path}: entry {i}: needs 'where' and 'values'")
        for var, value in entry["values"].items():
            if not (isinstance(value, list) and len(value) == 4):
                raise ValueError(f"{path}: entry {i}: {var}: expected [reference, lower, upper, unit]")
    return entries


def same_value(a, b) -> bool:
    """Equal as numbers where both are numbers (5 == 5.0), else as text;
    lists as the case string writes them ('1,2,4')."""
    if isinstance(a, (list, tuple)):
        a = ",".join(str(x) for x in a)
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


def matching_values(entries: list, facts: dict, case: dict) -> dict:
    """Merge the values of every entry whose 'where' and 'case' match.

    `facts` are the node facts (experiments/keys.py's NODE_FACTS), `case`
    the case's items (parameters as the test's name shows them, and the
    variables that change what it measures).
    """
    values = {}
    for entry in entries:
        where, items = entry["where"], entry.get("case", {})
        if all(same_value(facts.get(k), v) for k, v in where.items()) and all(
            same_value(case.get(k), v) for k, v in items.items()
        ):
            values.update(entry["values"])
    return values


def bounded_by_limit(value: list, limit: float | None) -> tuple:
    """A reference [ref, lower, upper, unit] whose upper bound, for a figure
    where higher is better and whose physical limit is known, is that limit."""
    ref, lower, upper, unit = value
    if limit and ref and direction(unit) == "higher":
        upper = round(limit / ref - 1, 6)
    return (ref, lower, upper, unit)


def physical_bounds(value: list, limit: float | None, floor_us: float | None) -> tuple:
    """A reference [ref, lower, upper, unit] with only physical bounds: a
    rate's upper bound its limit, a time's lower bound its path's floor,
    every other bound open."""
    ref, _, _, unit = value
    if not ref:
        return (ref, None, None, unit)
    if direction(unit) == "higher":
        return (ref, None, round(limit / ref - 1, 6) if limit else None, unit)
    if floor_us and unit in US_PER:
        return (ref, round(floor_us / US_PER[unit] / ref - 1, 6), None, unit)
    return (ref, None, None, unit)


def bound_only(unit: str, limit: float | None, floor_us: float | None) -> tuple | None:
    """A reference that holds a figure with no reference value to its
    physical bound alone: the bound itself as the reference, a rate no higher
    (upper 0), a time no lower (lower 0); None where neither is known or the
    unit is neither. What a kind's first nights, which become its baseline,
    are held to before anything is accepted."""
    if direction(unit) == "higher" and unit != "fraction" and limit:
        return (limit, None, 0.0, unit)
    if unit in US_PER and floor_us:
        return (floor_us / US_PER[unit], 0.0, None, unit)
    return None


def is_bound_only(unit: str, ref, lower, upper) -> bool:
    """Whether a perflog line's reference is :func:`bound_only`'s: a bound,
    not a value any run measured (the reports draw no reference for it)."""
    side, other = (upper, lower) if direction(unit) == "higher" else (lower, upper)
    try:
        return float(side) == 0 and not (other is not None and math.isfinite(float(other))) and float(ref) > 0
    except (TypeError, ValueError):
        return False


def bound_of(unit: str, ref, lower, upper) -> float:
    """The physical bound a reference of :func:`physical_bounds` carries, in
    the figure's unit: a rate's limit (its upper bound), a time's floor (its
    lower bound); NaN where it has none. Its inverse: what a run made with
    ``reference_bounds=physical`` logged, read back (judge/verdict.py)."""
    side = upper if direction(unit) == "higher" else lower
    try:
        ref, side = float(ref), float(side)
    except (TypeError, ValueError):
        return math.nan
    if not ref or math.isnan(side):
        return math.nan
    return ref * (1 + side)


def references_for(check) -> dict:
    """ReFrame's `reference` for this test case on its current partition."""
    name = type(check).__name__
    entries = [e for e in load_entries(name) if check.reference_applies(e)]
    case = check.case_items()
    values = matching_values(entries, check.node_facts(), case)
    if check.reference_bounds == "physical":
        bounded = {
            figure: physical_bounds(value, check.figure_limit(figure), check.figure_floor_us(figure))
            for figure, value in values.items()
        }
        bounded |= bounds_alone(check, set(values))
    elif check.reference_bounds == "tolerance":
        bounded = {figure: bounded_by_limit(value, check.figure_limit(figure)) for figure, value in values.items()}
    else:
        raise ValueError(f"reference_bounds={check.reference_bounds!r}: expected 'tolerance' or 'physical'")
    return {check.current_partition.fullname: bounded} if bounded else {}


def bounds_alone(check, referenced: set) -> dict:
    """{figure: reference}: each headline figure of the check's without a
    reference value held to its physical bound alone (:func:`bound_only`),
    from the system's data and the node's detected facts: on a kind's first
    nights every rate has its limit and every time its floor, before
    anything is accepted. Samples are held through their median."""
    found = {}
    for name, function in check.perf_variables.items():
        if name in referenced or split_sample(name)[1] is not None:
            continue
        unit = getattr(function, "unit", "")
        bound = bound_only(unit, check.figure_limit(name), check.figure_floor_us(name))
        if bound:
            found[name] = bound
    return found
