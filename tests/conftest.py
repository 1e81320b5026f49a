import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def own_lock(tmp_path_factory, monkeypatch):
    """Each test's commands hold a lock of their own (runner/lock.py), not the checkout's: the tests that
    call nightly, accept, rejudge or upgrade run side by side on several workers, and a site's own night in
    this checkout is not held up by them."""
    from runner import lock

    monkeypatch.setattr(lock, "RESULTS", tmp_path_factory.mktemp("lock"))


@pytest.fixture(scope="module")
def seed():
    """GDRCopy's README outputs (the seed's), by test (tests/gdrcopy_outputs.py)."""
    from gdrcopy_outputs import seed_outputs

    return seed_outputs()


#: The modules whose fixtures run whole nights one after another, minutes on one
#: worker (xdist keeps a module on one): started first, so that they are not
#: what the other workers wait for at the end.
FIRST = (
    "test_fake_gpu.py",
    "test_fake_gpu_faults.py",
    "test_fake_gpus.py",
    "test_dryrun.py",
    "test_readme.py",
    "test_nightly.py",
)


def pytest_collection_modifyitems(items):
    """A long test is a slow one too: `./suite test --quick` leaves it out as
    well. The modules of FIRST first (a stable order: every worker collects the same)."""
    for item in items:
        if item.get_closest_marker("long") and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(FIRST)))
