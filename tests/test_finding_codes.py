"""The catalogue of findings (systems/findings/codes.yaml): every finding the code can make has a code,
every code names a finding the code can make, a malformed catalogue is named, and the reasons a night
drains a node for each start with their finding's code."""

import ast
from pathlib import Path

import pandas as pd
import pytest

from judge import siblings, verdict
from judge.partition import Cell, Fleet, NodeState
from runner.nightly import UNJUDGED_REASONS, drain_reasons
from systems import finding_codes
from systems.finding_codes import CatalogueError, Uncatalogued, catalogue, code_of, failed_checks, split_code

REPO = Path(__file__).resolve().parent.parent


#: The calls of systems/health.py and systems/watch.py whose first argument is a node fact's field.
CALLS = ("Finding", "_same", "_at_least", "_code")


def health_fields() -> set[str]:
    """The fields systems/health.py and systems/watch.py can name in a FAIL line, read from their source: the
    first argument of every Finding, _same, _at_least and _code call, and the fields of the loops over them."""
    fields = set()
    for module in ("health.py", "watch.py"):
        tree = ast.parse((REPO / "systems" / module).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in (
                "Finding",
                "_same",
                "_at_least",
                "_code",
            ):
                first = node.args[0] if node.args else None
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    fields.add(first.value)
            if isinstance(node, ast.For) and isinstance(node.iter, ast.Tuple):
                for item in node.iter.elts:  # for field in ("a", "b") / for field, reading in (("a", "x"), ...)
                    first = item.elts[0] if isinstance(item, ast.Tuple) else item
                    if isinstance(first, ast.Constant) and isinstance(first.value, str):
                        fields.add(first.value)
    return fields


def emitted() -> dict[str, set[str]]:
    """What each source can say, from the code that says it."""
    return {
        "path": set(verdict.VERDICTS),
        "sibling": set(siblings.VERDICTS),
        "node": {str(c) for c in Cell},
        "node-state": {str(s) for s in NodeState},
        "fleet": {str(f) for f in Fleet},
        "health": health_fields(),
        "night": set(UNJUDGED_REASONS),
        "check": {"failed"},
        "change": {"held"},
        "act": {"breaker"},
    }


def test_every_finding_the_code_can_make_has_a_code_and_every_code_a_finding():
    said = emitted()
    assert len(said["health"]) >= 20  # the source scan found the fields, not a handful of them
    kept = {key for key, code in catalogue().items() if not code.retired}
    wanted = {(source, key) for source, keys in said.items() for key in keys}
    assert wanted - kept == set(), "findings without a code"
    assert kept - wanted == set(), "codes of findings nothing makes (retire them: retired: true)"
    assert set(said) == set(finding_codes.SOURCES)


def test_codes_are_unique_and_a_malformed_catalogue_names_the_entry(tmp_path):
    good = "actions: {none: nothing}\nfindings:\n"
    good += "  - {code: GMP-100, source: path, key: pass, severity: none, action: none}\n"
    broken = {
        "  - {code: GMP-100, source: path, key: moved, severity: none, action: none}\n": "its code or its source",
        "  - {code: X-1, source: path, key: moved, severity: none, action: none}\n": "is not GMP-NNN",
        "  - {code: GMP-101, source: disk, key: moved, severity: none, action: none}\n": "source 'disk'",
        "  - {code: GMP-101, source: path, key: moved, severity: dire, action: none}\n": "severity 'dire'",
        "  - {code: GMP-101, source: path, key: moved, severity: none, action: pray}\n": "action 'pray'",
        "  - {code: GMP-101, source: path, key: moved}\n": "lacks severity, action",
    }
    for line, words in broken.items():
        path = tmp_path / "codes.yaml"
        path.write_text(good + line)
        with pytest.raises(CatalogueError, match=f"{path}: finding 2.*{words}"):
            catalogue.__wrapped__(path)
    with pytest.raises(Uncatalogued, match="no code for the path finding 'dire'"):
        code_of("path", "dire")


def test_a_code_once_given_keeps_its_finding_for_good():
    """tests/data/finding_codes.txt holds every code ever given: each still names the same finding (retired
    maybe, never removed, renumbered or reused); a new code is appended there."""
    given = [line.split("|") for line in (REPO / "tests" / "data" / "finding_codes.txt").read_text().splitlines()]
    given = [(code, source, key) for code, source, key in (g for g in given if not g[0].startswith("#"))]
    now = {(c.code, c.source, c.key) for c in catalogue().values()}
    assert set(given) - now == set(), "codes changed, removed or reused"
    assert now - set(given) == set(), "new codes: append them to tests/data/finding_codes.txt"


def test_the_findings_page_is_the_catalogue():
    assert (REPO / "docs" / "findings.md").read_text() == finding_codes.markdown(), (
        "docs/findings.md is stale: python -m systems.finding_codes > docs/findings.md"
    )


def test_a_nights_drain_reasons_start_with_their_findings_codes():
    lags = pd.DataFrame(
        [{"path": "host link h2d of GPU 1, ce", "verdict": "lagging", "vs_siblings_pct": -30.0, "gpus": "1"}]
    ).reindex(columns=siblings.COLUMNS)
    found = {"failed": ["node_health: FAIL GMP-312 gpu0 pcie_width: expected x16, found x8"], "suite": []}
    reasons, kept = drain_reasons(None, found, lags, {})
    assert [split_code(r)[0] for r in reasons] == ["GMP-501", "GMP-201"] and kept == []
    assert failed_checks(reasons) == ["GMP-501 node_health: FAIL GMP-312 gpu0 pcie_width: expected x16, found x8"]
    # A night kept before findings had codes reads as it did.
    assert failed_checks(["failed daxpy %x=1", "moved against ..."]) == ["daxpy %x=1"]
