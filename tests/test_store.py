"""The store the perflogs are read through (reports/store.py): each line parsed
once, what was appended read on the next load, the table equal to the
perflogs parsed whole whatever the order the lines came in, a night's lines
added whole or not at all (a kill, a full disk), and a store rebuilt from
the perflogs equal to the one kept."""

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest

from reports import load as loader
from reports import store

REPO = Path(__file__).resolve().parent.parent
COMMITTED = REPO / "perflogs" / "hopper-vm" / "default"
#: Perflogs whose records carry curves, one set aside by a new column, and one with neither.
CHECKS = ("copy_latency", "daxpy", "host_bandwidth")


@pytest.fixture
def stores(tmp_path, monkeypatch):
    """Stores of the test's own, and nothing another test read in this process."""
    monkeypatch.setattr(store, "STORES", tmp_path / "stores")
    monkeypatch.setattr(loader, "_LAST", {})
    return tmp_path / "stores"


def lines(path: Path, first: int, last: int) -> list[str]:
    """Lines first..last (1-based, the header is 1) of a committed file."""
    return path.read_text().splitlines(keepends=True)[first - 1 : last]


def folder_of(tmp_path: Path, records: int) -> Path:
    """A folder with the header and first `records` lines of each of CHECKS' perflogs (and of their set-aside
    and curves files: the curves of the runs those lines hold and of some runs they do not)."""
    top = tmp_path / "perflogs-copy"
    (top / "default").mkdir(parents=True)
    for check in CHECKS:
        for suffix in (".log", ".log.h0", ".curves"):
            source = COMMITTED / f"{check}{suffix}"
            if source.exists():
                (top / "default" / source.name).write_text("".join(lines(source, 1, 1 + records)))
    return top


def whole(top: Path) -> loader.Loaded:
    """The folder parsed whole, as the loader parsed it before it had a store."""
    return loader._load([top])


def same(a: loader.Loaded, b: loader.Loaded) -> None:
    pd.testing.assert_frame_equal(a.frame, b.frame)
    assert [str(i) for i in a.issues] == [str(i) for i in b.issues]
    assert a.files == b.files


def grow(top: Path, check: str, suffix: str, first: int, last: int, cut: bool = False) -> None:
    """Lines first..last of the committed file appended to the copy (the last one cut short with `cut`)."""
    text = "".join(lines(COMMITTED / f"{check}{suffix}", first, last))
    with open(top / "default" / f"{check}{suffix}", "a") as stream:
        stream.write(text[: len(text) // 2] if cut else text)


def test_a_folder_read_through_its_store_is_the_folder_parsed_whole(stores, tmp_path):
    top = folder_of(tmp_path, 300)
    loaded = loader.load(top, warn=None)
    assert len(loaded.frame) > 300 and stores.exists()
    same(loaded, whole(top))


def test_lines_appended_in_pieces_give_the_table_parsed_whole(stores, tmp_path):
    top = folder_of(tmp_path, 50)
    loader.load(top, warn=None)
    # A night's lines after the first; a record cut short mid-write, then completed with more after it.
    grow(top, "daxpy", ".log.h0", 52, 120)
    grow(top, "copy_latency", ".log.h0", 52, 80, cut=True)
    cut = loader.load(top, warn=None)
    same(cut, whole(top))
    assert any(i.kind in ("truncated", "malformed") for i in cut.issues)
    path = top / "default" / "copy_latency.log.h0"
    path.write_text("".join(lines(COMMITTED / "copy_latency.log.h0", 1, 200)))  # the cut line whole, and more
    for suffix in (".curves",):  # curves whose runs' perflog lines came in an earlier load
        grow(top, "daxpy", suffix, 52, 400)
        grow(top, "copy_latency", suffix, 52, 300)
    grown = loader.load(top, warn=None)
    same(grown, whole(top))
    assert len(grown.frame) > len(cut.frame)


def test_a_curve_that_cannot_be_read_is_an_issue_whether_its_run_came_before_or_after_it(stores, tmp_path):
    top = folder_of(tmp_path, 0)
    daxpy = top / "default" / "daxpy.curves"
    header, first = (line.rstrip("\n").split("|") for line in lines(COMMITTED / "daxpy.log.h0", 1, 2))
    when, display, jobid = (first[header.index(k)] for k in ("job_completion_time", "display_name", "jobid"))
    broken = f"{when}|{display}|{jobid}|DAXPY: alloc=managed inner=x outer=4 sample=1 kernel_us=zz\n"
    daxpy.write_text(daxpy.read_text() + broken)  # before its run's perflog lines: kept waiting
    loader.load(top, warn=None)
    grow(top, "daxpy", ".log.h0", 2, 60)
    waited = loader.load(top, warn=None)
    same(waited, whole(top))
    assert sum(i.kind == "malformed" and "the curve of" in i.message for i in waited.issues) == 1
    loader.reindex(top)  # and read with its run's lines already there
    same(loader.load(top, warn=None), whole(top))


def test_a_new_header_midway_reads_the_lines_after_it_by_it(stores, tmp_path):
    top = folder_of(tmp_path, 20)
    loader.load(top, warn=None)
    # ReFrame starts a perflog anew when a check gains a column: today's header and records follow.
    grow(top, "host_bandwidth", ".log.h0", 1, 1)
    today = (COMMITTED / "host_bandwidth.log").read_text().splitlines(keepends=True)
    with open(top / "default" / "host_bandwidth.log.h0", "a") as stream:
        stream.write("".join(today[:10]))
    loaded = loader.load(top, warn=None)
    same(loaded, whole(top))
    assert loaded.frame["code"].notna().any()  # the new header's column, read by it


def test_a_file_replaced_or_gone_is_read_again_or_forgotten(stores, tmp_path):
    top = folder_of(tmp_path, 100)
    loader.load(top, warn=None)
    path = top / "default" / "daxpy.log.h0"
    path.write_text("".join(lines(COMMITTED / "daxpy.log.h0", 1, 40)))  # rotated: shorter, another start
    same(loader.load(top, warn=None), whole(top))
    text = path.read_text()
    path.write_text(text.replace("|", "|", 1)[:-200] + "x" * 200)  # same size, changed at its end
    same(loader.load(top, warn=None), whole(top))
    (top / "default" / "copy_latency.curves").unlink()
    loaded = loader.load(top, warn=None)
    same(loaded, whole(top))
    assert not any(s.endswith(".curves") and "copy_latency" in s for s in loaded.frame["source"])


def test_a_window_holds_the_rows_of_its_times_only(stores, tmp_path):
    top = folder_of(tmp_path, 300)
    every = loader.load(top, warn=None).frame
    times = every["time"].dropna().sort_values().unique()
    start, end = times[10], times[40]
    window = [(start.isoformat(), end.isoformat())]
    inside = loader.load(top, warn=None, windows=window).frame
    expected = every[(every["time"] >= start) & (every["time"] <= end)].reset_index(drop=True)
    pd.testing.assert_frame_equal(inside.reset_index(drop=True), expected[inside.columns])
    assert loader.load(top, warn=None, windows=[]).frame.empty
    day = str(pd.Timestamp(start).date())
    whole_day = loader.load(top, warn=None, windows=[(day, day)]).frame
    assert len(whole_day) == int((every["time"].dt.date.astype(str) == day).sum())


def test_a_hostile_column_name_is_kept_and_read_back(stores, tmp_path):
    top = tmp_path / "hostile"
    top.mkdir()
    hostile = 'x"); DROP TABLE records; --'

    def with_field(line: str, value: str) -> str:  # a field after the first (the completion time)
        first, rest = line.rstrip("\n").split("|", 1)
        return f"{first}|{value}|{rest}\n"

    header, *records = lines(COMMITTED / "host_bandwidth.log", 1, 4)
    (top / "host_bandwidth.log").write_text(
        with_field(header, hostile) + "".join(with_field(r, "it's") for r in records)
    )
    loaded = loader.load(top, warn=None)
    same(loaded, whole(top))
    assert len(loaded.frame) == 3 and (loaded.frame[hostile] == "it's").all()


def test_a_store_that_cannot_be_written_reads_the_perflogs_whole_and_says_so(stores, tmp_path, monkeypatch, capsys):
    top = folder_of(tmp_path, 50)
    loader.load(top, warn=None)
    grow(top, "daxpy", ".log.h0", 52, 90)

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store, "add_rows", full_disk)
    loaded = loader.load(top, warn=sys.stderr)
    same(loaded, whole(top))
    assert "could not be read or written" in capsys.readouterr().err
    monkeypatch.undo()
    monkeypatch.setattr(store, "STORES", stores)
    with store.opened(top) as con:  # the block that failed is not half in: the store says where it stopped
        kept = store.indexed(con)["default/daxpy.log.h0"]
        assert_whole_blocks(con)
    assert kept.lines == 51
    same(loader.load(top, warn=None), whole(top))


KILLED = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {repo!r})
from reports import load as loader, store
store.STORES = Path({stores!r})
added = store.add_rows
def add_then_die(con, frame):
    added(con, frame)
    if any(s.endswith("daxpy.log.h0") for s in frame["source"]):
        os.kill(os.getpid(), signal.SIGKILL)  # mid-night: some files' rows in, others not
store.add_rows = add_then_die
loader.load(Path({top!r}), warn=None)
"""


def assert_whole_blocks(con) -> None:
    """Each file's rows in the store are those of the lines its index says were read, and as many."""
    for name, entry in store.indexed(con).items():
        found = con.execute("SELECT count(*), coalesce(max(line), 0) FROM records WHERE source = ?", [name])
        rows, last = found.fetchall()[0]
        assert rows == entry.rows and last <= entry.lines, name


def test_a_night_killed_while_the_store_is_written_keeps_whole_blocks_and_goes_on_from_them(stores, tmp_path):
    top = folder_of(tmp_path, 50)
    loader.load(top, warn=None)
    for check, suffix in (("copy_latency", ".log.h0"), ("daxpy", ".log.h0"), ("host_bandwidth", ".log.h0")):
        grow(top, check, suffix, 52, 70)
    script = KILLED.format(repo=str(REPO), stores=str(stores), top=str(top))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    with store.opened(top) as con:
        kept = store.indexed(con)
        assert kept["default/copy_latency.log.h0"].lines == 70  # read whole before the kill, and kept
        assert kept["default/daxpy.log.h0"].lines == 51  # killed while added: rolled back, not half-added
        assert kept["default/host_bandwidth.log.h0"].lines == 51  # not yet read
        assert_whole_blocks(con)
    same(loader.load(top, warn=None), whole(top))


def test_a_damaged_store_is_rebuilt(stores, tmp_path):
    top = folder_of(tmp_path, 30)
    loader.load(top, warn=None)
    database = store.store_of(top) / "records.duckdb"
    database.write_bytes(os.urandom(4096))
    loader._LAST.clear()
    same(loader.load(top, warn=None), whole(top))


def test_reindex_rebuilds_the_store_equal_to_the_one_kept_incrementally(stores, tmp_path):
    top = folder_of(tmp_path, 40)
    loader.load(top, warn=None)
    grow(top, "daxpy", ".log.h0", 42, 100)
    grow(top, "daxpy", ".curves", 42, 300)
    loader.load(top, warn=None)
    [(folder, rows, found)] = loader.reindex(top, check=True)
    assert found == [] and rows == len(whole(top).frame)


def test_reindex_names_what_a_store_kept_wrongly(stores, tmp_path):
    top = folder_of(tmp_path, 40)
    loader.load(top, warn=None)
    with store.opened(top) as con:  # a store that lost rows (a bug, a hand's edit)
        store.run(con, "DELETE FROM records WHERE line < 10")
        store.next_generation(con)
    [(_, _, found)] = loader.reindex(top, check=True)
    assert found and "rows kept" in found[0]


def test_the_data_roots_perflogs_are_read_through_each_systems_store(stores, tmp_path, monkeypatch):
    root = tmp_path / "perflogs"
    for system in ("alpha", "beta"):
        (root / system / "default").mkdir(parents=True)
        (root / system / "default" / "host_bandwidth.log").write_text(
            "".join(lines(COMMITTED / "host_bandwidth.log.h0", 1, 30))
        )
    monkeypatch.setattr(loader, "PERFLOGS", root)
    every = loader.load(root, warn=None)
    one = loader.load(root / "alpha" / "default", warn=None)
    assert len(every.frame) == 2 * len(one.frame) and len(list(stores.glob("*-*"))) == 2
    assert set(one.frame["source"]) == {str(root / "alpha" / "default" / "host_bandwidth.log")}


@pytest.mark.slow
def test_the_committed_perflogs_read_through_the_store_are_them_parsed_whole(stores):
    same(loader.load(COMMITTED.parent, warn=None), whole(COMMITTED.parent))


def counted_ingests(monkeypatch) -> list[str]:
    """The files the loader parses into a store, as it parses them."""
    calls, ingest = [], loader._ingest

    def counted(con, top, path, indexed):
        calls.append(path.name)
        return ingest(con, top, path, indexed)

    monkeypatch.setattr(loader, "_ingest", counted)
    return calls


def test_each_line_is_parsed_once_whoever_loads_it_and_however_often(stores, tmp_path, monkeypatch):
    top = folder_of(tmp_path, 30)
    calls = counted_ingests(monkeypatch)
    tables = []
    workers = [threading.Thread(target=lambda: tables.append(loader.load(top, warn=None))) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    loader._LAST.clear()
    tables.append(loader.load(top, warn=None))  # read back from the store: nothing parsed again
    assert sorted(calls) == sorted(p.name for p in (top / "default").iterdir())
    assert all(t.frame.equals(tables[0].frame) for t in tables)
    grow(top, "daxpy", ".log.h0", 32, 40)
    loader.load(top, warn=None)
    assert calls.count("daxpy.log.h0") == 2 and len(calls) == len(list((top / "default").iterdir())) + 1


def test_a_table_read_again_in_the_process_is_a_copy_its_reader_may_change(stores, tmp_path):
    top = folder_of(tmp_path, 30)
    first = loader.load(top, warn=None)
    expected = first.frame.copy()
    first.frame.loc[:, "value"] = -1.0
    first.issues.append("changed")
    again = loader.load(top, warn=None)
    again.frame.loc[:, "unit"] = "changed"
    third = loader.load(top, warn=None)
    assert third.frame.equals(expected) and "changed" not in third.issues


def test_a_file_read_in_small_blocks_gives_the_table_parsed_whole(stores, tmp_path, monkeypatch):
    """A partition's night is read a block of whole lines at a time: a curve run, a cut line and a new
    header fall across blocks as they may."""
    monkeypatch.setattr(loader, "BLOCK_BYTES", 3000)
    top = folder_of(tmp_path, 200)
    grow(top, "daxpy", ".log.h0", 202, 260, cut=True)
    same(loader.load(top, warn=None), whole(top))
    grow(top, "daxpy", ".curves", 202, 500)
    same(loader.load(top, warn=None), whole(top))
    with store.opened(top) as con:  # the rows counted block by block are the rows kept, file by file
        assert_whole_blocks(con)
        assert store.next_row(con) == con.execute("SELECT max(_row) + 1 FROM records").fetchall()[0][0]


def test_a_curve_run_split_across_blocks_is_counted_once(stores, tmp_path, monkeypatch):
    """A run whose perflog lines are in, its curve split across blocks: the part read first is added, then
    dropped and read again whole with the rest; the file's rows are counted once (the index, the table)."""
    perflog = (COMMITTED / "daxpy.log.h0").read_text().splitlines(keepends=True)
    header = perflog[0].rstrip("\n").split("|")
    fields = [header.index(k) for k in ("job_completion_time", "display_name", "jobid")]
    key_of = {"|".join(line.split("|")[i] for i in fields): n for n, line in enumerate(perflog[1:], start=1)}
    curve_lines = (COMMITTED / "daxpy.curves").read_text().splitlines(keepends=True)
    key = next(k for line in curve_lines[1:] if (k := "|".join(line.split("|")[:3])) in key_of)
    curves = [line for line in curve_lines if line.startswith(key + "|")]
    runs = [line for line in perflog[1:] if "|".join(line.split("|")[i] for i in fields) == key]
    assert len(curves) > 20 and runs
    top = tmp_path / "perflogs-copy"
    (top / "default").mkdir(parents=True)
    (top / "default" / "daxpy.log.h0").write_text("".join([perflog[0], *runs]))
    (top / "default" / "daxpy.curves").write_text("".join(lines(COMMITTED / "daxpy.curves", 1, 1) + curves))
    monkeypatch.setattr(loader, "BLOCK_BYTES", 2000)
    forgotten = []
    forget = store.forget_run
    monkeypatch.setattr(store, "forget_run", lambda *a: forgotten.append(forget(*a)) or forgotten[-1])
    same(loader.load(top, warn=None), whole(top))
    assert sum(forgotten) > 0  # the split run's first part was added, then read again whole
    with store.opened(top) as con:
        assert_whole_blocks(con)


def test_the_reindex_command_rebuilds_and_says_what_differed(stores, tmp_path, capsys):
    from commands import cli

    top = folder_of(tmp_path, 30)
    assert cli.main(["reindex", "--check", str(top)]) == 0
    assert f"{len(whole(top).frame)} rows from its perflogs" in capsys.readouterr().out
    with store.opened(top) as con:
        store.run(con, "DELETE FROM records WHERE line < 5")
        store.next_generation(con)
    assert cli.main(["reindex", "--check", str(top)]) == 3
    assert "differed from its rebuild" in capsys.readouterr().err
    assert cli.main(["reindex", "--check", str(top)]) == 0  # rebuilt: sound again
    assert cli.main(["reindex", str(top / "default" / "daxpy.log.h0")]) == 3


def test_a_window_with_no_row_has_every_column_a_table_has(stores, tmp_path):
    top = folder_of(tmp_path, 30)
    every = loader.load(top, warn=None).frame
    empty = loader.load(top, warn=None, windows=[("2001-01-01", "2001-01-02")]).frame
    assert empty.empty and set(loader._finished([]).columns) <= set(empty.columns) and "gpu_count" in every


def test_some_columns_read_alone_are_those_of_the_whole_table(stores, tmp_path):
    top = folder_of(tmp_path, 60)
    every = loader.load(top, warn=None).frame
    some = loader.load(top, warn=None, columns=["time", "node", "value", "no such column"]).frame
    assert list(some.columns) == ["time", "node", "value", "source", "line"]
    pd.testing.assert_frame_equal(some, every[list(some.columns)])
