"""What the suite writes, written whole or not at all, and what it reads,
named when it is damaged.

A night is killed, a disk fills, a power cut comes: a record half written is
worse than none, since every later command trips on it. Every result the
suite keeps (run.json, accepted.json, the tables beside them) is written to
a temporary file in the same folder, flushed to the disk and renamed over
the old one, so that a reader sees the old file or the new one, never a
part. A file that is damaged all the same (written by hand, or by an older
suite) is reported with its path and what is wrong with it, never as a bare
parse error.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from pathlib import Path


class DamagedFile(ValueError):
    """A file the suite keeps that cannot be read: its path and what is wrong."""

    def __init__(self, path: Path, why: str):
        super().__init__(f"{path}: damaged ({why}); move it aside (or restore it where git keeps it), then run again")
        self.path, self.why = Path(path), why


def write_atomic(path: Path, text: str) -> None:
    """`text` into `path`, whole or not at all (a temporary file, fsync, rename, the folder's fsync)."""
    path = Path(path)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _mode_of(path))  # mkstemp's 0600 would hide drain.txt from a monitor's account
        with os.fdopen(fd, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _sync_folder(path.parent)


def _mode_of(path: Path) -> int:
    """The mode the file has, or a new file's under the process's umask (0644 under the usual 022)."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _sync_folder(folder: Path) -> None:
    """The rename itself made durable (a folder's entries are flushed by fsync on the folder)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_json(path: Path, record) -> None:
    """A JSON record, indented as the committed ones are, written whole (write_atomic)."""
    write_atomic(path, json.dumps(record, indent=1) + "\n")


def read_json(path: Path):
    """A JSON record the suite wrote; DamagedFile naming the path where it is empty, cut or not JSON."""
    path = Path(path)
    try:
        text = path.read_text()
    except UnicodeDecodeError as err:
        raise DamagedFile(path, f"not text: {err.reason} at byte {err.start}") from None
    if not text.strip():
        raise DamagedFile(path, "empty")
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise DamagedFile(path, f"not JSON: {err.msg}, line {err.lineno} column {err.colno}") from None


def disk_problem(err: OSError) -> str | None:
    """What a failed write says to a person: a full disk, a read-only or forbidden folder, by the file's
    path; None for other errors."""
    where = err.filename or "a file of the suite"
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"no space left on the file system of {where}: free some, then run again"
    if err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return f"cannot write {where} ({os.strerror(err.errno)}): make it writable, then run again"
    return None
