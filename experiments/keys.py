"""What identifies a measurement, defined once for the checks, the references,
the comparisons and the acceptance of runs.

- A *case* is one check run with given parameters and the variables that
  change what it measures (the check's ``case_variables``). Every perflog line
  carries it as one field, ``case``: ``name=value`` pairs sorted by name, e.g.
  ``memory=managed op=read size_class=small small_size=1G touch_on_host=notouch``.
  A variable that only changes how precisely a case is measured (repetitions,
  time budgets) is not part of it, so changing one keeps the case's reference.
- A *figure* is one performance variable of a case. A *headline figure* is
  logged with its samples from the same run: ``<figure>.s1`` ... ``.s<n>``,
  beside their median under the figure's own name. Only headline figures are
  judged by the nightly gate; the other figures (curves) are for the reports.
- The *key* of a figure is its check, case and environment, the facts of the
  node it ran on (system, partition, GPU model and count, host link), and the
  figure itself with its unit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

#: The node facts a case is keyed on and a reference's ``where`` may name.
NODE_FACTS = ("system", "partition", "gpu_model", "gpu_count", "host_link")

#: The software a record ran under (the checks log them; an upgrade changes them).
SOFTWARE_FACTS = ("driver_version", "cuda_version", "cuda_runtime_version")

#: What tells one set of runs from another in a report: where they ran, and under what.
SERIES_FIELDS = ("system", "partition", "node", "gpu_model", *SOFTWARE_FACTS)

#: A kind of node under one software stack: what a report's groups of figures are.
GROUP_FIELDS = ("system", "partition", "gpu_model", "host_link", *SOFTWARE_FACTS)

#: Fields of a perflog record that identify one case on one kind of node.
CASE_KEY = ("test", "case", "environ", *NODE_FACTS)

#: ... and one figure of it.
FIGURE_KEY = (*CASE_KEY, "figure", "unit")

_SAMPLE = re.compile(r"^(?P<figure>.+)\.s(?P<sample>[1-9][0-9]*)$")
_CASE_ITEM = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>\S*)$")

#: Units whose larger values are better, and those whose smaller values are.
HIGHER_IS_BETTER = {"B/s", "KB/s", "MB/s", "GB/s", "TB/s", "KiB/s", "MiB/s", "GiB/s", "TiB/s", "fraction"}
LOWER_IS_BETTER = {"s", "ms", "us", "ns", "x"}


def sample_name(figure: str, k: int) -> str:
    """'steady_bw', 3 -> 'steady_bw.s3': the perflog name of a figure's k-th sample (k from 1)."""
    if k < 1:
        raise ValueError(f"samples are numbered from 1, not {k}")
    return f"{figure}.s{k}"


def split_sample(perf_var: str) -> tuple[str, int | None]:
    """'steady_bw.s3' -> ('steady_bw', 3); 'steady_bw' -> ('steady_bw', None)."""
    match = _SAMPLE.match(perf_var)
    return (match["figure"], int(match["sample"])) if match else (perf_var, None)


def format_value(value) -> str:
    """A parameter's or variable's value as the case string writes it."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ",".join(format_value(v) for v in value)
    return str(value)


def format_case(items: Mapping[str, object]) -> str:
    """{'op': 'read', 'memory': 'managed'} -> 'memory=managed op=read'."""
    parts = []
    for name in sorted(items):
        text = format_value(items[name])
        if not text or any(c.isspace() or c == "=" for c in text):
            raise ValueError(f"case value {name}={text!r} must be non-empty, without spaces or '='")
        parts.append(f"{name}={text}")
    return " ".join(parts)


def parse_case(text: str) -> dict[str, str]:
    """'memory=managed op=read' -> {'memory': 'managed', 'op': 'read'}; errors name the item."""
    items = {}
    for item in (text or "").split():
        match = _CASE_ITEM.match(item)
        if not match:
            raise ValueError(f"case item {item!r} is not name=value (in {text!r})")
        items[match["name"]] = match["value"]
    return items


def direction(unit: str) -> str | None:
    """'higher' for rates and fractions, 'lower' for times and slowdowns, None otherwise."""
    unit = (unit or "").strip()
    if unit in HIGHER_IS_BETTER:
        return "higher"
    if unit in LOWER_IS_BETTER:
        return "lower"
    return None
