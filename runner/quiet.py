"""ReFrame's output, quieter, and what a run left where: ``./suite run`` runs
ReFrame through this.

    python -m runner.quiet [--perflogs DIR] [--stage DIR] -- COMMAND...

Runs COMMAND (ReFrame), passing its output through line by line, except the
cases it skipped: those are counted by their reason and said once each,
before ReFrame's last line (on a machine without a GPU, 89 cases skip for one
reason), and, in a dry run, the two lines ReFrame prints for every case (DRY
and OK): those are counted per check and said once each, with the
environments they cover (a dry run of dgx-a100 printed 400 lines). After
the run it names what the run wrote: the perflogs it added to, or, for a dry
run, the job scripts it wrote. Exits with COMMAND's status.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from runner import lock

#: ReFrame's line for a skipped case: '[    SKIP ] ( 2/92) gdrcopy_sanity /206fdd34 @sys:part+env [why]'.
_SKIP = re.compile(r"^\[\s*SKIP\s*\]\s*\(\s*\d+/\d+\)\s+(?P<name>\S+).*?@\S+\s+\[(?P<why>.*)\]\s*$")
#: ReFrame's last summary line: '[  PASSED  ] Ran 4/93 test case(s) ...' (or FAILED).
_SUMMARY = re.compile(r"^\[\s*(PASSED|FAILED|ABORTED)\s*\] Ran ")
#: A dry run's lines for a case: '[ DRY      ] path_matrix %paths=peer-ce /b59c7f8f @sys:part+env' and
#: '[       OK ] ( 1/186) path_matrix %paths=peer-ce /b59c7f8f @sys:part+env'.
_DRY_CASE = re.compile(r"^\[\s*(?P<what>DRY|OK)\s*\]\s*(\(\s*\d+/\d+\)\s*)?(?P<name>\S+).*@(?P<where>\S+)\s*$")
#: ReFrame colours its verdicts: the escapes are read past.
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


class Skips:
    """The skipped cases, by reason: each reason said once, with its count and checks."""

    def __init__(self) -> None:
        self.by_reason: dict[str, Counter] = {}

    def take(self, line: str) -> bool:
        """Whether `line` is a skipped case's (counted, not printed)."""
        found = _SKIP.match(_COLOUR.sub("", line))
        if found:
            self.by_reason.setdefault(found["why"], Counter())[found["name"]] += 1
        return bool(found)

    def lines(self) -> list[str]:
        # Reasons that differ only in a case's expected time ('over the case budget ...: expected 3 min 19 s')
        # are one reason, said with the range of those times.
        merged: dict[str, tuple[Counter, list[str]]] = {}
        for why, names in self.by_reason.items():
            found = _EXPECTED.match(why)
            head, expected = (found["head"], [found["expected"]]) if found else (why, [])
            counts, times = merged.setdefault(head, (Counter(), []))
            counts.update(names)
            times += expected
        out = []
        for head, (names, times) in merged.items():
            checks = ", ".join(sorted(names))
            times = sorted(set(times), key=_seconds)
            why = head + (f": expected {times[0]}" + (f" to {times[-1]}" if len(times) > 1 else "") if times else "")
            out.append(f"suite: {sum(names.values())} case(s) skipped ({checks}): {why}")
        self.by_reason.clear()
        return out


#: A skip reason that ends in the case's expected time (checks/suite/base.py's case budget).
_EXPECTED = re.compile(r"^(?P<head>.*): expected (?P<expected>(?:\d+ min )?\d+ s)$")


def _seconds(duration: str) -> int:
    """'3 min 19 s' or '38 s' in seconds (experiments/budget.py's `minutes` read back)."""
    numbers = [int(n) for n in re.findall(r"\d+", duration)]
    return numbers[0] * 60 + numbers[1] if len(numbers) == 2 else numbers[0]


class DryCases:
    """A dry run's cases, per check: each check said once, with its count and where it would run."""

    def __init__(self) -> None:
        self.by_check: dict[str, Counter] = {}

    def take(self, line: str) -> bool:
        """Whether `line` is one of a dry run's case lines (counted, not printed)."""
        found = _DRY_CASE.match(_COLOUR.sub("", line))
        if found and found["what"] == "OK":  # its job script written (a skipped case has a DRY line too)
            self.by_check.setdefault(found["name"], Counter())[found["where"]] += 1
        return bool(found)

    def lines(self) -> list[str]:
        out = [
            f"suite: {sum(where.values())} job script(s) of {name} for {', '.join(sorted(where))}"
            for name, where in self.by_check.items()
        ]
        self.by_check.clear()
        return out


def written_since(root: Path, pattern: str, since: float) -> list[Path]:
    """The files under `root` matching `pattern` modified since `since` (epoch seconds)."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob(pattern) if p.is_file() and p.stat().st_mtime >= since)


def where_lines(perflogs: Path, stage: Path, since: float, dry_run: bool, cwd: Path) -> list[str]:
    """What the run wrote, named for the user: job scripts of a dry run, the perflogs of a run."""

    def shown(path: Path) -> str:
        return str(path.relative_to(cwd)) if path.is_relative_to(cwd) else str(path)

    if dry_run:
        # A build's script is rfm_build.sh, a case's rfm_job.sh: counted together, as the lines above count
        # each check's (a count of rfm_job.sh alone read as four scripts gone missing).
        jobs = written_since(stage, "**/rfm_job.sh", since)
        builds = written_since(stage, "**/rfm_build.sh", since)
        if not jobs and not builds:
            return ["suite: the dry run wrote no job script"]
        folders = sorted({shown(p.parent.parent) for p in jobs + builds})
        kinds = f"{len(jobs)} rfm_job.sh" + (f", {len(builds)} rfm_build.sh" if builds else "")
        scripts = len(jobs) + len(builds)
        return [f"suite: {scripts} job script(s) ({kinds}) under {', '.join(folders)}; nothing submitted"]
    logs = written_since(perflogs, "**/*.log", since)
    if not logs:
        return ["suite: no perflog written: nothing was measured"]
    folders = sorted({shown(p.parent) for p in logs})
    names = ", ".join(p.name for p in logs)
    return [f"suite: perflogs in {', '.join(folders)} ({names}); ./suite report html {folders[0]} -o DIR draws them"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.quiet", description=__doc__.splitlines()[0])
    parser.add_argument("--perflogs", type=Path, default=Path("perflogs"))
    parser.add_argument("--stage", type=Path, default=Path("stage"))
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    since = time.time() - 1
    dry_run = "--dry-run" in command
    skips, dry = Skips(), DryCases()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # The node's lock (runner/lock.py), where ./suite run took it, held by ReFrame too: killed outright,
    # this process lets the node go only when the ReFrame it started ends.
    child = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        env=env,
        pass_fds=lock.held_fds(),
    )
    # Ctrl-C reaches ReFrame too (one process group): it cancels its jobs and says so, and this reads on
    # to the end of what it says. A termination sent to this process alone is passed on.
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda number, _frame: child.send_signal(number))
    with child:
        for line in child.stdout:
            if skips.take(line) or (dry_run and dry.take(line)):
                continue
            if _SUMMARY.match(_COLOUR.sub("", line)):
                for said in dry.lines() + skips.lines():
                    print(said, flush=True)
            print(line, end="", flush=True)
    for signum, handler in before.items():
        signal.signal(signum, handler)
    for line in dry.lines() + skips.lines():
        print(line)
    if child.returncode == USAGE_ERROR:  # ReFrame's parser refused an option: the suite's usage error, 3
        print("suite: ReFrame refused its options (its error above): a usage error, nothing run", file=sys.stderr)
        return 3
    for line in where_lines(args.perflogs.resolve(), args.stage.resolve(), since, dry_run, Path.cwd()):
        print(line)
    return child.returncode if child.returncode >= 0 else 128 - child.returncode


#: What ReFrame exits with when its parser refuses an option (argparse's), never after running anything.
USAGE_ERROR = 2


if __name__ == "__main__":
    sys.exit(main())
