"""What a case is expected to cost in time, from its sizes and the node's data.

Each check says how many bytes its program moves over which path
(`expected_seconds`); the rates are the node's speeds of light from the
system data (systems/data.py: the host link, HBM, a peer link), derated to
what a program reaches, plus the fixed costs every program pays. The
constants below are fitted to the cases of one H100 on PCIe Gen5 (the
committed night of 2026-11-24 22:42): they make a plan a centre can read,
not a benchmark (on two H100s it came within 1-49% above what the nights
took, docs/verdict.md).

A case whose expected time is over its budget (`case_budget_s`) is sized
down where the check knows how (fewer repeats), and otherwise left out with
the reason; `runner/plan.py` prints the run's plan before it starts.
"""

from __future__ import annotations

#: A program's start under the NVML watch: the process, the CUDA context, NVML,
#: and ReFrame's job around it (a case moving nothing took 2 s).
START_S = 2.0
#: Fresh host memory first touched, pinned or registered (page faults and
#: zeroing in a virtual machine: 1 GiB cost about half a second).
HOST_FIRST_TOUCH_BPS = 2.0e9
#: What a program reaches of a link's or HBM's speed of light.
REACHED = 0.85
#: Unified Memory's fault-driven migration, as a share of the host link: 6
#: GiB/s over a 64 GB/s link on the H100, 5.2 over 75 on the AC922, 2.2 over
#: 16 on PCIe Gen3 (the reprex seed).
MIGRATION_OF_LINK = 0.1
#: ... and with read duplication invalidated by a host touch each run (the
#: slowest: 33 s for 25 GiB on the H100).
DUPLICATE_INVALIDATION_OF_LINK = 0.015
#: One kernel launch and its completion.
LAUNCH_S = 10e-6
#: What a case may be expected to take unless a site says otherwise
#: (-S case_budget_s=N): the slowest default case on one H100 takes 36 s.
CASE_BUDGET_S = 120


#: What ends a left-out case's reason before its expected time: the plan
#: (runner/plan.py) says each reason once, with the range of those times.
EXPECTED = ": expected "


def transfer_s(nbytes: float, speed_of_light: float | None, share: float = REACHED) -> float:
    """Seconds to move `nbytes` at `share` of a path's speed of light (bytes/s);
    0 where the path's speed is unknown (nothing to plan with)."""
    if not speed_of_light:
        return 0.0
    return nbytes / (speed_of_light * share)


def fewer(now: int, least: int, fixed_s: float, each_s: float, budget_s: float) -> int | None:
    """How many repetitions of `each_s` seconds fit `budget_s` after
    `fixed_s`: a count from `least` up to below `now`, or None where even
    `least` do not fit, or all `now` do (nothing to size down)."""
    fits = int((budget_s - fixed_s) // each_s) if each_s > 0 else now
    return fits if least <= fits < now else None


def first_touch_s(nbytes: float) -> float:
    """Seconds to allocate and first touch fresh host memory."""
    return nbytes / HOST_FIRST_TOUCH_BPS


def minutes(seconds: float) -> str:
    """'4 min 05 s', '38 s': a duration as a plan prints it."""
    seconds = round(seconds)
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"
