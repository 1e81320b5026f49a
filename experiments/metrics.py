"""Performance records to a time-series database, through ReFrame's own
httpjson perflog handler: where a system's data names an endpoint
(``metrics: {url: ...}`` in systems/<name>.yaml, or GPU_MEMPATHS_METRICS_URL
for every system), every performance record
also goes there, shaped by `victoria_lines` into VictoriaMetrics' JSON line
import format (``POST /api/v1/import``), one line per figure:

    {"metric": {"__name__": "gpu_mempaths_figure", "test": ..., "figure": ..., "path": ...},
     "values": [47.3], "timestamps": [1764000000000]}

Each carries as labels the figure, its unit and sample, the test, case and
environment, the path (systems/paths/paths.yaml), the node's facts, the CUDA
runtime and driver, and the night's stamp (GPU_MEMPATHS_NIGHT, which the
nightly sets; 'none' outside a nightly). The nightly posts its verdict per
path the same way (`verdict_lines`). The perflogs are written first and
whatever the endpoint says: a server that is down loses no record.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import urllib.error
import urllib.request
from typing import Any

from experiments.keys import parse_case, split_sample
from experiments.paths import path_of
from systems.finding_codes import code_of

FIGURE = "gpu_mempaths_figure"
VERDICT = "gpu_mempaths_path_verdict"
CHANGE = "gpu_mempaths_path_change_pct"
CHANGE_POINT = "gpu_mempaths_path_change_point"
NIGHT_EXIT = "gpu_mempaths_night_exit"
NODE_VS_SIBLINGS = "gpu_mempaths_node_vs_siblings_pct"
NODE_VERDICT = "gpu_mempaths_node_verdict"
FLEET_CHANGE = "gpu_mempaths_fleet_change_pct"
#: Another process on a GPU during the night's cases (value: the cases it was seen in), and a finding it explains.
CONTENTION = "gpu_mempaths_contention_cases"
CONTENDED = "gpu_mempaths_path_contended"
#: A node's verdict on a path as a number (judge/partition.py's Cell), 0 as its siblings.
NODE_CODES = {"pass": 0, "unjudged": 0, "transient": 1, "contended": 1, "node fault": 2, "both": 2, "not measured": 1}
#: A path's verdict as a number, for a dashboard's thresholds: 0 is as accepted.
VERDICT_CODES = {"pass": 0, "improved": 0, "transient": 1, "moved": 2, "unstable": 2, "unjudged": 3}
NIGHT_VARIABLE = "GPU_MEMPATHS_NIGHT"
URL_VARIABLE = "GPU_MEMPATHS_METRICS_URL"

#: Record attributes (ReFrame's check_<variable>) carried as labels, by label.
_LABELS = {
    "system": "check_system",
    "partition": "check_partition",
    "environ": "check_environ",
    "node": "check_job_nodelist",
    "case": "check_case",
    "gpu_model": "check_gpu_model",
    "gpu_count": "check_gpu_count",
    "host_link": "check_host_link",
    "driver_version": "check_driver_version",
    "cuda_version": "check_cuda_version",
    "cuda_runtime_version": "check_cuda_runtime_version",
}


def _label(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return "" if value is None else str(value)


def _figures_of(record) -> dict[str, tuple]:
    """{name: (value, unit)}: a multiline perflog's record carries one figure
    (check_perf_var), another record all of them (check_perfvalues)."""
    name = getattr(record, "check_perf_var", None)
    if name:
        return {name: (record.check_perf_value, record.check_perf_unit)}
    return {k: (info[0], info[4]) for k, info in (getattr(record, "check_perfvalues", None) or {}).items()}


def victoria_lines(record, extras: dict | None, ignore_keys) -> str | None:
    """ReFrame's json_formatter: the record's figures as VictoriaMetrics
    import lines, or None (nothing sent) for a record without figures."""
    values = _figures_of(record)
    test = str(getattr(record, "check_display_name", "") or getattr(record, "check_name", "")).split()[0]
    when = int(1000 * float(getattr(record, "check_job_completion_time_unix", None) or time.time()))
    common = {label: _label(getattr(record, attr, "")) for label, attr in _LABELS.items()}
    common.update(test=test, night=os.environ.get(NIGHT_VARIABLE, "none"), **(extras or {}))
    case = parse_case(common["case"]) if common["case"] else {}
    lines = []
    for key, (value, unit) in values.items():
        if value is None or not math.isfinite(float(value)):
            continue
        name = key.split(":")[-1]
        figure, sample = split_sample(name)
        path = path_of(test, case, figure)
        labels = {
            "__name__": FIGURE,
            **common,
            "figure": figure,
            "sample": str(sample or "median"),
            "unit": unit or "",
            "path": path.name if path else "",
        }
        lines.append(_line(labels, float(value), when))
    return "\n".join(lines) or None


def verdict_lines(system: str, night: str, paths, when_ms: int) -> str:
    """The nightly's verdict per path (a DataFrame of paths.csv's columns)."""
    lines = []
    for row in paths.itertuples():
        labels = {"system": system, "night": night, "path": row.path, "kind": row.kind, "verdict": row.verdict}
        labels["finding"] = code_of("path", row.verdict).code
        code = VERDICT_CODES.get(row.verdict, 3)
        lines.append(_line({"__name__": VERDICT, **labels}, code, when_ms))
        if row.change_pct == row.change_pct:  # not NaN
            metric = {"__name__": CHANGE, **labels}
            lines.append(_line(metric, float(row.change_pct), when_ms))
    return "\n".join(lines)


def partition_lines(system: str, night: str, cells, fleet, when_ms: int) -> str:
    """A partition's night: each node's deviation from its siblings and its
    verdict by path (the node a label, for a dashboard's path across nodes),
    and the partition's change by path against its accepted runs."""
    lines = []
    for row in cells.itertuples():
        labels = {"system": system, "night": night, "node": row.node, "path": row.path, "verdict": str(row.verdict)}
        labels["finding"] = code_of("node", row.verdict).code
        code = NODE_CODES.get(str(row.verdict), 3)
        lines.append(_line({"__name__": NODE_VERDICT, **labels}, code, when_ms))
        if row.vs_siblings_pct == row.vs_siblings_pct:
            lines.append(_line({"__name__": NODE_VS_SIBLINGS, **labels}, float(row.vs_siblings_pct), when_ms))
    for row in fleet.itertuples():
        if row.change_pct == row.change_pct:
            labels = {"__name__": FLEET_CHANGE, "system": system, "night": night, "path": row.path}
            finding = code_of("fleet", row.verdict).code
            lines.append(
                _line({**labels, "verdict": str(row.verdict), "finding": finding}, float(row.change_pct), when_ms)
            )
    return "\n".join(lines)


def contention_lines(system: str, night: str, processes: list[dict], contended: dict[str, str], when_ms: int) -> str:
    """Every other process the watch saw on a GPU (run.json's contention: the
    node, GPU, process and name as labels, the cases it was seen in as the
    value) and every finding it explains (1, the path and who as labels): a
    dashboard tells a busy GPU from a slow one."""
    lines = []
    for p in processes:
        labels = {"system": system, "night": night, "node": p["node"], "gpu": _gpu_label(p["gpu"])}
        labels["pid"] = str(p["pid"])
        lines.append(_line({"__name__": CONTENTION, **labels, "process": p["name"]}, p["cases"], when_ms))
    for path, by in contended.items():
        lines.append(
            _line({"__name__": CONTENDED, "system": system, "night": night, "path": path, "by": by}, 1, when_ms)
        )
    return "\n".join(lines)


def _gpu_label(gpu) -> str:
    """A process's GPU as a label: 'host' for one busy on the host's CPUs (no GPU: systems/host_use.py)."""
    return "host" if gpu is None else str(gpu)


def _line(metric: dict, value: float, when_ms: int) -> str:
    """One sample in VictoriaMetrics' JSON line import format."""
    return json.dumps({"metric": metric, "values": [value], "timestamps": [when_ms]})


def night_line(system: str, night: str, kind: str, status: int, meaning: str, when_ms: int) -> str:
    """The night's exit status (0 as accepted, 1 failed, 2 moved, 3 not judged):
    the one series a dashboard or an alert needs to say which nights need a look."""
    labels = {"__name__": NIGHT_EXIT, "system": system, "night": night, "kind": kind, "meaning": meaning}
    return _line(labels, status, when_ms)


def change_lines(system: str, night: str, changes, when_ms: int) -> str:
    """The change points the nightly reported (judge/changepoints.py), one
    line each: the move in percent, worse positive, with the report's line."""
    lines = []
    for change in changes:
        labels = {
            "__name__": CHANGE_POINT,
            "system": system,
            "night": night,
            "path": change.path,
            "since": change.stamp,
            "finding": code_of("change", "held").code,
            "line": change.line(),
        }
        lines.append(_line(labels, change.move_pct, when_ms))
    return "\n".join(lines)


def post(url: str, lines: str, timeout: float = 10.0) -> str | None:
    """POST import lines; None, or why they did not arrive (naming the endpoint)."""
    request = urllib.request.Request(url, data=lines.encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return None if response.status < 300 else f"{url}: HTTP {response.status}"
    except (urllib.error.URLError, OSError) as err:
        return f"{url}: {getattr(err, 'reason', err)}"


def formatter_for(url: str):
    """`victoria_lines` for ReFrame's handler to `url`. ReFrame leaves the
    handler out, naming the server, when it cannot connect at start; this
    asks again at the first record (the server may have gone since): where
    it does not answer, one warning names it and nothing is sent (ReFrame
    would warn once per record it failed to send)."""
    answered: list[bool] = []

    def json_formatter(record, extras, ignore_keys):
        if not answered:
            why = post(url, "", timeout=5)
            answered.append(why is None)
            if why:
                print(f"warning: metrics endpoint {why}: the records are in the perflogs only", file=sys.stderr)
        return victoria_lines(record, extras, ignore_keys) if answered[0] else None

    return json_formatter


def perflog_handler(url: str) -> dict[str, Any]:
    """ReFrame's httpjson perflog handler for an endpoint."""
    return {
        "type": "httpjson",
        "url": url,
        "level": "info",
        "json_formatter": formatter_for(url),
        "extras": {},
        "ignore_keys": [],
    }


def endpoint(system: dict[str, Any]) -> str | None:
    """Where a system's records go besides its perflogs, if anywhere."""
    return os.environ.get(URL_VARIABLE) or (system.get("metrics") or {}).get("url")
