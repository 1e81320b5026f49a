"""What measured a record: a fingerprint of the program's source, its build
options and the check's version, which every perflog line carries (`code`).

A baseline is only worth what it measured. When a program changes what it
measures (the scan's chunk layout, a new kernel), the nights after it must
not be held to runs the old program made under the same case names: the
verdict leaves a case whose fingerprint differs from its accepted runs' not
judged ("measured by another program since it was accepted: re-accept"),
never moved.

The fingerprint covers what decides the measurement and nothing else: the
program's own folder under src/, what every program shares (src/common,
src/CMakeLists.txt, src/cmake), the build options the build recorded
(build-facts.txt: architectures, build type, flags; not the CUDA toolkit or
compiler, which are the software facts an upgrade changes and the records
carry apart), and the check's `code_version`, which a check raises when its
own way of measuring changes. Free of ReFrame.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from experiments import REPO

#: What every program is built from, beside its own folder.
SHARED_SOURCES = ("src/common", "src/CMakeLists.txt", "src/cmake")

#: The build-facts lines that are build options (the rest are software facts).
BUILD_OPTIONS = ("build_type", "cuda_architectures", "cxx_flags", "cuda_flags")

#: Hex digits kept: a change of program is told apart, a line stays short.
DIGITS = 12

#: What a record made before fingerprints were kept carries (or a dry run).
UNKNOWN = "unknown"


def _files(root: Path, relative: str) -> list[Path]:
    path = root / relative
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts) if path.is_dir() else []


@lru_cache(maxsize=64)
def source_digest(program: str, root: str = str(REPO)) -> str:
    """The sha256 of a program's sources and the shared ones, by relative
    path and content (the same on every checkout of the same commit)."""
    base = Path(root)
    digest = hashlib.sha256()
    for relative in (f"src/{program}", *SHARED_SOURCES):
        for path in _files(base, relative):
            digest.update(str(path.relative_to(base)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def build_facts(facts_text: str) -> dict[str, str]:
    """A build-facts.txt text (src/CMakeLists.txt writes it) as {name: value}."""
    return dict(line.split("=", 1) for line in facts_text.splitlines() if "=" in line)


def build_options(facts_text: str) -> str:
    """The build options of a build-facts.txt text, in a fixed order ('' where none)."""
    facts = build_facts(facts_text)
    return ";".join(f"{key}={facts.get(key, '').strip()}" for key in BUILD_OPTIONS)


def fingerprint(program: str, facts_text: str, version: int, root: str = str(REPO)) -> str:
    """The fingerprint of what measured a check's records: its program's
    sources, the build options and the check's version."""
    text = f"{source_digest(program, root)}|{build_options(facts_text)}|v{version}"
    return hashlib.sha256(text.encode()).hexdigest()[:DIGITS]


def known(code) -> bool:
    """Whether a record's fingerprint says what measured it (not missing, not UNKNOWN)."""
    return isinstance(code, str) and code not in ("", UNKNOWN, "null", "None", "nan")
