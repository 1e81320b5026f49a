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
