"""One night at a time on a node: a lock per checkout and node.

Two nightlies of one checkout on one node (a doubled cron line, a manual run
during cron's) share ReFrame's stage folders and the perflogs, and each
reads the other's failures as its own: a healthy node drained by the suite's
own collision. Every command that runs checks or changes the baseline
(nightly, ./suite run, accept, rejudge, upgrade) holds this lock while it
works; a second exits 3 naming the holder (its pid, when it started and its
command), or waits for it with --wait.

The lock is the kernel's (flock on a file under results/), not a pid file:
it is let go when its holder ends, however it ends (a kill, a power cut), so
no stale lock ever blocks a night. The file only names the holder.

    python -m runner.lock [--wait] -- COMMAND...   (what ./suite run starts: the lock held across exec)
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import functools
import os
import re
import shlex
import socket
import sys
import time
from pathlib import Path

from experiments.roots import RESULTS
from judge.status import UNJUDGED

#: How often a waiting command looks again.
POLL_S = 2.0


class Busy(SystemExit):
    """Another command of this checkout holds the node's lock: a usage error's exit, naming it."""


def lock_path(node: str | None = None) -> Path:
    """The lock file of this checkout on `node` (this machine by default): results/.lock-NODE."""
    name = (node or socket.gethostname()).split(".")[0]
    return RESULTS / f".lock-{name}"


#: holder_of's answer while the holder has not yet written its name (it takes the lock first).
UNNAMED = "a command that has not yet written its name"


def holder_of(path: Path) -> str:
    """Who holds the lock, as its file says ('pid 4242 since 2026-12-06T02:15:00: ./suite nightly ...')."""
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        text = ""
    return text or UNNAMED


#: How long a command that finds the lock held waits for its holder to write its name: flock is taken
#: before the name is written (over the last holder's, which the file keeps), and a nightly that read no
#: name, or a dead holder's, would not know a health check's "(done by ...)" and exit 3 beside a holder
#: that ends in seconds.
NAMING_S = 1.0
_PID = re.compile(r"^pid (\d+) ")


def _alive(holder: str, path: Path) -> bool:
    """Whether the holder the lock file at `path` names is a process of this node still running: its pid,
    and (where /proc says) a process started before the file was written, not a later one given the pid."""
    found = _PID.match(holder)
    if not found:
        return False
    pid = int(found[1])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: running
        pass
    started = _started_at(pid)
    try:
        return started is None or started <= path.stat().st_mtime + 1.0
    except OSError:
        return True


def _started_at(pid: int) -> float | None:
    """When process `pid` started (seconds since the epoch), from /proc; None where it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        boot = next(line for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime "))
        return float(boot.split()[1]) + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _named_holder(fd: int, path: Path) -> str | None:
    """holder_of `path` once a running holder has named itself there (NAMING_S at most); None where the
    lock came free meanwhile and `fd` now holds it."""
    end = time.monotonic() + NAMING_S
    while not _alive(holder := holder_of(path), path) and time.monotonic() < end:
        time.sleep(0.05)
        if _try(fd):
            return None
    return holder


def _try(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


#: The descriptors of the locks this process holds: handed to ReFrame (held_fds), so that a night killed
#: outright (SIGKILL, the OOM killer) holds the node until the ReFrame it started, still measuring, ends.
_HELD: list[int] = []
#: The variable that names the lock's descriptor to the command runner.lock starts (./suite run's).
FD_VARIABLE = "GPU_MEMPATHS_LOCK_FD"


def held_fds() -> tuple[int, ...]:
    """The descriptors of the locks held here (this process's, or the one runner.lock handed down)."""
    handed = os.environ.get(FD_VARIABLE, "")
    return (*_HELD, *([int(handed)] if handed.isdigit() else []))


#: A holder that says it ends within this many seconds (a short tier: runner/healthcheck.py) is waited for
#: by a command that would otherwise exit 3: a nightly started while a health check measures for ten
#: seconds runs after it, not never.
BRIEF_AT_MOST_S = 130.0
_BRIEF = re.compile(r" \(done by (\d+(?:\.\d+)?)\)")


def brief(what: str, seconds: float) -> str:
    """`what`, as a holder that ends within `seconds` names itself (waited for: BRIEF_AT_MOST_S)."""
    return f"{what} (done by {time.time() + seconds:.0f})"


def _wait_for_brief(fd: int, holder: str, at_most_s: float) -> bool:
    """Whether the lock was taken after waiting, `at_most_s` at most, for a brief holder to end (False: not
    brief, or not ended)."""
    found = _BRIEF.search(holder)
    if not found or at_most_s <= 0:
        return False
    end = min(float(found[1]) + POLL_S, time.time() + at_most_s)
    while time.time() < end:
        time.sleep(POLL_S / 4)
        if _try(fd):
            return True
    return False


def _busy_or_wait(fd: int, path: Path, wait: bool) -> None:
    """Busy naming the holder (read again: a brief one waited for may have handed the lock on), or with
    `wait`, the lock taken once its holder lets it go."""
    holder = holder_of(path)
    if not _alive(holder, path) and holder != UNNAMED:  # a dead holder's name left in the file: said as such
        holder = f"{holder} (ended: a process it started, or one not yet named, holds the lock)"
    if not wait:
        os.close(fd)
        raise Busy(
            f"suite: another command holds this checkout's lock on this node ({path}): {holder}; one night "
            "at a time: wait for it (--wait), or stop it"
        )
    print(f"suite: waiting for the command that holds {path}: {holder}", file=sys.stderr, flush=True)
    while not _try(fd):
        time.sleep(POLL_S)


def acquire(what: str, wait: bool = False, path: Path | None = None, brief_wait_s: float = BRIEF_AT_MOST_S) -> int:
    """The node's lock taken for `what` (a command line, for whoever finds it held): the open file
    descriptor that holds it. Held: with `wait`, waits for it (saying so once); held by a brief holder (a
    short tier), waits for it within what it said (`brief_wait_s` at most); else Busy."""
    path = path or lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    if not _try(fd):
        # Its holder read once named (where this command would wait for a brief one; None: it let go meanwhile).
        holder = _named_holder(fd, path) if brief_wait_s > 0 else holder_of(path)
        if holder is not None and not _wait_for_brief(fd, holder, brief_wait_s):
            _busy_or_wait(fd, path, wait)
    since = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} since {since} UTC: {what}\n".encode(), 0)
    except OSError:  # a full disk: the lock is still ours, its holder unnamed
        pass
    _HELD.append(fd)
    return fd


@contextlib.contextmanager
def held(what: str, wait: bool = False, path: Path | None = None, brief_wait_s: float = BRIEF_AT_MOST_S):
    """The node's lock held while the block runs (acquire), let go after it."""
    fd = acquire(what, wait, path, brief_wait_s)
    try:
        yield
    finally:
        _HELD.remove(fd)
        os.close(fd)  # closing the last descriptor (a child's too) lets the lock go


def add_wait(p) -> None:
    """--wait on a command that holds the lock."""
    p.add_argument(
        "--wait",
        action="store_true",
        help="wait for another command of this checkout on this node to end, rather than exit 3",
    )


def holding(command):
    """`command` (a parser's func, given args) run with the node's lock held (held; --wait where given)."""

    @functools.wraps(command)
    def run(args):
        with held(command_line(), wait=getattr(args, "wait", False)):
            return command(args)

    return run


def command_line(argv: list[str] | None = None) -> str:
    """This process's command line, quoted, as the lock names its holder: as the user typed it where the
    suite's command line started it ('./suite nightly --system local', not commands/__main__.py)."""
    words = list(sys.argv if argv is None else argv)
    if words and words[0].endswith(os.path.join("commands", "__main__.py")):
        words[0] = os.environ.get("GPU_MEMPATHS_PROG", "python -m commands")
        return " ".join([words[0], *(shlex.quote(w) for w in words[1:])])
    return " ".join(shlex.quote(word) for word in words)


def main(argv: list[str]) -> int:
    """--wait and the command after '--': run with the lock held (exec: the lock is the command's)."""
    wait = argv[:1] == ["--wait"]
    argv = argv[1:] if wait else argv
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: python -m runner.lock [--wait] -- COMMAND...", file=sys.stderr)
        return UNJUDGED
    try:
        fd = acquire(os.environ.get("GPU_MEMPATHS_LOCK_AS") or command_line(argv), wait)
    except Busy as busy:
        print(busy.code, file=sys.stderr)
        return UNJUDGED
    except OSError as err:  # a lock file another user made, a file system without flock: the suite's, not judged
        print(f"suite: the node's lock ({lock_path()}) could not be taken: {err}", file=sys.stderr)
        return UNJUDGED
    os.set_inheritable(fd, True)  # held by the command itself, until it ends, and handed to its ReFrame
    os.environ[FD_VARIABLE] = str(fd)
    os.execvp(argv[0], argv)
    return UNJUDGED  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
