"""A busy GPU told from a slow one: which of a night's findings another
process on the same GPUs can explain.

The NVML watch lists, for every case and every GPU it watched, whether the
case's program used the GPU and which other processes were on it
(systems/gpu_use.py). A finding (a path behind its siblings, a path moved
against the accepted runs) is on the GPUs its figures name (``gpu1_h2d_...``:
GPU 1; ``gpu0_read_gpu1_ce``: GPUs 0 and 1), or, for a figure that names
none, on the GPUs the case's program used. It is **contended** where, in
every run that measured its cases and flagged it (the night, its rerun, the
later measure), another process was on one of those GPUs during one of those
cases: the night cannot say the GPU is slow, only that it was shared. A path
through the host side (systems/paths/paths.yaml's `shares: host`: host
memory, every host link, the migrations and small copies over them) is
shared by every GPU of the node: another process on any GPU, seen moving
HOST_TRAFFIC_GBS or more through that GPU's host link while the suite did
not use it, contends it too (on four H200s, a neighbour copying 50 GB/s
each way through GPU 2's link made GPU 1's and GPU 3's host paths 8-13%
slower, their siblings alike). So does another process that kept the host's
CPUs busy during those cases (a ``HostUse`` record of the watch,
systems/host_use.py: HOST_CPUS or more on average), though it is on no GPU: a
neighbour streaming memory with the CPUs shares the host's memory and root
complex with every GPU's host link; it explains nothing of a GPU's own memory,
its peer links or its kernels. A finding whose rerun still lags with nobody else on the node's
shared side is the GPU's own (a fault to drain), however busy the first run
was.

Pure functions over tables (runner/contention.py reads them from a night's
run reports); no ReFrame, no files.
"""

from __future__ import annotations

import pandas as pd

from experiments.keys import parse_case
from experiments.paths import path_of
from judge.siblings import sibling_group

#: One row per case and GPU the watch saw: the run ('tonight', 'rerun', 'later'), the case's key, the
#: GPU, whether the case's program used it, and the GPU's traffic over the case (GB/s).
GPU_COLUMNS = [
    "run",
    "test",
    "case",
    "environ",
    "node",
    "gpu",
    "own",
    "samples",
    "pcie_rx_gbs",
    "pcie_tx_gbs",
    "nvlink_rx_gbs",
    "nvlink_tx_gbs",
]
#: One row per case, GPU and other process on it: how many of the watch's readings saw it, and its memory.
OTHER_COLUMNS = ["run", "test", "case", "environ", "node", "gpu", "pid", "name", "seen", "samples", "used_mib"]
#: One row per case and another's process busy on the host's CPUs (systems/host_use.py's HostUse records):
#: its CPU seconds, the CPUs it used on average, its most resident memory, and the watch's readings.
HOST_COLUMNS = ["run", "test", "case", "environ", "node", "pid", "name", "cpu_s", "cpus", "rss_mib", "seen", "samples"]
#: A GPU's host-link traffic, in and out together, mean over a case (GB/s), from which another
#: process on it shares the host side with every GPU's host link: an idle context does not,
#: a neighbour copying through the link does (50 GB/s each way in the measured night).
HOST_TRAFFIC_GBS = 5.0
#: A finding explained: the path, whether it is contended, and by whom.
COLUMNS = ["path", "contended", "by"]

_CASE = ["test", "case", "environ"]


def figure_gpus(figures: pd.Series) -> set[int] | None:
    """The GPUs a path's figures name; None where none names one (the case's program's GPUs)."""
    found = {g for f in figures for g in (sibling_group(f) or ("", ()))[1]}
    return found or None


def path_shares(path: str, cases: list[tuple], figures) -> str | None:
    """What the path shares with every GPU of the node (paths.yaml's `shares`),
    from the first of its figures in its cases (test, case, environ) whose rule names it."""
    for test, case, *_ in cases:
        for figure in figures:
            found = path_of(test, parse_case(case), figure)
            if found is not None and found.name == path:
                return found.shares
    return None


def explain(
    findings: pd.DataFrame, gpus: pd.DataFrame, others: pd.DataFrame, hosts: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Each finding (`findings`: path, `cases` a list of (test, case, environ),
    `gpus` a set of GPU indices or None, `runs` the runs that flagged it, and
    optionally `shares`, 'host' for a path through the host side) contended
    or not, and by whom (COLUMNS); `hosts`, the processes busy on the host's
    CPUs (HOST_COLUMNS), contend the host side's findings alone."""
    rows = []
    moving = movers(gpus, others)
    hosts = pd.DataFrame(columns=HOST_COLUMNS) if hosts is None else hosts
    for finding in findings.itertuples():
        runs = [r for r in finding.runs if _measured(gpus, r, finding.cases)]
        seen = [_others_on(finding, r, gpus, others, moving) for r in runs]
        busy = [_host_users(finding, r, hosts) for r in runs]
        contended = bool(runs) and all(not (s.empty and b.empty) for s, b in zip(seen, busy))
        by = "; ".join(filter(None, (describe(pd.concat(seen)), describe_host(pd.concat(busy))))) if contended else ""
        rows.append({"path": finding.path, "contended": contended, "by": by})
    return pd.DataFrame(rows, columns=COLUMNS)


def _host_users(finding, run: str, hosts: pd.DataFrame) -> pd.DataFrame:
    """The processes busy on the host's CPUs during the finding's cases in `run`, for a path
    through the host side (none for another: a GPU's memory or peer links are not the host's)."""
    if getattr(finding, "shares", None) != "host" or hosts.empty:
        return hosts.iloc[0:0]
    return _rows(hosts, run, finding.cases)


def _measured(gpus: pd.DataFrame, run: str, cases: list[tuple]) -> bool:
    """Whether the watch saw any of `cases` in `run` (a rerun runs the flagged cases only)."""
    return not _rows(gpus, run, cases).empty


def _rows(table: pd.DataFrame, run: str, cases: list[tuple]) -> pd.DataFrame:
    keys = pd.MultiIndex.from_frame(table[_CASE]) if not table.empty else pd.MultiIndex.from_tuples([], names=_CASE)
    return table[(table["run"] == run).to_numpy() & keys.isin(cases)]


def movers(gpus: pd.DataFrame, others: pd.DataFrame) -> set[tuple]:
    """The (node, GPU, pid) of other processes seen moving data through their
    GPU's host link: on it during a case that did not use that GPU (so that
    the traffic is not the suite's own), the GPU carrying HOST_TRAFFIC_GBS or
    more in and out. An idle context is none; nor is a process on a GPU the
    night's cases all used, whose traffic cannot be told from theirs."""
    if gpus.empty or others.empty:
        return set()
    load = gpus["pcie_rx_gbs"].fillna(0) + gpus["pcie_tx_gbs"].fillna(0)
    busy = gpus[~gpus["own"].astype(bool) & (load >= HOST_TRAFFIC_GBS)]
    found = others.merge(busy[["run", *_CASE, "node", "gpu"]], on=["run", *_CASE, "node", "gpu"])
    return set(found[["node", "gpu", "pid"]].itertuples(index=False, name=None))


def _others_on(finding, run: str, gpus: pd.DataFrame, others: pd.DataFrame, moving: set[tuple]) -> pd.DataFrame:
    """The other processes on the finding's GPUs during its cases in `run`,
    with the GPU's traffic; for a path through the host side, also those on
    any other GPU that were seen moving data through its host link (`movers`; `across`)."""
    here = _rows(others, run, finding.cases)
    used = _rows(gpus, run, finding.cases)
    wanted = finding.gpus if finding.gpus is not None else set(used.loc[used["own"].astype(bool), "gpu"])
    traffic = used.groupby("gpu")[["pcie_rx_gbs", "pcie_tx_gbs"]].mean()
    own = here["gpu"].isin(wanted)
    near = own.copy()
    if getattr(finding, "shares", None) == "host":
        keys = zip(here["node"], here["gpu"], here["pid"])
        near |= pd.Series([key in moving for key in keys], index=here.index, dtype=bool)
    return here[near].assign(across=~own[near]).join(traffic, on="gpu")


def describe(seen: pd.DataFrame) -> str:
    """'pid 4242 (python3, 1.0 GiB) on GPU 0 in 5 of its cases; GPU 0's PCIe 48.1 GB/s in, 47.9 out'."""
    parts = []
    for (pid, name, gpu), rows in seen.groupby(["pid", "name", "gpu"], sort=True):
        memory = rows["used_mib"].max() / 1024
        line = f"pid {pid} ({name}, {memory:.1f} GiB) on GPU {gpu} in {rows[_CASE].drop_duplicates().shape[0]} case(s)"
        rx, tx = rows["pcie_rx_gbs"].mean(), rows["pcie_tx_gbs"].mean()
        if pd.notna(rx) and pd.notna(tx):
            line += f"; GPU {gpu}'s PCIe {rx:.1f} GB/s in, {tx:.1f} out"
        if "across" in rows and rows["across"].any():
            line += " (on the host side every GPU's host link shares)"
        parts.append(line)
    return "; ".join(parts)


def describe_host(seen: pd.DataFrame) -> str:
    """'pid 77 (stream, 3.9 CPUs, 2.0 GiB resident) on the host's CPUs in 2 case(s) (on the host side every
    GPU's host link shares)': its most CPUs in one case, its most resident memory."""
    parts = []
    for (pid, name), rows in seen.groupby(["pid", "name"], sort=True):
        cases = rows[_CASE].drop_duplicates().shape[0]
        used = f"{rows['cpus'].max():.1f} CPUs, {rows['rss_mib'].max() / 1024:.1f} GiB resident"
        parts.append(f"pid {pid} ({name}, {used}) on the host's CPUs in {cases} case(s)")
    return "; ".join(parts) + (" (on the host side every GPU's host link shares)" if parts else "")


def processes(others: pd.DataFrame, hosts: pd.DataFrame | None = None) -> list[dict]:
    """Every other process seen during the night, once per GPU: run.json's
    `contention` (pid, name, GPU, how many cases it was seen in, of which tests);
    then each busy on the host's CPUs (`hosts`), its GPU None, with its most CPUs
    and resident memory."""
    return _gpu_processes(others) + _host_processes(hosts if hosts is not None else pd.DataFrame(columns=HOST_COLUMNS))


def _host_processes(hosts: pd.DataFrame) -> list[dict]:
    found = []
    for (node, pid, name), rows in hosts.groupby(["node", "pid", "name"], sort=True):
        cases = rows[_CASE].drop_duplicates()
        found.append(
            {
                "node": node,
                "gpu": None,
                "pid": int(pid),
                "name": name,
                "cpus": round(float(rows["cpus"].max()), 2),
                "rss_gib": round(float(rows["rss_mib"].max()) / 1024, 2),
                "cases": int(len(cases)),
                "tests": sorted(set(cases["test"])),
            }
        )
    return found


def _gpu_processes(others: pd.DataFrame) -> list[dict]:
    found = []
    for (node, gpu, pid, name), rows in others.groupby(["node", "gpu", "pid", "name"], sort=True):
        cases = rows[_CASE].drop_duplicates()
        found.append(
            {
                "node": node,
                "gpu": int(gpu),
                "pid": int(pid),
                "name": name,
                "used_gib": round(float(rows["used_mib"].max()) / 1024, 2),
                "cases": int(len(cases)),
                "tests": sorted(set(cases["test"])),
            }
        )
    return found
