"""The nightly runs and the accepted baseline, read through one module: where
they are kept, which records a run logged, and which runs are accepted."""

from __future__ import annotations

import datetime as dt
import json
import socket
from pathlib import Path

import pandas as pd

from systems import data

from .compare import select_mask

REPO = Path(__file__).resolve().parent.parent
NIGHTLY_DIR = REPO / "reports" / "nightly"
#: The reruns a night may have (run.json's windows), in the order they run:
#: the rerun minutes after the run, and on a shared host one later still.
RERUNS = ("rerun", "later")
PERFLOGS = REPO / "perflogs"
REFERENCES = REPO / "systems" / "references"


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def selected_system(explicit: str | None) -> str:
    """The system ReFrame would pick on this machine, unless one is named."""
    if explicit:
        return explicit
    return data.system_for_host(data.load_all(), socket.gethostname()) or "local"


def accepted_file(system: str) -> Path:
    return PERFLOGS / system / "accepted.json"


def read_accepted(system: str) -> dict | None:
    """The system's baseline: its runs (older records held one run) and node facts."""
    path = accepted_file(system)
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    if "runs" not in record:
        record = {"system": system, "runs": [record], "node": {}}
    return record


def run_rows(frame: pd.DataFrame, system: str, runs: list[dict]) -> pd.Series:
    """Which rows of `frame` the given runs of `system` logged."""
    mask = pd.Series(False, index=frame.index)
    for run in runs:
        mask |= select_mask(frame, "time", f"{run['start']}..{run['end']}")
    return mask & (frame["system"] == system)


def accepted_masks(frame: pd.DataFrame, system: str, accepted: dict) -> dict[str, pd.Series]:
    """Each accepted run's rows of `frame`, by its stamp."""
    return {r["stamp"]: run_rows(frame, system, [r]) for r in accepted["runs"]}


def find_run(system: str, stamp: str) -> tuple[Path, dict]:
    outdir = NIGHTLY_DIR / system / stamp.replace(":", "")
    path = outdir / "run.json"
    if not path.exists():
        raise SystemExit(f"accept: no nightly run {stamp} of {system} ({path} is missing)")
    return outdir, json.loads(path.read_text())


def finished_runs(system: str, drills: bool = False) -> list[dict]:
    """Every nightly run of the system that finished, oldest first; a drill
    (a fault planted on purpose, `nightly --drill`) only if asked for: it is
    no night of the node's history."""
    found = []
    for path in sorted((NIGHTLY_DIR / system).glob("*/run.json")):
        run = json.loads(path.read_text())
        if run.get("start") and run.get("end") and (drills or not run.get("drill")):
            found.append(run)
    return sorted(found, key=lambda r: r["start"])
