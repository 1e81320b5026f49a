"""The one-H100 kind's accepted runs as the verdict's tests take them: their
per-run table (judge.verdict.run_values, the run medians), kept in
tests/data so that the quick tier simulates nights on a real baseline without
parsing the whole committed history (13 s on two cores the first time after a
clone). CI's tier checks that it is still what the committed perflogs give
(test_verdict.py); where it is not (the kind accepted again, run_values
changed), write it again:

    .venv/bin/python tests/baselines.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

SYSTEM, KIND = "hopper-vm", "1 x NVIDIA H100 80GB HBM3"
FIXTURE = Path(__file__).resolve().parent / "data" / "baselines" / "hopper-vm-1xH100.csv.gz"
#: run_values' columns of numbers; the others are text, '' where empty.
NUMBERS = {"value": "float64", "cv": "float64", "n": "int64", "bound": "float64"}


def from_perflogs() -> pd.DataFrame:
    """The kind's accepted runs' per-run table, from the committed perflogs."""
    from runner.power import accepted_run_values

    return accepted_run_values(SYSTEM, kind=KIND)[0]


def read() -> pd.DataFrame:
    """The table as kept, typed as run_values types it."""
    table = pd.read_csv(FIXTURE, dtype="str", keep_default_na=False)
    for column, dtype in NUMBERS.items():
        table[column] = table[column].replace("", "nan").astype("float64").astype(dtype)
    return table


def write() -> Path:
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    # No time in the gzip header: the same table writes the same bytes.
    from_perflogs().to_csv(FIXTURE, index=False, float_format="%.17g", compression={"method": "gzip", "mtime": 0})
    return FIXTURE


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    print(write())
