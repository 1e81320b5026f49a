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

import contextlib
import itertools
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.curves import CURVE_SUFFIX
from experiments.keys import NODE_FACTS, SOFTWARE_FACTS, direction, split_sample
from experiments.roots import PERFLOGS
from reports import store
from reports.curves import curve_records, curve_runs, derived_figures
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
    """Every record of a perflog."""
    return _read_perflog_text(path.read_bytes().decode("utf-8", errors="replace"), path, issues)[0]


def _read_perflog_text(
    raw: str, path: Path, issues: list[Issue], start: int = 1, header: list[str] | None = None
) -> tuple[list[dict], list[str] | None]:
    """The records of a perflog's lines from line `start` on (`raw`: their text), read by `header` (the one in
    force before them) until a header line replaces it; and the header in force after them."""
    lines = raw.split("\n")
    ends_with_newline = raw.endswith("\n")
    if ends_with_newline:
        lines = lines[:-1]
    records = []
    last = start + len(lines) - 1
    for number, line in enumerate(lines, start=start):
        last_cut = number == last and not ends_with_newline
        kind = "truncated" if last_cut else "malformed"
        if not line.strip():
            continue
        fields = line.split("|")
        if _is_header(fields):
            header = fields
            continue
        if header is None:
            issues.append(Issue(str(path), number, "unreadable", "no header line before this record; file skipped"))
            return records, None
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
    if header is None and lines and start == 1:
        issues.append(Issue(str(path), 0, "unreadable", "no perflog header line (perf_var|perf_value...)"))
    return records, header


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


@dataclass
class _Segment:
    """A perflog's lines read by one header: their fields and line numbers."""

    header: list[str]
    lines: list[str] = field(default_factory=list)
    numbers: list[int] = field(default_factory=list)
    cut: int | None = None  # the number of a last line without its newline (kept: its fields are whole)


def _segments(
    raw: str, path: Path, issues: list[Issue], start: int, header: list[str] | None
) -> tuple[list[_Segment], list[str] | None]:
    """A perflog's lines from line `start` on, by the header each is read by, with the lines that fit none
    (a wrong number of fields; any before a header, which ends the file's reading) named in `issues`: what
    _read_perflog_text sees, without a dict a line."""
    lines = raw.split("\n")
    ends_with_newline = raw.endswith("\n")
    if ends_with_newline:
        lines = lines[:-1]
    last = start + len(lines) - 1
    segments: list[_Segment] = [] if header is None else [_Segment(header)]
    for number, line in enumerate(lines, start=start):
        if not line.strip():
            continue
        last_cut = number == last and not ends_with_newline
        if "perf_var" in line and "perf_value" in line and _is_header(fields := line.split("|")):
            header = fields
            segments.append(_Segment(header))
            continue
        if header is None:
            issues.append(Issue(str(path), number, "unreadable", "no header line before this record; file skipped"))
            return segments, None
        count = line.count("|") + 1
        if count != len(header):
            kind = "truncated" if last_cut else "malformed"
            issues.append(Issue(str(path), number, kind, f"{count} fields where the header has {len(header)}"))
            continue
        segment = segments[-1]
        segment.lines.append(line)
        segment.numbers.append(number)
        if last_cut:
            segment.cut = number
    if header is None and lines and start == 1:
        issues.append(Issue(str(path), 0, "unreadable", "no perflog header line (perf_var|perf_value...)"))
    return segments, header


#: A perflog's fields that are numbers (_number): a record where one is not is skipped, named.
_NUMBERS = ("perf_value", "perf_ref", "perf_lower_thres", "perf_upper_thres")


def _fields_frame(segment: _Segment) -> pd.DataFrame:
    """A segment's lines as a table of text, a column per header field (the last of a field named twice,
    as a dict of the line would keep): no quoting, nothing read as missing. By Arrow's CSV reader (six
    times pandas' C parser), or pandas' where Arrow is not installed or a line holds a carriage return
    (Arrow would end the line there)."""
    text = "\n".join(segment.lines)
    names = [str(i) for i in range(len(segment.header))]
    try:
        if "\r" in text:
            raise ImportError("a carriage return in a field")
        import pyarrow as pa
        from pyarrow import csv as arrow_csv

        table = arrow_csv.read_csv(
            pa.py_buffer(text.encode()),
            read_options=arrow_csv.ReadOptions(column_names=names),
            parse_options=arrow_csv.ParseOptions(delimiter="|", quote_char=False, newlines_in_values=False),
            convert_options=arrow_csv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.string()),
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
                null_values=[],
            ),
        ).to_pandas()
    except ImportError:
        import csv
        import io

        table = pd.read_csv(
            io.StringIO(text),
            sep="|",
            header=None,
            names=names,
            dtype=str,
            keep_default_na=False,
            na_filter=False,
            quoting=csv.QUOTE_NONE,
            engine="c",
            lineterminator="\n",
            skip_blank_lines=False,
        )
    last = {name: i for i, name in enumerate(segment.header)}
    table = table[[names[i] for i in last.values()]]
    table.columns = list(last)
    return table.assign(__line=segment.numbers)


def _numbers(table: pd.DataFrame, path: Path, issues: list[Issue], cut: int | None) -> pd.DataFrame:
    """The number fields as floats (a placeholder as None's NaN), the records where one is not a number
    dropped and named, as _read_perflog_text does."""
    bad = pd.Series(False, index=table.index)
    found: dict[int, str] = {}
    if "perf_value" in table:  # no value (a build's line), where 'nan' is a program's
        table["__missing"] = table["perf_value"].isin(_MISSING)
    for key in (k for k in _NUMBERS if k in table.columns):
        text = table[key]
        values = pd.to_numeric(text.where(~text.isin(_MISSING)), errors="coerce")
        doubted = values.isna() & ~text.isin(_MISSING)
        for index in doubted[doubted].index:  # 'nan', 'inf', '1_000': what float() reads, pandas may not
            try:
                values[index] = float(text[index])
            except ValueError as err:
                bad[index] = True
                found.setdefault(index, f"not a number: {err}")
        table[key] = values.astype(float).astype(object).where(~text.isin(_MISSING), None)
    for index, message in found.items():
        line = int(table.at[index, "__line"])
        issues.append(Issue(str(path), line, "truncated" if line == cut else "malformed", message))
    return table[~bad]


def _perflog_table(
    raw: str, path: Path, issues: list[Issue], start: int = 1, header: list[str] | None = None
) -> tuple[pd.DataFrame, dict, list[str] | None]:
    """_read_perflog_text and _tidy at once, a column at a time (what a partition's night of millions of
    lines needs): the tidy rows of a perflog's lines from `start` on, its runs' records (what curves are
    matched to) and the header in force after them; the same issues, in line order."""
    found: list[Issue] = []
    segments, header = _segments(raw, path, found, start, header)
    frames, runs = [], {}
    for segment in segments:
        if not segment.lines:
            continue
        table = _numbers(_fields_frame(segment), path, found, segment.cut)
        if segment.cut is not None and segment.cut in set(table["__line"]):
            found.append(
                Issue(str(path), segment.cut, "truncated", "last line has no newline; its fields are complete, kept")
            )
        runs.update(_runs_of_table(table))
        frames.append(_tidy_table(table, str(path)))
    issues.extend(sorted(found, key=lambda i: i.line))
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), runs, header


def _runs_of_table(table: pd.DataFrame) -> dict[tuple[str, str, str], tuple[dict, dict]]:
    """A segment's records by run (completion time, display name, job id, as their fields spell them): each
    run's first record and its figures, what curves are matched to (one take of the first records: a
    partition's night has a hundred thousand runs)."""
    keys = [table.get(k, pd.Series(None, index=table.index)) for k in ("job_completion_time", "display_name")]
    jobid = table["jobid"].astype(str) if "jobid" in table else pd.Series("None", index=table.index)
    groups = table.groupby([*keys, jobid], sort=False, dropna=False).indices
    columns = [c for c in table.columns if c not in ("__line", "__missing")]
    firsts = table.iloc[[at[0] for at in groups.values()]][columns].to_dict("records")
    names, values = table["perf_var"].to_numpy(object), table["perf_value"].to_numpy(object)
    return {
        tuple(key): (first, dict(zip(names[at].tolist(), values[at].tolist())))
        for (key, at), first in zip(groups.items(), firsts)
    }


def _tidy_table(table: pd.DataFrame, source: str) -> pd.DataFrame:
    """_tidy of a perflog's records as a table: the same rows, a column at a time."""
    line = table.pop("__line")
    missing = table.pop("__missing").to_numpy(bool) if "__missing" in table else None
    numbers = [k for k in _NUMBERS if k in table.columns]
    text = [c for c in table.columns if c not in numbers]
    table = table.copy()
    table[text] = table[text].where(~table[text].isin(_MISSING), None)
    named = [_column(k) for k in table.columns]
    last = {name: i for i, name in enumerate(named)}  # two fields of one column: the last, as a dict keeps
    table = table.iloc[:, list(last.values())]
    table.columns = list(last)
    frame = table
    frame["__missing"] = missing if missing is not None else True
    frame["line"] = line.to_numpy()
    frame["source"] = source
    display = frame["display_name"] if "display_name" in frame else pd.Series(None, index=frame.index)
    if "name" in frame:
        display = display.where(display.notna() & (display != ""), frame["name"])
    display = display.fillna("").astype(object)
    frame["display_name"] = display
    cases = {d: _Case.of(d) for d in display.unique()}
    nid = display.map({d: c.nid for d, c in cases.items()})
    node = frame["node"] if "node" in frame else pd.Series(None, index=frame.index)
    frame["node"] = node.where(node.notna() & (node != "") | nid.isna(), nid)
    frame["test"] = display.map({d: c.test for d, c in cases.items()})
    frame["params"] = display.map({d: c.params for d, c in cases.items()})
    frame = frame.drop(columns=[k for k in _DROPPED if k in frame])
    given = set(frame.columns)
    for column in dict.fromkeys(k for c in cases.values() for k, _ in c.columns):
        if column not in given:  # a record's own field of that name wins (setdefault)
            frame[column] = display.map({d: dict(c.columns).get(column) for d, c in cases.items()})
    if "reframe_version" in frame:
        frame["reframe_version"] = frame["reframe_version"].str.removeprefix("reframe ").str.strip()
    return frame


#: The last table read in this process, by its folder, the store's state and the windows: the tests and a
#: nightly's phases load the same rows again, and a copy of a table takes a tenth of reading it back.
_LAST: dict[tuple, Loaded] = {}


def _copy(loaded: Loaded) -> Loaded:
    """A copy its reader may change without changing the one kept."""
    return Loaded(loaded.frame.copy(), list(loaded.issues), dict(loaded.files))


Window = tuple  # (from, to): ISO times, either None for an open end


def load(
    paths,
    warn=sys.stderr,
    windows: list[Window] | None = None,
    nodes: list[str] | None = None,
    columns: list[str] | None = None,
) -> Loaded:
    """Every perflog (and JSON run report) under `paths`, as one table; only
    the rows within any of `windows` (from, to: ISO times; a run's window)
    where given: what a night is judged from, never the years; of `nodes`
    alone where given (a partition's night, some of its nodes at a time); of
    `columns` alone where given and read through a store (what a night of
    thousands of nodes needs of each record), with `source` and `line`.

    One row per performance value. Records without one (a build's line) are
    left out. Each skipped line is reported on `warn` (None: silent) and kept
    in the result's ``issues``. A folder is read through its store
    (reports/store.py): each line parsed once, what was appended since read
    on the next load. A single file, or a folder whose store cannot be
    written (a read-only checkout, a full disk), is parsed whole, and says so.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    loaded = _joined([_read_top(top, windows, warn, nodes, columns) for top in map(Path, paths)])
    if warn is not None:
        for issue in loaded.issues:
            print(f"warning: {issue}", file=warn)
    return loaded


def _read_top(
    top: Path, windows: list[Window] | None, warn, nodes: list[str] | None = None, columns: list[str] | None = None
) -> Loaded:
    """One path's table: a file parsed; a folder through the stores of the systems it holds (or is in), or
    parsed where a store fails."""
    if not top.is_dir():
        return _windowed(_load([top]), windows, nodes)
    try:
        parts = [
            _from_system(system, within, spelled, windows, nodes, columns)
            for system, within, spelled in _systems_of(top)
        ]
    except store.failures() as err:  # a store that fails is derived: the perflogs are read whole instead
        if warn is not None:
            print(f"warning: the store of {top} could not be read or written ({err}): read whole", file=warn)
        return _windowed(_load([top]), windows, nodes)
    loose = [p for p in _perflog_files(top) if p.parent == top] if top.resolve() == PERFLOGS.resolve() else []
    if loose:  # files beside the systems' folders (a run report dropped there): parsed
        parts.append(_windowed(_load(loose), windows, nodes))
    return _joined(parts) if parts else Loaded(_finished([]))


def _systems_of(top: Path) -> list[tuple[Path, str, Path]]:
    """The folders whose stores hold `top`'s records, each with the part of it `top` is ('' for all of it) and
    how its files are named (as `top` is spelled): the data root's perflogs/ is its systems' folders, a
    folder inside a system's is that system's store narrowed to it, any other folder has a store of its own.
    A system's night is never read twice into two stores."""
    root, resolved = PERFLOGS.resolve(), top.resolve()
    if resolved == root:
        return [(child, "", top / child.name) for child in sorted(resolved.iterdir()) if child.is_dir()]
    if root in resolved.parents:
        system = root / resolved.relative_to(root).parts[0]
        within = resolved.relative_to(system).as_posix()
        return [(system, "" if within == "." else within, top)]
    return [(resolved, "", top)]


def _from_system(
    folder: Path,
    within: str,
    spelled: Path,
    windows: list[Window] | None,
    nodes: list[str] | None = None,
    columns: list[str] | None = None,
) -> Loaded:
    """The records of `folder` (those under its part `within`) from its store, synced first; a copy of the
    last table read in this process where nothing changed since."""
    with store.opened(folder) as con:
        changed = _sync(con, folder)
        key = (
            str(spelled),
            str(folder),
            within,
            changed,
            tuple(map(tuple, windows)) if windows is not None else None,
            tuple(nodes) if nodes is not None else None,
            tuple(columns) if columns is not None else None,
        )
        last = _LAST.get(key)
        if last is not None:
            return _copy(last)
        loaded = _from_store(con, folder, within, spelled, windows, nodes, columns)
    _LAST.clear()
    _LAST[key] = _copy(loaded)
    return loaded


def nodes_logged(top: Path, windows: list[Window]) -> list[str]:
    """The nodes whose records of `top` (a system's folder) fall in `windows`: a partition's night's."""
    found: set[str] = set()
    for folder, _, _ in _systems_of(top):
        with store.opened(folder) as con:
            _sync(con, folder)
            found |= set(store.nodes_in(con, _store_windows(windows)))
    return sorted(found)


def reindex(top: Path, check: bool = False) -> list[tuple[Path, int, list[str]]]:
    """The stores of the systems `top` holds (or is in) rebuilt from their perflogs: each (folder, rows,
    differences). With `check`, the store is first brought up to date as any load does, a fresh one is built
    beside it and the two compared (their differences named; none where the incremental store is sound),
    then the fresh one kept."""
    done = []
    for folder, _, _ in _systems_of(top):
        before = _whole(folder) if check else None
        store.remove(folder)
        after = _whole(folder)
        done.append((folder, len(after.frame), differences(before, after) if before is not None else []))
    return done


def _whole(folder: Path) -> Loaded:
    """A system's folder, every record, from its store (synced first)."""
    with store.opened(folder) as con:
        _sync(con, folder)
        return _from_store(con, folder, "", folder, None)


def differences(kept: Loaded, rebuilt: Loaded) -> list[str]:
    """What a store kept differs in from the same store rebuilt from its perflogs: rows, issues, files."""
    found = []
    a, b = kept.frame, rebuilt.frame
    if list(a.columns) != list(b.columns):
        found.append(f"columns differ: {sorted(set(a.columns) ^ set(b.columns))}")
    elif len(a) != len(b):
        found.append(f"{len(a)} rows kept, {len(b)} rebuilt")
    else:
        try:
            pd.testing.assert_frame_equal(a, b, check_dtype=False)
        except AssertionError as err:
            found.append(f"rows differ: {str(err).splitlines()[0]}")
    if [str(i) for i in kept.issues] != [str(i) for i in rebuilt.issues]:
        found.append(f"{len(kept.issues)} issues kept, {len(rebuilt.issues)} rebuilt, or in another order")
    if kept.files != rebuilt.files:
        found.append("rows per file differ")
    return found


def _windowed(loaded: Loaded, windows: list[Window] | None, nodes: list[str] | None = None) -> Loaded:
    """A table narrowed to `windows` and `nodes` as the store narrows it."""
    frame = loaded.frame
    if nodes is not None:
        frame = frame[frame["node"].isin(nodes)]
    if windows is None:
        return Loaded(frame.reset_index(drop=True), loaded.issues, loaded.files)
    keep = np.zeros(len(frame), dtype=bool)
    for start, end in windows:
        inside = np.ones(len(frame), dtype=bool)
        if start:
            inside &= (frame["time"] >= pd.Timestamp(start, tz="UTC")).to_numpy(bool)
        if end:
            inside &= (frame["time"] <= _window_end(end)).to_numpy(bool)
        keep |= inside
    return Loaded(frame[keep].reset_index(drop=True), loaded.issues, loaded.files)


def _window_end(end: str) -> pd.Timestamp:
    """A window's last instant: a bare date is that whole day (judge/select.py's reading)."""
    stop = pd.Timestamp(end, tz="UTC")
    return stop + pd.Timedelta(days=1) - pd.Timedelta(microseconds=1) if len(str(end)) <= 10 else stop


def _joined(parts: list[Loaded]) -> Loaded:
    """Several paths' tables as one."""
    if len(parts) == 1:
        return parts[0]
    frames = [p.frame for p in parts if not p.frame.empty]
    table = pd.concat(frames, ignore_index=True) if frames else _finished([])
    extra = sorted(c for c in table.columns if c not in CORE)
    for column in CORE:
        if column not in table:
            table[column] = None
    issues = [i for p in parts for i in p.issues]
    files = {k: v for p in parts for k, v in p.files.items()}
    return Loaded(table[CORE + extra], issues, files)


def _load(paths: list[Path]) -> Loaded:
    """Files and folders parsed whole, without a store."""
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
            records = curve_records(
                derived_figures(path, logged.get(path.with_suffix(""), []), issues, whole=top.is_dir())
            )
            _add_frame(frames, files, _tidy(records, str(path), False), path)
    table = _finished(frames)
    issues.extend(_not_numbers(table))
    return Loaded(table, issues, files)


def _text_dtype():
    """pandas' text column with NaN for a missing value (pandas 3's default), or plain objects before it."""
    try:
        return pd.StringDtype(na_value=np.nan)
    except TypeError:
        return object


#: What a check's parameter or variable column is: text, NaN where a record has none.
TEXT = _text_dtype()


def _finished(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Tidied files' rows as one table: its columns in order, each of its type, each value's figure and sample."""
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=CORE)
    for column in CORE:
        if column not in table:
            table[column] = None
    # A check's column none of whose records has a value is no column (a store keeps none of it), and one
    # that has some is text, whatever files it came from.
    extra = sorted(c for c in table.columns if c not in CORE and table[c].notna().any())
    table = table[CORE + extra]
    for column in extra:
        if table[column].dtype == object:
            table[column] = table[column].astype(TEXT)
    table["time"] = pd.to_datetime(table["time"], format="ISO8601", utc=True, errors="coerce")
    for column in ("value", "ref", "lower_thres", "upper_thres"):
        table[column] = pd.to_numeric(table[column], errors="coerce")
    for column in (*SOFTWARE_FACTS, "node", "gpu_model", "host_link"):
        table[column] = table[column].fillna("unknown").astype(str)
    table["line"] = table["line"].astype(int)
    _add_keys(table)
    # gpu_count is one of the extras even where _add_keys made it (no record said it): a table's columns are
    # in one order however its rows came, read whole or through the store.
    return table[CORE + sorted(c for c in table.columns if c not in CORE)]


def _sync(con, top: Path) -> int:
    """What was appended to `top`'s files since the store last read them, added to it; files gone or
    replaced are forgotten, or read again whole. Each block of lines is added with the index entry that
    says it was read, in one transaction (_block): a kill or a full disk leaves the store holding whole
    blocks and saying which, and the next load goes on from there. Returns the store's generation after
    it (a load's key: the same generation, the same table)."""
    perflogs, curves = _perflog_files(top), _curve_files(top)
    kept = store.indexed(con)
    on_disk = {_relative(top, p) for p in [*perflogs, *curves]}
    todo = [(p, store.unread_from(p, kept.get(_relative(top, p)))) for p in [*perflogs, *curves]]
    todo = [(p, start) for p, start in todo if start is not None]
    gone = [name for name in kept if name not in on_disk]
    if gone:
        with _block(con):
            for name in gone:
                store.forget(con, name)
    for path, start in todo:
        _ingest(con, top, path, kept.get(_relative(top, path)) if start else None)
    return store.generation(con)


@contextlib.contextmanager
def _block(con) -> Iterator[None]:
    """One transaction of the store, that moves its generation on: all of it kept, or none."""
    store.run(con, "BEGIN TRANSACTION")
    try:
        yield
        store.next_generation(con)
        store.run(con, "COMMIT")
    except BaseException:
        store.run(con, "ROLLBACK")
        raise


def _relative(top: Path, path: Path) -> str:
    """A file as the store names it: from its folder, so that the folder may be spelled either way."""
    return path.relative_to(top).as_posix()


#: Bytes of a file parsed at once: a partition's night (4,608 nodes' lines, gigabytes) is read in bounded
#: memory, a block of whole lines at a time, within the one transaction of its load.
BLOCK_BYTES = 32 << 20


def _blocks(path: Path, start: int, size: int) -> Iterator[bytes]:
    """The bytes of `path` from `start` to `size` in blocks of whole lines (the last may end in a cut line)."""
    with open(path, "rb") as stream:
        stream.seek(start)
        left, carry = size - start, b""
        while left > 0:
            data = stream.read(min(BLOCK_BYTES, left))
            if not data:  # the file shrank while read: what was read is all there is
                break
            left -= len(data)
            data = carry + data
            cut = data.rfind(b"\n") + 1 if left > 0 else len(data)
            carry = data[cut:]
            if cut:
                yield data[:cut]
        if carry:
            yield carry


def _ingest(con, top: Path, path: Path, indexed: store.Indexed | None) -> None:
    """One file's unread lines (all of them where `indexed` is None) parsed and added to the store, a block
    at a time, each in a transaction of its own with the file's index entry as far as it goes: a night's
    curves are a million tidy rows, which DuckDB holds in memory until they are committed."""
    name = _relative(top, path)
    kind = "report" if path.suffix == ".json" else "curves" if path.name.endswith(CURVE_SUFFIX) else "perflog"
    size = path.stat().st_size
    if kind == "report":
        with _block(con):
            store.forget(con, name)
            issues: list[Issue] = []
            _add_rows(con, name, _read_run_report(path, issues), issues, True)
            head, tail = store.probes(path, size)
            entry = store.Indexed(name, kind, size, size, head, tail, 0, "", store.rows_of(con, name))
            store.keep_index(con, entry)
        return
    read, lines = (indexed.size, indexed.lines) if indexed else (0, 0)
    header = indexed.header.split("|") if indexed and indexed.header else None
    last = indexed.last if indexed else ""
    first, rows = True, 0  # the file's rows, counted as they come, not over the table (it holds years)
    for block in itertools.chain(_blocks(path, read, size), [b""] if read >= size else []):
        with _block(con):
            if first and indexed:  # a cut last line, read again with what followed it
                rows = indexed.rows - store.forget_tail(con, name, indexed.lines)
            elif first:
                store.forget(con, name)
            first = False
            text, issues = block.decode("utf-8", errors="replace"), []
            if not block:  # a file with nothing (more) to read: its index entry alone
                pass
            elif kind == "perflog":
                table, runs, header = _perflog_table(text, Path(name), issues, lines + 1, header)
                store.add_runs(con, name, runs)
                for curves, figures, found in _waiting(con, name):
                    _add_table(con, curves, figures, found)
                    store.recount(con, curves)
                rows += _add_table(con, name, table, issues)
            else:
                read_runs = curve_runs(Path(name), issues, text, lines + 1, as_lines=True)
                runs, gone = _continued(con, name, last, read_runs)
                rows -= gone
                last = json.dumps([*next(reversed(runs.items()))]) if runs else last
                ready = store.has_runs(con, store.base_of(name), set(runs))
                store.add_pending(con, name, {key: found for key, found in runs.items() if key not in ready})
                figures = _curves_of(con, name, {key: found for key, found in runs.items() if key in ready}, issues)
                rows += _add_table(con, name, figures, issues)
            whole = block.rfind(b"\n") + 1  # a cut last line is read again, whole, next time
            read, lines = read + whole, lines + block.count(b"\n")
            _keep_index(con, path, name, kind, read, size, lines, header, last, rows)


def _keep_index(
    con,
    path: Path,
    name: str,
    kind: str,
    read: int,
    size: int,
    lines: int,
    header: list[str] | None,
    last: str,
    rows: int,
) -> None:
    """A file's index entry: how far it was read (bytes, lines), the digests that tell it was not changed
    since, the header in force, the rows it gave, and the curves run read last."""
    head, tail = store.probes(path, read)
    entry = store.Indexed(
        name,
        kind,
        read,
        size,
        head,
        tail,
        lines,
        "|".join(header) if kind == "perflog" and header else "",
        rows,
        last if kind == "curves" else "",
    )
    store.keep_index(con, entry)


def _add_rows(con, name: str, records: list[dict], issues: list[Issue] = (), from_report: bool = False) -> None:
    """A file's records (of one read) tidied and added, with the issues found reading them and over them."""
    _add_table(con, name, _tidy(records, name, from_report), issues)


def _add_table(con, name: str, tidy: pd.DataFrame, issues: list[Issue] = ()) -> int:
    """A file's tidy rows (of one read) added, with the issues found reading them and over them; how many."""
    frames: list[pd.DataFrame] = []
    _add_frame(frames, {}, tidy, Path(name))
    table = _finished(frames) if frames else None
    late = _not_numbers(table) if table is not None else []
    if table is not None:
        table["_row"] = np.arange(len(table), dtype=np.int64) + store.next_row(con)
        store.add_rows(con, table)
    seq = store.next_seq(con)
    store.add_issues(con, list(issues), False, seq)
    store.add_issues(con, late, True, seq + len(issues))
    return 0 if table is None else len(table)


def _continued(con, name: str, last: str, runs: dict) -> tuple[dict, int]:
    """A curves chunk's runs, the first one joined to the `last` run read before (JSON: its key, first line
    and lines) where it goes on (a load between two writes of one run's curve, or a block's end), that
    run's rows dropped to be read again whole; and how many rows were dropped."""
    if not runs or not last:
        return runs, 0
    key, (first, lines) = json.loads(last)
    key = tuple(key)
    if next(iter(runs)) != key:
        return runs, 0
    gone = store.forget_run(con, name, key, first)
    _, more = runs[key]
    return {key: (first, lines + more), **{k: v for k, v in runs.items() if k != key}}, gone


def _curves_of(con, name: str, runs: dict[tuple[str, str, str], tuple[int, list[str]]], issues: list[Issue]):
    """The tidy rows of the figures of curves `runs` (of the curves file `name`) whose perflog lines the store
    holds, the issues of their reading added to `issues`."""
    logged = store.runs_of(con, name, set(runs))
    derived = []
    for key, (first, lines) in runs.items():  # each run with its own records: never all runs' for each
        text = "\n".join(lines)
        derived += derived_figures(Path(name), logged.get(key, []), issues, whole=False, text=text, start=first)
    return _curve_table(name, derived)


def _curve_table(name: str, derived: list[tuple[dict, list[tuple[str, object, str]]]]) -> pd.DataFrame:
    """The tidy rows of runs' derived figures (derived_figures), as _tidy makes them of their records, a
    run's template tidied once and repeated for each of its figures: a daxpy curve gives hundreds a run, and
    a partition's night millions, where a dict a row costs a kilobyte and tens of microseconds."""
    if not derived:
        return pd.DataFrame()
    templates = [{**template, "perf_var": None, "perf_value": None, "perf_unit": None} for template, _ in derived]
    tidy = _tidy(templates, name, False)
    counts = [len(found) for _, found in derived]
    table = tidy.iloc[np.repeat(np.arange(len(tidy)), counts)].reset_index(drop=True)
    names, values, units = zip(*(item for _, found in derived for item in found))
    values = [_AS_NONE.get(v, v) for v in values]
    table["perf_var"] = [_AS_NONE.get(v, v) for v in names]
    table["value"] = pd.Series(values, dtype=object).infer_objects()
    table["unit"] = [_AS_NONE.get(v, v) for v in units]
    table["__missing"] = [v is None for v in values]
    return table


def _waiting(con, perflog: str) -> list[tuple[str, pd.DataFrame, list[Issue]]]:
    """The curves that waited for runs a perflog chunk just brought: (their file, their figures' tidy rows,
    the issues of their reading), each dropped from the waiting."""
    found = []
    for source, key, first, lines in store.pending_of(con, store.base_of(perflog)):
        if store.has_runs(con, store.base_of(perflog), {key}):
            issues: list[Issue] = []
            found.append((source, _curves_of(con, source, {key: (first, lines)}, issues), issues))
            store.drop_pending(con, source, key)
    return found


def _from_store(
    con,
    folder: Path,
    within: str,
    spelled: Path,
    windows: list[Window] | None,
    nodes: list[str] | None = None,
    columns: list[str] | None = None,
) -> Loaded:
    """The store's rows of `folder` (of its part `within`; within `windows`), issues and rows per file,
    named as `spelled` names the part."""
    prefix = "" if not within else within + "/"
    names = [_relative(folder, p) for p in [*_perflog_files(folder), *_curve_files(folder)]]
    names = [n for n in names if n.startswith(prefix)]
    frame = store.read_rows(con, _store_windows(windows), names, nodes, columns)
    named = {name: str(spelled / name[len(prefix) :]) for name in names}
    if frame.empty:
        table = _finished([])  # no row: the columns every table has
    else:
        frame = frame.drop(columns=["_row"])
        extra = sorted(c for c in frame.columns if c not in CORE and frame[c].notna().any())
        table = frame[[c for c in CORE if c in frame] + extra]
        table["source"] = table["source"].map(named).astype(str)
        table["line"] = table["line"].astype(int)
        if "sample" in table:
            table["sample"] = table["sample"].astype("Int64")
    kept = store.stored_issues(con, names)
    issues = [Issue(named[i.path], i.line, i.kind, i.message) for i in kept if i.path in named]
    files = {named[k]: v for k, v in store.stored_rows(con).items() if k in named}
    return Loaded(table, issues, files)


def _store_windows(windows: list[Window] | None) -> list[Window] | None:
    """The windows as the store compares times: each end its last instant."""
    if windows is None:
        return None
    return [(start, _window_end(end).isoformat() if end else None) for start, end in windows]


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
