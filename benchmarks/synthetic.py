"""Synthetic histories made of the committed nights, never of a model (benchmarks/history.py).

Every line written is a committed perflog line (or curves line) of a real night, moved in time; every
night folder a committed run.json with its windows moved the same way. What changes is how many there
are:

- `times` k: the committed perflogs and nights, plus k-1 copies of every finished night of a kind, each
  copy moved by a whole number of days past the last committed night (copy after copy, in order);
- `years` Y: one copy a day for 365*Y days, the kind's nights taken in turn;
- a partition's night: N made-up nodes (node0001...), each the lines of one committed night of the kind
  (the nights taken in turn, so that neighbours differ), its node and job id changed and its times moved
  into the partition's window.

Records are appended to the file that holds lines of the current header (NAME.log). The committed nights
of a kind mostly sit in the perflogs ReFrame set aside when a column was added (NAME.log.h0, an older
header): their lines are rewritten into NAME.log's columns, a column they lack written as ReFrame's
'null' (which the loader reads as the missing field it was), so that a copy of an old night is as whole
as the night; a set-aside file with a column NAME.log no longer has could not be rewritten without loss,
and stops the benchmark.

Lines are streamed to the files (a partition of 4,608 nodes is millions of lines); what is kept in memory
is the committed lines of the kind's nights, as text.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import re
import shutil
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from experiments.curves import CURVE_COLUMNS, CURVE_SUFFIX
from experiments.files import DamagedFile, read_json
from judge.select import RERUNS
from reports.runs import night_complete, node_facts_of
from systems.health import kind_of

#: The checkout: its perflogs/ and results/ are the committed history, whatever GPU_MEMPATHS_DATA says.
REPO = Path(__file__).resolve().parent.parent
#: A night's windows whose records are its own (run.json's: the checks', then its reruns').
WINDOWS = ("tonight", *RERUNS)
#: ReFrame's placeholder of a field a record does not have (reports/load.py reads it as none).
NULL = "null"
TIME = "job_completion_time"
#: A perflog ReFrame set aside when its header changed: NAME.log.h0, .h1...
SET_ASIDE = re.compile(r"^(?P<log>.+\.log)\.h(?P<n>\d+)$")
#: What later nights read of a night's folder: run.json, its node facts (a partition's per host), a
#: partition's cells.csv (node_histories), a rejudged verdict.
NIGHT_FILES = ("run.json", "node-*.json", "*/node-*.json", "cells.csv", "rejudged.json")
#: The run reports ReFrame wrote for a night, which the benchmark's ReFrame hands over again.
REPORTS = ("health-report.json", "run-report.json", *(f"{key}-report.json" for key in RERUNS))


# --- committed nights ----------------------------------------------------------------------------


@dataclass(eq=False)
class Night:
    """A committed night: its run.json, its folder, its kind of node (run.json's, else its node facts')."""

    run: dict
    folder: Path
    kind: str | None

    @property
    def stamp(self) -> str:
        return self.run["stamp"]

    def windows(self) -> dict[str, tuple[dt.datetime, dt.datetime]]:
        """Its windows by name (WINDOWS) as judge/select.py's run_rows reads them: [start, end], to the second."""
        return {key: (naive(start), naive(end)) for key, (start, end) in window_texts(self.run).items()}

    def span(self) -> tuple[dt.datetime, dt.datetime]:
        """From its start to the end of its last window."""
        windows = self.windows().values()
        return min(start for start, _ in windows), max(end for _, end in windows)


def committed_nights(system: str, root: Path = REPO) -> list[Night]:
    """Every night of `system` under root/results/nightly whose run.json can be read, oldest first."""
    nights = []
    for path in sorted((root / "results" / "nightly" / system).glob("*/run.json")):
        try:
            run = read_json(path)
        except DamagedFile:
            continue
        if not isinstance(run, dict) or not run.get("stamp") or not run.get("start"):
            continue
        facts = node_facts_of(path.parent)
        nights.append(Night(run, path.parent, run.get("kind") or (kind_of(facts[0]) if facts else None)))
    return sorted(nights, key=lambda night: night.run["start"])


def finished(nights: list[Night], kind: str | None = None, drills: bool = False) -> list[Night]:
    """The nights reports/runs.py's finished_runs counts: complete, not a partition's, a drill only if asked
    for, of `kind` where given."""
    return [
        night
        for night in nights
        if night_complete(night.run)
        and not night.run.get("nodes")
        and (drills or not night.run.get("drill"))
        and night.windows()
        and (kind is None or night.kind == kind)
    ]


def busiest_kind(nights: list[Night]) -> str:
    """The kind of node with the most finished nights."""
    counts = Counter(night.kind for night in finished(nights) if night.kind)
    if not counts:
        raise SystemExit("history: no finished night of any kind of node is committed")
    return counts.most_common(1)[0][0]


def tonight_source(nights: list[Night], checks: dict[str, Check]) -> Night:
    """The last of `nights` (a kind's, drills too) whose checks logged records that `checks` holds: what
    the benchmark's nights measure again."""
    logged = [n for n in nights if any(check.records.get((n.stamp, "tonight")) for check in checks.values())]
    if not logged:
        raise SystemExit("history: no committed night of the kind has perflog lines to measure again")
    return logged[-1]


def window_texts(run: dict) -> dict[str, list[str]]:
    """A run.json's windows by name, as written: {'tonight': [start, end], 'rerun': [...]}."""
    found = {"tonight": run, **{key: run[key] for key in RERUNS if isinstance(run.get(key), dict)}}
    return {key: [w["start"], w["end"]] for key, w in found.items() if w.get("start") and w.get("end")}


def naive(text: str) -> dt.datetime:
    """A stamp or a record's time as UTC without its zone, as run.json's windows are written."""
    when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return when.astimezone(dt.timezone.utc).replace(tzinfo=None) if when.tzinfo else when


@functools.lru_cache(maxsize=65536)
def _record_time(text: str) -> dt.datetime | None:
    try:
        return naive(text)
    except ValueError:
        return None


# --- committed perflogs --------------------------------------------------------------------------


class WindowIndex:
    """Which night window (stamp, window name) a time falls in, among the windows of some nights."""

    def __init__(self, nights: list[Night]):
        self.spans = sorted(
            (start, end, night.stamp, key) for night in nights for key, (start, end) in night.windows().items()
        )
        self.starts = [span[0] for span in self.spans]

    def find(self, when: dt.datetime) -> tuple[str, str] | None:
        i = bisect_right(self.starts, when) - 1
        for start, end, stamp, key in self.spans[max(i - 1, 0) : i + 1][::-1]:
            if start <= when <= end:
                return stamp, key
        return None


@dataclass
class Check:
    """One check's committed perflog lines of some nights, as text in NAME.log's columns, by (night, window):
    each line its time and the rest of its fields ('|'-joined), and its curves lines likewise."""

    name: str  # NAME.log, relative to perflogs/<system>/
    header: list[str]
    records: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)
    curves: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)

    def index(self, column: str) -> int | None:
        return self.header.index(column) if column in self.header else None


def _is_header(fields: list[str]) -> bool:
    """As reports/load.py tells a header line: it names perf_var and perf_value."""
    return "perf_var" in fields and "perf_value" in fields


def _header_of(path: Path) -> list[str] | None:
    with path.open(encoding="utf-8", errors="replace") as stream:
        for line in stream:
            fields = line.rstrip("\n").split("|")
            if _is_header(fields):
                return fields
    return None


def _columns(old: list[str], new: list[str], path: Path) -> list[int | None]:
    """Where each column of `new` is in `old` (None: the old header lacks it, written as NULL)."""
    lost = [column for column in old if column not in new]
    if lost:
        raise SystemExit(
            f"history: {path} has columns its check's current perflog lacks ({', '.join(lost)}): "
            "its lines cannot be rewritten into the current header without losing them"
        )
    return [old.index(column) if column in old else None for column in new]


def perflog_groups(perflogs: Path) -> dict[str, list[Path]]:
    """Each check's perflog files under `perflogs` (NAME.log relative to it: the set-aside NAME.log.hN
    oldest first, then NAME.log)."""
    groups: dict[str, list[tuple[int, Path]]] = {}
    for path in sorted(perflogs.rglob("*.log*")):
        aside = SET_ASIDE.match(path.name)
        if not (aside or path.name.endswith(".log")) or not path.is_file():
            continue
        log = path.with_name(aside["log"]) if aside else path
        groups.setdefault(str(log.relative_to(perflogs)), []).append((int(aside["n"]) if aside else 1 << 30, path))
    return {name: [path for _, path in sorted(files)] for name, files in groups.items()}


def read_checks(
    perflogs: Path, nights: list[Night], only: set[str] | None = None
) -> tuple[dict[str, Check], dt.datetime]:
    """The lines of `nights` (each of their windows) in every perflog under `perflogs` and its curves beside
    (of the checks `only` names, where given), and the latest time any record there has: what copies are
    made of, and what they are moved past. A line that does not fit its header (which the loader skips)
    is never copied."""
    index = WindowIndex(nights)
    checks: dict[str, Check] = {}
    latest = dt.datetime.min
    for name, files in perflog_groups(perflogs).items():
        if only is not None and check_name(name) not in only:
            continue
        header = _header_of(perflogs / name) if (perflogs / name).exists() else _header_of(files[-1])
        if header is None or header[0] != TIME:
            continue
        check = checks[name] = Check(name, header)
        keys: dict[tuple[str, str], set] = {}
        for path in files:
            latest = max(latest, _read_records(path, check, index, keys))
        curves = (perflogs / name).with_suffix(CURVE_SUFFIX)
        if curves.exists():
            latest = max(latest, _read_curves(curves, check, index, keys))
    return checks, latest


def _read_records(path: Path, check: Check, index: WindowIndex, keys: dict) -> dt.datetime:
    latest, header, columns = dt.datetime.min, None, None
    with path.open(encoding="utf-8", errors="replace") as stream:
        for line in stream:
            if not line.endswith("\n"):
                continue  # cut short: a truncated last line is not copied
            fields = line[:-1].split("|")
            if _is_header(fields):
                header = fields
                columns = None if header == check.header else _columns(header, check.header, path)
                continue
            if header is None or len(fields) != len(header):
                continue
            when = _record_time(fields[0])
            if when is None:
                continue
            latest = max(latest, when)
            where = index.find(when)
            if where is None:
                continue
            if columns is None:
                rest = line[len(fields[0]) + 1 : -1]
            else:
                rest = "|".join(fields[i] if i is not None else NULL for i in columns[1:])
            check.records.setdefault(where, []).append((fields[0], rest))
            record = dict(zip(header, fields))
            keys.setdefault(where, set()).add((fields[0], record.get("display_name"), str(record.get("jobid"))))
    return latest


def _read_curves(path: Path, check: Check, index: WindowIndex, keys: dict) -> dt.datetime:
    """The curves lines of the windows' runs, kept where a copied perflog line is their run's (the
    loader reads a curves line without one as an issue: none is made)."""
    latest = dt.datetime.min
    with path.open(encoding="utf-8", errors="replace") as stream:
        if stream.readline().rstrip("\n") != "|".join(CURVE_COLUMNS):
            return latest
        for line in stream:
            fields = line.rstrip("\n").split("|")
            if not line.endswith("\n") or len(fields) != len(CURVE_COLUMNS):
                continue
            when = _record_time(fields[0])
            if when is None:
                continue
            latest = max(latest, when)
            where = index.find(when)
            if where is not None and (fields[0], fields[1], fields[2]) in keys.get(where, ()):
                check.curves.setdefault(where, []).append((fields[0], line[len(fields[0]) + 1 : -1]))
    return latest


def check_name(name: str) -> str:
    """'default/daxpy.log' -> 'daxpy': a perflog's, its set-aside's or its curves' check."""
    return Path(name).name.split(".")[0]


# --- moving in time ------------------------------------------------------------------------------


@functools.lru_cache(maxsize=65536)
def _date_after(date: str, days: int) -> str:
    return (dt.date.fromisoformat(date) + dt.timedelta(days=days)).isoformat()


def shift_days(text: str, days: int) -> str:
    """A record's time or a stamp as written ('2026-11-23T08:52:29+00:00', '2026-11-23T08:52:29') moved by
    whole days: its date alone changes, the rest of its text is kept as it was."""
    return _date_after(text[:10], days) + text[10:]


@functools.lru_cache(maxsize=65536)
def shift_by(text: str, delta: dt.timedelta) -> str:
    """A record's time moved by `delta`, written as ReFrame writes it (its zone kept)."""
    when = dt.datetime.fromisoformat(text.replace("Z", "+00:00")) + delta
    return when.isoformat(timespec="microseconds" if when.microsecond else "seconds")


def shifted_run(run: dict, days: int) -> dict:
    """run.json of a night moved by whole days: its stamp, start, end and reruns' windows."""
    moved = json.loads(json.dumps(run))
    for key in ("stamp", "start", "end"):
        if moved.get(key):
            moved[key] = shift_days(moved[key], days)
    for key in RERUNS:
        for end in ("start", "end"):
            if isinstance(moved.get(key), dict) and moved[key].get(end):
                moved[key][end] = shift_days(moved[key][end], days)
    return moved


def folder_name(stamp: str) -> str:
    """A night's folder as the nightly names it: its stamp without colons."""
    return stamp.replace(":", "")


# --- histories -----------------------------------------------------------------------------------


def times_copies(nights: list[Night], after: dt.date, times: int) -> list[tuple[Night, int]]:
    """k-1 copies of every night, each (night, days moved): the first on the day after `after`, each copy
    after the one before, so that the nights stay in order."""
    first = min(night.span()[0].date() for night in nights)
    last = max(night.span()[1].date() for night in nights)
    gap, span = (after - first).days + 1, (last - first).days + 1
    return [(night, gap + copy * span) for copy in range(times - 1) for night in nights]


def daily_copies(nights: list[Night], after: dt.date, count: int) -> list[tuple[Night, int]]:
    """One night a day for `count` days after `after`, the nights taken in turn."""
    found = []
    for day in range(count):
        night = nights[day % len(nights)]
        found.append((night, (after + dt.timedelta(days=day + 1) - night.span()[0].date()).days))
    return found


def check_order(pairs: list[tuple[Night, int]]) -> None:
    """Copies that overlap (a night across midnight before an early one) would share records: refused."""
    spans = sorted(
        (night.span()[0] + dt.timedelta(days=d), night.span()[1] + dt.timedelta(days=d)) for night, d in pairs
    )
    for (_, end), (start, _) in zip(spans, spans[1:]):
        if start <= end:
            raise SystemExit(f"history: two copied nights overlap at {start}: the copies cannot be told apart")


def copy_committed(system: str, dest: Path, only: set[str] | None = None) -> None:
    """The committed perflogs of `system` (those of the checks `only` names and accepted.json, where given)
    and of each committed night the files later nights read (NIGHT_FILES), under dest/perflogs and
    dest/results/nightly."""
    source = REPO / "perflogs" / system

    def ignored(folder: str, names: list[str]) -> list[str]:
        if only is None:
            return []
        return [n for n in names if (Path(folder) / n).is_file() and n != "accepted.json" and check_name(n) not in only]

    shutil.copytree(source, dest / "perflogs" / system, ignore=ignored, dirs_exist_ok=True)
    for night in sorted((REPO / "results" / "nightly" / system).glob("*/run.json")):
        _copy_night_files(night.parent, dest / "results" / "nightly" / system / night.parent.name)


def _copy_night_files(source: Path, target: Path, run: dict | None = None) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for pattern in NIGHT_FILES:
        for path in source.glob(pattern):
            if path.name == "run.json" and run is not None:
                continue
            (target / path.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target / path.relative_to(source))
    if run is not None:
        (target / "run.json").write_text(json.dumps(run, indent=1) + "\n")


def _appender(path: Path, header: str):
    """`path` opened to append lines: created with its header, or ended with a newline first."""
    if not path.exists() or path.stat().st_size == 0:
        path.parent.mkdir(parents=True, exist_ok=True)
        stream = path.open("w", encoding="utf-8")
        stream.write(header + "\n")
        return stream
    with path.open("rb") as ends:
        ends.seek(-1, 2)
        cut = ends.read(1) != b"\n"
    stream = path.open("a", encoding="utf-8")
    if cut:
        stream.write("\n")
    return stream


def append_copies(perflogs: Path, checks: dict[str, Check], pairs: list[tuple[Night, int]]) -> int:
    """Each (night, days)'s records, of each of its windows, moved by its days and appended to its check's
    NAME.log and NAME.curves under `perflogs`; the lines written."""
    written = 0
    for check in checks.values():
        log = perflogs / check.name
        with (
            _appender(log, "|".join(check.header)) as records,
            _appender(log.with_suffix(CURVE_SUFFIX), "|".join(CURVE_COLUMNS)) as curves,
        ):
            for night, days in pairs:
                for key in WINDOWS:
                    for when, rest in check.records.get((night.stamp, key), ()):
                        records.write(f"{shift_days(when, days)}|{rest}\n")
                        written += 1
                    for when, rest in check.curves.get((night.stamp, key), ()):
                        curves.write(f"{shift_days(when, days)}|{rest}\n")
                        written += 1
        if log.with_suffix(CURVE_SUFFIX).stat().st_size == len("|".join(CURVE_COLUMNS)) + 1:
            log.with_suffix(CURVE_SUFFIX).unlink()  # no curves: none made where the check keeps none
    return written


def write_copies(dest: Path, system: str, checks: dict[str, Check], pairs: list[tuple[Night, int]]) -> int:
    """The copies `pairs` made under `dest`: their records appended and their folders (run.json moved,
    node facts as they were); the lines written."""
    check_order(pairs)
    written = append_copies(dest / "perflogs" / system, checks, pairs)
    for night, days in pairs:
        run = shifted_run(night.run, days)
        _copy_night_files(night.folder, dest / "results" / "nightly" / system / folder_name(run["stamp"]), run)
    return written


@dataclass
class History:
    """A synthetic history under `root` (perflogs/, results/), and what it holds."""

    root: Path
    system: str
    kind: str
    nights: int  # finished nights of the kind
    lines: int  # perflog and curves lines under perflogs/<system>/
    last: dt.date  # the day of its last night or record
    source: Night  # the night its benchmark's nights measure again
    copies: list[tuple[Night, int]] = field(repr=False, default_factory=list)  # (night, days moved)
    checks: dict[str, Check] = field(repr=False, default_factory=dict)


def count_lines(folder: Path) -> int:
    """The perflog and curves lines under `folder`, headers included."""
    total = 0
    for path in folder.rglob("*"):
        if path.is_file() and (".log" in path.name or path.suffix == CURVE_SUFFIX):
            with path.open("rb") as stream:
                total += sum(chunk.count(b"\n") for chunk in iter(lambda s=stream: s.read(1 << 20), b""))
    return total


def make_history(
    dest: Path,
    system: str = "hopper-vm",
    kind: str | None = None,
    times: int = 1,
    years: float | None = None,
    only: set[str] | None = None,
) -> History:
    """The committed history of `system` under `dest` with copies of the finished nights of `kind` (the
    busiest by default): k-1 copies of each (`times`), or one a day for 365*`years` days. `only`: the
    checks whose perflogs are copied (the tests', to read back in seconds)."""
    nights = committed_nights(system)
    kind = kind or busiest_kind(nights)
    ours = finished(nights, kind)
    if not ours:
        raise SystemExit(f"history: no finished night of {kind} is committed")
    checks, latest = read_checks(REPO / "perflogs" / system, finished(nights, kind, drills=True), only)
    source = tonight_source(finished(nights, kind, drills=True), checks)
    after = max([latest.date(), *(night.span()[1].date() for night in nights if night.windows())])
    pairs = daily_copies(ours, after, round(365 * years)) if years else times_copies(ours, after, times)
    copy_committed(system, dest, only)
    write_copies(dest, system, checks, pairs)
    last = max([after, *((night.span()[1] + dt.timedelta(days=d)).date() for night, d in pairs)])
    lines = count_lines(dest / "perflogs" / system)
    return History(dest, system, kind, len(ours) + len(pairs), lines, last, source, pairs, checks)


# --- the nights to come --------------------------------------------------------------------------


def stage_night(history: History, number: int) -> Path:
    """The benchmark's night `number` (1: tonight, 2: the next night): the source night moved to the
    `number`th day after the history, kept aside under bench/pending/<number>/ until the benchmark's
    ReFrame logs it (meta.json: its windows and plan; per window its lines, NAME.log and NAME.curves
    without headers; the run reports and node facts ReFrame and health wrote). Its folder."""
    source = history.source
    days = (history.last - source.span()[0].date()).days + number
    pending = history.root / "bench" / "pending" / str(number)
    if pending.exists():
        shutil.rmtree(pending)
    pending.mkdir(parents=True)
    moved = shifted_run(source.run, days)
    windows = window_texts(moved)
    for key in windows:
        for check in history.checks.values():
            for part, lines in (("", check.records), (CURVE_SUFFIX, check.curves)):
                found = lines.get((source.stamp, key), ())
                if found:
                    target = pending / key / (check.name if not part else str(Path(check.name).with_suffix(part)))
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text("".join(f"{shift_days(when, days)}|{rest}\n" for when, rest in found))
    made = []
    for name, window in zip(REPORTS, ("health", *WINDOWS)):
        if (source.folder / name).is_file():
            shutil.copy2(source.folder / name, pending / name)
        elif window == "health" or window in windows:
            (pending / name).write_text(json.dumps(made_report(history.checks, source.stamp, window, days)) + "\n")
            made.append(name)
    for path in source.folder.glob("node-*.json"):
        shutil.copy2(path, pending / path.name)
    meta = {"source": str(source.folder), "stamp": moved["stamp"], "windows": windows, "plan": source.run.get("plan")}
    meta["reports_made"] = made  # not kept with the night (the nights' folders keep run.json, not ReFrame's reports)
    (pending / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return pending


#: The check whose cases are health's (its own run report), not the night's checks'.
HEALTH = "node_health"


def made_report(checks: dict[str, Check], stamp: str, window: str, days: int) -> dict:
    """ReFrame's run report of the night `stamp`'s `window` (health: its health checks'), made from its
    perflog lines for a night whose folder did not keep it (git keeps a night's run.json, not ReFrame's
    reports): each case the lines name, passed, with its environment, case, node, completion time (moved
    by `days`), values, and a hash of its name, which a rerun selects it by as ReFrame's hash."""
    cases: dict[str, dict] = {}
    for check in checks.values():
        if (check_name(check.name) == HEALTH) != (window == "health"):
            continue
        for when, rest in check.records.get((stamp, "tonight" if window == "health" else window), ()):
            record = dict(zip(check.header, [when, *rest.split("|")]))
            name = record.get("display_name", "")
            case = cases.setdefault(name, _made_case(record, shift_days(when, days)))
            value = record.get("perf_var")
            if value not in (None, "", NULL):
                key = f"{record.get('system')}:{record.get('partition')}:{value}"
                numbers = [
                    _number(record.get(k)) for k in ("perf_value", "perf_ref", "perf_lower_thres", "perf_upper_thres")
                ]
                case["perfvalues"][key] = [*numbers, record.get("perf_unit")]
    if window == "health" and not cases:
        cases[HEALTH] = {"display_name": HEALTH, "result": "pass", "job_nodelist": []}
    report = {
        "session_info": {"version": "4.10.4", "num_cases": len(cases)},
        "runs": [{"testcases": [*cases.values()]}],
    }
    return report


def _made_case(record: dict, when: str) -> dict:
    name = record.get("display_name", "")
    node = record.get("job_nodelist") or ""
    return {
        "display_name": name,
        "result": "pass",
        "hashcode": hashlib.sha256(f"{name}|{record.get('environ')}".encode()).hexdigest()[:8],
        "environ": record.get("environ", ""),
        "case": "" if record.get("case") in (None, NULL) else record["case"],
        "job_nodelist": [node] if node and node != NULL else [],
        "job_completion_time": when,
        "perfvalues": {},
    }


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "", NULL) else None
    except ValueError:
        return None


# --- a partition's night -------------------------------------------------------------------------

#: Where a partition's night's records go (runner/partition.py): under Slurm, ReFrame's --distribute logs
#: every node's records of a check to the check's one perflog (perflogs/<system>/<partition>/NAME.log);
#: under LSF each node's task logs its own (perflogs/<system>/nodes/<host>/NAME.log). The runner reads
#: both alike (load([PERFLOGS / system]): every perflog under the system's folder), so the layout changes
#: only how many files there are: Slurm's, the default, is what most centres' nights write, and puts the
#: nodes' records in the files the committed one-node history is in.
LAYOUTS = ("slurm", "lsf")


def cases_of(checks: dict[str, Check], stamp: str) -> frozenset[str]:
    """The cases (display names) a night's checks window logged."""
    found = set()
    for check in checks.values():
        at = check.index("display_name")
        found.update(rest.split("|")[at - 1] for _, rest in check.records.get((stamp, "tonight"), ()))
    return frozenset(found)


def node_sources(history: History, nights: list[Night]) -> list[Night]:
    """The nights of the kind that measured every case the history's source night did: a node of the
    partition measures what its siblings measure, as the nodes of one night do."""
    wanted = cases_of(history.checks, history.source.stamp)
    found = [night for night in nights if cases_of(history.checks, night.stamp) >= wanted]
    if not found:
        raise SystemExit(f"history: no committed night of {history.kind} measured every case of {history.source.stamp}")
    return found


def node_names(count: int) -> list[str]:
    """node0001, node0002...: made-up hosts, as many as asked."""
    width = max(4, len(str(count)))
    return [f"node{i:0{width}d}" for i in range(1, count + 1)]


def _job(jobid: str, node: int) -> str:
    """A node's job id: each node's job is its own (Slurm's --distribute submits one a node), so that its
    curves are matched to its own perflog lines."""
    return jobid if jobid in ("", NULL, "None") else f"{jobid}{node:06d}"


@dataclass
class PartitionNight:
    """A partition's night written by write_partition_night: its records in the perflogs, its node facts
    and run reports staged until the benchmark's scheduler hands them over."""

    stamp: str
    start: str
    end: str
    nodes: list[str]
    lines: int
    pending: Path


def write_partition_night(history: History, nodes: int, number: int, layout: str = "slurm") -> PartitionNight:
    """The partition's night `number` of `nodes` made-up nodes on the `number`th day after the history:
    each node the tonight-window lines of one committed night of the kind (node_sources, in turn, moved on
    by one each night), its node and job id its own and its times moved into the night's window (written
    to the perflogs of `layout`, streamed); its node facts and ReFrame's run reports (every case the node
    logged, passed) under bench/pending/partition-<number>/ as the night's folder will hold them."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout {layout!r}: one of {', '.join(LAYOUTS)}")
    sources = node_sources(history, finished(committed_nights(history.system), history.kind))
    start = dt.datetime.combine(history.last + dt.timedelta(days=number), dt.time(2, 0, 0))
    names = node_names(nodes)
    chosen = [sources[(i + number - 1) % len(sources)] for i in range(nodes)]
    deltas = [start - night.windows()["tonight"][0] for night in chosen]
    end = max(night.windows()["tonight"][1] + delta for night, delta in zip(chosen, deltas))
    perflogs = history.root / "perflogs" / history.system
    lines = 0
    for check in history.checks.values():
        lines += _write_partition_check(perflogs, check, names, chosen, deltas, layout)
    stamp = start.isoformat(timespec="seconds")
    pending = history.root / "bench" / "pending" / f"partition-{number}"
    if pending.exists():
        shutil.rmtree(pending)
    pending.mkdir(parents=True)
    _stage_partition_reports(pending, history.checks, names, chosen, layout)
    meta = {"stamp": stamp, "start": stamp, "end": end.isoformat(timespec="seconds"), "nodes": names, "layout": layout}
    (pending / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return PartitionNight(stamp, stamp, meta["end"], names, lines, pending)


def _write_partition_check(
    perflogs: Path, check: Check, names: list[str], chosen: list[Night], deltas: list, layout: str
) -> int:
    """One check's lines of every node (its perflog and curves: one file each under Slurm, one per node
    under LSF); the lines written."""
    node_at, job_at = check.index("job_nodelist"), check.index("jobid")
    if node_at is None or job_at is None:
        return 0
    written = 0
    shared = layout == "slurm"
    log_of = (
        (lambda host: perflogs / check.name)
        if shared
        else (lambda host: perflogs / "nodes" / host / Path(check.name).name)
    )
    streams = None
    for number, (host, night, delta) in enumerate(zip(names, chosen, deltas), start=1):
        if streams is None or not shared:
            if streams is not None:
                _close(streams)
            streams = (
                _appender(log_of(host), "|".join(check.header)),
                _appender(log_of(host).with_suffix(CURVE_SUFFIX), "|".join(CURVE_COLUMNS)),
            )
        records, curves = streams
        for when, rest in check.records.get((night.stamp, "tonight"), ()):
            fields = rest.split("|")
            fields[node_at - 1], fields[job_at - 1] = host, _job(fields[job_at - 1], number)
            records.write(f"{shift_by(when, delta)}|{'|'.join(fields)}\n")
            written += 1
        for when, rest in check.curves.get((night.stamp, "tonight"), ()):
            display, jobid, record = rest.split("|", 2)
            curves.write(f"{shift_by(when, delta)}|{display}|{_job(jobid, number)}|{record}\n")
            written += 1
    if streams is not None:
        _close(streams)
    return written


def _close(streams) -> None:
    for stream in streams:
        stream.close()
        path = Path(stream.name)
        if path.suffix == CURVE_SUFFIX and path.stat().st_size == len("|".join(CURVE_COLUMNS)) + 1:
            path.unlink()  # a check that keeps no curves has no curves file


def _stage_partition_reports(
    pending: Path, checks: dict[str, Check], names: list[str], chosen: list[Night], layout: str
) -> None:
    """Each node's facts (its night's, its host named) and ReFrame's run reports as the night's folder
    holds them: one report of every node under Slurm, one per node under LSF (under <host>/)."""
    health, checked = [], []
    names_of = {night.stamp: sorted(cases_of(checks, night.stamp)) for night in chosen}  # each night read once
    facts_of = {night.stamp: (node_facts_of(night.folder) or [{}])[0] for night in chosen}
    for host, night in zip(names, chosen):
        folder = pending if layout == "slurm" else pending / host
        folder.mkdir(parents=True, exist_ok=True)
        record = {**facts_of[night.stamp], "host": host}
        (folder / f"node-{host}.json").write_text(json.dumps(record, indent=1) + "\n")
        node_health = [{"display_name": "node_health", "result": "pass", "job_nodelist": [host]}]
        cases = [{"display_name": name, "result": "pass", "job_nodelist": [host]} for name in names_of[night.stamp]]
        if layout == "lsf":
            _write_report(folder / "health-report.json", node_health)
            _write_report(folder / "run-report.json", cases)
        else:
            health += node_health
            checked += cases
    if layout == "slurm":
        _write_report(pending / "health-report.json", health)
        _write_report(pending / "run-report.json", checked)


def _write_report(path: Path, cases: list[dict]) -> None:
    """A ReFrame run report of `cases` (what the partition's night reads of one: each case's outcome and node)."""
    report = {"session_info": {"version": "4.10.4", "num_cases": len(cases)}, "runs": [{"testcases": cases}]}
    path.write_text(json.dumps(report) + "\n")
