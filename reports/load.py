"""Perflogs (and ReFrame's JSON run reports) into one tidy table.

A perflog of this suite is a '|'-separated table with a header line and one
line per performance variable (rfmconfig/settings.py): the fields are every
loggable attribute of the check (``%(check_#ALL)s``), so each check's
perflog has its own columns, and a file is read by its header.

Beside a perflog, ``NAME.curves`` keeps the curves of each run whose perflog
lines carry only its headline figures (checks/suite/curves.py): they are
read back, through the check's ``curve_figures``, as the figures of every
size, segment or point, with the node facts and case of the run's perflog
lines.

Lines that do not fit their header (a wrong number of fields, a value that is
not a number, a last line cut short) are skipped, counted per file and
reported with file and line number; they never stop the load or hide the
rest of the file.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import pickle
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from experiments import caches
from experiments.curves import CURVE_SUFFIX
from experiments.keys import NODE_FACTS, SOFTWARE_FACTS, direction, split_sample
from experiments.roots import LOAD_CACHE, REPO
from reports.curves import read_curves
from reports.issue import Issue
from reports.names import split_display_name

#: Perflog header fields -> columns of the tidy table.
RENAME = {
    "job_completion_time": "time",
    "reframe version": "reframe_version",
    "version": "reframe_version",
    "job_nodelist": "node",
    "perf_var": "perf_var",
    "perf_value": "value",
    "perf_unit": "unit",
    "perf_ref": "ref",
    "perf_lower_thres": "lower_thres",
    "perf_upper_thres": "upper_thres",
}

#: Columns every table has, in this order; parameters and check variables follow.
CORE = [
    "time",
    "system",
    "partition",
    "environ",
    "node",
    "gpu_model",
    *SOFTWARE_FACTS,
    "host_link",
    "test",
    "params",
    "case",
    "display_name",
    "perf_var",
    "figure",
    "sample",
    "value",
    "unit",
    "ref",
    "lower_thres",
    "upper_thres",
    "result",
    "reframe_version",
    "jobid",
    "source",
    "line",
]

#: Fields of the perflog that the tidy table does not keep as such.
_DROPPED = {"name"}

#: Perflog fields that are the tidy table's own columns; a check's variable or
#: parameter of the same name as a column ('time', 'node'...) becomes param_NAME.
_NATIVE = (
    set(RENAME)
    | _DROPPED
    | {
        "system",
        "partition",
        "environ",
        *NODE_FACTS,
        *SOFTWARE_FACTS,
        "display_name",
        "result",
        "jobid",
        "case",
    }
)


def _column(field: str) -> str:
    column = RENAME.get(field, field)
    return f"param_{field}" if column in CORE and field not in _NATIVE else column


#: Placeholder of fields a record did not have (ReFrame writes None as 'null').
_MISSING = {"", "null", "None", "<undefined>"}
#: Each of them to None, anything else to itself: _AS_NONE.get(v, v), at C speed over a record's fields.
_AS_NONE = dict.fromkeys(_MISSING)


@dataclass
class Loaded:
    """The tidy table and what the loader had to leave out."""

    frame: pd.DataFrame
    issues: list[Issue] = field(default_factory=list)
    files: dict[str, int] = field(default_factory=dict)  # rows kept per file

    def issue_counts(self) -> pd.DataFrame:
        """Skipped lines per file and kind."""
        rows = [(i.path, i.kind) for i in self.issues]
        table = pd.DataFrame(rows, columns=["file", "kind"])
        return table.value_counts().rename("lines").reset_index()


def _is_header(fields: list[str]) -> bool:
    return "perf_var" in fields and "perf_value" in fields


#: The files a folder's records are read from: perflogs, the perflogs ReFrame
#: set aside when a new column changed their header (NAME.log.h0, .h1...:
#: the records before it, read by their own header), and run reports.
PERFLOG_NAME = re.compile(r"\.log(?:\.h\d+)?$|\.json$")
#: ... of which ReFrame's perflogs (the rest are run reports).
PERFLOG_ONLY = r"\.log(?:\.h\d+)?$"


def from_perflogs(frame: pd.DataFrame) -> pd.Series:
    """The rows a perflog line gave (not a run report's, not a curves file's)."""
    return frame["source"].str.contains(PERFLOG_ONLY, regex=True)


def _perflog_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file() and PERFLOG_NAME.search(p.name))


def _number(text: str) -> float | None:
    if text in _MISSING:
        return None
    return float(text)


def _read_perflog(path: Path, issues: list[Issue]) -> list[dict]:
    raw = path.read_bytes().decode("utf-8", errors="replace")
    lines = raw.split("\n")
    ends_with_newline = raw.endswith("\n")
    if ends_with_newline:
        lines = lines[:-1]
    header: list[str] | None = None
    records = []
    for number, line in enumerate(lines, start=1):
        last_cut = number == len(lines) and not ends_with_newline
        kind = "truncated" if last_cut else "malformed"
        if not line.strip():
            continue
        fields = line.split("|")
        if _is_header(fields):
            header = fields
            continue
        if header is None:
            issues.append(Issue(str(path), number, "unreadable", "no header line before this record; file skipped"))
            return records
        if len(fields) != len(header):
            issues.append(Issue(str(path), number, kind, f"{len(fields)} fields where the header has {len(header)}"))
            continue
        record = dict(zip(header, fields))
        try:
            record["perf_value"] = _number(record["perf_value"])
            for key in ("perf_ref", "perf_lower_thres", "perf_upper_thres"):
                if key in record:
                    record[key] = _number(record[key])
        except ValueError as err:
            issues.append(Issue(str(path), number, kind, f"not a number: {err}"))
            continue
        if last_cut:
            issues.append(
                Issue(str(path), number, "truncated", "last line has no newline; its fields are complete, kept")
            )
        record["__line"] = number
        records.append(record)
    if header is None and lines:
        issues.append(Issue(str(path), 0, "unreadable", "no perflog header line (perf_var|perf_value...)"))
    return records


def _read_run_report(path: Path, issues: list[Issue]) -> list[dict]:
    """Performance values of a ReFrame JSON run report (--report-file)."""
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        issues.append(Issue(str(path), 0, "unreadable", f"not a JSON run report: {err}"))
        return []
    if not isinstance(report, dict) or "runs" not in report:
        return []  # some other JSON file: not ours to judge
    version = report.get("session_info", {}).get("version", "")
    records = []
    for run in report["runs"]:
        for case in run.get("testcases", []):
            base = {
                "job_completion_time": case.get("job_completion_time") or "",
                "reframe version": f"reframe {version}".strip(),
                "result": case.get("result", ""),
            }
            for key, value in case.items():
                if isinstance(value, (str, int, float)) and key not in base:
                    base[key] = str(value)
            nodes = case.get("job_nodelist") or []
            base["job_nodelist"] = ",".join(nodes) if isinstance(nodes, list) else str(nodes)
            for key, values in (case.get("perfvalues") or {}).items():
                value, ref, lower, upper, unit, *_ = values
                records.append(
                    {
                        **base,
                        "perf_var": key.split(":")[-1],
                        "perf_value": value,
                        "perf_ref": ref,
                        "perf_lower_thres": lower,
                        "perf_upper_thres": upper,
                        "perf_unit": unit,
                        "__line": 0,
                    }
                )
    return records


#: Keys of a JSON run report's test case that are ReFrame's, not the check's.
_REPORT_KEEP = {
    "job_completion_time",
    "reframe version",
    "result",
    "name",
    "display_name",
    "system",
    "partition",
    "environ",
    "job_nodelist",
    "jobid",
    "gpu_model",
    *SOFTWARE_FACTS,
    "host_link",
    "case",
    "perf_var",
    "perf_value",
    "perf_ref",
    "perf_lower_thres",
    "perf_upper_thres",
    "perf_unit",
    "__line",
}


@dataclass(frozen=True)
class _Case:
    """What a record's display name says: its test, its parameters (as text
    and as the columns they fill) and the node ReFrame's --distribute ran it on."""

    test: str
    params: str
    columns: tuple[tuple[str, str], ...]
    nid: str | None

    @classmethod
    def of(cls, display: str) -> _Case:
        test, params = split_display_name(display)
        # ReFrame's hidden parameters say where a case ran (--distribute's '.nid', its node, where the
        # scheduler reported none) and how often, not what it measured.
        hidden = {k: params.pop(k) for k in [k for k in params if k.startswith(".")]}
        text = " ".join(f"{k}={v}" for k, v in params.items())
        columns = tuple((key if key not in CORE else f"param_{key}", value) for key, value in params.items())
        return cls(test, text, columns, hidden.get(".nid"))


def _tidy(records: list[dict], source: str, from_report: bool) -> pd.DataFrame:
    rows = []
    columns: dict[tuple, list[str]] = {}  # a perflog's records share their fields: each set named once
    cases: dict[str, _Case] = {}  # and a case's records its display name: each read once
    for record in records:
        if from_report:
            record = {k: v for k, v in record.items() if k in _REPORT_KEEP}
        line = record.pop("__line")
        fields = tuple(record)
        named = columns.get(fields) or columns.setdefault(fields, [_column(k) for k in fields])
        row = dict(zip(named, map(_AS_NONE.get, record.values(), record.values())))
        row["__missing"] = row.get("value") is None  # no value (a build's line), where 'nan' is a program's
        row["line"] = line
        row["source"] = source
        display = row.get("display_name") or row.get("name") or ""
        row["display_name"] = display
        case = cases.get(display) or cases.setdefault(display, _Case.of(display))
        if not row.get("node") and case.nid:
            row["node"] = case.nid
        row["test"] = case.test
        row["params"] = case.params
        for key in _DROPPED:
            row.pop(key, None)
        for column, value in case.columns:
            row.setdefault(column, value)
        if isinstance(row.get("reframe_version"), str):
            row["reframe_version"] = row["reframe_version"].removeprefix("reframe ").strip()
        rows.append(row)
    return pd.DataFrame(rows)


#: The cached tables kept at most (each of one set of files read): the least recently used go first.
CACHE_KEPT = 6

#: Seconds of parsing below which a table is not kept: reading a few records
#: again is as quick as reading their pickle back, and keeping them would push
#: the committed perflogs' table (16 s to parse) out of the cache.
CACHE_WORTH_S = 1.0


def _cache_key(paths: list[Path]) -> str:
    """What a table read from `paths` depends on: every file it reads (as
    spelled, which the table names, and where it is; size, modification
    time), whether each path is a folder, and the loader's own code
    (reports/, experiments/). Not the paths themselves: a folder and the
    folder inside it that holds all its perflogs give the same table."""
    digest = hashlib.sha256(f"{pd.__version__}|{Path.cwd()}".encode())
    for top in paths:
        if not top.exists():
            digest.update(f"missing {top}\n".encode())
            continue
        digest.update(b"folder\n" if top.is_dir() else b"file\n")
        for path in [*_perflog_files(top), *_curve_files(top)]:
            stat = path.stat()
            digest.update(f"{path}|{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}\n".encode())
    for source in sorted([*(REPO / "reports").rglob("*.py"), *(REPO / "experiments").rglob("*.py")]):
        digest.update(source.read_bytes())
    return digest.hexdigest()[:32]


#: The last table read back or parsed in this process, by its key: the tests
#: and a nightly's phases load the same files again, and reading the pickle
#: back takes a second where a copy of the table takes a tenth.
_LAST: dict[str, Loaded] = {}


def _copy(loaded: Loaded) -> Loaded:
    """A copy its reader may change without changing the one kept."""
    return Loaded(loaded.frame.copy(), list(loaded.issues), dict(loaded.files))


def _remember(key: str, loaded: Loaded) -> None:
    kept = _copy(loaded)
    _LAST.clear()
    _LAST[key] = kept


def _cached(key: str) -> Loaded | None:
    last = _LAST.get(key)  # one lookup: another thread may replace the kept table meanwhile
    if last is not None:
        return _copy(last)
    path = LOAD_CACHE / f"{key}.pickle.gz"
    try:
        with gzip.open(path, "rb") as stream:
            loaded = pickle.load(stream)
    except Exception:  # not kept, unreadable, half-written or of another numpy: read the files again
        return None
    caches.touch(path)
    _remember(key, loaded)
    return loaded


def _keep(key: str, loaded: Loaded) -> None:
    """The table kept for the next load of the same files, compressed (the
    committed perflogs' 150 MB of pickle are 3 MB)."""

    def write(partial: Path) -> None:
        with gzip.open(partial, "wb", compresslevel=1) as stream:
            pickle.dump(loaded, stream, protocol=pickle.HIGHEST_PROTOCOL)

    try:
        caches.write_whole(LOAD_CACHE / f"{key}.pickle.gz", write)
        caches.keep_recent(LOAD_CACHE, "*.pickle.gz", CACHE_KEPT)
    except OSError:  # a read-only checkout loads as before, only slower next time
        pass


def load(paths, warn=sys.stderr) -> Loaded:
    """Every perflog (and JSON run report) under `paths`, as one table.

    One row per performance value. Records without one (a build's line) are
    left out. Each skipped line is reported on `warn` (None: silent) and kept
    in the result's ``issues``. What took a second or more to read is kept
    (build/cache/load/, by the files read, their sizes and times, and this
    code): reading the committed perflogs again takes 2 s on two cores, where
    parsing them takes 16.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    paths = [Path(p) for p in paths]
    key = _cache_key(paths)
    # Another process parsing the same files (a test worker of a fresh checkout, a report beside a nightly):
    # wait for it, then read what it kept.
    with caches.exclusive(LOAD_CACHE / f"{key}.lock"):
        loaded = _cached(key)
        if loaded is None:
            started = time.monotonic()
            loaded = _load(paths)
            if time.monotonic() - started >= CACHE_WORTH_S:
                _keep(key, loaded)
                _remember(key, loaded)
    if warn is not None:
        for issue in loaded.issues:
            print(f"warning: {issue}", file=warn)
    return loaded


def _load(paths: list[Path]) -> Loaded:
    """load()'s reading and tidying, uncached."""
    issues: list[Issue] = []
    frames, files = [], {}
    for top in map(Path, paths):
        if not top.exists():
            issues.append(Issue(str(top), 0, "unreadable", "no such file or directory"))
            continue
        logged: dict[Path, list[dict]] = {}
        for path in _perflog_files(top):
            is_report = path.suffix == ".json"
            records = _read_run_report(path, issues) if is_report else _read_perflog(path, issues)
            if not is_report:  # a check's records, set aside or not, beside its one curves file
                logged.setdefault(path.with_name(re.sub(PERFLOG_ONLY, "", path.name)), []).extend(records)
            _add_frame(frames, files, _tidy(records, str(path), is_report), path)
        for path in _curve_files(top):
            records = read_curves(path, logged.get(path.with_suffix(""), []), issues, whole=top.is_dir())
            _add_frame(frames, files, _tidy(records, str(path), False), path)
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=CORE)
    for column in CORE:
        if column not in table:
            table[column] = None
    extra = sorted(c for c in table.columns if c not in CORE)
    table = table[CORE + extra]
    table["time"] = pd.to_datetime(table["time"], format="ISO8601", utc=True, errors="coerce")
    for column in ("value", "ref", "lower_thres", "upper_thres"):
        table[column] = pd.to_numeric(table[column], errors="coerce")
    for column in (*SOFTWARE_FACTS, "node", "gpu_model", "host_link"):
        table[column] = table[column].fillna("unknown").astype(str)
    table["line"] = table["line"].astype(int)
    _add_keys(table)
    issues.extend(_not_numbers(table))
    return Loaded(table, issues, files)


def _curve_files(top: Path) -> list[Path]:
    """The curves files beside the perflogs of `top`: every one under a
    folder, the perflog's own beside a file (NAME.curves beside NAME.log)."""
    if top.is_dir():
        return sorted(top.rglob(f"*{CURVE_SUFFIX}"))
    beside = top.with_suffix(CURVE_SUFFIX)
    return [beside] if top.suffix != ".json" and beside.is_file() else []


def _add_frame(frames: list, files: dict, frame: pd.DataFrame, path: Path) -> None:
    """Keep a file's rows that have a performance value, and count them: a
    null value (a dry run's) is none; 'nan' (a program's) is one, and broken."""
    if not frame.empty:
        frame = frame[frame["perf_var"].notna() & ~frame["__missing"].astype(bool)].drop(columns="__missing")
    files[str(path)] = len(frame)
    if not frame.empty:
        frames.append(frame)


def _not_numbers(table: pd.DataFrame) -> list[Issue]:
    """Each value a program gave as not a number, and each rate or time that
    is infinite, zero or negative, named: kept in the table, where the
    verdict judges its figure broken, never dropped so that the median of
    the rest passes."""
    units = table["unit"].map(str)  # None and NaN as 'None' and 'nan', as every unit: str, never missing
    measured = units.map({unit: direction(unit) is not None for unit in units.unique()})  # a few units, many rows
    values = table["value"].astype(float)
    impossible = measured & values.notna() & (~np.isfinite(values) | (values <= 0))
    issues = [
        Issue(str(r.source), int(r.line), "not-a-number", f"{r.test} {r.perf_var} is not a number: broken")
        for r in table[table["value"].isna()].itertuples()
    ]
    return issues + [
        Issue(
            str(r.source),
            int(r.line),
            "impossible",
            f"{r.test} {r.perf_var} is {r.value} {r.unit}, not a positive finite number: broken",
        )
        for r in table[impossible].itertuples()
    ]


def _add_keys(table: pd.DataFrame) -> None:
    """The figure and sample each value is (experiments/keys.py), and GPU
    counts as whole numbers ('' where a record does not say)."""
    # Each name and count split once: a few thousand names and counts, hundreds of thousands of rows.
    names = table["perf_var"].map(str)
    split = {name: split_sample(name) for name in names.unique()}
    table["figure"] = names.map({name: figure for name, (figure, _) in split.items()})
    table["sample"] = pd.array(names.map({name: k for name, (_, k) in split.items()}), dtype="Int64")
    table["case"] = table["case"].fillna("")
    counts = (
        pd.to_numeric(table["gpu_count"], errors="coerce") if "gpu_count" in table else pd.Series(index=table.index)
    )
    table["gpu_count"] = counts.map({c: "" if pd.isna(c) else str(int(c)) for c in counts.unique()})
