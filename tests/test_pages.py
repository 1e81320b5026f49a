"""Pages that say what to do: a committed night's page drawn again from its
folder (runner/pages.py), every change as % worse, a why for every path, the
two judges of a path side by side, a next step for every verdict
(judge/explain.py), the report's index opening with the latest night of
each kind of node, a partition's heat map by each path's floor, and the
history page's words and axes. On the committed nights, without perflogs
read: seconds (those that draw a figure are left out of --quick)."""

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from commands.cli import main
from judge import explain
from reports.runs import NIGHTLY_DIR
from runner import histories, nightly, pages

REPO = Path(__file__).resolve().parent.parent
NIGHTS = NIGHTLY_DIR / "hopper-vm"
#: Two H100s, a second process copying through GPU 1's host link: exit 2, GPU 1 behind its sibling.
DRILL = "2026-11-25T214100"
#: The committed partition's night: the clean single-H100 nights judged as one partition's nodes.
PARTITION = "2026-11-27T200037"
#: Figures' internal names (path_matrix gpu1_h2d_allgpus_ce): never on a page.
INTERNAL = re.compile(r"\bgpu\d+_\w+")


def table(stamp: str, name: str) -> pd.DataFrame | None:
    return pages.night_table(NIGHTS / stamp / f"{name}.csv")


def judged_nights() -> list[str]:
    return sorted(p.parent.name for p in NIGHTS.glob("*/paths.csv"))


# --- one sign, a why for every path, two judges side by side ---------------------


def test_a_rate_behind_and_a_time_above_are_both_positive_worse():
    change = pd.Series([-50.0, 200.0, 30.0])
    assert list(explain.worse_pct(change, pd.Series(["higher", "lower", "higher"]))) == [50.0, 200.0, -30.0]
    rows = pd.DataFrame({"path": ["a", "b", "c"], "kind": ["host-link", "link-latency", "host-link"]})
    assert list(explain.directions(rows, {"c": "lower"})) == ["higher", "lower", "lower"]
    levels = np.log([2.0])  # a rate halved, a time doubled: the same worse-oriented log
    assert explain.worse_of_levels(levels, "higher")[0] == pytest.approx(50.0)
    assert explain.worse_of_levels(levels, "lower")[0] == pytest.approx(100.0)


@pytest.mark.parametrize("stamp", judged_nights())
def test_every_path_of_every_committed_night_says_why_in_words(stamp):
    paths = explain.explain_paths(table(stamp, "paths"))
    assert (paths["why"].str.len() > 0).all(), paths.loc[paths["why"] == "", "path"].tolist()
    assert not paths["why"].str.contains(INTERNAL).any()
    beyond = paths[(paths["verdict"] == "pass") & (paths["worse_pct"].abs() > paths["floor_pct"])]
    assert not beyond["why"].str.startswith("within the floor").any()
    assert beyond["why"].str.contains("spread|chance|better", regex=True).all()


def test_a_pass_beyond_its_floor_says_why_and_a_disagreement_of_the_judges_is_explained():
    """The drill on two H100s: GPU 1's latency 222% worse than the accepted
    runs passed (three accepted runs, 46 paths judged at once), while its
    siblings' judge found it 199% behind GPU 0: both rows say why."""
    paths = explain.explain_paths(table(DRILL, "paths"))
    lags = explain.explain_siblings(table(DRILL, "siblings"), paths)
    paths, lags = explain.side_by_side(paths, lags)
    latency = "host link latency of GPU 1, SM loads"
    [mine] = paths[paths["path"] == latency].to_dict("records")
    assert mine["verdict"] == "pass" and mine["worse_pct"] == pytest.approx(222.4, abs=0.1)
    assert "not beyond chance with 46 paths judged at once" in mine["why"] and "siblings' verdict stands" in mine["why"]
    assert mine["siblings_verdict"] == "LAGGING +198.8%"
    [theirs] = lags[lags["path"] == latency].to_dict("records")
    assert "Against the accepted runs it passed (+222.4% worse)" in theirs["why"]
    # Where both judges flag a path, neither row explains a disagreement.
    both = paths[(paths["verdict"] == "moved") & paths["siblings_verdict"].str.startswith("LAGGING")]
    assert len(both) == 4 and not both["why"].str.contains("siblings' verdict").any()
    # The UM migration of 06:49 ran 30% faster than accepted: better, not an empty why.
    clean = explain.explain_paths(table("2026-11-26T064916", "paths")).set_index("path")
    assert clean.loc["Unified Memory migration, GPU 0", "worse_pct"] == pytest.approx(-30.4, abs=0.1)
    assert clean.loc["Unified Memory migration, GPU 0", "why"].startswith("better, not worse")


@pytest.mark.parametrize(
    ("stamp", "step"),
    [
        (DRILL, explain.Step.DRAIN),  # GPU 1 behind its sibling
        ("2026-11-26T064916", explain.Step.NOTHING),  # as accepted
        ("2026-11-27T193904", explain.Step.ACCEPT),  # four H200s, no accepted runs of their kind
        ("2026-11-24T200603", explain.Step.COMPARE),  # a change held over the nights
    ],
)
def test_each_verdict_ends_with_its_next_step(stamp, step):
    run = json.loads((NIGHTS / stamp / "run.json").read_text())
    *_, found, (name, text) = nightly.explained(run, table(stamp, "paths"), table(stamp, "siblings"))
    assert name == step and text
    assert all(f.step in vars(explain.Step).values() for f in found)


def test_a_contended_finding_calls_for_a_rerun_not_a_drain():
    lags = pd.DataFrame(
        {
            "path": ["host link h2d of GPU 5, ce"],
            "kind": ["host-link"],
            "gpus": ["5"],
            "verdict": ["lagging"],
            "vs_siblings_pct": [-45.0],
            "floor_pct": [3.0],
            "z": [20.0],
            "siblings": [7],
            "reason": [""],
            "contended_by": ["pid 7 (copier, 1.0 GiB) on GPU 5"],
        }
    )
    run = {"exit": 2, "meaning": "something moved", "drain": [], "not_drained": ["..."]}
    *_, found, (name, _) = nightly.explained(run, None, lags)
    assert [f.verdict for f in found] == ["CONTENDED"] and name == explain.Step.RERUN


# --- a night's page drawn again ----------------------------------------------------


def test_a_committed_night_is_drawn_again_verdict_first(tmp_path):
    assert main(["night", DRILL, "--verdict-only", "-o", str(tmp_path)]) == 0
    page = (tmp_path / "index.html").read_text()
    first_table = page.index("<table")
    assert page.index("Verdict: exit 2 (something moved)") < page.index("Next step: drain") < first_table
    assert "A drill:" in page and not INTERNAL.search(page)
    headers = re.findall(r"<th>([^<]*%[^<]*)</th>", page)
    assert headers and all("% worse" in h or h in ("floor %", "spread of the accepted runs %") for h in headers)
    assert "change %" not in page and "(positive is worse)" in page
    # Every row of both tables has its why (the last column of words).
    for body in re.findall(r"<tbody>(.*?)</tbody>", page, re.S):
        for row in re.findall(r"<tr>(.*?)</tr>", body, re.S):
            assert re.findall(r"<td class='text'>([^<]*)</td>", row)[-1].strip(), row


#: Four H200s, exit 2 as it ran (GPUs 1 and 3 lagging on peer latency), exit 0 judged again (./suite rejudge).
REJUDGED = "2026-11-28T201122"


def test_a_night_judged_again_is_shown_as_judged_again_beside_what_it_said(tmp_path):
    run = pages.read_night(NIGHTS / REJUDGED)
    assert (run["exit"], run["as_ran"]["exit"]) == (0, 2) and run["rejudged"]
    assert pages.read_night(NIGHTS / DRILL).get("rejudged") is None  # never judged again: its own
    *_, found, (name, _) = nightly.explained(run, *pages.night_tables(NIGHTS / REJUDGED, run))
    assert name == explain.Step.NOTHING and [f for f in found if f.verdict == "LAGGING"] == []
    assert main(["night", REJUDGED, "--verdict-only", "-o", str(tmp_path)]) == 0
    page = (tmp_path / "index.html").read_text()
    # Side by side, each dated, the night's own first: not its exit 2 in a grey sentence under the later exit 0.
    table = page[page.index("<h2>Verdicts</h2>") :]
    table = table[: table.index("</table>")]
    own = "the night itself</td><td class='text'>exit 2 (something moved)</td><td class='text'>2026-11-28 20:11"
    again = "judged again (./suite rejudge)</td><td class='text'>exit 0 (as accepted)</td>"
    assert own in table and again in table and table.index(own) < table.index(again), table


def test_rejudge_records_its_verdict_for_the_pages(tmp_path, monkeypatch):
    from runner import accept

    folder = tmp_path / REJUDGED
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"exit": 2, "meaning": "something moved"}))
    monkeypatch.setattr(accept.verdict, "summary_line", lambda result: "1 headline figure: 1 judged")
    accept.write_rejudged(folder, 3, None, {"runs": [{"stamp": "a"}, {"stamp": "b"}]}, ["unjudged-figures"])
    record = json.loads((folder / "rejudged.json").read_text())
    assert record["exit"] == 3 and record["meaning"] == "not judged" and record["accepted_runs"] == ["a", "b"]
    run = pages.read_night(folder)
    assert run["unjudged_reasons"] == ["unjudged-figures"]  # the night's own reasons are not the rejudge's
    assert run["as_ran"] == {"exit": 2, "meaning": "something moved", "unjudged_reasons": None}


def test_a_partition_night_is_never_shown_as_rejudged(tmp_path):
    folder = tmp_path / PARTITION
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"exit": 2, "meaning": "something moved", "nodes": ["a", "b"]}))
    (folder / "rejudged.json").write_text(json.dumps({"when": "x", "exit": 0, "meaning": "as accepted"}))
    assert pages.read_night(folder)["exit"] == 2


@pytest.mark.slow  # judges a night of four H200s again: the committed history, read whole
def test_rejudge_judges_a_night_again_with_its_contention_and_keeps_a_failed_night_failed(
    tmp_path, monkeypatch, capsys
):
    import argparse
    import shutil

    from judge.status import FAILED
    from reports import runs
    from runner import accept

    copies = {}
    for stamp in (REJUDGED, "2026-11-28T223245"):  # exit 2 as it ran; a neighbour inside GPU 0's memory
        copies[stamp] = shutil.copytree(NIGHTS / stamp, tmp_path / stamp)
    (copies[REJUDGED] / "rejudged-siblings.csv").write_text("left by an earlier rejudge\n")
    failed = json.loads((copies[REJUDGED] / "run.json").read_text())
    found = {stamp: (folder, json.loads((folder / "run.json").read_text())) for stamp, folder in copies.items()}
    monkeypatch.setattr(accept, "find_run", lambda system, stamp, command="accept": found[stamp.replace(":", "")])
    args = argparse.Namespace(system="hopper-vm", stamps=list(copies), alpha=0.05)
    assert accept.rejudge(args) == 2
    assert pages.read_night(copies[REJUDGED])["exit"] == 0
    assert "left by" not in (copies[REJUDGED] / "rejudged-siblings.csv").read_text()
    neighbour = pages.read_night(copies["2026-11-28T223245"])
    paths, _ = pages.night_tables(copies["2026-11-28T223245"], neighbour)
    *_, found_now, (step, _) = nightly.explained(neighbour, paths, None)
    assert {f.verdict for f in found_now} == {"CONTENDED"} and step == explain.Step.RERUN  # who used GPU 0, kept
    # A night whose checks failed is not made good by its figures.
    found[REJUDGED] = (copies[REJUDGED], {**failed, "exit": FAILED, "meaning": "a check failed"})
    assert accept.rejudge(argparse.Namespace(system="hopper-vm", stamps=[REJUDGED], alpha=0.05)) == FAILED
    assert runs.as_last_judged(copies[REJUDGED], found[REJUDGED][1])["exit"] == FAILED
    # A night on another host than the accepted runs' is judged again as the nightly judged it: not judged, not drained.
    folder, run = found["2026-11-28T223245"]
    found["2026-11-28T223245"] = (folder, {**run, "host_differs": "the host differs from the accepted nodes': CPU X"})
    assert accept.rejudge(argparse.Namespace(system="hopper-vm", stamps=["2026-11-28T223245"], alpha=0.05)) == 3
    assert "other-host" in json.loads((folder / "rejudged.json").read_text())["unjudged_reasons"]


def test_a_stamp_no_night_has_is_a_usage_error_naming_the_nearest(capsys):
    drawn = set(pages.DRAWN.rglob("*")) if pages.DRAWN.exists() else set()
    assert main(["night", "2026-11-26T06:50"]) == 3
    err = capsys.readouterr().err
    assert "no night '2026-11-26T06:50'" in err and "the nearest: 2026-11-26T064916" in err
    assert main(["night", "last-tuesday"]) == 3
    assert "the latest: " in capsys.readouterr().err
    assert (set(pages.DRAWN.rglob("*")) if pages.DRAWN.exists() else set()) == drawn  # nothing written


def test_a_night_is_drawn_where_git_ignores_it_unless_asked():
    assert pages.DRAWN.relative_to(REPO).parts[0] == "build"
    ignored = subprocess.run(["git", "check-ignore", "-q", str(pages.DRAWN / "hopper-vm" / DRILL)], cwd=REPO)
    assert ignored.returncode == 0


@pytest.mark.slow  # draws a figure: seconds
def test_the_committed_partition_night_is_drawn_again_with_its_heat_map(tmp_path):
    assert main(["night", PARTITION, "--verdict-only", "-o", str(tmp_path)]) == 0
    page = (tmp_path / "index.html").read_text()
    assert page.index("Verdict: exit 2") < page.index("Next step: drain") < page.index("heat-map.png")
    assert "2026-11-24T223455: behind its siblings on host link h2d of GPU 0, sm +36.4%" in page
    assert "A replay, not a night measured at once" in page and "in floors of the path" in page
    assert (tmp_path / "heat-map.png").stat().st_size > 20_000
    # Its folder keeps its page: drawn by the partition's own writers, committed with its tables.
    kept = NIGHTS / PARTITION
    assert {"index.html", "heat-map.png", "cells.csv", "run.json", "drain.txt"} <= {p.name for p in kept.iterdir()}
    assert "partition" in json.loads((kept / "run.json").read_text()) and (kept / "drain.txt").read_text().startswith(
        "2026-11-24T223455\t"
    )


def test_a_cells_table_written_before_worse_pct_gives_the_same_worse():
    cells = pd.read_csv(NIGHTS / PARTITION / "cells.csv")
    assert explain.cell_worse(cells.drop(columns="worse_pct")).to_numpy() == pytest.approx(
        cells["worse_pct"].to_numpy(), nan_ok=True
    )


@pytest.mark.slow  # draws a figure: seconds
def test_the_heat_map_marks_the_cells_that_named_a_node_and_scales_by_each_paths_floor(tmp_path):
    from reports import partition as page

    result = pages.read_partition(NIGHTS / PARTITION)
    drawn, _ = page.heat_rows(result.cells, result.nodes)
    assert drawn.loc["2026-11-24T223455", "host link h2d of GPU 0, sm"] == pytest.approx(36.4, abs=0.1)
    floors = page.floors_of(result.fleet, drawn.columns)
    assert floors["host memory read, NUMA node 0"] == 5 and floors["host link h2d of GPU 0, sm"] == 3
    drawn_marks = []
    original = page.Rectangle

    def spy(*args, **kwargs):
        drawn_marks.append(kwargs.get("ls"))
        return original(*args, **kwargs)

    page.Rectangle = spy
    try:
        page.draw_heat_map(result.cells, result.nodes, tmp_path / "heat.png", result.fleet)
    finally:
        page.Rectangle = original
    named = result.cells["verdict"].isin(page.NAMED).sum()
    assert drawn_marks.count("-") == named == 2 and drawn_marks.count(":") >= 1  # 22:49's transient


# --- the report's index --------------------------------------------------------------


def test_a_partition_night_kept_without_its_tables_is_named_and_left_out_of_the_index(tmp_path, monkeypatch, capsys):
    """A partition's night copied with its run.json and cells.csv alone (the history benchmark's made-up
    years keep no more): its page cannot be drawn again, and the report says so rather than stopping."""
    folder = tmp_path / "hopper-vm" / PARTITION
    folder.mkdir(parents=True)
    for name in ("run.json", "cells.csv"):
        (folder / name).write_bytes((NIGHTS / PARTITION / name).read_bytes())
    assert pages.partition_lacks(folder) == ["fleet.csv", "nodes.csv"]
    with pytest.raises(SystemExit, match="lacks fleet.csv, nodes.csv"):
        pages.read_partition(folder)
    run = json.loads((folder / "run.json").read_text())
    monkeypatch.setattr(pages, "NIGHTLY_DIR", tmp_path)
    monkeypatch.setattr(pages, "latest_runs", lambda system: {("1 x NVIDIA H100 80GB HBM3", True): run})
    assert pages.latest_nights(pd.DataFrame({"system": ["hopper-vm"]}), tmp_path / "report") == []
    assert "lacks fleet.csv, nodes.csv: left out of the latest nights" in capsys.readouterr().err


@pytest.mark.slow  # draws a figure: seconds
def test_the_index_opens_with_the_latest_night_of_each_kind(tmp_path):
    from reports.html import nights_section

    links = pages.latest_nights(pd.DataFrame({"system": ["hopper-vm"]}), tmp_path)
    labels = [link.label for link in links]
    assert "hopper-vm, 1 x NVIDIA H100 80GB HBM3" in labels and "hopper-vm, 4 x NVIDIA H200" in labels
    assert any(label.endswith("a partition's night of 19 nodes") for label in labels)
    latest = {link.label: link for link in links}
    assert latest["hopper-vm, 1 x NVIDIA H100 80GB HBM3"].run["stamp"] == "2026-11-26T06:49:16"  # no drill
    assert latest["hopper-vm, 2 x NVIDIA H100 80GB HBM3"].step == (  # not judged on its night, accepted since
        explain.Step.NOTHING,
        "it has since become one of its kind's accepted runs",
    )
    assert all(link.page.exists() and link.step[0] for link in links)
    section = "".join(nights_section(links, tmp_path))
    assert section.startswith("<h2>The latest night of each kind of node</h2>")
    assert "night-hopper-vm-1xNVIDIA-H100-80GB-HBM3/index.html" in section
    assert "<b>DRAIN</b> GMP-231 2026-11-24T223455" in section


# --- the history page ------------------------------------------------------------------


@pytest.mark.slow  # draws a figure: seconds
def test_a_history_without_changes_says_so_and_names_its_spikes_with_readable_axes(tmp_path):
    runs = [f"2026-12-{d:02d}T01:00:00" for d in range(1, 11)]
    levels = pd.DataFrame(
        {
            "path": "host link h2d of GPU 0, ce",
            "run": runs,
            "level": [0.0, 0.001, -0.001, 0.0, np.log(1 / 0.6), 0.0, 0.001, 0.0, -0.001, 0.0],
            "floor": 0.03,
            "kind": "host-link",
            "better": "higher",
        }
    )
    drawn = histories.drawn(levels, {"host link h2d of GPU 0, ce": 0.005}, [])
    assert drawn[0]["worse"].iloc[4] == pytest.approx(40.0) and drawn[0]["far"].sum() == 1
    page = (histories.write_history("s", tmp_path, drawn, kind="1 x GPU")).read_text()
    assert "No new level has held three nights" in page and "<li>none</li>" not in page
    assert "12-05 01:00: host link h2d of GPU 0, ce +40%" in page

    import matplotlib.pyplot as plt

    from reports import history

    fig, ax = plt.subplots()
    history._panel(ax, "p", drawn[0], None)
    assert min(label.get_fontsize() for label in ax.get_xticklabels()) >= 9  # 12 px at the page's 100 dpi
    assert ax.get_xticklabels()[0].get_text() == "12-01 01:00"
    plt.close(fig)


def test_a_change_that_rounds_to_zero_is_written_without_a_sign():
    """'-0.0' and '+0.0' beside paths as accepted read as a move: what rounds to zero is written 0.0."""
    from experiments.numbers import signed

    assert [signed(v) for v in (-0.04, 0.04, -3.25, 12.0)] == ["0.0", "0.0", "-3.2", "+12.0"]
    assert signed(-0.4, 0) == "0" and signed(0.6, 0) == "+1"


def test_a_night_of_many_paths_shows_what_moved_first_and_folds_the_paths_within_their_floor(tmp_path):
    """A four-H200 night judges 156 paths: its table shows what moved and what passed beyond its floor,
    the rest folded into one line that counts them (the page once had over 100 rows, most within 3%)."""
    assert main(["night", "2026-11-28T084531", "--verdict-only", "-o", str(tmp_path)]) == 0
    page = (tmp_path / "index.html").read_text()
    folded = re.search(r"<summary>(\d+) more paths as accepted, each within its floor</summary>", page)
    assert folded and int(folded[1]) > 50, page[:2000]
    first = page[: page.index("<details>")]
    shown = first[first.rindex("<table") :].count("<tr>") - 1  # less the heading's row
    assert 0 < shown <= 60 and page.index("moved") < page.index("<details>")
