"""experiments/caches.py: arrays computed once per checkout, read back whole,
computed again for another key, by one process at a time, the least
recently used dropped, and nothing kept where the checkout is read-only."""

import os
import threading
import time

import numpy as np
import pytest

from experiments import caches


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(caches, "ARRAY_CACHE", tmp_path / "arrays")
    return tmp_path / "arrays"


def counted(value: float, calls: list, seconds: float = 0.0):
    def compute():
        calls.append(value)
        time.sleep(seconds)
        return np.full(4, value)

    return compute


def test_an_array_is_computed_once_and_read_back_the_same(cache):
    calls = []
    first = caches.cached_array("null", "3|0", counted(1.5, calls))
    again = caches.cached_array("null", "3|0", counted(9.0, calls))
    assert calls == [1.5] and np.array_equal(first, again) and len(list(cache.glob("*.npy"))) == 1


def test_another_key_or_name_is_computed_anew(cache):
    calls = []
    caches.cached_array("null", "3|0", counted(1.0, calls))
    caches.cached_array("null", "4|0", counted(2.0, calls))
    caches.cached_array("paired-null", "3|0", counted(3.0, calls))
    assert calls == [1.0, 2.0, 3.0]


def test_processes_wanting_the_same_array_at_once_compute_it_once(cache):
    calls, got = [], []
    workers = [
        threading.Thread(target=lambda: got.append(caches.cached_array("null", "5|2", counted(5.0, calls, 0.3))))
        for _ in range(3)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert calls == [5.0] and all(np.array_equal(g, np.full(4, 5.0)) for g in got)


def test_the_least_recently_used_go_past_the_count(cache, monkeypatch):
    monkeypatch.setattr(caches, "ARRAYS_KEPT", 2)
    calls = []
    for key in ("a", "b"):
        caches.cached_array("null", key, counted(1.0, calls))
    oldest = sorted(cache.glob("*.npy"), key=lambda p: p.stat().st_mtime)
    os.utime(oldest[0], (0, 0))  # 'a' or 'b', whichever is older, made the oldest by far
    caches.cached_array("null", "c", counted(1.0, calls))
    kept = set(cache.glob("*.npy"))
    assert len(kept) == 2 and oldest[0] not in kept and not (cache / (oldest[0].stem + ".lock")).exists()


def test_a_half_written_array_is_computed_again(cache):
    calls = []
    caches.cached_array("null", "k", counted(1.0, calls))
    (kept,) = cache.glob("*.npy")
    kept.write_bytes(kept.read_bytes()[:20])
    assert np.array_equal(caches.cached_array("null", "k", counted(2.0, calls)), np.full(4, 2.0))


def test_a_checkout_that_cannot_be_written_computes_every_time(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the cache's folder would be: nothing can be made under it
    monkeypatch.setattr(caches, "ARRAY_CACHE", blocked / "arrays")
    calls = []
    for _ in range(2):
        assert np.array_equal(caches.cached_array("null", "k", counted(1.0, calls)), np.full(4, 1.0))
    assert calls == [1.0, 1.0]
