"""Performance references as data: systems/references/<Check>.yaml.

Each file is a list of entries::

    - where: {system: summit}                  # or partition, gpu_model, host_link
      case: {allocator: numa, op: read}        # test parameters; optional
      values:
        steady_bw: [63.5, -0.05, 0.05, GiB/s]  # reference, lower, upper, unit
      source: the reprex seed, baseline run    # where the figure comes from

Declared systems are matched by name; machines described at run time
(``local``) by their GPU model and host link, and by their GPU count where
the figure depends on it, so a figure measured on one H100 on PCIe Gen5
applies to any such node and to no other. Later entries refine
earlier ones.
"""

import os

import yaml
from reframe.core.warnings import suppress_deprecations

from .build import REPO

REFERENCES_DIR = os.path.join(REPO, "systems", "references")


def load_entries(check_name: str, directory: str = REFERENCES_DIR) -> list:
    path = os.path.join(directory, f"{check_name}.yaml")
    if not os.path.exists(path):
        return []
    with open(path) as stream:
        entries = yaml.safe_load(stream) or []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or "where" not in entry or "values" not in entry:
            raise ValueError(f"{path}: entry {i}: needs 'where' and 'values'")
        for var, value in entry["values"].items():
            if not (isinstance(value, list) and len(value) == 4):
                raise ValueError(f"{path}: entry {i}: {var}: expected [reference, lower, upper, unit]")
    return entries


def _facts(check) -> dict:
    return {
        "system": check.current_system.name,
        "partition": check.current_partition.name,
        "gpu_model": check.gpu_model,
        "gpu_count": check.gpu_count,
        "host_link": check.host_link,
    }


def _same(a, b) -> bool:
    """Equal as numbers where both are numbers (5 == 5.0), else as text;
    lists as ReFrame's perflogs write them ('1,2,4')."""
    if isinstance(a, (list, tuple)):
        a = ",".join(str(x) for x in a)
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


def matching_values(entries: list, facts: dict, params: dict) -> dict:
    """Merge the values of every entry whose 'where' and 'case' match.

    `params` holds the test's parameters (as its name shows them) and its
    variables, so a case can also pin a variable such as a data size.
    """
    values = {}
    for entry in entries:
        where, case = entry["where"], entry.get("case", {})
        if all(_same(facts.get(k), v) for k, v in where.items()) and all(
            _same(params.get(k), v) for k, v in case.items()
        ):
            values.update(entry["values"])
    return values


def references_for(check, check_name: str = None) -> dict:
    """ReFrame's `reference` for this test case on its current partition."""
    name = check_name or type(check).__name__
    # Parameters as the test's name shows them (e.g. memory=managed+accessed-by).
    raw = type(check).raw_params
    with suppress_deprecations():  # var_space also lists ReFrame's deprecated aliases
        params = {v: getattr(check, v, None) for v in type(check).var_space.vars}
    params.update({p: raw[p].format(getattr(check, p)) for p in type(check).param_space.params})
    values = matching_values(load_entries(name), _facts(check), params)
    return {check.current_partition.fullname: {k: tuple(v) for k, v in values.items()}} if values else {}
