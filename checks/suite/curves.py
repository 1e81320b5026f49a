"""A case's curves, kept beside its perflog.

The perflog carries a case's headline figures: what its references hold and
the nightly gate judges. The curves they sum up (every size of the latency
sweep, every segment of the scan, every point of the DAXPY study) are kept
record for record, as the program printed them, in ``<name>.curves`` in the
perflog's own folder (``perflogs/<system>/<partition>/``): a '|'-separated
table with a header, like the perflog, one line per record::

    job_completion_time|display_name|jobid|record
    2026-11-23T08:38:44+00:00|copy_latency|7794|Latency: method=pinned direction=h2d size=8 median_us=6.2 ...

The run's completion time and display name are those of its perflog lines,
so that reports/load.py joins the two and reads each curve back as the
figures older perflogs carried (each check's ``curve_figures``).

The curve is kept by the sanity function, last, once the records it keeps
have been verified: deferred, so nothing is read or written in a dry run, and
kept for runs whose figures then miss their references too.
"""

from __future__ import annotations

import datetime
import os

import reframe.core.runtime as rt
import reframe.utility.sanity as sn

from experiments.curves import CURVE_COLUMNS, CURVE_SUFFIX, curve_lines
from experiments.records import read_output

#: Where ReFrame was started: a relative perflog folder is relative to it, as
#: ReFrame resolves it at start-up (the sanity runs in the stage folder).
_LAUNCH_DIR = os.getcwd()


def completion_time(unix: float) -> str:
    """A job's completion time as the perflog writes it (%FT%T%:z, local time)."""
    return datetime.datetime.fromtimestamp(unix).astimezone().isoformat(timespec="seconds")


def perflog_folders(system: str, partition: str) -> list[str]:
    """The folders the configured file perflog handlers write this partition's
    perflogs to, computed as ReFrame's filelog handler does."""
    config = rt.runtime().site_config
    folders = []
    handlers = config.get("logging/0/handlers_perflog") or []
    for index, handler in enumerate(handlers):
        if handler.get("type") != "filelog":
            continue
        prefix = f"logging/0/handlers_perflog/{index}"
        basedir = os.path.join(
            _LAUNCH_DIR, config.get("systems/0/prefix"), os.path.expandvars(config.get(f"{prefix}/basedir"))
        )
        where = os.path.expandvars(config.get(f"{prefix}/prefix"))
        try:
            where = where % {"check_system": system, "check_partition": partition}
        except KeyError as err:
            why = f"the perflog prefix {where!r} names {err}: curves are kept by system and partition"
            raise sn.SanityError(why) from None
        folders.append(os.path.normpath(os.path.join(basedir, where)))
    return folders


def append_curve(path: str, when: str, display_name: str, jobid, lines: list[str]) -> None:
    """Add one run's curve records to a curves file, its header first if new."""
    for line in lines:
        if "|" in line or "\n" in line:
            raise sn.SanityError(f"a curve record cannot hold '|' or a newline: {line!r}")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a") as stream:
        if new:
            stream.write("|".join(CURVE_COLUMNS) + "\n")
        stream.writelines(f"{when}|{display_name}|{jobid}|{line}\n" for line in lines)


@sn.deferrable
def keep_curve(check, lines) -> bool:
    """Append the run's curve records (a list of lines, or a deferred one) to
    ``<name>.curves`` beside each of its perflogs; True, for the sanity."""
    lines = list(lines)
    if not lines:
        return True
    when = completion_time(check.job.completion_time)
    name = type(check).variant_name()
    for folder in perflog_folders(check.current_system.name, check.current_partition.name):
        append_curve(os.path.join(folder, name + CURVE_SUFFIX), when, check.display_name, check.job.jobid, lines)
    return True


@sn.deferrable
def output_curve(stdout: str, tags) -> list[str]:
    """The curve records of a job's output (read when the sanity is evaluated)."""
    return curve_lines(read_output(stdout), tags)
