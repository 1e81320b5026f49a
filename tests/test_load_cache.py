"""reports.load's cache (build/cache/load/): what takes a second to parse is
kept and read back, a few records are not kept (they would push the committed
perflogs' table out), and processes asking for the same files at once parse
them once."""

import threading
import time
from pathlib import Path

import pytest

from reports import load as loader

HOST_LOG = Path(__file__).resolve().parent.parent / "perflogs" / "hopper-vm" / "default" / "host_bandwidth.log"
RECORDS = 5  # the perflog's header and its first five records


@pytest.fixture
def perflogs(tmp_path, monkeypatch):
    """A few records of a committed perflog in a folder of their own, and a cache of the test's own."""
    monkeypatch.setattr(loader, "LOAD_CACHE", tmp_path / "cache")
    monkeypatch.setattr(loader, "_LAST", {})  # nothing another test read in this process
    folder = tmp_path / "perflogs" / "hopper-vm" / "default"
    folder.mkdir(parents=True)
    (folder / "host_bandwidth.log").write_text("".join(HOST_LOG.read_text().splitlines(keepends=True)[: 1 + RECORDS]))
    return tmp_path / "perflogs"


def slowed(monkeypatch, seconds: float) -> list[int]:
    """load()'s parsing made to take `seconds`; the list counts its calls."""
    calls, parse = [], loader._load

    def slow(paths):
        calls.append(1)
        time.sleep(seconds)
        return parse(paths)

    monkeypatch.setattr(loader, "_load", slow)
    return calls


def kept(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.pickle.gz")) if cache.exists() else []


def test_a_few_records_are_read_again_not_kept(perflogs):
    first = loader.load(perflogs, warn=None)
    assert len(first.frame) == RECORDS and kept(loader.LOAD_CACHE) == []


def test_what_took_a_second_to_parse_is_kept_and_read_back(perflogs, monkeypatch):
    calls = slowed(monkeypatch, loader.CACHE_WORTH_S)
    first = loader.load(perflogs, warn=None)
    again = loader.load(perflogs, warn=None)  # from this process's last table
    loader._LAST.clear()
    from_disk = loader.load(perflogs, warn=None)  # another process's read: the kept pickle
    assert len(kept(loader.LOAD_CACHE)) == 1 and len(calls) == 1
    assert again.frame.equals(first.frame) and from_disk.frame.equals(first.frame)


def test_a_table_read_again_in_the_process_is_a_copy_its_reader_may_change(perflogs, monkeypatch):
    calls = slowed(monkeypatch, loader.CACHE_WORTH_S)
    first = loader.load(perflogs, warn=None)
    expected = first.frame.copy()
    first.frame.loc[:, "value"] = -1.0
    first.issues.append("changed")
    again = loader.load(perflogs, warn=None)
    again.frame.loc[:, "unit"] = "changed"
    third = loader.load(perflogs, warn=None)
    assert len(calls) == 1 and third.frame.equals(expected) and "changed" not in third.issues


def test_a_changed_file_is_parsed_again(perflogs, monkeypatch):
    calls = slowed(monkeypatch, loader.CACHE_WORTH_S)
    loader.load(perflogs, warn=None)
    log = next(perflogs.rglob("*.log"))
    log.write_text(log.read_text() + HOST_LOG.read_text().splitlines(keepends=True)[1 + RECORDS])
    assert len(loader.load(perflogs, warn=None).frame) == RECORDS + 1 and len(calls) == 2


def test_loaders_of_the_same_files_at_once_parse_them_once(perflogs, monkeypatch):
    calls = slowed(monkeypatch, loader.CACHE_WORTH_S)
    tables = []
    workers = [threading.Thread(target=lambda: tables.append(loader.load(perflogs, warn=None))) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(calls) == 1 and [len(t.frame) for t in tables] == [RECORDS] * 3


def test_a_folder_and_the_one_inside_holding_all_its_perflogs_share_one_table(perflogs, monkeypatch):
    calls = slowed(monkeypatch, loader.CACHE_WORTH_S)
    whole = loader.load(perflogs, warn=None)
    assert loader.load(perflogs / "hopper-vm", warn=None).frame.equals(whole.frame) and len(calls) == 1
    (perflogs / "other" / "default").mkdir(parents=True)
    (perflogs / "other" / "default" / "host_bandwidth.log").write_text(HOST_LOG.read_text()[:2000])
    assert len(loader.load(perflogs, warn=None).frame) > RECORDS and len(calls) == 2  # another system's too now
