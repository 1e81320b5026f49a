"""benchmarks/history.py's synthetic histories: made of the committed nights, read back whole.

The histories are written under tmp_path and read back by the suite's loader in a process whose data
root is theirs (GPU_MEMPATHS_DATA), so that nothing of them reaches the checkout's perflogs/, results/
or caches. Two checks' perflogs only (host_bandwidth, path_matrix: the committed H100 nights' smallest),
so that they read back in seconds.
"""

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from benchmarks import history as bench
from benchmarks import synthetic

REPO = Path(__file__).resolve().parent.parent
ONLY = {"host_bandwidth", "path_matrix"}

#: Loads each history's perflogs and counts rows by window, in a process whose data root is the test's.
READ_BACK = """
import json, sys
from pathlib import Path
from benchmarks.history import HISTORY_CACHES
from benchmarks.night import redirect_caches

spec = json.loads(Path(sys.argv[1]).read_text())
redirect_caches(HISTORY_CACHES, Path(spec["root"]))
import pandas as pd
from reports.load import load
from reports.runs import finished_runs

found = {"nights": len(finished_runs(spec["system"], kind=spec["kind"])), "issues": {}, "windows": {}}
frames = {}
for name, folder in spec["loads"].items():
    loaded = load([Path(folder)], warn=None)
    frames[name] = loaded.frame
    found["issues"][name] = sorted(
        [str(Path(i.path).relative_to(folder)), i.line, i.kind] for i in loaded.issues if i.path.startswith(folder)
    )
for name, (load_name, start, end) in spec["windows"].items():
    frame = frames[load_name]
    inside = frame[(frame["time"] >= pd.Timestamp(start, tz="UTC")) & (frame["time"] <= pd.Timestamp(end, tz="UTC"))]
    found["windows"][name] = {"rows": len(inside), "nodes": sorted(inside["node"].unique())}
for name, (load_name, after) in spec.get("after", {}).items():
    frame = frames[load_name]
    later = frame[frame["time"] > pd.Timestamp(after, tz="UTC")]
    found["windows"][name] = {"rows": len(later), "nodes": sorted(later["node"].unique())}
print(json.dumps(found))
"""


def read_back(root: Path, spec: dict) -> dict:
    path = root / "read-back.json"
    path.write_text(json.dumps({**spec, "root": str(root)}))
    env = {**os.environ, "GPU_MEMPATHS_DATA": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", READ_BACK, str(path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def histories(tmp_path_factory):
    """The committed history (of the two checks), the same with every H100 night twice, and a partition's
    night of three nodes after the committed history; each history's rows by window, read back."""
    top = tmp_path_factory.mktemp("histories")
    one = synthetic.make_history(top / "one", only=ONLY)
    two = synthetic.make_history(top / "two", times=2, only=ONLY)
    part = synthetic.make_history(top / "part", only=ONLY)
    night = synthetic.write_partition_night(part, 3, 1)
    windows = {}
    for night_copied, days in two.copies:
        moved = synthetic.shifted_run(night_copied.run, days)
        for key, (start, end) in synthetic.window_texts(night_copied.run).items():
            windows[f"{night_copied.stamp} {key}"] = ["one", start, end]
            windows[f"{moved['stamp']} {key} copy"] = ["two", *synthetic.window_texts(moved)[key]]
    windows["partition"] = ["part", night.start, night.end]
    last_committed = max(n.span()[1] for n in synthetic.committed_nights("hopper-vm"))
    spec = {
        "system": "hopper-vm",
        "kind": two.kind,
        "loads": {
            name: str(h.root / "perflogs" / "hopper-vm") for name, h in (("one", one), ("two", two), ("part", part))
        },
        "windows": windows,
        "after": {
            "copies": ["two", (last_committed + timedelta(days=1)).date().isoformat()],
            "partition nodes": ["part", (last_committed + timedelta(days=1)).date().isoformat()],
        },
    }
    return {"one": one, "two": two, "part": part, "night": night, "read": read_back(top / "two", spec)}


def test_a_history_of_times_2_reads_back_with_no_new_issue_and_twice_the_nights(histories):
    one, two, read = histories["one"], histories["two"], histories["read"]
    assert two.nights == 2 * one.nights and one.nights > 10
    assert read["nights"] == two.nights  # the suite's own count (reports/runs.py's finished_runs)
    assert [i for i in read["issues"]["two"] if i not in read["issues"]["one"]] == []
    assert two.lines > one.lines


def test_every_copied_night_keeps_its_rows_inside_its_moved_windows(histories):
    windows, copied = histories["read"]["windows"], 0
    for night, days in histories["two"].copies:
        moved = synthetic.shifted_run(night.run, days)
        assert moved["stamp"] > night.stamp
        for key in synthetic.window_texts(night.run):
            rows = windows[f"{moved['stamp']} {key} copy"]["rows"]
            assert rows == windows[f"{night.stamp} {key}"]["rows"], (night.stamp, key)
            copied += rows
    assert copied > 0
    # Every row after the committed history is inside a copied night's window: none fell between them.
    assert windows["copies"]["rows"] == copied


def test_a_partition_night_of_three_nodes_lands_in_its_window_with_three_names(histories):
    night, windows = histories["night"], histories["read"]["windows"]
    assert night.nodes == ["node0001", "node0002", "node0003"]
    assert windows["partition"]["nodes"] == night.nodes
    assert windows["partition"]["rows"] > 0
    # Nothing of the nodes outside the night's window: every row after the committed history is in it.
    assert windows["partition nodes"] == windows["partition"]
    assert len(json.loads((night.pending / "run-report.json").read_text())["runs"][0]["testcases"]) > 3


def test_a_night_whose_folder_kept_no_run_report_gets_one_made_from_its_lines(histories):
    two = histories["two"]
    night = next(
        n
        for n, _ in two.copies
        if any(check.records.get((n.stamp, "rerun")) for check in two.checks.values())
        and not (n.folder / "run-report.json").exists()
    )
    for window in ("tonight", "rerun"):
        cases = synthetic.made_report(two.checks, night.stamp, window, 0)["runs"][0]["testcases"]
        lines = [line for check in two.checks.values() for line in check.records.get((night.stamp, window), ())]
        assert cases and {case["result"] for case in cases} == {"pass"}
        assert len({case["hashcode"] for case in cases}) == len(cases)  # what a rerun selects each by
        assert sum(len(case["perfvalues"]) for case in cases) == len(lines)
    health = synthetic.made_report(two.checks, night.stamp, "health", 0)["runs"][0]["testcases"]
    assert [case["display_name"] for case in health] == ["node_health"]


def test_a_mistake_on_the_command_line_exits_3_naming_its_option(capsys):
    for argv, option in (
        (["kind"], "--times"),
        (["kind", "--times", "0"], "--times"),
        (["partition", "--nodes", "x"], "--nodes"),
    ):
        with pytest.raises(SystemExit) as stop:
            bench.main(argv)
        assert stop.value.code == 3
        assert option in capsys.readouterr().err


def cells(table: str) -> list[dict[str, str]]:
    """A markdown table's rows as {column: cell}."""
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in table.splitlines()
        if line.startswith("|")
    ]
    head, body = rows[0], rows[2:]
    return [dict(zip(head, row)) for row in body]


@pytest.mark.slow
def test_kind_times_1_end_to_end_prints_every_phase_with_cpu_time(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.history",
            "kind",
            "--times",
            "1",
            "--csv",
            str(tmp_path / "t.csv"),
            "--night-timeout-min",
            "15",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    nights = cells(done.stdout)
    assert [row["night"] for row in nights] == [label for _, label in bench.KIND_NIGHTS]
    for row in nights:
        assert row["exit"] in {"0", "1", "2", "3"}, row
        for phase in [*bench.NIGHT_PHASES, "total after the checks"]:
            assert float(row[phase].split(" s /")[0]) > 0, (phase, row)
    assert nights[0]["store/cache before"] == "cold (empty)"
    assert nights[1]["store/cache before"].startswith("warm")
    assert (tmp_path / "t.csv").read_text().count("\n") == 2 * (len(bench.NIGHT_PHASES) + 1) + 1
