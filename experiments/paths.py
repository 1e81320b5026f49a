"""The physical path of each headline figure, as data: systems/paths/paths.yaml.

The checks read it for a time's physical floor (a reference's lower bound in
the nightly); the nightly's verdict (judge/verdict.py) to roll figures up
by path. Free of ReFrame, so that both can import it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache

from experiments import REPO
from systems.data import parse_yaml

PATHS_FILE = os.path.join(REPO, "systems", "paths", "paths.yaml")

#: What a path may share with every GPU of its node (paths.yaml's `shares`).
SHARED = {"host"}

#: Microseconds per unit of the time figures, for a path's floor in a figure's unit.
US_PER = {"s": 1e6, "ms": 1e3, "us": 1.0, "ns": 1e-3}


@dataclass(frozen=True)
class FigurePath:
    """A figure's path: its name, its kind, the kind's practical floor (the
    smallest move worth an alarm, a fraction) and physical floor of a time in
    microseconds (None where none is known), for a yardstick measured once a
    night elsewhere, the check that judges it, what of the node it
    shares with every GPU ('host': the host side every host link crosses),
    and the kind's guard rail: the move (a fraction) beyond which the
    verdict flags whatever the spread (None: none)."""

    name: str
    kind: str
    floor: float
    min_us: float | None = None
    yardstick: str | None = None
    shares: str | None = None
    guard: float | None = None


@lru_cache(maxsize=4)
def load_rules(rules_file: str = PATHS_FILE) -> tuple[dict, dict]:
    """The kinds and the rules per check, checked once: every rule's kind known,
    its figure a valid regular expression."""
    with open(rules_file) as stream:
        raw = parse_yaml(stream.read()) or {}
    kinds, rules = raw.get("kinds", {}), raw.get("rules", {})
    for name, kind in kinds.items():
        guard = kind.get("guard")
        if guard is not None and not (isinstance(guard, (int, float)) and kind["floor"] < guard < 1):
            raise ValueError(
                f"{rules_file}: kinds.{name}.guard {guard!r} is not a fraction above its floor and below 1"
            )
    for check, entries in rules.items():
        for i, rule in enumerate(entries):
            where = f"{rules_file}: rules.{check}[{i}]"
            if rule.get("kind") not in kinds:
                raise ValueError(f"{where}: kind {rule.get('kind')!r} is not one of {sorted(kinds)}")
            if "path" not in rule or "figure" not in rule:
                raise ValueError(f"{where}: needs 'figure' and 'path'")
            if rule.get("shares", kinds[rule["kind"]].get("shares")) not in {None, *SHARED}:
                raise ValueError(f"{where}: shares {rule.get('shares')!r} is not one of {sorted(SHARED)}")
            try:
                re.compile(rule["figure"])
            except re.error as err:
                raise ValueError(f"{where}: figure {rule['figure']!r}: {err}") from err
    return kinds, rules


def _case_matches(wanted: dict, case: dict) -> bool:
    for name, value in wanted.items():
        allowed = value if isinstance(value, list) else [value]
        if str(case.get(name)) not in {str(v) for v in allowed}:
            return False
    return True


def path_of(test: str, case: dict, figure: str, rules_file: str = PATHS_FILE) -> FigurePath | None:
    """The path of a figure of `test` in a case (its items), or None where no rule names it."""
    kinds, rules = load_rules(rules_file)
    for rule in rules.get(test, []):
        match = re.fullmatch(rule["figure"], figure)
        if not match or not _case_matches(rule.get("case", {}), case):
            continue
        fields = {**rule.get("values", {}), **case, **{k: v for k, v in match.groupdict().items() if v is not None}}
        try:
            name = rule["path"].format(**fields)
        except KeyError as err:
            raise ValueError(f"{rules_file}: rules.{test}: path {rule['path']!r} needs {err} for {figure}") from err
        kind = kinds[rule["kind"]]
        shares = rule.get("shares", kind.get("shares"))
        guard = kind.get("guard")
        return FigurePath(
            name,
            rule["kind"],
            float(kind["floor"]),
            kind.get("min_us"),
            rule.get("yardstick"),
            shares,
            None if guard is None else float(guard),
        )
    return None


def kind_min_us(kind: str, rules_file: str = PATHS_FILE) -> float | None:
    """A kind's physical floor of a time in microseconds, None where it has none."""
    kinds, _ = load_rules(rules_file)
    return kinds[kind].get("min_us")


def min_time_us(test: str, case: dict, figure: str) -> float | None:
    """The physical floor of a time figure in microseconds, None where none is known."""
    found = path_of(test, case, figure)
    return found.min_us if found else None
