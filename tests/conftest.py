import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


import pytest  # noqa: E402


@pytest.fixture(scope="module")
def seed():
    """GDRCopy's README outputs (the seed's), by test (tests/gdrcopy_outputs.py)."""
    from gdrcopy_outputs import seed_outputs

    return seed_outputs()


def pytest_collection_modifyitems(items):
    """A long test is a slow one too: `./suite test --quick` leaves it out as well."""
    for item in items:
        if item.get_closest_marker("long") and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
