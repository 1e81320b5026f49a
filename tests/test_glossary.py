"""One glossary (docs/glossary.md) for README, docs/ and what the commands print: every term it defines is
used, every word README sets in bold is defined there, and every word in capitals that README, docs/ or the
nightly's output uses as a verdict (CONTENDED, TRANSIENT, ...) is defined there; README stays what a
newcomer reads once: under 150 lines, no line of prose over 100 characters."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GLOSSARY = REPO / "docs" / "glossary.md"


def defined() -> set[str]:
    """The terms the glossary defines: each bold word at the start of an entry ('- **a**, **b**: ...')."""
    terms = set()
    for line in GLOSSARY.read_text().splitlines():
        if line.startswith("- **"):
            head = line.split(":", 1)[0]
            terms |= {t.lower() for t in re.findall(r"\*\*([^*]+)\*\*", head)}
    return terms


def texts() -> str:
    """README and every page of docs/ but the glossary, and the nightly's and the health tier's code (what
    they print)."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    code = [*sorted((REPO / "runner").glob("*.py")), *sorted((REPO / "judge").glob("*.py"))]
    return "\n".join(p.read_text() for p in [*pages, *code] if p != GLOSSARY)


def test_every_term_of_the_glossary_is_used():
    used = texts().lower()
    unused = sorted(t for t in defined() if not re.search(rf"\b{re.escape(t)}", used))
    assert not unused, f"defined in docs/glossary.md, used nowhere: {unused}"


def test_every_bold_word_of_readme_is_defined():
    readme = (REPO / "README.md").read_text()
    bold = {w.lower() for w in re.findall(r"\*\*([^*]+)\*\*", readme)}
    # README's own labels: the prerequisites and the steps of "Your site".
    labels = {"prerequisites"} | {w.lower() for w in re.findall(r"^\d+\. \*\*([^*]+)\*\*", readme, re.MULTILINE)}
    undefined = sorted(bold - labels - defined())
    assert not undefined, f"README sets these in bold, docs/glossary.md does not define them: {undefined}"


def verdict_words() -> set[str]:
    """Every verdict the judges can give, as the nightly's output prints it (in capitals): a path's against
    the accepted runs, a GPU's against its siblings, a node's and a partition's, and the night's own words."""
    from judge import partition, siblings, verdict

    words = {*verdict.VERDICTS, *siblings.VERDICTS, *partition.Cell, *partition.Fleet}
    words |= {"contended", "change", "not judged", "suite error", "drain"}
    return {str(w).upper() for w in words}


def test_every_verdict_word_is_defined():
    terms = {t.upper() for t in defined()}
    undefined = sorted(w for w in verdict_words() if w not in terms)
    assert not undefined, f"verdicts the output prints in capitals, not in docs/glossary.md: {undefined}"


def test_every_verdict_word_readme_and_docs_write_in_capitals_is_a_verdict_the_judges_give():
    """README and docs/ write a verdict in capitals only as the output prints it (no CHANGED for CHANGE)."""
    pages = "\n".join(p.read_text() for p in [REPO / "README.md", *(REPO / "docs").rglob("*.md")])
    near = {w for w in re.findall(r"\b([A-Z]{5,})\b", pages)}
    words = {w for v in verdict_words() for w in v.split()}
    misspelt = sorted(w for w in near if w not in words and any(w.startswith(v[:5]) for v in words if len(v) >= 5))
    assert not misspelt, f"written in capitals like a verdict, printed by no judge: {misspelt}"


def test_readme_is_short_and_its_prose_lines_too():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) < 150
    fenced, long = False, []
    for number, line in enumerate(lines, start=1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and not line.startswith("|") and len(line) > 100:
            long.append(number)
    assert not long, f"README's prose lines over 100 characters: {long}"
