"""A Grafana dashboard of a system's paths over the nights, on VictoriaMetrics
(its Prometheus-compatible query API) fed by the suite (experiments/metrics.py):

    python -m commands grafana [--system NAME] -o FILE.json

One row per kind of path (host memory, the host link, GPU memory, ...), one
panel per path: each night's move from the accepted runs in percent (worse
is up for a time, down for a rate, as the nightly's change_pct), a point per
night named by its stamp, and the change points the nightly reported as
annotations. Each point carries the night's verdict as a label, and the
verdicts are a metric of their own (experiments/metrics.py's VERDICT), for
panels a site adds; these panels do not colour by them. The paths are the system's accepted ones
(results/nightly/<system>/<stamp>/paths.csv of its last night). A last row shows a
partition's nights: the path chosen above ($path) across the nodes, each node's
deviation from its siblings, and the partition's change by path.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from experiments import metrics
from reports.runs import NIGHTLY_DIR, selected_system

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def last_paths(system: str) -> pd.DataFrame:
    """The paths and kinds of the system's last judged night."""
    for path in sorted((NIGHTLY_DIR / system).glob("*/paths.csv"), reverse=True):
        table = pd.read_csv(path)
        if not table.empty:
            return table[["path", "kind"]].drop_duplicates().sort_values(["kind", "path"])
    raise SystemExit(f"grafana: no judged night of {system} (results/nightly/{system}/*/paths.csv)")


def panel_query(path: str) -> str:
    return f'{metrics.CHANGE}{{system="$system",path="{path}"}}'


def _panel(path: str, x: int, y: int, panel_id: int) -> dict:
    return {
        "id": panel_id,
        "type": "timeseries",
        "title": path,
        "datasource": DATASOURCE,
        "gridPos": {"h": 7, "w": 8, "x": x, "y": y},
        "targets": [{"refId": "A", "expr": panel_query(path), "legendFormat": "{{night}}", "datasource": DATASOURCE}],
        "fieldConfig": {
            "defaults": {
                "unit": "percent",
                "custom": {"drawStyle": "points", "pointSize": 6},
                "thresholds": {"mode": "absolute", "steps": [{"color": "green", "value": None}]},
            },
            "overrides": [],
        },
        "options": {"legend": {"showLegend": False}, "tooltip": {"mode": "single"}},
    }


def partition_panels(y: int, panel_id: int) -> list[dict]:
    """A partition's nights (runner/partition.py): one path, chosen above, across the nodes (each node's
    deviation from its siblings, a line per node), and the partition's change against its accepted runs."""
    row = {"id": panel_id, "type": "row", "title": "nodes against their siblings", "collapsed": False}
    across = _panel("$path across the nodes", 0, y + 1, panel_id + 1)
    across["gridPos"]["w"] = 16
    across["targets"][0].update(
        expr=f'{metrics.NODE_VS_SIBLINGS}{{system="$system",path="$path"}}', legendFormat="{{node}}"
    )
    across["options"]["legend"]["showLegend"] = True
    fleet = _panel("the partition against its accepted runs", 16, y + 1, panel_id + 2)
    fleet["targets"][0].update(expr=f'{metrics.FLEET_CHANGE}{{system="$system"}}', legendFormat="{{path}}")
    return [{**row, "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}}, across, fleet]


def dashboard(system: str, paths: pd.DataFrame) -> dict:
    panels, y, panel_id = [], 0, 1
    for kind, rows in paths.groupby("kind", sort=True):
        panels.append(
            {
                "id": panel_id,
                "type": "row",
                "title": kind,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
            }
        )
        panel_id, y = panel_id + 1, y + 1
        for i, path in enumerate(rows["path"]):
            panels.append(_panel(path, 8 * (i % 3), y + 7 * (i // 3), panel_id))
            panel_id += 1
        y += 7 * ((len(rows) + 2) // 3)
    panels += partition_panels(y, panel_id)
    change = {
        "name": "change points",
        "datasource": DATASOURCE,
        "enable": True,
        "iconColor": "red",
        "expr": f'{metrics.CHANGE_POINT}{{system="$system"}}',
        "titleFormat": "{{path}}",
        "textFormat": "{{line}}",
        "useValueForTime": False,
    }
    return {
        "title": f"GPU memory paths: {system}",
        "uid": f"gpu-mempaths-{system}",
        "schemaVersion": 39,
        "time": {"from": "now-90d", "to": "now"},
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus"},
                {"name": "system", "type": "constant", "query": system, "hide": 2},
                {
                    "name": "path",
                    "type": "query",
                    "datasource": DATASOURCE,
                    "query": f'label_values({metrics.NODE_VS_SIBLINGS}{{system="$system"}}, path)',
                    "refresh": 2,
                },
            ]
        },
        "annotations": {"list": [change]},
        "panels": panels,
    }


def write_dashboard(system: str, output: Path) -> Path:
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(dashboard(system, last_paths(system)), indent=1) + "\n")
    return output


def add_parsers(sub) -> None:
    """grafana in the suite's one parser (commands/cli.py)."""
    p = sub.add_parser("grafana", help="a Grafana dashboard of the system's paths over the nights")
    p.add_argument("--system", help="default: the one ReFrame picks here")
    p.add_argument("-o", "--output", required=True, help="the dashboard's JSON file")
    p.set_defaults(func=grafana)


def grafana(args) -> int:
    print(f"dashboard written to {write_dashboard(selected_system(args.system), Path(args.output))}")
    return 0
