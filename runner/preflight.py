"""What a night needs of this machine, checked before anything runs.

A missing CMake, a compiler not on PATH, a full or read-only disk: each made
the build fail, every check after it "not run", and the night read as a
broken node. The preflight names each of them first, and the night ends as
"not judged" (exit 3) with the fix, never as a drain.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

#: The least free space a night starts with in each folder it writes: a night's perflog lines, run
#: reports and stage folders come to tens of MB; a night's pages and a rerun's build to a few hundred.
MIN_FREE_MB = 512


def _command(word: str | None) -> str | None:
    """The program a system's compiler entry starts ('g++', from 'ccache g++ -std=c++17': the first word)."""
    return word.split()[0] if word and word.split() else None


def missing_tools(system: dict) -> list[str]:
    """The tools the system's build needs that are not on PATH: CMake (unless every environment uses an
    installation of the suite or Spack), and each environment's C and C++ compiler (unless the environment
    loads modules, which bring their own)."""
    found = []
    environments = system.get("environments", [])
    builds_here = [e for e in environments if not e.get("suite_prefix") and "spack" not in e.get("features", [])]
    if builds_here and shutil.which("cmake") is None:
        found.append("cmake is not on PATH (the build runs CMake; install it: Debian's package cmake)")
    for env in builds_here:
        if env.get("modules"):
            continue
        for key in ("cc", "cxx"):
            tool = _command(env.get(key))
            if tool and shutil.which(tool) is None:
                found.append(f"{tool} (environment {env.get('name')}'s {key}) is not on PATH")
    return found


def space_problems(folders: list[Path], least_mb: int = MIN_FREE_MB) -> list[str]:
    """The folders a night writes that cannot be written, or whose file system has less than `least_mb` free."""
    found = []
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        try:
            with tempfile.TemporaryFile(dir=folder):
                pass
        except OSError as err:
            found.append(f"{folder} cannot be written ({err.strerror}): make it writable")
            continue
        free_mb = shutil.disk_usage(folder).free / 2**20
        if free_mb < least_mb:
            found.append(f"{folder}: {free_mb:.0f} MB free, a night needs {least_mb} MB: free some space")
    return found


def problems(system: dict, folders: list[Path]) -> list[str]:
    """Everything that stops a night before it starts, each with its fix (empty: nothing does)."""
    least = int(os.environ.get("GPU_MEMPATHS_MIN_FREE_MB", MIN_FREE_MB))
    return missing_tools(system) + space_problems(folders, least)


def seal_perflogs(folder: Path) -> list[str]:
    """Close every perflog under `folder` that ends in a cut line (a night killed, or a disk that filled,
    while ReFrame wrote it) with a newline, so that the next night's first line starts whole instead of
    joining the fragment and being lost with it; each one closed named (the loader skips the fragment)."""
    closed = []
    for log in sorted(folder.rglob("*.log")) if folder.is_dir() else []:
        with open(log, "rb+") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size == 0:
                continue
            handle.seek(size - 1)
            if handle.read(1) != b"\n":
                handle.write(b"\n")
                closed.append(f"{log} ended in a cut line (a night killed or a disk full while it wrote): closed")
    return closed
