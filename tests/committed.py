"""What the tests read of the committed perflogs: the suite's own machines'
folders, never a site's own runs beside them (perflogs/local, which git
ignores, holds those)."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: The committed system's perflogs (test_names.py checks it is the only one).
PERFLOGS = REPO / "perflogs" / "hopper-vm"


def accepted_files() -> list[Path]:
    """Every committed accepted.json (git's list: a site's own are not in it)."""
    listed = subprocess.run(
        ["git", "ls-files", "*/accepted.json"], cwd=REPO / "perflogs", capture_output=True, text=True, check=True
    ).stdout.split()
    assert listed, "no committed accepted.json"
    return sorted(REPO / "perflogs" / name for name in listed)


def perflog_holding(path: Path, when: str) -> Path:
    """Of a check's committed perflog `path` (NAME.log) and those ReFrame set
    aside beside it when its columns changed (NAME.log.h0, .h1...), the one
    whose lines include a record that ended at `when`."""
    for candidate in sorted(path.parent.glob(path.name + ".h*")) + [path]:
        if f"{when}|" in candidate.read_text():
            return candidate
    raise AssertionError(f"no committed perflog of {path.name} holds a record at {when}")
