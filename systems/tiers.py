"""The catalogue of tiers (systems/tiers/catalogue.yaml): where each of the suite's runs fits among a
scheduler's hooks, its whole command's limit, and the cases a short tier measures again.

A case (ReFrame's display name, 'path_matrix %paths=host-ce') belongs to the first tier whose patterns match
it, else to the nightly: `tier_of`. Pure data and functions over it: runner/tier_checks.py measures a short
tier, runner/tier_catalogue.py prints the catalogue with each case's measured seconds.
"""

from __future__ import annotations

import fnmatch
import functools
from dataclasses import dataclass
from pathlib import Path

import yaml

CATALOGUE = Path(__file__).resolve().parent / "tiers" / "catalogue.yaml"
#: The tier every case the nightly runs belongs to, where no shorter tier names it.
NIGHTLY = "nightly"


class TierError(ValueError):
    """The catalogue is malformed, or a tier is asked for that it lacks: the message names which."""


@dataclass(frozen=True)
class Tier:
    name: str
    limit_s: float | None
    fits: str
    command: str
    cases: tuple[str, ...]

    def measures(self, case: str) -> bool:
        """Whether this tier measures the case with display name `case` ('path_matrix %paths=host-ce')."""
        return any(fnmatch.fnmatchcase(case, pattern) for pattern in self.cases)


@functools.cache
def catalogue(path: Path = CATALOGUE) -> tuple[Tier, ...]:
    """The tiers, shortest first, each entry checked (TierError naming it)."""
    try:
        text = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise TierError(f"{path}: {err}") from None
    entries = text.get("tiers") if isinstance(text, dict) else None
    if not isinstance(entries, list) or not entries:
        raise TierError(f"{path}: wants 'tiers', a list")
    tiers = tuple(_tier(path, number, entry) for number, entry in enumerate(entries, start=1))
    names = [t.name for t in tiers]
    if len(set(names)) != len(names) or NIGHTLY not in names:
        raise TierError(f"{path}: each tier once, the {NIGHTLY!r} tier among them (found {', '.join(names)})")
    return tiers


def _tier(path: Path, number: int, entry) -> Tier:
    where = f"{path}: tier {number}"
    if not isinstance(entry, dict):
        raise TierError(f"{where}: not a mapping")
    missing = [k for k in ("name", "limit_s", "fits", "command", "cases") if k not in entry]
    if missing:
        raise TierError(f"{where}: lacks {', '.join(missing)}")
    limit = entry["limit_s"]
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit <= 0):
        raise TierError(f"{where} ({entry['name']}): limit_s {limit!r} is not a number of seconds above 0, nor null")
    cases = entry["cases"]
    if not isinstance(cases, list) or not all(isinstance(c, str) and c for c in cases):
        raise TierError(f"{where} ({entry['name']}): cases must be a list of display-name patterns")
    if cases and limit is None:  # a tier that measures runs in a hook's time: it needs a limit
        raise TierError(f"{where} ({entry['name']}): a tier with cases needs a limit_s")
    return Tier(
        str(entry["name"]),
        None if limit is None else float(limit),
        str(entry["fits"]),
        str(entry["command"]),
        tuple(cases),
    )


def tier_named(name: str) -> Tier:
    """The tier called `name`; TierError naming the tiers there are."""
    for tier in catalogue():
        if tier.name == name:
            return tier
    raise TierError(f"no tier {name!r}: the tiers are {', '.join(t.name for t in catalogue())}")


def measured_tiers() -> tuple[Tier, ...]:
    """The tiers that measure cases of their own again (health, epilog), shortest first."""
    return tuple(t for t in catalogue() if t.cases)


def tier_of(case: str) -> str:
    """The first tier that measures the case with display name `case`, else the nightly."""
    return next((t.name for t in measured_tiers() if t.measures(case)), NIGHTLY)
