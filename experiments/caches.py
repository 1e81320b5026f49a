"""What the suite keeps in its build folder to avoid doing the same work twice
(build/cache/, which git ignores): each cache a folder of files named by
what they depend on, the least recently used dropped past a count, and one
lock per entry so that processes wanting the same entry at once (test
workers, a report beside a nightly) compute it once. A checkout that cannot
be written computes everything as if nothing were kept."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from experiments.roots import ARRAY_CACHE

#: The arrays kept at most: the nulls a nightly or the test suite asks for (58 in the quick tests), 3.2 MB each.
ARRAYS_KEPT = 96


@contextlib.contextmanager
def exclusive(lock: Path) -> Iterator[None]:
    """Held by one process at a time (an flock on `lock`); where the lock
    cannot be made or taken, held by every process at once."""
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        handle = open(lock, "a")
    except OSError:
        yield
        return
    with handle:
        with contextlib.suppress(OSError):  # a file system without locks: compute alongside
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield  # the lock goes with the file's closing


def write_whole(path: Path, write: Callable[[Path], None]) -> None:
    """`write` into a file beside `path`, then renamed over it: a reader never sees half of one."""
    partial = path.with_name(f"{path.name}.{socket.gethostname()}.{os.getpid()}.partial")  # a checkout nodes share
    try:
        write(partial)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


def keep_recent(folder: Path, pattern: str, kept: int) -> None:
    """Drops all but the `kept` most recently used files of `pattern` in `folder`, with their locks."""
    found = sorted(folder.glob(pattern), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in found[kept:]:
        old.unlink(missing_ok=True)
        lock_of(old).unlink(missing_ok=True)


def lock_of(path: Path) -> Path:
    """The lock beside a cached file (x.pickle.gz, x.npy: x.lock)."""
    return path.with_name(path.name.split(".")[0] + ".lock")


def touch(path: Path) -> None:
    """Marks a cached file used now (keep_recent keeps the most recently used)."""
    with contextlib.suppress(OSError):
        os.utime(path)


def cached_array(name: str, key: str, compute: Callable[[], np.ndarray]) -> np.ndarray:
    """`compute()`, or the array it gave before for the same `name` and `key`
    (which must name everything the array depends on)."""
    path = ARRAY_CACHE / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:24]}.npy"
    with exclusive(lock_of(path)):
        try:
            array = np.load(path, allow_pickle=False)
            touch(path)
            return array
        except (OSError, ValueError):  # not kept yet, unreadable or half of one: compute it
            pass
        array = compute()
        with contextlib.suppress(OSError):
            write_whole(path, lambda partial: _save(partial, array))
            keep_recent(ARRAY_CACHE, "*.npy", ARRAYS_KEPT)
        return array


def _save(path: Path, array: np.ndarray) -> None:
    with open(path, "wb") as stream:  # np.save on a name would add .npy to it
        np.save(stream, array, allow_pickle=False)
