"""Where the suite keeps what it measured and what it concluded, said once.

Data lives beside the code, never inside a code package: ``perflogs/`` holds
what the runs measured (ReFrame's perflogs, the accepted baselines), and
``results/`` what was concluded from them (the nightly's folders, upgrades,
the verdict's power tables and replays, the dashboards). Each is committed
only for the suite's own machines (.gitignore).
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: Where perflogs/ and results/ are: the checkout, or GPU_MEMPATHS_DATA (a site keeping its history on
#: a file system of its own; the history benchmark's made-up years, away from the committed nights).
DATA_VARIABLE = "GPU_MEMPATHS_DATA"
DATA = Path(os.environ.get(DATA_VARIABLE) or REPO).resolve()
PERFLOGS = DATA / "perflogs"
REFERENCES = REPO / "systems" / "references"
RESULTS = DATA / "results"
#: <system>/<stamp>/: a night's run.json, tables and report.
NIGHTLY = RESULTS / "nightly"
#: <system>-<what>-<old>-to-<new>[-<stamp>]: an upgrade's rounds, tables and runs.
UPGRADES = RESULTS / "upgrades"
#: <system>-<kind>.txt and .csv: each path's power against its accepted runs.
POWER = RESULTS / "power"
#: The judge's test bench's results (runner/replay.py).
REPLAYS = RESULTS / "replays"
#: ReFrame's results database and its run reports (rfmconfig/settings.py), where ReFrame would
#: otherwise write them in the home directory: in the checkout, ignored by git.
REFRAME = RESULTS / "reframe"
#: Grafana dashboards (reports/grafana.py).
DASHBOARDS = RESULTS / "grafana"
#: A partition's dry runs (./suite nightly --nodes ... --dry-run): their job scripts and reports, in the
#: build folder, which git ignores; never where the nights are kept.
DRY_RUNS = REPO / "build" / "dry-runs"
#: What the loader read, a store per folder of perflogs (reports/store.py): derived from them, rebuilt by
#: `./suite report reindex`; in the data root's build folder, which git ignores.
STORES = DATA / "build" / "store"
#: The verdict's simulated null distributions, kept by what they depend on (experiments/caches.py): likewise.
ARRAY_CACHE = REPO / "build" / "cache" / "arrays"
