"""The perflogs read once: a columnar store of what the loader parsed, fed
with what was appended since.

The perflogs stay ReFrame's record and the source of truth; this store is
derived from them and can always be rebuilt (``./suite report reindex``).
Each folder the loader reads has one store, a DuckDB file under
build/store/ (DuckDB: an embedded column store with transactions, whose
file a killed process leaves as its last commit). It holds:

- ``files``: per file read, the bytes read (to the last whole line), the
  digests of its first and last kilobytes read, the lines read and the
  header in force there. A file that grew past what was read, with those
  digests unchanged, is read from there on; one that shrank or changed
  before that point (rotated, replaced, edited) is read again whole.
- ``records``: the tidy table (reports/load.py), one row per value, with
  the columns the files brought (a check's parameters are added as a
  header names them).
- ``issues``: the lines the loader skipped or flagged, by file and line.
- ``runs``: each run's first perflog record and its figures, by completion
  time, display name and job id: what a curves file's lines, read later,
  are matched to (reports/curves.py).

A sync is one transaction: a night's lines are added whole or not at all,
so a kill or a full disk leaves the store as it was, and the next load
reads them again. The loader's code is part of the store's identity: a
store written by other code is rebuilt.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from experiments import caches
from experiments.roots import REPO, STORES
from reports.issue import Issue

#: The store's own layout; a store of another is rebuilt.
SCHEMA = 1
#: Bytes of a file's start and of the end of what was read whose digests say it is the file that was read.
PROBE = 4096
#: Stores of folders outside the data root's perflogs (a test's, a copy) kept at most, the least recently used
#: dropped: a site's own stores are never dropped.
OTHERS_KEPT = 8
#: DuckDB's own memory at most (its default is 80% of the machine's): it spills to disk beyond, and a
#: nightly's judging has the rest.
MEMORY_LIMIT = "1GB"
#: The code whose change makes a store another's: what turns a line into rows.
_CODE = ("reports/load.py", "reports/curves.py", "reports/names.py", "reports/store.py", "reports/issue.py")


@dataclass(frozen=True)
class Indexed:
    """What the store read of one file."""

    path: str
    kind: str  # perflog, report or curves
    size: int  # bytes read: to the end of its last whole line (a cut last line is read again)
    full: int  # the file's size when read (its cut last line included)
    head: str  # digest of its first PROBE bytes
    tail: str  # digest of the PROBE bytes before `size`
    lines: int  # whole lines read
    header: str  # the perflog header in force at `size` ('' for others)
    rows: int  # rows kept
    last: str = ""  # a curves file's last run read (JSON: its key, first line and lines): it may go on


def store_of(top: Path) -> Path:
    """The store of the folder `top`: named by its name and where it is."""
    resolved = top.resolve()
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", resolved.name)[:40] or "root"
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:12]
    return STORES / f"{name}-{digest}"


def code_digest() -> str:
    """What the store's rows depend on besides the files: the loader's code, each experiment's curve reader."""
    digest = hashlib.sha256(f"{SCHEMA}|{pd.__version__}".encode())
    for source in sorted([*(REPO / p for p in _CODE), *(REPO / "experiments").rglob("*.py")]):
        digest.update(source.read_bytes())
    return digest.hexdigest()[:32]


def run(con, sql: str, params=None) -> list:
    """A statement run to its end (DuckDB holds a connection busy until its result is fetched)."""
    return con.execute(sql, params or []).fetchall()


def failures() -> tuple[type[BaseException], ...]:
    """What a store that cannot be written or read raises: a full disk, a read-only checkout, a file locked by
    another program, a damaged file. The loader then reads the perflogs whole; any other error is a bug and
    is raised."""
    import duckdb

    return (
        OSError,
        duckdb.IOException,
        duckdb.PermissionException,
        duckdb.OutOfMemoryException,
        duckdb.FatalException,
        duckdb.InternalException,
        duckdb.SerializationException,
    )


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:24]


def probes(path: Path, size: int) -> tuple[str, str]:
    """The digests of a file's first PROBE bytes and of the PROBE bytes before `size`."""
    with open(path, "rb") as stream:
        head = stream.read(min(PROBE, size))
        stream.seek(max(0, size - PROBE))
        tail = stream.read(size - max(0, size - PROBE))
    return _digest(head), _digest(tail)


def unread_from(path: Path, indexed: Indexed | None) -> int | None:
    """Where to read `path` from: 0 (whole: new, replaced or changed before what was read), the bytes read
    (it grew), or None (nothing new). A run report is read whole whenever it changed."""
    size = path.stat().st_size
    if indexed is None:
        return 0
    if indexed.kind == "report":
        return None if size == indexed.full and probes(path, size) == (indexed.head, indexed.tail) else 0
    if size < indexed.size or probes(path, indexed.size) != (indexed.head, indexed.tail):
        return 0
    return None if size == indexed.full else indexed.size


def quoted(name: str) -> str:
    """A column's name as a DuckDB identifier: a perflog header is outside input."""
    return '"' + name.replace('"', '""') + '"'


_SQL_TYPES = {"float64": "DOUBLE", "Int64": "BIGINT", "int64": "BIGINT", "bool": "BOOLEAN"}


def sql_type(dtype) -> str:
    """The DuckDB type a column of the tidy table is kept as."""
    if isinstance(dtype, pd.DatetimeTZDtype) or str(dtype).startswith("datetime64"):
        return "TIMESTAMPTZ"
    return _SQL_TYPES.get(str(dtype), "VARCHAR")


@contextlib.contextmanager
def opened(top: Path) -> Iterator[object]:
    """The store of `top`, held by this process alone (an flock: test workers and a report beside a nightly
    take turns), rebuilt where another schema or loader code wrote it. Raises OSError or DuckDB's
    errors where it cannot be opened or written: the caller reads the perflogs whole instead."""
    import duckdb  # here: a second of import that the command line's parser need not pay

    folder = store_of(top)
    folder.mkdir(parents=True, exist_ok=True)
    _drop_others(folder)
    with caches.exclusive(folder / "lock"):
        try:
            con = duckdb.connect(str(folder / "records.duckdb"))
        except duckdb.Error:  # not a DuckDB file (a disk that filled while it was first written): derived, rebuilt
            for path in folder.glob("records.duckdb*"):
                path.unlink()
            con = duckdb.connect(str(folder / "records.duckdb"))
        try:
            run(con, "SET TimeZone = 'UTC'")
            run(con, "SET enable_progress_bar = false")  # its bar is no line of the suite's output
            run(con, f"SET memory_limit = '{MEMORY_LIMIT}'")
            _fit(con, top, code_digest())
            yield con
        finally:
            con.close()


def remove(top: Path) -> None:
    """The store of `top` deleted (under its lock): the next load builds it again from the perflogs."""
    folder = store_of(top)
    if not folder.exists():
        return
    with caches.exclusive(folder / "lock"):
        for path in folder.glob("records.duckdb*"):
            path.unlink()


def _drop_others(keep: Path) -> None:
    """Stores of folders that are not the site's own perflogs beyond OTHERS_KEPT, least recent first."""
    from experiments.roots import PERFLOGS

    own = {store_of(p).name for p in PERFLOGS.glob("*") if p.is_dir()} | {store_of(PERFLOGS).name, keep.name}
    others = [p for p in STORES.glob("*-*") if p.is_dir() and p.name not in own]
    others.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    for old in others[OTHERS_KEPT:]:
        with contextlib.suppress(OSError):
            for path in old.iterdir():
                path.unlink()
            old.rmdir()
    keep.touch(exist_ok=True)


def _fit(con, top: Path, code: str) -> None:
    """The store's tables, emptied where they were written by another schema or another loader."""
    run(con, "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    found = dict(con.execute("SELECT key, value FROM meta").fetchall())
    if found.get("code") == code:
        return
    run(con, "BEGIN TRANSACTION")
    for table in ("files", "records", "issues", "runs", "pending", "levels", "level_nights", "cells", "cell_nights"):
        run(con, f"DROP TABLE IF EXISTS {table}")
    run(
        con,
        "CREATE TABLE files (path VARCHAR PRIMARY KEY, kind VARCHAR, size BIGINT, full_size BIGINT, head VARCHAR,"
        " tail VARCHAR, lines BIGINT, header VARCHAR, rows BIGINT, last VARCHAR)",
    )
    run(con, "CREATE TABLE issues (source VARCHAR, line BIGINT, kind VARCHAR, text VARCHAR, late BOOLEAN, seq BIGINT)")
    run(
        con,
        "CREATE TABLE runs (source VARCHAR, base VARCHAR, completed VARCHAR, display_name VARCHAR, jobid VARCHAR,"
        " record VARCHAR, figures VARCHAR)",
    )
    run(
        con,
        "CREATE TABLE pending (source VARCHAR, base VARCHAR, completed VARCHAR, display_name VARCHAR, jobid VARCHAR,"
        " line BIGINT, lines VARCHAR)",
    )
    run(con, "DELETE FROM meta")
    con.executemany(
        "INSERT INTO meta VALUES (?, ?)", [("code", code), ("folder", str(top.resolve())), ("generation", "0")]
    )
    run(con, "COMMIT")


def indexed(con) -> dict[str, Indexed]:
    """What the store read, by file."""
    rows = con.execute(
        "SELECT path, kind, size, full_size, head, tail, lines, header, rows, last FROM files"
    ).fetchall()
    return {row[0]: Indexed(*row) for row in rows}


def forget(con, source: str) -> None:
    """A file's rows, issues, runs and index entry dropped (it is read again whole, or it is gone)."""
    if _has_records(con):
        run(con, "DELETE FROM records WHERE source = ?", [source])
    run(con, "DELETE FROM issues WHERE source = ?", [source])
    run(con, "DELETE FROM runs WHERE source = ?", [source])
    run(con, "DELETE FROM pending WHERE source = ?", [source])
    run(con, "DELETE FROM files WHERE path = ?", [source])


def forget_tail(con, source: str, after_line: int) -> int:
    """The rows and issues of a file's lines after `after_line`: its cut last line, read again with what
    was appended to it; how many rows went."""
    deleted = _deleted(con, "DELETE FROM records WHERE source = ? AND line > ?", [source, after_line])
    run(con, "DELETE FROM issues WHERE source = ? AND line > ?", [source, after_line])
    run(con, "DELETE FROM pending WHERE source = ? AND line > ?", [source, after_line])
    return deleted


def _deleted(con, sql: str, params: list) -> int:
    """The records a DELETE of them removed (none where there is no records table yet)."""
    return int(run(con, sql, params)[0][0]) if _has_records(con) else 0


def base_of(source: str) -> str:
    """The check a perflog or curves file is of: NAME of NAME.log, NAME.log.h0 and NAME.curves."""
    return re.sub(r"\.(log(\.h\d+)?|curves)$", "", source)


def _has_records(con) -> bool:
    return _has_table(con, "records")


def add_rows(con, frame: pd.DataFrame) -> None:
    """Rows of the tidy table added, with a column for each the table lacks (a check's new parameter); the
    next row's number kept (next_row), in the same transaction."""
    _add_frame_rows(con, "records", frame)
    if not frame.empty:
        run(con, "DELETE FROM meta WHERE key = 'next_row'")
        run(con, "INSERT INTO meta VALUES ('next_row', ?)", [str(int(frame["_row"].max()) + 1)])


def _has_table(con, table: str) -> bool:
    found = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [table]).fetchall()
    return bool(found[0][0])


def _add_frame_rows(con, table: str, frame: pd.DataFrame) -> None:
    """A frame's rows added to `table`, made with the frame's columns, or given each column it lacks."""
    if frame.empty:
        return
    if not _has_table(con, table):
        columns = ", ".join(f"{quoted(c)} {sql_type(frame[c].dtype)}" for c in frame.columns)
        run(con, f"CREATE TABLE {table} ({columns})")
    found = con.execute("SELECT column_name FROM information_schema.columns WHERE table_name = ?", [table])
    have = {row[0] for row in found.fetchall()}
    for column in frame.columns:
        if column not in have:
            run(con, f"ALTER TABLE {table} ADD COLUMN {quoted(column)} {sql_type(frame[column].dtype)}")
    con.register("_added", frame)
    try:
        names = ", ".join(quoted(c) for c in frame.columns)
        run(con, f"INSERT INTO {table} ({names}) SELECT {names} FROM _added")
    finally:
        con.unregister("_added")


def add_issues(con, issues: list[Issue], late: bool, first_seq: int) -> None:
    """Issues kept in the order the loader found them (`late`: found over the table, after the lines')."""
    if not issues:
        return
    con.executemany(
        "INSERT INTO issues VALUES (?, ?, ?, ?, ?, ?)",
        [(i.path, int(i.line), i.kind, i.message, late, first_seq + n) for n, i in enumerate(issues)],
    )


def next_row(con) -> int:
    """The number the next row added is given: rows are read back in the order they were added. Kept in
    meta as rows are added (add_rows), not a max over the table: a partition's night adds blocks by the
    dozen to a table of years."""
    kept = con.execute("SELECT value FROM meta WHERE key = 'next_row'").fetchall()
    if kept:
        return int(kept[0][0])
    return (
        int(con.execute("SELECT coalesce(max(_row), -1) + 1 FROM records").fetchall()[0][0]) if _has_records(con) else 0
    )


def rows_of(con, source: str) -> int:
    """The rows kept of one file."""
    if not _has_records(con):
        return 0
    return int(con.execute("SELECT count(*) FROM records WHERE source = ?", [source]).fetchall()[0][0])


def recount(con, source: str) -> None:
    """A file's rows counted again (its curves' figures came with a later perflog chunk)."""
    run(con, "UPDATE files SET rows = ? WHERE path = ?", [rows_of(con, source), source])


def generation(con) -> int:
    """How many syncs changed the store: a load's key (the same generation, the same table)."""
    return int(con.execute("SELECT value FROM meta WHERE key = 'generation'").fetchall()[0][0])


def next_generation(con) -> None:
    run(con, "UPDATE meta SET value = CAST(CAST(value AS BIGINT) + 1 AS VARCHAR) WHERE key = 'generation'")


def next_seq(con) -> int:
    return int(con.execute("SELECT coalesce(max(seq), -1) + 1 FROM issues").fetchall()[0][0])


def keep_index(con, entry: Indexed) -> None:
    run(con, "DELETE FROM files WHERE path = ?", [entry.path])
    run(con, "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", list(entry.__dict__.values()))


def forget_run(con, source: str, key: tuple[str, str, str], line: int) -> int:
    """A curves run's rows, issues and waiting dropped: it went on in the lines read next, and is read again
    whole with them; how many rows went."""
    deleted = _deleted(con, "DELETE FROM records WHERE source = ? AND line = ?", [source, line])
    run(con, "DELETE FROM issues WHERE source = ? AND line = ?", [source, line])
    drop_pending(con, source, key)
    return deleted


def add_runs(con, source: str, runs: dict[tuple[str, str, str], tuple[dict, dict]]) -> None:
    """Each run's first raw record and its figures, for the curves read later (reports/curves.py): a table
    added at once (a partition's night has a hundred thousand runs)."""
    if not runs:
        return
    keys = list(runs)
    frame = pd.DataFrame(
        {
            "source": source,
            "base": base_of(source),
            "completed": [k[0] for k in keys],
            "display_name": [k[1] for k in keys],
            "jobid": [k[2] for k in keys],
            "record": [json.dumps(first) for first, _ in runs.values()],
            "figures": [json.dumps(figures) for _, figures in runs.values()],
        },
        dtype=object,
    )
    con.register("_runs", frame)
    try:
        run(con, "INSERT INTO runs SELECT * FROM _runs")
    finally:
        con.unregister("_runs")


def runs_of(con, curves: str, keys: set[tuple[str, str, str]]) -> dict[tuple[str, str, str], list[dict]]:
    """The raw perflog records (as derived_figures takes them) of the runs `keys` of the check of `curves`, by
    run: its first record whole, then one record per figure with the run's key."""
    if not keys:
        return {}
    found = _runs_keyed(
        con, "r.completed, r.display_name, r.jobid, r.record, r.figures", base_of(curves), keys, "ORDER BY r.rowid"
    )
    # A run whose perflog lines fell in two blocks (or two loads) is kept twice: its first record is the
    # first part's, its figures both parts' (a later value of a name over an earlier one, as a whole parse).
    merged: dict[tuple[str, str, str], tuple[dict, dict]] = {}
    for completed, display_name, jobid, record, figures in found:
        key = (completed, display_name, jobid)
        if key not in keys:
            continue
        if key in merged:
            merged[key][1].update(json.loads(figures))
        else:
            merged[key] = (json.loads(record), json.loads(figures))
    runs = {}
    for (completed, display_name, jobid), (first, figures) in merged.items():
        named = {"job_completion_time": completed, "display_name": display_name, "jobid": jobid}
        runs[(completed, display_name, jobid)] = [
            first,
            *({**named, "perf_var": n, "perf_value": v} for n, v in figures.items()),
        ]
    return runs


def stored_issues(con, order: list[str]) -> list[Issue]:
    """The issues kept, with each curve still waiting for its run's perflog lines (unmatched): the lines'
    first and then those found over the table, each by file (in `order`) and line, as the loader finds them."""
    waiting = con.execute(
        "SELECT source, line, 'unmatched', 'no perflog line of ' || display_name || ' at ' || completed, false, -1"
        " FROM pending"
    ).fetchall()
    rows = con.execute("SELECT source, line, kind, text, late, seq FROM issues").fetchall() + waiting
    rank = {name: n for n, name in enumerate(order)}
    rows.sort(key=lambda r: (r[4], rank.get(r[0], len(rank)), r[1], r[5]))
    return [Issue(source, int(line), kind, text) for source, line, kind, text, *_ in rows]


def add_pending(con, source: str, runs: dict[tuple[str, str, str], tuple[int, list[str]]]) -> None:
    """Curves whose run has no perflog line yet (a load between the two writes): read when it comes."""
    if runs:
        con.executemany(
            "INSERT INTO pending VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(source, base_of(source), *key, line, json.dumps(lines)) for key, (line, lines) in runs.items()],
        )


def pending_of(con, base: str) -> list[tuple[str, tuple[str, str, str], int, list[str]]]:
    """The curves waiting of a check: (their file, their run, first line, lines)."""
    found = con.execute(
        "SELECT source, completed, display_name, jobid, line, lines FROM pending WHERE base = ?", [base]
    ).fetchall()
    return [(source, (c, d, j), line, json.loads(lines)) for source, c, d, j, line, lines in found]


def drop_pending(con, source: str, key: tuple[str, str, str]) -> None:
    run(
        con, "DELETE FROM pending WHERE source = ? AND completed = ? AND display_name = ? AND jobid = ?", [source, *key]
    )


def has_runs(con, base: str, keys: set[tuple[str, str, str]]) -> set[tuple[str, str, str]]:
    """Which of `keys` have perflog lines in the store."""
    return {tuple(row) for row in _runs_keyed(con, "r.completed, r.display_name, r.jobid", base, keys)} & keys


def _runs_keyed(con, columns: str, base: str, keys: set[tuple[str, str, str]], order: str = "") -> list[tuple]:
    """`columns` of the runs of `base` whose key is among `keys`, joined in the store: the runs table holds
    every night's (a partition's night adds tens of thousands), a block wants a few hundred of them."""
    if not keys:
        return []
    wanted = pd.DataFrame(list(keys), columns=["completed", "display_name", "jobid"], dtype=object)
    con.register("_keys", wanted)
    try:
        return con.execute(
            f"SELECT {columns} FROM runs r JOIN _keys k ON r.completed IS NOT DISTINCT FROM k.completed "
            "AND r.display_name IS NOT DISTINCT FROM k.display_name AND r.jobid IS NOT DISTINCT FROM k.jobid "
            f"WHERE r.base = ? {order}",
            [base],
        ).fetchall()
    finally:
        con.unregister("_keys")


def stored_rows(con) -> dict[str, int]:
    return dict(con.execute("SELECT path, rows FROM files").fetchall())


def read_rows(
    con,
    windows: list[tuple[str | None, str | None]] | None,
    order: list[str],
    nodes: list[str] | None = None,
    columns: list[str] | None = None,
) -> pd.DataFrame:
    """The records kept, in the loader's order (its files in `order`, each by line), within any of the
    `windows` (from, to: ISO times, either None for open) where given; of `columns` alone (those the
    records have, with their file, line and order) where given."""
    if not _has_records(con):
        return pd.DataFrame()
    picked = "records.*"
    if columns is not None:
        have = {
            row[0]
            for row in con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'records'"
            ).fetchall()
        }
        wanted = dict.fromkeys([*columns, "source", "line", "_row"])
        picked = ", ".join(f"records.{quoted(c)}" for c in wanted if c in have)
    where, params = _window_clause(windows or [])
    clause = f"WHERE {where}" if windows is not None else "WHERE TRUE"
    if nodes is not None:  # a partition's night, some of its nodes at a time
        clause += " AND node IN (SELECT node FROM _nodes)"
    con.register("_order", pd.DataFrame({"source": order, "rank": range(len(order))}))
    con.register("_nodes", pd.DataFrame({"node": list(nodes or [])}, dtype=object))
    try:
        return con.execute(
            f"SELECT {picked} FROM records JOIN _order USING (source) {clause} ORDER BY _order.rank, line, _row",
            params,
        ).df()
    finally:
        con.unregister("_order")
        con.unregister("_nodes")


def _window_clause(windows: list[tuple[str | None, str | None]]) -> tuple[str, list]:
    """SQL that holds for a record in any of `windows` (none: for no record), and its parameters."""
    where, params = [], []
    for start, end in windows:
        bounds = []
        if start:
            bounds.append("time >= ?")
            params.append(pd.Timestamp(start, tz="UTC").to_pydatetime())
        if end:
            bounds.append("time <= ?")
            params.append(pd.Timestamp(end, tz="UTC").to_pydatetime())
        where.append("(" + (" AND ".join(bounds) or "TRUE") + ")")
    return ("(" + " OR ".join(where) + ")" if where else "FALSE"), params


def nodes_in(con, windows: list[tuple[str | None, str | None]]) -> list[str]:
    """The nodes whose records fall in any of `windows`."""
    if not _has_records(con) or not windows:
        return []
    where, params = _window_clause(windows)
    found = con.execute(f"SELECT DISTINCT node FROM records WHERE {where} ORDER BY node", params).fetchall()
    return [row[0] for row in found if row[0] is not None]


# Each night's level per path (judge/changepoints.py), kept when the night is judged: what the change points
# and the history page read, one row per path and night, instead of every night's records. Kept by the basis
# they were judged on (the kind's accepted runs and the code and data that turn records into levels) and by
# each night's digest (its windows and its paths' verdicts): a night judged again, or a new baseline, is
# computed again. Derived like the rest: a reindex drops them, and the next night computes them again.
LEVEL_COLUMNS = ("run", "path", "level", "floor", "kind", "better")


def _level_tables(con) -> None:
    run(con, "CREATE TABLE IF NOT EXISTS level_nights (basis VARCHAR, run VARCHAR, digest VARCHAR)")
    run(
        con,
        "CREATE TABLE IF NOT EXISTS levels (basis VARCHAR, run VARCHAR, path VARCHAR, level DOUBLE, floor DOUBLE,"
        " kind VARCHAR, better VARCHAR)",
    )


def level_nights(con, basis: str) -> dict[str, str]:
    """The nights whose levels are kept on `basis`, with their digests."""
    _level_tables(con)
    return dict(con.execute("SELECT run, digest FROM level_nights WHERE basis = ?", [basis]).fetchall())


def read_levels(con, basis: str) -> pd.DataFrame:
    """The levels kept on `basis`, every night's."""
    _level_tables(con)
    columns = ", ".join(LEVEL_COLUMNS)
    return con.execute(f"SELECT {columns} FROM levels WHERE basis = ?", [basis]).df()


def keep_levels(con, basis: str, digests: dict[str, str], table: pd.DataFrame) -> None:
    """The levels of the nights `digests` names (`table`: theirs, maybe none for a night) kept, replacing
    what was kept of them, in one transaction."""
    _level_tables(con)
    nights = pd.DataFrame({"basis": basis, "run": list(digests), "digest": list(digests.values())})
    rows = table.loc[:, list(LEVEL_COLUMNS)].assign(basis=basis)
    run(con, "BEGIN TRANSACTION")
    try:
        con.register("_nights", nights)
        con.register("_levels", rows)
        run(con, "DELETE FROM level_nights WHERE basis = ? AND run IN (SELECT run FROM _nights)", [basis])
        run(con, "DELETE FROM levels WHERE basis = ? AND run IN (SELECT run FROM _nights)", [basis])
        run(con, "INSERT INTO level_nights SELECT basis, run, digest FROM _nights")
        names = ", ".join(("basis", *LEVEL_COLUMNS))
        run(con, f"INSERT INTO levels ({names}) SELECT {names} FROM _levels")
        run(con, "COMMIT")
    except BaseException:
        run(con, "ROLLBACK")
        raise
    finally:
        con.unregister("_nights")
        con.unregister("_levels")


# A partition's night's cells (node x path, runner/partition.py's cells.csv) kept when its results are
# written: a node's history is read from here, not from every earlier night's whole cells.csv.
def _cell_tables(con) -> None:
    run(con, "CREATE TABLE IF NOT EXISTS cell_nights (night VARCHAR PRIMARY KEY)")


def cell_nights(con) -> set[str]:
    """The partition nights whose cells are kept."""
    _cell_tables(con)
    return {row[0] for row in con.execute("SELECT night FROM cell_nights").fetchall()}


def keep_cells(con, night: str, cells: pd.DataFrame) -> None:
    """A partition night's cells kept (replacing what was kept of it), with a column for each they bring."""
    _cell_tables(con)
    run(con, "BEGIN TRANSACTION")
    try:
        if _has_table(con, "cells"):
            run(con, "DELETE FROM cells WHERE night = ?", [night])
        _add_frame_rows(con, "cells", cells.assign(night=night))
        run(con, "DELETE FROM cell_nights WHERE night = ?", [night])
        run(con, "INSERT INTO cell_nights VALUES (?)", [night])
        run(con, "COMMIT")
    except BaseException:
        run(con, "ROLLBACK")
        raise


def read_cells(con, nodes: list[str]) -> pd.DataFrame:
    """The kept cells of `nodes`, every night's."""
    if not _has_table(con, "cells") or not nodes:
        return pd.DataFrame(columns=["node", "night"])
    con.register("_nodes", pd.DataFrame({"node": list(nodes)}))
    try:
        return con.execute("SELECT cells.* FROM cells JOIN _nodes USING (node)").df()
    finally:
        con.unregister("_nodes")
