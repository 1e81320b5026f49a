"""The catalogue of the suite's findings (systems/findings/codes.yaml): each finding's code, which never
changes and is never reused, its severity and the action it calls for.

A finding is named by where it comes from (its `source`: a path's verdict, a node fact, a night not judged...)
and what that source says (its `key`: 'moved', 'pcie_width', 'no-baseline'...). `code_of(source, key)` is
the one way from the one to the other; a finding the catalogue lacks is a bug of the suite, found by the
tests that hold every source's keys to the catalogue (tests/test_finding_codes.py).
"""

from __future__ import annotations

import enum
import functools
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

CATALOGUE = Path(__file__).resolve().parent / "findings" / "codes.yaml"
#: The sources a finding comes from (the catalogue's header says what each is).
SOURCES = ("path", "sibling", "node", "node-state", "fleet", "health", "night", "check", "change", "act")
#: What every drain reason, every ticket and every series starts with: the suite's name, then the code.
PREFIX = "gpu-mempaths"
_CODE = re.compile(r"^GMP-\d{3}$")


class Severity(enum.StrEnum):
    NONE = "none"  # as accepted
    INFO = "info"  # worth a look
    WARNING = "warning"  # a person should look; nothing drained
    CRITICAL = "critical"  # drained, where the site lets the suite act


@dataclass(frozen=True)
class Code:
    """One finding of the catalogue."""

    code: str
    source: str
    key: str
    severity: Severity
    action: str
    action_text: str
    retired: bool = False

    def tag(self, text: str) -> str:
        """`text` with the finding's code before it, as drain reasons and findings lines carry it."""
        return f"{self.code} {text}"


class CatalogueError(ValueError):
    """The catalogue file is malformed: the message names the entry and what is wrong with it."""


@functools.cache
def catalogue(path: Path = CATALOGUE) -> dict[tuple[str, str], Code]:
    """{(source, key): Code} of the catalogue file, every entry checked (CatalogueError naming it)."""
    try:
        text = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise CatalogueError(f"{path}: {err}") from None
    actions = text.get("actions") if isinstance(text, dict) else None
    if not isinstance(actions, dict) or not isinstance(text.get("findings"), list):
        raise CatalogueError(f"{path}: wants 'actions' (a mapping) and 'findings' (a list)")
    found: dict[tuple[str, str], Code] = {}
    codes: set[str] = set()
    for number, entry in enumerate(text["findings"], start=1):
        code = _entry(path, number, entry, actions)
        if code.code in codes or (code.source, code.key) in found:
            raise CatalogueError(f"{path}: finding {number} ({code.code}): its code or its source and key twice")
        codes.add(code.code)
        found[(code.source, code.key)] = code
    return found


def _entry(path: Path, number: int, entry, actions: dict) -> Code:
    """One catalogue entry as a Code, or a CatalogueError naming it and what it lacks."""
    where = f"{path}: finding {number}"
    if not isinstance(entry, dict):
        raise CatalogueError(f"{where}: not a mapping")
    missing = [k for k in ("code", "source", "key", "severity", "action") if k not in entry]
    if missing:
        raise CatalogueError(f"{where}: lacks {', '.join(missing)}")
    code, source, key = str(entry["code"]), str(entry["source"]), str(entry["key"])
    if not _CODE.match(code):
        raise CatalogueError(f"{where}: code {code!r} is not GMP-NNN")
    if source not in SOURCES:
        raise CatalogueError(f"{where} ({code}): source {source!r} is none of {', '.join(SOURCES)}")
    try:
        severity = Severity(entry["severity"])
    except ValueError:
        raise CatalogueError(f"{where} ({code}): severity {entry['severity']!r} is none of {list(Severity)}") from None
    if entry["action"] not in actions:
        raise CatalogueError(f"{where} ({code}): action {entry['action']!r} is not among the actions")
    action = str(entry["action"])
    return Code(code, source, key, severity, action, str(actions[action]), bool(entry.get("retired", False)))


#: Severities from the least to the most.
SEVERITY_ORDER = (Severity.NONE, Severity.INFO, Severity.WARNING, Severity.CRITICAL)


def by_code(code: str) -> Code:
    """The catalogue's entry of a code."""
    for entry in catalogue().values():
        if entry.code == code:
            return entry
    raise Uncatalogued(f"no finding with code {code!r} in {CATALOGUE}")


class Uncatalogued(KeyError):
    """A finding the catalogue lacks: a bug of the suite, never the node's."""


def code_of(source: str, key: str) -> Code:
    """The catalogue's entry of the finding `key` of `source`."""
    try:
        return catalogue()[(source, str(key))]
    except KeyError:
        raise Uncatalogued(f"no code for the {source} finding {key!r} in {CATALOGUE}") from None


def tagged(source: str, key: str, text: str) -> str:
    """`text` with the code of the finding `key` of `source` before it."""
    return code_of(source, key).tag(text)


_TAGGED = re.compile(r"^(GMP-\d{3}) (.*)$", re.DOTALL)


def split_code(text: str) -> tuple[str, str]:
    """('GMP-501', 'failed ...') of a text with its code before it; ('', text) of one without (a night kept
    before findings had codes)."""
    found = _TAGGED.match(text)
    return (found[1], found[2]) if found else ("", text)


def failed_checks(reasons: list) -> list[str]:
    """The reasons among `reasons` that are failed checks, each its code (if it has one) and what failed,
    without the word 'failed'."""
    found = []
    for reason in reasons:
        code, text = split_code(reason) if isinstance(reason, str) else ("", "")
        if text.startswith("failed "):
            found.append(" ".join(filter(None, [code, text.removeprefix("failed ")])))
    return found


def markdown() -> str:
    """docs/findings.md: the catalogue as a page (python -m systems.finding_codes > docs/findings.md)."""
    text = yaml.safe_load(CATALOGUE.read_text())
    lines = [
        "# Findings and their codes",
        "",
        "Every finding the suite makes carries a code from `systems/findings/codes.yaml`: a drain",
        "reason (`drain.txt`, run.json's `drain`), a failed health fact (`FAIL GMP-312 gpu0 pcie_width: ...`),",
        "a path's verdict (run.json's `paths`), a night not judged (`unjudged_codes`), a change held over",
        "the nights. A code never changes and is never reused; the words after it may. Generated from the",
        "catalogue (`python -m systems.finding_codes > docs/findings.md`); a test holds this page to it.",
        "",
        "Each night's folder also holds `verdict.xml`, its verdict as JUnit XML for CI dashboards",
        "(`reports/junit.py`): a test case per path, per sibling comparison, per node of a partition and per",
        "failed check; moved, unstable, lagging and drained are failures, broken values and the suite's own",
        "errors are errors, contended and unjudged are skipped with their reason; each failure's and skip's",
        "`type` is its code. Every committed night's validates against Jenkins' JUnit schema",
        "(`tests/test_junit.py`). `python -m reports.junit RUN_JSON` writes a kept night's again.",
        "",
        "| code | source | finding | severity | action |",
        "|---|---|---|---|---|",
    ]
    for code in sorted(catalogue().values(), key=lambda c: c.code):
        retired = " (retired)" if code.retired else ""
        lines.append(f"| {code.code}{retired} | {code.source} | {code.key} | {code.severity} | {code.action} |")
    lines += ["", "## Actions", "", "| action | what to do |", "|---|---|"]
    lines += [f"| {name} | {words} |" for name, words in text["actions"].items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
