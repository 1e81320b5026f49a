"""Who else used the GPUs during a night, read from its cases' outputs, and
which of its findings that explains (judge/contention.py).

Each case's program ran under the NVML watch, which printed a ``GpuUse``
record per GPU and a ``Contention`` record per other process
(systems/gpu_use.py), and a ``HostUse`` record per other process busy on the
host's CPUs (systems/host_use.py). ReFrame's run reports name each case's output: its
output folder once it passed, its stage (kept: the nightly keeps the stages)
where it did not.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments.files import DamagedFile, read_json
from experiments.gpu_use import parse, parse_host
from judge import contention, verdict
from judge.select import RERUNS

#: The night's run reports by the run they hold (runner/nightly.py writes them).
REPORTS = {"tonight": "run-report.json", **{key: f"{key}-report.json" for key in RERUNS}}


def _stdout(case: dict) -> Path | None:
    name = case.get("job_stdout")
    if not name:
        return None
    for folder in (case.get("outputdir"), case.get("stagedir")):
        if folder and (Path(folder) / name).is_file():
            return Path(folder) / name
    return None


#: The tables of a run's watch, as judge/contention.py's: GpuUse, Contention and HostUse records.
TABLES = (contention.GPU_COLUMNS, contention.OTHER_COLUMNS, contention.HOST_COLUMNS)


def read_report(report: Path, run: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The GpuUse, Contention and HostUse records of every case of a ReFrame run report, as
    judge/contention.py's tables."""
    gpus, others, hosts = [], [], []
    try:
        runs = read_json(report).get("runs", []) if report.exists() else []
    except DamagedFile:  # the night names it (nightly.outcomes): who else used the GPUs is not known
        runs = []
    for case in (c for r in runs[-1:] for c in r["testcases"]):
        path = _stdout(case)
        if path is None:
            continue
        text = path.read_text(errors="replace")
        uses, contenders = parse(text)
        key = {
            "run": run,
            "test": case["display_name"].split()[0],
            "case": case.get("case", ""),
            "environ": case.get("environ", ""),
            "node": ",".join(case.get("job_nodelist") or []),
        }
        gpus += [{**key, **vars(u)} for u in uses]
        others += [{**key, **vars(c)} for c in contenders]
        hosts += [{**key, **vars(h)} for h in parse_host(text)]
    return tuple(pd.DataFrame(rows, columns=columns) for rows, columns in zip((gpus, others, hosts), TABLES))


def read_reports(reports: list[Path], run: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The GpuUse, Contention and HostUse tables of several run reports of one run (a partition's, per node)."""
    found = [read_report(path, run) for path in reports if path.name == "run-report.json"]
    return _joined(found)


def _joined(found: list[tuple[pd.DataFrame, ...]]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    return tuple(
        pd.concat([tables[i] for tables in found] or [pd.DataFrame(columns=columns)], ignore_index=True)
        for i, columns in enumerate(TABLES)
    )


def _snapshots(outdir: Path, run: str) -> tuple[Path, Path, Path]:
    return outdir / f"gpu-use-{run}.csv", outdir / f"contention-{run}.csv", outdir / f"host-use-{run}.csv"


def snapshot(outdir: Path, run: str) -> None:
    """The run's GpuUse, Contention and HostUse tables kept in the night's folder as soon as it ends: a rerun runs
    the same cases in the same stage and output folders, and leaves only its own outputs there."""
    for table, path in zip(read_report(outdir / REPORTS[run], run), _snapshots(outdir, run)):
        table.to_csv(path, index=False)


def read_night(outdir: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The night's GpuUse, Contention and HostUse tables, its reruns' included: each run's as kept when it
    ended (snapshot), else as its report's outputs are now (a night kept before the host was watched has
    no host-use snapshot: nobody was seen on the host)."""
    found = []
    for run, name in REPORTS.items():
        kept = _snapshots(outdir, run)
        if all(p.exists() for p in kept[:2]):
            found.append(tuple(_read_csv(p, c) for p, c in zip(kept, TABLES)))
        elif (outdir / name).exists():
            found.append(read_report(outdir / name, run))
    return _joined(found)


def _read_csv(path: Path, columns: list[str]) -> pd.DataFrame:
    if not path.exists():
        return pd.DataFrame(columns=columns)
    table = pd.read_csv(path, keep_default_na=False, na_values=[""], dtype={"case": str, "node": str, "name": str})
    table = table.reindex(columns=columns)
    table["case"] = table["case"].fillna("")
    return table


def findings(judged, run: dict) -> pd.DataFrame:
    """The night's findings to explain: each path behind its siblings (with
    the GPUs of its figures) and each path moved or unstable against the
    accepted runs, with their cases and the runs that measured them."""
    runs = ["tonight", *(key for key in RERUNS if key in run)]
    rows = []
    lags = judged.siblings
    for row in lags[lags["verdict"] == "lagging"].itertuples() if not lags.empty else []:
        shares = contention.path_shares(row.path, row.cases, row.figures.split())
        gpus = {int(g) for g in row.gpus.split()}
        rows.append({"path": row.path, "cases": row.cases, "gpus": gpus, "runs": runs, "shares": shares})
    result = judged.verdict
    for path in result.flagged_paths() if result is not None else []:
        cases = list(verdict.cases_of_paths(result, [path]).itertuples(index=False, name=None))
        figures = result.figures.loc[result.figures["path"] == path, "figure"]
        shares = contention.path_shares(path, cases, figures.drop_duplicates())
        gpus = contention.figure_gpus(figures)
        rows.append({"path": path, "cases": cases, "gpus": gpus, "runs": runs, "shares": shares})
    return pd.DataFrame(rows, columns=["path", "cases", "gpus", "runs", "shares"])


def explain_night(judged, run: dict, outdir: Path) -> tuple[dict[str, str], list[dict]]:
    """{path: who contended it} for the night's contended findings, and every other process seen, on the
    GPUs and on the host's CPUs (run.json's)."""
    gpus, others, hosts = read_night(outdir)
    explained = contention.explain(findings(judged, run), gpus, others, hosts)
    contended = dict(zip(explained.loc[explained["contended"], "path"], explained.loc[explained["contended"], "by"]))
    return contended, contention.processes(others, hosts)
