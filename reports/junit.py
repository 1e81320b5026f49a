"""A night's verdict as JUnit XML (verdict.xml beside run.json), for the dashboards that read JUnit: Jenkins,
GitLab, and ReFrame's own, which cover the checks, not the verdict.

Made from run.json alone, so that any kept night can be written again (`python -m reports.junit RUN_JSON`):
- `paths against the accepted runs`: a test case per path; moved and unstable are failures, broken an error
  (a value the suite could not use), unjudged skipped with the night's reasons, a path another process
  explains (contended) skipped with who; pass, improved, transient and yardstick pass.
- `GPUs against their siblings`: a test case per path judged between sibling GPUs; lagging fails.
- `nodes against the partition` (a partition's night): a test case per node; drained nodes fail, nodes whose
  GPUs were shared are skipped.
- `node facts` (a short tier's run, runner/healthcheck.py): each fact that failed a failure.
- `checks`: each failed check a failure, each of the suite's own errors an error; a night not judged at all
  is one skipped case naming why.
Every failure's and skip's `type` is its finding's code (systems/findings/codes.yaml).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

from experiments.files import write_atomic
from systems.finding_codes import catalogue, code_of, failed_checks, split_code

#: What a path's verdict is in JUnit: a failure, an error, skipped, or passed (None).
PATH_OUTCOME = {
    "moved": "failure",
    "unstable": "failure",
    "broken": "error",
    "unjudged": "skipped",
}


def verdict_xml(run: dict) -> bytes:
    """The JUnit XML document of the night `run` (run.json's contents)."""
    root = ET.Element("testsuites", name=f"gpu-mempaths {run.get('system', '')} {run.get('stamp', '')}".strip())
    suites = [
        _facts_suite(run),
        _paths_suite(run),
        _siblings_suite(run),
        _nodes_suite(run),
        _checks_suite(run),
    ]
    for suite in suites:
        if suite is not None:
            root.append(suite)
    _count(root)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def write_verdict_xml(outdir: Path, run: dict) -> Path:
    """verdict.xml in the night's folder, written whole or not at all."""
    target = outdir / "verdict.xml"
    write_atomic(target, verdict_xml(run).decode())
    return target


def _suite(run: dict, name: str) -> ET.Element:
    return ET.Element(
        "testsuite",
        name=name,
        tests="0",
        timestamp=str(run.get("start") or run.get("stamp") or ""),
        hostname=str(run.get("system", "")),
    )


def _case(suite: ET.Element, classname: str, name: str, outcome: str | None = None, code="", message="") -> None:
    case = ET.SubElement(suite, "testcase", classname=classname, name=name)
    if outcome:
        ET.SubElement(case, outcome, type=code, message=message).text = message


def _facts_suite(run: dict) -> ET.Element | None:
    """A short tier's node facts (runner/healthcheck.py run.json's `facts`): one case, or a failure per fact
    that failed, each with its code."""
    facts = run.get("facts")
    if not isinstance(facts, dict):
        return None
    suite = _suite(run, "node facts")
    failures = [split_code(str(line)) for line in facts.get("failures") or []]
    for code, line in failures:
        _case(suite, "fact", line.split(":")[0] or "fact", "failure", code or code_of("check", "failed").code, line)
    if not failures:
        _case(suite, "fact", "node facts")
    return suite


def _paths_suite(run: dict) -> ET.Element | None:
    paths = run.get("paths") or {}
    if not paths:
        return None
    suite = _suite(run, "paths against the accepted runs")
    contended = (run.get("contention") or {}).get("paths") or {}
    reasons = ", ".join(run.get("unjudged_reasons") or []) or "too few accepted runs"
    for path, found in sorted(paths.items()):
        verdict = str(found.get("verdict", ""))
        code = found.get("code") or code_of("path", verdict).code
        change = found.get("change_pct")
        known = isinstance(change, int | float)
        words = f"{verdict}: its median changed {change:+.1f}% from the accepted runs'" if known else verdict
        outcome = PATH_OUTCOME.get(verdict)
        if outcome == "failure" and path in contended:
            outcome, words = "skipped", f"{words}; contended: {contended[path]}"
        elif outcome == "skipped":
            words = f"unjudged: {reasons}"
        _case(suite, "path", path, outcome, code, words)
    return suite


def _siblings_suite(run: dict) -> ET.Element | None:
    siblings = run.get("siblings") or {}
    if not siblings:
        return None
    suite = _suite(run, "GPUs against their siblings")
    for path, found in sorted(siblings.items()):
        verdict = str(found.get("verdict", ""))
        code = found.get("code") or code_of("sibling", verdict).code
        by = found.get("contended_by")
        change = found.get("vs_siblings_pct")
        words = f"{verdict}: {change:+.1f}% against its siblings" if isinstance(change, int | float) else verdict
        outcome = "failure" if verdict == "lagging" else None
        if outcome and by:
            outcome, words = "skipped", f"{words}; contended: {by}"
        _case(suite, "sibling", path, outcome, code, words)
    return suite


def _nodes_suite(run: dict) -> ET.Element | None:
    counts = run.get("counts") or {}
    if "nodes" not in counts:  # a night of one node
        return None
    suite = _suite(run, "nodes against the partition")
    drained = [row for row in run.get("drain") or [] if isinstance(row, dict)]
    shared = [row for row in run.get("not_drained") or [] if isinstance(row, dict)]
    for row, outcome in [*((r, "failure") for r in drained), *((r, "skipped") for r in shared)]:
        reasons = [str(r) for r in row.get("reasons") or []]
        code = (split_code(reasons[0])[0] if reasons else "") or _state_code(row.get("state", ""))
        _case(suite, "node", str(row.get("node", "")), outcome, code, " | ".join(reasons))
    passed = int(counts["nodes"]) - len({str(r.get("node", "")) for r in [*drained, *shared]})
    if passed > 0:  # run.json counts the nodes that passed, it does not name them
        _case(suite, "node", f"the other {passed} nodes")
    return suite


def _state_code(state: str) -> str:
    """The code of a node's state in a partition (a night kept before its reasons had codes), or ''."""
    return code_of("node-state", state).code if ("node-state", state) in catalogue() else ""


def _checks_suite(run: dict) -> ET.Element | None:
    failed = [split_code(line) for line in failed_checks(_drain_lines(run))]
    errors = [str(line) for line in run.get("suite_errors") or []]
    not_judged = int(run.get("exit", 0) or 0) == 3 and not errors
    if not failed and not errors and not not_judged:
        return None
    suite = _suite(run, "checks")
    for code, line in failed:
        _case(suite, "check", line.split(":")[0] or "check", "failure", code or code_of("check", "failed").code, line)
    suite_code = code_of("night", "suite-error").code
    for line in errors:
        _case(suite, "suite", line.split(":")[0] or "suite", "error", suite_code, line)
    if not_judged:
        reasons = run.get("unjudged_reasons") or []
        codes = " ".join(run.get("unjudged_codes") or [code_of("night", r).code for r in reasons])
        _case(suite, "night", "judged", "skipped", codes, f"not judged: {', '.join(reasons) or 'no reason kept'}")
    return suite


def _drain_lines(run: dict) -> list[str]:
    """The drain reasons of a night of one node (strings), or of a partition's nodes (rows of reasons)."""
    lines = []
    for row in run.get("drain") or []:
        lines += [row] if isinstance(row, str) else [str(r) for r in row.get("reasons") or []]
    return lines


def _count(root: ET.Element) -> None:
    """Each suite's and the document's counts of tests, failures, errors and skips, from its cases."""
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for suite in root.iter("testsuite"):
        cases = suite.findall("testcase")
        counts = {
            "tests": len(cases),
            "failures": sum(c.find("failure") is not None for c in cases),
            "errors": sum(c.find("error") is not None for c in cases),
            "skipped": sum(c.find("skipped") is not None for c in cases),
        }
        for key, value in counts.items():
            suite.set(key, str(value))
        for key in totals:
            totals[key] += counts[key]
    for key, value in totals.items():
        root.set(key, str(value))


def main(argv: list[str] | None = None) -> int:
    """python -m reports.junit RUN_JSON...: each night's verdict.xml written again beside its run.json."""
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m reports.junit RUN_JSON...", file=sys.stderr)
        return 3
    for name in args:
        path = Path(name)
        try:
            run = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            print(f"junit: {path}: not a night's run.json: {err}", file=sys.stderr)
            return 3
        print(write_verdict_xml(path.parent, run))
    return 0


if __name__ == "__main__":
    sys.exit(main())
