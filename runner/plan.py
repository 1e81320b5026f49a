"""The plan of a run before it starts: which cases will run and how long each
is expected to take on this node, which are sized down, and which are left
out and why, each reason said once.

    python -m runner.plan [--system NAME] [-- reframe options]

Read from a dry run of the same selection (ReFrame's report: each case's
`expected_s`, `sized_down` and `left_out_because`, checks/suite/base.py),
which costs seconds; `./suite run` and `./suite nightly` print it first.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from experiments.budget import EXPECTED, minutes
from experiments.files import DamagedFile, read_json
from runner.rfm import REPO, reframe_command


@dataclass
class Plan:
    """The cases that will run, with their expected seconds, by check; those
    sized down; those left out, by reason; and a dry run that failed."""

    seconds: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    sized_down: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    left_out: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    #: The builds (fixtures) that run before the cases: counted apart, so that the plan's counts add up to
    #: ReFrame's "Ran N/M".
    builds: int = 0
    error: str = ""

    @property
    def total_s(self) -> float:
        return sum(sum(values) for values in self.seconds.values())

    @property
    def cases(self) -> int:
        return sum(len(values) for values in self.seconds.values())


def read_plan(report: dict) -> Plan:
    """The plan a dry run's report gives."""
    plan = Plan()
    for case in (report.get("runs") or [{}])[-1].get("testcases", []):
        name = case["display_name"]
        check = name.split()[0]
        if case["result"] == "skip":
            plan.left_out[case.get("left_out_because") or "skipped (no reason kept)"].append(name)
        elif case["result"] == "fail":
            plan.left_out[f"refused at setup: {' '.join(str(case.get('fail_reason')).split())}"].append(name)
        elif not case.get("fixture") or case.get("expected_s"):
            plan.seconds[check].append(float(case.get("expected_s") or 0.0))
            if case.get("sized_down"):
                plan.sized_down[case["sized_down"]].append(name)
        else:
            plan.builds += 1
    return plan


def plan_lines(plan: Plan, prefix: str = "plan") -> list[str]:
    """What the plan says: the total, each check's share, what is sized down and each reason once."""
    if plan.error:
        return [f"{prefix}: none: {plan.error}"]
    by_check = ", ".join(
        f"{check} {len(values)} ({minutes(sum(values))})"
        for check, values in sorted(plan.seconds.items(), key=lambda item: -sum(item[1]))
    )
    builds = f" and {plan.builds} build(s)" if plan.builds else ""
    lines = [f"{prefix}: {plan.cases} case(s){builds}, expected {minutes(plan.total_s)}: {by_check}"]
    lines += [f"{prefix}: sized down ({_counted(names)}): {change}" for change, names in plan.sized_down.items()]
    reasons: dict[str, list[str]] = defaultdict(list)
    times: dict[str, list[str]] = defaultdict(list)
    for reason, names in plan.left_out.items():
        said, _, expected = reason.partition(EXPECTED)
        reasons[said] += names
        times[said] += [expected] * len(names) if expected else []
    for reason, names in sorted(reasons.items(), key=lambda item: -len(item[1])):
        span = sorted(set(times[reason]), key=_seconds)
        expected = f"{EXPECTED}{span[0]}" + (f" to {span[-1]}" if len(span) > 1 else "") if span else ""
        lines.append(f"{prefix}: left out ({_counted(names)}): {reason}{expected}")
    return lines


def _counted(names: list[str]) -> str:
    """'um_bandwidth x8, path_matrix x2': the checks of the named cases, counted."""
    return ", ".join(f"{check} x{count}" for check, count in sorted(Counter(n.split()[0] for n in names).items()))


def _seconds(text: str) -> int:
    """minutes()'s text back to seconds, to order them."""
    parts = text.replace(" s", "").split(" min ")
    return int(parts[0]) * 60 + int(parts[1]) if len(parts) == 2 else int(parts[0])


def make_plan(system: str | None, options: list[str], cwd: Path = REPO) -> Plan:
    """A dry run of `options` on `system` (None: ReFrame's pick), read as a
    plan (its error, where it failed)."""
    with tempfile.TemporaryDirectory(prefix="gpu-mempaths-plan-") as tmp:
        report = Path(tmp) / "plan.json"
        cmd = reframe_command(system, "--dry-run", "--report-file", str(report), *options)
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        if not report.exists():
            tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
            return Plan(error=f"the dry run wrote no report ({tail[0]})")
        try:
            return read_plan(read_json(report))
        except DamagedFile as err:
            return Plan(error=str(err))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="Options after '--' go to ReFrame.")
    parser.add_argument("--system", help="the system to plan for (default: the one ReFrame picks on this machine)")
    parser.add_argument("reframe", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    options = args.reframe[1:] if args.reframe[:1] == ["--"] else args.reframe
    for line in plan_lines(make_plan(args.system, options)):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
