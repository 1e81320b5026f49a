"""The nightly's exit statuses and the acceptance of runs, on synthetic data
(the whole flow through ReFrame is tests/test_fake_gpu.py)."""

import json
import re

import numpy as np
import pandas as pd
import pytest
import yaml

from commands import cli
from experiments import mem_scan
from experiments.references import matching_values
from judge import explain, select, verdict
from reports import history as history_page
from reports import runs, store
from runner import accept, histories, nightly

#: The verdict's statistics alone (the rules beside them off): what the tests of pooled spreads measure.
STATISTICS = verdict.Rules(guard=False, figures=False)

H100 = {"gpu_model": "NVIDIA H100 80GB HBM3", "host_link": "pcie gen5 x16", "gpu_count": "1"}
#: The kind of node of the committed single-H100 nights and baseline.
H100_KIND = "1 x NVIDIA H100 80GB HBM3"


def _samples(test, case, figure, unit, runs: list[list[float]], **facts) -> list[dict]:
    common = {
        "test": test,
        "case": case,
        "environ": "gnu",
        "system": "local",
        "partition": "default",
        **H100,
        **facts,
        "figure": figure,
        "unit": unit,
    }
    return [
        {**common, "run": r, "sample": k + 1, "value": v} for r, values in enumerate(runs) for k, v in enumerate(values)
    ]


def test_tolerance_covers_the_spread_between_runs_and_within_them():
    # Three runs whose medians differ by 2%: four robust standard deviations of them.
    runs = [np.array([100.0, 100.1, 99.9]), np.array([102.0, 102.1, 101.9]), np.array([98.0, 98.1, 97.9])]
    ref, spread = accept.tolerance(runs, minimum=0.03, better="higher")
    assert ref == pytest.approx(100.0) and spread == pytest.approx(4 * 1.4826 * 0.02, rel=1e-3)
    # Quiet runs: the minimum.
    quiet = [np.array([50.0, 50.01, 49.99])] * 3
    assert accept.tolerance(quiet, minimum=0.03, better="higher") == (pytest.approx(50.0), 0.03)
    # Noisy samples within each run: three robust standard deviations of them.
    noisy = [np.array([9.0, 9.5, 10.0, 10.5, 11.0])] * 3  # MAD 0.5, median 10
    assert accept.tolerance(noisy, 0.03, "higher")[1] == pytest.approx(3 * 1.4826 * 0.05)
    wild = [np.array([1.0, 3.0, 5.0]), np.array([2.0, 6.0, 9.0]), np.array([0.5, 1.0, 9.0])]
    assert accept.tolerance(wild, 0.03, "higher")[1] == accept.MAX_RATE_TOLERANCE  # a rate's bound stays above 0
    assert accept.tolerance(wild, 0.03, "lower")[1] > 1.0  # a time may take several times longer


def test_one_odd_run_among_three_does_not_blind_a_figure():
    # A copy engine at 30 GiB/s in one of three runs (it happened): the other two set the tolerance.
    runs = [np.array([51.3] * 5), np.array([30.5, 24.3, 29.6, 30.1, 30.0]), np.array([51.2] * 5)]
    ref, spread = accept.tolerance(runs, minimum=0.06, better="higher")
    assert ref == pytest.approx(51.2) and spread < 0.1
    assert accept.outside(ref, spread, "higher", 30.1) and not accept.outside(ref, spread, "higher", 51.0)


def test_accepted_runs_become_one_entry_per_case_and_node(tmp_path):
    rows = _samples(
        "um_bandwidth",
        "memory=pinned op=read size=1G",
        "steady_bw",
        "GiB/s",
        [[47.5, 47.4, 47.6], [47.3, 47.3, 47.4], [47.7, 47.6, 47.8]],
    )
    rows += _samples(
        "um_bandwidth",
        "memory=pinned op=read size=1G",
        "steady_bw",
        "GiB/s",
        [[40.0] * 3] * 3,
        gpu_count="2",
        gpu_model="NVIDIA H200",
    )
    rows += _samples("copy_latency", "device=0", "lat_us_pinned_h2d_8", "us", [[7.0, 7.01, 6.99]] * 3)
    entries, warnings = accept.reference_entries(pd.DataFrame(rows), minimum=0.03, detected=True)
    assert warnings == []
    um = {e["where"]["gpu_model"]: e for e in entries["um_bandwidth"]}
    assert um["NVIDIA H100 80GB HBM3"]["where"] == {
        "gpu_model": "NVIDIA H100 80GB HBM3",
        "host_link": "pcie gen5 x16",
        "gpu_count": 1,
    }
    assert um["NVIDIA H100 80GB HBM3"]["case"] == {"memory": "pinned", "op": "read", "size": "1G"}
    ref, lower, upper, unit = um["NVIDIA H100 80GB HBM3"]["values"]["steady_bw"]
    assert ref == pytest.approx(47.5) and lower == -0.03 and upper is None and unit == "GiB/s"  # upper: physics
    assert um["NVIDIA H200"]["values"]["steady_bw"][0] == 40.0
    [lat] = entries["copy_latency"]
    assert lat["values"]["lat_us_pinned_h2d_8"][1:] == [None, 0.03, "us"]  # a time's bound is above it


def test_a_declared_system_keeps_its_name_and_partition(tmp_path):
    rows = _samples(
        "host_bandwidth",
        "buffer_size=1G",
        "read_bw_node0",
        "GiB/s",
        [[60.0] * 3] * 3,
        system="summit",
        partition="batch",
    )
    entries, _ = accept.reference_entries(pd.DataFrame(rows), 0.03, detected=False)
    [entry] = entries["host_bandwidth"]
    assert entry["where"] == {"system": "summit", "partition": "batch"}


def test_a_case_in_too_few_runs_gets_no_reference_and_an_odd_run_is_named():
    rows = _samples("host_bandwidth", "buffer_size=1G", "read_bw_node0", "GiB/s", [[68.0, 68.1, 67.9]] * 2)
    rows += _samples(
        "um_bandwidth", "memory=pinned", "copy_engine_bw", "GiB/s", [[51.3] * 3, [30.2, 30.5, 30.1], [51.2] * 3]
    )
    entries, warnings = accept.reference_entries(pd.DataFrame(rows), 0.06, True)
    assert "host_bandwidth" not in entries  # two runs of three: its figures stay unjudged
    assert warnings[0].startswith("host_bandwidth buffer_size=1G on NVIDIA H100 80GB HBM3: in 2 of the runs")
    assert "copy_engine_bw: accepted run 2 (30.2 GiB/s) is outside the tolerance the runs give" in warnings[1]


def test_history_leaves_out_the_runs_that_failed_their_checks():
    frame = pd.DataFrame(
        {
            "system": ["local"] * 3,
            "test": ["host_bandwidth"] * 3,
            "result": ["pass", "fail", None],
            "time": pd.to_datetime(["2026-11-20T01:00", "2026-11-20T02:00", "2026-11-20T03:00"], utc=True),
        }
    )
    history = accept.history_of(frame, [{"start": "2026-11-21T00:00", "end": "2026-11-21T01:00"}], "local")
    assert list(history["time"].dt.hour) == [1, 3]  # the failed run (a fault) does not widen tolerances


def test_history_leaves_out_drills_and_their_reruns(tmp_path, monkeypatch):
    """A planted fault passes its checks (they hold to physical bounds only): it must not widen tolerances."""
    monkeypatch.setattr(runs, "NIGHTLY_DIR", tmp_path)
    drill = {"stamp": "d", "start": "2026-11-20T02:00", "end": "2026-11-20T02:10", "drill": "host memory"}
    drill["rerun"] = {"start": "2026-11-20T02:20", "end": "2026-11-20T02:30"}
    (tmp_path / "local" / "d").mkdir(parents=True)
    (tmp_path / "local" / "d" / "run.json").write_text(json.dumps(drill))
    times = ["2026-11-20T01:00", "2026-11-20T02:05", "2026-11-20T02:25", "2026-11-20T03:00"]
    frame = pd.DataFrame(
        {
            "system": ["local"] * 4,
            "test": ["daxpy"] * 4,
            "result": ["pass"] * 4,
            "time": pd.to_datetime(times, utc=True),
        }
    )
    history = accept.history_of(frame, [{"start": "2026-11-21T00:00", "end": "2026-11-21T01:00"}], "local")
    assert list(history["time"].dt.hour) == [1, 3]


def test_history_leaves_out_records_from_before_their_program_measured_the_same():
    """mem_scan's chunks were rounded to 2 MiB before ALIKE_SINCE, and small
    segments ran ten times slower: such records must not widen today's tolerances."""
    since = pd.Timestamp(mem_scan.ALIKE_SINCE)
    times = [since - pd.Timedelta(hours=1), since + pd.Timedelta(hours=1)] * 2
    frame = pd.DataFrame(
        {
            "system": ["local"] * 4,
            "test": ["mem_scan", "mem_scan", "daxpy", "daxpy"],
            "result": ["pass"] * 4,
            "time": times,
        }
    )
    history = accept.history_of(frame, [{"start": "2026-12-21T00:00", "end": "2026-12-21T01:00"}], "local")
    assert list(zip(history["test"], history["time"] > since)) == [
        ("mem_scan", True),
        ("daxpy", False),
        ("daxpy", True),
    ]


def test_written_references_keep_the_header_and_replace_the_last_acceptance(tmp_path):
    entries = {
        "X": [{"where": {"gpu_model": "G"}, "case": {"op": "read"}, "values": {"bw": [1.0, -0.1, None, "GB/s"]}}]
    }
    (tmp_path / "X.yaml").write_text("# hand-written header\n- where: {system: summit}\n  values: {}\n")
    for _ in range(2):  # accepting again replaces the section, it does not pile up
        accept.write_references(entries, "the runs A, B, C", tmp_path)
    text = (tmp_path / "X.yaml").read_text()
    assert text.startswith("# hand-written header") and text.count("# --- written by ./suite accept") == 1
    values = matching_values(yaml.safe_load(text), {"gpu_model": "G"}, {"op": "read", "size": "1G"})
    assert values == {"bw": [1.0, -0.1, None, "GB/s"]}


def test_references_of_one_kind_of_node_keep_anothers(tmp_path):
    """Accepting a pair's runs keeps the single GPU's section, and replaces only its own."""
    one = {"X": [{"where": {"gpu_model": "G", "gpu_count": 1}, "values": {"bw": [1.0, -0.1, None, "GB/s"]}}]}
    two = {"X": [{"where": {"gpu_model": "G", "gpu_count": 2}, "values": {"bw": [2.0, -0.1, None, "GB/s"]}}]}
    (tmp_path / "X.yaml").write_text("# header\n[]\n")
    accept.write_references(one, "A, B, C", tmp_path, kind="1 x G")
    for _ in range(2):
        accept.write_references(two, "D, E, F", tmp_path, kind="2 x G")
    text = (tmp_path / "X.yaml").read_text()
    assert text.count("for 1 x G from A, B, C") == 1 and text.count("for 2 x G from D, E, F") == 1
    assert [e["values"]["bw"][0] for e in yaml.safe_load(text)] == [1.0, 2.0]


def test_an_empty_reference_list_takes_entries(tmp_path):
    (tmp_path / "X.yaml").write_text("# header\n[]\n# template: - where: ...\n")
    accept.write_references(
        {"X": [{"where": {"system": "a"}, "values": {"bw": [1.0, -0.1, None, "GB/s"]}}]}, "s", tmp_path
    )
    assert yaml.safe_load((tmp_path / "X.yaml").read_text()) == [
        {"where": {"system": "a"}, "values": {"bw": [1.0, -0.1, None, "GB/s"]}}
    ]


# --- exit statuses ---------------------------------------------------------------


def _verdict(*paths):
    """A verdict whose paths have the given verdicts (figures: one each, judged alike)."""
    names = [f"p{i}" for i in range(len(paths))]
    figures = pd.DataFrame(
        {"path": names, "verdict": [v if v != "unstable" else "pass" for v in paths], "reason": [""] * len(paths)}
    )
    return verdict.Verdict(figures, pd.DataFrame({"path": names, "verdict": list(paths)}))


@pytest.mark.parametrize(
    "failed, paths, reasons, allow, status",
    [
        ([], ["pass", "pass"], [], False, 0),
        ([], ["pass", "improved", "transient"], [], False, 0),  # a transient the rerun did not confirm: listed
        (["x"], ["moved"], [], False, 1),  # a failed check outranks everything
        ([], ["broken"], [], False, 1),  # an impossible measurement is a failed check
        ([], ["pass", "moved"], ["vanished"], False, 2),  # a confirmed move, even with something unjudged
        ([], ["unstable"], [], False, 2),
        ([], ["pass"], ["vanished"], False, 3),
        ([], ["pass"], ["vanished"], True, 3),  # --allow-unjudged allows no baseline only
        ([], ["pass"], ["other-kind"], True, 3),
        ([], None, ["no-baseline"], True, 0),
        ([], None, ["no-baseline"], False, 3),
    ],
)
def test_exit_statuses(failed, paths, reasons, allow, status):
    result = _verdict(*paths) if paths is not None else None
    assert nightly.nightly_status({"failed": failed}, result, reasons, allow) == status


@pytest.mark.parametrize(
    "failed, paths, reasons, status",
    [
        ([], None, ["other-kind"], 2),  # a first night on a new kind of node: its siblings alone
        ([], ["pass"], [], 2),
        (["x"], ["pass"], [], 1),  # a failed check still outranks it
    ],
)
def test_a_gpu_behind_its_siblings_exits_2_with_or_without_a_baseline(failed, paths, reasons, status):
    result = _verdict(*paths) if paths is not None else None
    lagging = ["host link h2d of GPU 1, ce"]
    assert nightly.nightly_status({"failed": failed}, result, reasons, False, lagging=lagging) == status


def test_a_baseline_of_no_kind_serves_every_kind_until_runs_with_node_facts_are_accepted(tmp_path, monkeypatch):
    """An accepted.json from before kinds, whose runs recorded no node facts."""
    monkeypatch.setattr(runs, "accepted_file", lambda system: tmp_path / "accepted.json")
    (tmp_path / "accepted.json").write_text(json.dumps({"system": "s", "runs": [{"stamp": "a"}], "node": {}}))
    assert runs.read_accepted("s", "2 x G")["runs"] == [{"stamp": "a"}]
    runs.write_baseline("s", {"kind": "1 x G", "runs": [{"stamp": "b"}], "node": {"default": {"gpus": []}}})
    assert runs.read_accepted("s", "2 x G") is None and runs.read_accepted("s", "1 x G")["runs"] == [{"stamp": "b"}]
    assert set(runs.read_baselines("s")) == {"unknown", "1 x G"}


def test_references_need_three_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runs, "NIGHTLY_DIR", tmp_path)
    for stamp in ("2026-11-20T03:00:00", "2026-11-21T03:00:00"):
        run = tmp_path / "local" / stamp.replace(":", "")
        run.mkdir(parents=True)
        (run / "run.json").write_text(
            json.dumps({"stamp": stamp, "start": stamp, "end": stamp, "checks": "pass", "health": "pass"})
        )
    args = cli.parser().parse_args(["accept", "2026-11-20T03:00:00", "2026-11-21T03:00:00", "--write-references"])
    assert accept.accept(args) == 3  # nothing judged, not "moved"
    assert "at least 3 runs on separately started nodes, 2 given" in capsys.readouterr().err


def test_a_stamp_of_another_system_names_the_system_to_give(tmp_path, monkeypatch):
    monkeypatch.setattr(runs, "NIGHTLY_DIR", tmp_path)
    (tmp_path / "mysite" / "2026-11-20T030000").mkdir(parents=True)
    (tmp_path / "mysite" / "2026-11-20T030000" / "run.json").write_text("{}")
    with pytest.raises(SystemExit, match=r"it is a night of mysite \(--system mysite\)"):
        runs.find_run("local", "2026-11-20T03:00:00")


def test_a_run_whose_checks_failed_is_accepted_only_saying_why(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runs, "NIGHTLY_DIR", tmp_path)
    monkeypatch.setattr(accept, "runs_without_rows", lambda *_: [])  # runs of records alone: no perflogs to hold
    monkeypatch.setattr(runs, "accepted_file", lambda system: tmp_path / "accepted.json")
    stamps = ("2026-11-20T03:00:00", "2026-11-21T03:00:00", "2026-11-22T03:00:00")
    for stamp, checks in zip(stamps, ("pass", "fail", "pass")):
        run = tmp_path / "local" / stamp.replace(":", "")
        run.mkdir(parents=True)
        record = {"stamp": stamp, "start": stamp, "end": stamp, "checks": checks, "health": "pass"}
        (run / "run.json").write_text(json.dumps(record))
    args = cli.parser().parse_args(["accept", *stamps, "--system", "local"])
    assert accept.accept(args) == 3
    assert "2026-11-21T03:00:00 did not pass all its health checks and checks" in capsys.readouterr().err
    assert not (tmp_path / "accepted.json").exists()
    why = "a reference of another machine failed; every case measured"
    assert accept.accept(cli.parser().parse_args(["accept", *stamps, "--system", "local", "--despite", why])) == 0
    baseline = runs.read_accepted("local", "unknown")
    assert [r.get("accepted_despite") for r in baseline["runs"]] == [None, why, None]


def test_a_night_whose_health_saw_no_gpu_is_no_baseline_unless_the_system_declares_none(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runs, "NIGHTLY_DIR", tmp_path)
    monkeypatch.setattr(runs, "accepted_file", lambda system: tmp_path / "accepted.json")
    stamps = ("2026-11-20T03:00:00", "2026-11-21T03:00:00", "2026-11-22T03:00:00")
    for stamp in stamps:
        run = tmp_path / "local" / stamp.replace(":", "")
        run.mkdir(parents=True)
        record = {"stamp": stamp, "start": stamp, "end": stamp, "checks": "pass", "health": "pass", "kind": "no GPU"}
        (run / "run.json").write_text(json.dumps(record))
    assert accept.accept(cli.parser().parse_args(["accept", *stamps, "--system", "local"])) == 3
    assert "health saw no GPU on the node, and local does not declare a node without GPUs" in capsys.readouterr().err
    assert not (tmp_path / "accepted.json").exists()
    assert accept.declares_no_gpu({"partitions": [{"node": {"gpus": {"count": 0}}}]})
    assert not accept.declares_no_gpu({"partitions": [{"node": {"gpus": {"count": 6}}}]})


def test_every_committed_accepted_run_passed_its_checks_or_its_baseline_says_why():
    from committed import accepted_files

    for accepted_file in accepted_files():
        for kind, baseline in runs.baselines_in(json.loads(accepted_file.read_text())).items():
            for run in baseline["runs"]:
                passed = run.get("checks") == "pass" and run.get("health") == "pass"
                assert passed or run.get("accepted_despite"), f"{accepted_file} {kind}: {run['stamp']} says not why"


def test_a_broken_sample_of_an_accepted_run_gives_no_reference():
    frame = pd.DataFrame(
        {
            "time": pd.to_datetime(["2026-11-20T03:00:10Z"] * 3, utc=True),
            "system": "local",
            "sample": pd.array([1, 2, 3], dtype="Int64"),
            "value": [50.0, float("nan"), 52.0],
        }
    )
    run = {"start": "2026-11-20T03:00:00", "end": "2026-11-20T03:01:00"}
    assert accept.accepted_samples(frame, "local", [run])["value"].tolist() == [50.0, 52.0]


def test_a_drill_is_never_accepted_as_the_baseline(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runs, "NIGHTLY_DIR", tmp_path)
    monkeypatch.setattr(runs, "accepted_file", lambda system: tmp_path / "accepted.json")
    for stamp, drill in (("2026-11-20T03:00:00", None), ("2026-11-21T03:00:00", "host memory streamed")):
        run = tmp_path / "local" / stamp.replace(":", "")
        run.mkdir(parents=True)
        record = {"stamp": stamp, "start": stamp, "end": stamp, "checks": "pass", "health": "pass"}
        (run / "run.json").write_text(json.dumps(record | ({"drill": drill} if drill else {})))
    args = cli.parser().parse_args(["accept", "2026-11-20T03:00:00", "2026-11-21T03:00:00", "--system", "local"])
    assert accept.accept(args) == 3
    assert "a drill is no baseline: 2026-11-21T03:00:00 (host memory streamed)" in capsys.readouterr().err
    assert not (tmp_path / "accepted.json").exists()


def test_earlier_runs_of_a_case_widen_its_tolerance(tmp_path):
    """Runs of the case outside the accepted ones count with their spread; other cases' do not."""
    facts = {"system": "local", "partition": "default", **H100}
    history = pd.DataFrame(
        [
            {
                **facts,
                "test": "copy_latency",
                "environ": "gnu",
                "case": "device=0",
                "figure": "lat_us_pinned_h2d_8",
                "sample": None,
                "value": v,
                "time": t,
            }
            for t, v in (
                ("2026-11-22T10:00", 8.5),
                ("2026-11-22T11:00", 8.9),
                ("2026-11-22T12:00", 8.6),
                ("2026-11-22T13:00", 8.7),
            )
        ]
        + [
            {
                **facts,
                "test": "copy_latency",
                "environ": "gnu",
                "case": "device=1",
                "figure": "lat_us_pinned_h2d_8",
                "sample": None,
                "value": 99.0,
                "time": "2026-11-22T14:00",
            }
        ]
    ).astype({"sample": "Int64"})
    rows = _samples("copy_latency", "device=0", "lat_us_pinned_h2d_8", "us", [[7.0, 7.01, 6.99]] * 3)
    samples = pd.DataFrame(rows)
    entries, _ = accept.reference_entries(samples, 0.03, True)
    [alone] = entries["copy_latency"]
    assert alone["values"]["lat_us_pinned_h2d_8"][2] == 0.03
    entries, _ = accept.reference_entries(samples, 0.03, True, history=history)
    [widened] = entries["copy_latency"]
    # 8.5, 8.9, 8.6 and 8.7 us on four earlier nodes against 7.0 on three accepted ones: four
    # robust standard deviations of the seven (device=1's 99 us is another case).
    deviations = sorted([0, 0, 0, *(v / 7 - 1 for v in (8.5, 8.9, 8.6, 8.7))])
    assert widened["values"]["lat_us_pinned_h2d_8"][2] == pytest.approx(4 * 1.4826 * deviations[3], abs=1e-4)


@pytest.mark.parametrize(
    "options, kept",
    [
        (["-n", "path_matrix"], []),
        (["--name=path_matrix", "-p", "gnu"], ["-p", "gnu"]),
        (["-x", "um_bandwidth", "-S", "samples=3", "-t", "paths"], ["-S", "samples=3"]),
        (["--failed", "--exec-policy", "serial"], ["--exec-policy", "serial"]),
        (["-npath_matrix", "-thealth", "-p", "gnu"], ["-p", "gnu"]),
        (["--restore-session", "-r"], ["-r"]),
        (["--restore-session", "old.json", "-S", "a=1"], ["-S", "a=1"]),
        (["--restore-session=old.json"], []),
    ],
)
def test_the_health_checks_run_whatever_the_night_selects(options, kept):
    # '-n path_matrix' used to reach the health run too, which then selected
    # nothing, wrote no report, and left the node unjudged.
    assert nightly.health_options(options) == kept


def test_many_figures_unjudged_for_one_reason_are_one_line(tmp_path):
    """A check not run tonight leaves dozens of figures vanished: one line
    counts them; a few broken ones are each named."""
    vanished = "vanished: the accepted runs have it, tonight's run did not measure it"
    rows = [
        {"verdict": "unjudged", "test": "daxpy", "case": f"rows={i}", "figure": f"us_i{k}", "reason": vanished}
        for i in range(12)
        for k in range(4)
    ]
    rows += [
        {
            "verdict": "broken",
            "test": "copy_latency",
            "case": "device=0",
            "figure": "lat_us_pinned_h2d_8",
            "reason": "not a number: s3",
        }
    ]
    lines = nightly.figure_lines(pd.DataFrame(rows), tmp_path)
    assert lines == [
        f"UNJUDGED daxpy: 48 figures of 12 case(s): {vanished} (each in {tmp_path / 'compare.csv'})",
        "BROKEN copy_latency device=0 lat_us_pinned_h2d_8: not a number: s3",
    ]


@pytest.mark.slow
def test_a_nights_report_links_the_systems_history(tmp_path, monkeypatch):
    """A committed night of hopper-vm that moved (22:49), its report drawn
    again (its host memory: few figures): its index links the history of
    every night, drawn beside the nights."""
    from reports.load import Loaded, load

    last = next(r for r in runs.finished_runs("hopper-vm", kind=H100_KIND) if r["stamp"] == "2026-11-24T22:49:45")
    frame = load(runs.PERFLOGS / "hopper-vm", warn=None).frame
    tonight = select.run_rows(frame, "hopper-vm", [last]) & (frame["test"] == "host_bandwidth")
    records = Loaded(frame[tonight])
    assert not records.frame.empty
    outdir = tmp_path / last["stamp"].replace(":", "")
    paths = pd.read_csv(runs.NIGHTLY_DIR / "hopper-vm" / last["stamp"].replace(":", "") / "paths.csv")
    nightly.write_html("hopper-vm", last, records, outdir, frame, verdict.Verdict(pd.DataFrame(), paths))
    index = (outdir / "index.html").read_text()
    folder = "history-1xNVIDIA-H100-80GB-HBM3"
    assert f"href='../{folder}/history.html'" in index and "History of hopper-vm" in index
    # The night's verdict opens its report, what moved first (22:49: the copy engines' host-to-GPU path).
    assert f"<h2>Verdict: exit {last['exit']} ({last['meaning']})</h2>" in index and "Next step: drain" in index
    table = index[index.index("<caption>Each path against") :].split("</table>")[0]
    rows = re.findall(r"<tr>\s*<td class='text'>([^<]+)</td>\s*<td class='text'>([^<]+)</td>", table)
    assert len(rows) == len(paths) and rows[0][1] == "MOVED" and rows[-1][1] == "pass"
    history = (tmp_path / folder / "history.html").read_text()
    assert f"History of hopper-vm, {H100_KIND}: 22 paths over" in history and "history-host-link.png" in history
    assert "index.html" not in history  # one history serves every night: no way back to one of them
    # The nightly hands the history what it judged tonight over, rather than have it computed again: the same page.
    accepted = runs.read_accepted("hopper-vm", H100_KIND)
    levels = histories.night_levels("hopper-vm", accepted, tonight=last)
    spreads = dict(zip(paths["path"], paths["spread_pct"] / 100))
    stamps = [r["stamp"] for r in accepted["runs"]]
    starts = nightly.changepoints.found_starts(levels, spreads, stamps)
    drawn = histories.drawn(levels, spreads, nightly.changepoints.changes(levels, spreads, stamps, starts), starts)
    monkeypatch.setattr(history_page, "draw", lambda *args: [])  # its words are compared, not its figures again
    again = history_page.write_history("hopper-vm", tmp_path / "again", drawn, kind=H100_KIND).read_text()
    heading = re.compile(r"<h1>.*</h1>|<h2>Changes the nightly reports[^<]*</h2>(?:<ul>.*?</ul>|<p>.*?</p>)", re.S)
    assert heading.findall(again) == heading.findall(history)


def test_a_drill_is_judged_as_any_night_and_left_out_of_later_nights_history(tmp_path, monkeypatch):
    monkeypatch.setattr(runs, "NIGHTLY_DIR", tmp_path)
    monkeypatch.setattr(store, "STORES", tmp_path / "stores")  # no night's levels kept by an earlier test
    nights = {
        "n1": {"stamp": "n1", "start": "2026-12-01T01:00", "end": "2026-12-01T01:05"},
        "fault": {"stamp": "fault", "start": "2026-12-02T01:00", "end": "2026-12-02T01:05", "drill": "host memory"},
        "n3": {"stamp": "n3", "start": "2026-12-03T01:00", "end": "2026-12-03T01:05"},
    }
    for name, run in nights.items():
        (tmp_path / "site" / name).mkdir(parents=True)
        (tmp_path / "site" / name / "run.json").write_text(json.dumps(run))
    assert [r["stamp"] for r in runs.finished_runs("site")] == ["n1", "n3"]
    assert [r["stamp"] for r in runs.finished_runs("site", drills=True)] == ["n1", "fault", "n3"]
    seen = []
    monkeypatch.setattr(
        histories.changepoints,
        "path_levels",
        lambda frame, system, nights, stamps: seen.append(nights) or pd.DataFrame(),
    )
    tonight = {"stamp": "drill", "start": "2026-12-04T01:00", "end": "2026-12-04T01:05", "drill": "GPU memory"}
    histories.night_levels("site", {"runs": []}, tonight=tonight)
    assert [r["stamp"] for r in seen[-1]] == ["n1", "n3", "drill"]
    parser = cli.parser()
    args = parser.parse_args(["nightly", "--drill", "host memory streamed on 16 cores", "--confirm-later", "0"])
    assert args.drill == "host memory streamed on 16 cores" and args.confirm_later == 0


def test_a_rerun_saves_its_window_at_once_and_hands_on_the_records_it_reloaded(tmp_path, monkeypatch):
    """A night killed after its rerun keeps the rerun's window in run.json
    (rejudge confirms by it); the change points over the nights see the
    rerun's records (a transient path is at its rerun's level)."""
    reloaded = pd.DataFrame({"with": ["the rerun's records"]})
    monkeypatch.setattr(nightly, "rerun_selection", lambda result, report: ["-n", "/abc"])
    ran = []
    monkeypatch.setattr(nightly, "reframe", lambda *args: ran.append(args) or 0)
    monkeypatch.setattr(nightly, "outcomes", lambda report: {"failed": [], "passed": [], "skipped": []})
    monkeypatch.setattr(nightly, "load", lambda paths, warn, windows=None: type("Loaded", (), {"frame": reloaded}))
    monkeypatch.setattr(nightly, "judged_with_rerun", lambda frame, system, accepted, run, alpha: "confirmed")
    run = {"stamp": "s", "start": "2026-12-01T01:00", "end": "2026-12-01T01:05"}
    night = nightly.Night("site", run, tmp_path, {}, [], 0.05, {"failed": []}, pd.DataFrame())
    assert nightly.rerun_flagged(night, "rerun", "confirming", result=None) == "confirmed"
    assert night.frame is reloaded
    assert set(json.loads((tmp_path / "run.json").read_text())["rerun"]) == {"start", "end"}
    from rfmconfig.settings import NIGHTLY_OPTIONS

    assert "--mode" not in ran[0] and "/abc" in ran[0]  # the mode spelled out: a site's -p selects alone
    assert " ".join(NIGHTLY_OPTIONS) in " ".join(map(str, ran[0]))  # its settings kept (the reprex's repeats)


def test_a_night_stopped_during_its_rerun_keeps_the_reruns_window(tmp_path, monkeypatch):
    """Measured on two H200s (2026-11-28 16:20): a night stopped by a time
    limit during its rerun wrote no rerun window, so the records the rerun
    logged under a drill counted as clean history for the kind's references."""

    def stopped(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(nightly, "rerun_selection", lambda result, report: ["-n", "/abc"])
    monkeypatch.setattr(nightly, "reframe", stopped)
    run = {"stamp": "s", "start": "2026-12-01T01:00", "end": "2026-12-01T01:05"}
    night = nightly.Night("site", run, tmp_path, {}, [], 0.05, {"failed": []}, pd.DataFrame())
    with pytest.raises(KeyboardInterrupt):
        nightly.rerun_flagged(night, "rerun", "confirming", result=None)
    saved = json.loads((tmp_path / "run.json").read_text())["rerun"]
    assert saved["start"] <= saved["end"] and saved["cut"]


def test_no_later_measure_without_a_rerun_or_on_a_night_that_failed(tmp_path, monkeypatch):
    slept = []
    monkeypatch.setattr(nightly.time, "sleep", slept.append)
    flagged = type("Verdict", (), {"flagged_paths": lambda self: ["host memory read, NUMA node 0"]})()
    run = {"stamp": "s", "start": "2026-12-01T01:00", "end": "2026-12-01T01:05"}
    night = nightly.Night("site", run, tmp_path, {}, [], 0.05, {"failed": []}, pd.DataFrame())
    assert nightly.confirm_later(night, flagged, 180) is flagged  # nothing was rerun
    run["rerun"] = {"start": "2026-12-01T01:06", "end": "2026-12-01T01:07"}
    night.found["failed"] = ["rerun: path_matrix"]
    assert nightly.confirm_later(night, flagged, 180) is flagged  # it exits 1 whatever moved
    assert slept == []


def test_the_later_measure_draws_the_pages_while_it_waits_and_waits_what_the_budget_leaves(tmp_path, monkeypatch):
    slept, drawn = [], []
    monkeypatch.setattr(nightly.time, "sleep", slept.append)
    monkeypatch.setattr(nightly, "rerun_flagged", lambda night, key, why, result: f"{key} judged")
    monkeypatch.setattr(nightly, "now", lambda: "2026-12-01T01:06:35")  # 395 s into the night
    flagged = type("Verdict", (), {"flagged_paths": lambda self: ["host link h2d of GPU 0, ce"]})()
    run = {
        "stamp": "s",
        "start": "2026-12-01T01:00:00",
        "rerun": {"start": "2026-12-01T01:06:00", "end": "2026-12-01T01:06:30"},
    }
    night = nightly.Night("site", run, tmp_path, {}, [], 0.05, {"failed": []}, pd.DataFrame())
    assert nightly.confirm_later(night, flagged, 180, meanwhile=lambda: drawn.append(1), budget_s=600) == "later judged"
    assert drawn == [1] and run["later_wait_s"] == 130 and 129 < slept[0] <= 130


def test_the_pages_are_drawn_alongside_the_rerun_at_the_lowest_priority_and_once(tmp_path):
    import os
    import threading

    drawing, seen = threading.Event(), []

    def pages():
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        drawing.set()
        return "pages"

    night = nightly.Night("site", {}, tmp_path, {}, [], 0.05, {"failed": []}, pd.DataFrame())
    with nightly.alongside(lambda: night.draw(pages)):
        assert drawing.wait(10)  # drawn while the block (the rerun's ReFrame) still runs
    assert night.pages == "pages" and seen == [19]
    night.draw(pages)  # the later measure's wait draws nothing again
    assert seen == [19]
    with nightly.alongside(None):  # --no-report: nothing alongside
        pass


def test_an_interrupted_rerun_does_not_wait_for_the_pages():
    import threading
    import time

    release, began = threading.Event(), time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with nightly.alongside(lambda: release.wait(30)):  # a drawing that would take half a minute
            raise KeyboardInterrupt
    assert time.monotonic() - began < 10
    release.set()


def test_a_nights_verdict_names_its_reasons_and_puts_the_largest_alarms_first():
    from reports.html import verdict_section

    paths = pd.DataFrame(
        {
            "path": ["a", "b <&>", "c", "d", "e"],
            "verdict": ["pass", "moved", "yardstick", "moved", "transient"],
            "change_pct": [0.1, -4.0, float("nan"), -30.0, 9.0],
            "reason": ["", "moved alone: path_matrix gpu1_h2d_allgpus_ce", "", "", "gone when measured again later"],
        }
    )
    run = {"exit": 3, "meaning": "not judged", "unjudged_reasons": ["vanished"]}
    paths, _, found, step = nightly.explained(run, paths, None)
    parts = verdict_section(run, paths, [], nightly.UNJUDGED_REASONS, None, found, step)
    page = "\n".join(parts)
    assert "<p>Not judged (vanished): figures the accepted runs have were not measured tonight.</p>" in page
    rows = re.findall(r"<tr>\s*<td class='text'>([^<]+)</td>\s*<td class='text'>([^<]+)</td>", page)
    assert rows == [("d", "MOVED"), ("b &lt;&amp;&gt;", "MOVED"), ("e", "TRANSIENT"), ("a", "pass")]
    assert "Judged by another check (1 path(s)" in page  # set aside, under the table
    # The judge's reasons in words: no figure's internal name on the page.
    assert "its one figure moved" in page and "gpu1_h2d_allgpus_ce" not in page
    assert "Next step:" in page and all(f.line for f in found)


def test_a_nights_verdict_shows_each_gpu_against_its_siblings_what_lags_first():
    from reports.html import verdict_section

    lags = pd.DataFrame(
        {
            "path": ["host link h2d of GPU 0, ce", "host link h2d of GPU 1, ce", "host link d2h of GPU 1, sm"],
            "kind": ["host-link"] * 3,
            "gpus": ["0", "1", "1"],
            "verdict": ["pass", "lagging", "transient"],
            "vs_siblings_pct": [1.0, -48.0, -12.0],
            "floor_pct": [3.0] * 3,
            "z": [-3.0, 11.0, 5.0],
            "siblings": [1] * 3,
            "reason": ["within the floor", "", "not behind its siblings in the rerun"],
        }
    )
    run = {"exit": 2, "meaning": "something moved"}
    _, lags, found, step = nightly.explained(run, None, lags)
    page = "\n".join(verdict_section(run, None, [], lags=lags, found=found, step=step))
    table = page[page.index("Each GPU against its siblings") :]
    rows = re.findall(
        r"<tr>\s*<td class='text'>[^<]+</td>\s*<td class='text'>[^<]+</td>\s*<td class='text'>([^<]+)", table
    )
    assert rows == ["LAGGING", "TRANSIENT", "pass"]
    # One sign on the page: a rate 48% behind its siblings is +48.0% worse, named so in the header.
    assert "<td>+48.0</td>" in table and "% worse (positive is worse) than its siblings" in page
    assert "Next step: drain" in page and "host link h2d of GPU 1, ce: +48.0% against its siblings" in page


def test_a_typod_system_is_a_usage_error_that_writes_no_night(capsys):
    from checks.suite import options
    from commands.cli import main
    from reports.runs import NIGHTLY_DIR
    from systems import data

    before = set(NIGHTLY_DIR.glob("*"))
    for command in (
        ["nightly", "--system", "sumit"],
        ["accept", "x", "--system", "sumit"],
        ["power", "--system", "sumit"],
    ):
        assert main(command) == 3
        assert "--system 'sumit': not known (did you mean summit?); known: ac922," in capsys.readouterr().err
    assert set(NIGHTLY_DIR.glob("*")) == before and not (NIGHTLY_DIR / "sumit").exists()
    assert options.main(["-n", "x", "--system=sumit"]) == 3 and "did you mean summit?" in capsys.readouterr().err
    assert options.main(["--system", "summit:batch"]) == 0 and options.main([]) == 0
    with pytest.raises(SystemExit, match="--system summit: partition 'gpu': not known; known: batch"):
        data.known_system("summit:gpu")
    assert main(["accept", "x", "--system", "summit:batch"]) == 3  # a night's folder is a system's, not a partition's
    assert "a partition's night takes --partition" in capsys.readouterr().err


def test_a_typod_variable_or_test_in_a_setting_is_a_usage_error_naming_the_nearest(capfd):
    from checks.suite import options
    from commands.cli import main

    tests = {"mem_scan": {"memory_fraction", "reps"}, "SuiteBuild": {"build_jobs"}, "um_bandwidth": {"size"}}
    assert options.mistakes(["-S", "mem_scan.memory_fracton=0.4", "-Sum_bandwith.size=1G"], tests=tests) == [
        "-S: variable of mem_scan 'memory_fracton': not known (did you mean memory_fraction?); "
        "known: memory_fraction, reps",
        "-S: test 'um_bandwith': not known (did you mean um_bandwidth?); known: SuiteBuild, mem_scan, um_bandwidth",
    ]
    fine = ["--setvar=reps=50", "-S", "mem_scan.build.build_jobs=8", "-S", "size=1G"]
    assert options.mistakes(fine, tests=tests) == []
    assert (
        options.mistakes(["-S", "rep=3", "-S", "nonsense"], tests=tests)[1]
        == "-S 'nonsense': not [test.]variable=value"
    )
    # The suite's own tests, read from checks/: the nightly names the mistake and writes no night.
    assert options.mistakes(["-S", "mem_scan.memory_fraction=0.4", "-S", "SuiteBuild.build_jobs=8"]) == []
    assert main(["nightly", "--system", "local", "--", "-S", "mem_scan.memory_fracton=0.4"]) == 3
    assert (
        "-S: variable of mem_scan 'memory_fracton': not known (did you mean memory_fraction?)" in capfd.readouterr().err
    )


def test_a_check_name_no_check_matches_is_a_usage_error():
    from checks.suite import options

    assert options.mistakes(["-n", "um_bandwith"])[0].startswith(
        "-n: no check matches 'um_bandwith': not known (did you mean um_bandwidth or host_bandwidth?)"
    )
    assert options.mistakes(["-n", "("])[0].startswith("-n '(': not a regular expression")
    # ReFrame's own forms: a regular expression over the display names without spaces, a hash, a variant.
    fine = ["-n", "^(path_matrix)(%|$)", "-npath_matrix%paths=host", "--name=host_bandwidth", "-n", "/abc", "-n", "x@1"]
    assert options.mistakes(fine) == []


@pytest.mark.slow  # eleven nights judged
def test_a_baseline_run_the_others_would_flag_is_found_by_leaving_it_out():
    """The committed single-H100 baseline, each run judged against the other
    eight: none would be flagged. 04:20:31, accepted before the rule, would
    exit 2 against the other nine (its small async copies' samples spread 5.5
    times theirs) and was accepted again without it (2026-11-28); offered
    back, it is flagged again on that path. A night that moved (22:49, the
    copy engines' host-to-GPU path), offered too, is flagged with that path."""
    accepted = runs.read_accepted("hopper-vm", H100_KIND)
    assert len(accepted["runs"]) == 9 and all(r["leave_one_out"]["moved"] == [] for r in accepted["runs"])
    offered = {"2026-11-23T04:20:31", "2026-11-24T22:49:45"}
    extra = [r for r in runs.finished_runs("hopper-vm", kind=H100_KIND) if r["stamp"] in offered]
    from reports.load import load

    frame = load(runs.PERFLOGS / "hopper-vm", warn=None).frame
    found = accept.leave_one_out(frame, "hopper-vm", {**accepted, "runs": [*accepted["runs"], *extra]})
    assert {stamp for stamp, lines in found.items() if lines} == offered
    assert any(line.startswith("host link h2d of GPU 0, ce: +") for line in found["2026-11-24T22:49:45"])
    assert any(line.startswith("small copies h2d of GPU 0, async") for line in found["2026-11-23T04:20:31"])
    three = {**accepted, "runs": accepted["runs"][:3]}  # two others each: too few to judge against
    kept = accept.held_out(three, accept.leave_one_out(frame, "hopper-vm", three))
    assert {run["leave_one_out"]["why"] for run in kept["runs"]} == {"3 other runs needed"}


@pytest.mark.long  # the committed perflogs judged: the night, its rerun and its later measure (test_contention.py
# holds the rule itself, on tables, in every tier)
def test_the_committed_neighbour_night_on_four_h200s_drains_nothing_and_names_gpu_2_alone_behind_its_siblings():
    """08:45, a neighbour copying 50 GB/s each way through GPU 2's host link: GPU 2's host paths lag its
    siblings, and GPU 1's and 3's host paths are 8-13% slower than the accepted runs (the host side is
    every link's). Judged again by the nightly's own code: every finding contended, none drained (the
    night itself, under the rule that looked at a finding's own GPUs alone, drained GPU 1 and 3)."""
    from reports.load import load

    outdir = runs.NIGHTLY_DIR / "hopper-vm" / "2026-11-28T084531"
    run = json.loads((outdir / "run.json").read_text())
    baseline, kind = nightly.baseline_of_node("hopper-vm", outdir)
    assert kind == "4 x NVIDIA H200" and run["drill"]
    # the three runs it was judged against (its log's 'judged by path against'): the kind has more since
    judged_against = {"2026-11-27T16:03:22", "2026-11-27T19:39:04", "2026-11-27T19:50:01"}
    accepted = baseline | {"runs": [r for r in baseline["runs"] if r["stamp"] in judged_against]}
    assert len(accepted["runs"]) == 3
    frame = load(runs.PERFLOGS / "hopper-vm", warn=None).frame
    judged = nightly.with_contention(nightly.judged_with_rerun(frame, "hopper-vm", accepted, run, 0.05), run, outdir)
    contended = run["contention"]["paths"]
    drain, kept = nightly.drain_reasons(judged.verdict, {"failed": []}, judged.siblings, contended)
    lagging = judged.siblings[judged.siblings["verdict"] == "lagging"]
    # 28 findings kept, each contended: 15 before the H200 pair's six accepted runs lent their spreads
    # (2026-11-28), 21 before the guard rail and a case moving alone flagged paths too (2026-12-06)
    assert drain == [] and len(kept) == 27
    assert set(lagging["gpus"]) == {"2"} and len(lagging) == 7
    flagged = judged.verdict.flagged_paths()
    assert {p for p in flagged if "GPU 1" in p or "GPU 3" in p} and set(flagged) <= set(contended)
    assert "on GPU 2 in 1 case(s); GPU 2's PCIe 49.4 GB/s in" in contended["host link d2h of GPU 1, sm"]


@pytest.mark.long  # the committed perflogs judged: the night's first pass, against three runs and against six
def test_a_neighbour_on_one_gpu_of_an_h200_pair_is_flagged_on_every_path_it_slowed_past_twice_its_floor():
    """Two H200s, a PyTorch process copying 75-98 GB/s both ways through GPU
    0's host link all night (2026-11-28 16:20; its rerun was cut by the
    machine's ten-minute limit, so this is the first pass, as a night that
    ends in a rerun starts). 32 paths slowed past twice their floor. Against
    the kind's first three accepted runs, with the spreads the other H200s
    lend, 24 of them are flagged (8 pass: host memory read -57% and write
    -44%, whose three runs spread 23% and 9%; the pageable and zero-copy small
    copies; both SM paths with all GPUs at once, which no other two-GPU kind
    of H200 measured; GPU 1's latency +12%). Against the six the kind has
    since accepted, 30: still passed, the d2h by SMs with all GPUs at once
    (-12%, Holm-adjusted p 0.034 over the path family's alpha 0.025) and the
    pageable device-to-host small copies (+34%, spread 12%)."""
    from reports.load import load

    run = json.loads((runs.NIGHTLY_DIR / "hopper-vm" / "2026-11-28T162032" / "run.json").read_text())
    assert run["rerun"]["cut"] and run["drill"]  # its rerun cut after 2 of 40 cases: the first pass is judged
    baseline = runs.read_accepted("hopper-vm", "2 x NVIDIA H200")
    assert len(baseline["runs"]) == 6
    frame = load(runs.PERFLOGS / "hopper-vm", warn=None).frame
    missed = {}
    for rules in (STATISTICS, verdict.ALL_RULES):
        for name, stamps in (("three", run["accepted_runs"]), ("six", [r["stamp"] for r in baseline["runs"]])):
            accepted = {**baseline, "runs": [runs.find_run("hopper-vm", s)[1] for s in stamps]}
            # its pool derived
            paths = nightly.judge_window(frame, "hopper-vm", accepted, run, 0.05, rules=rules).verdict.paths
            slowed = paths[explain.worse_pct(paths["change_pct"], paths["better"]) > 2 * paths["floor_pct"]]
            assert len(slowed) == 32, name
            missed[name, rules] = set(slowed.loc[~slowed["verdict"].isin(verdict.FLAGGED), "path"])
    three, six = missed["three", STATISTICS], missed["six", STATISTICS]
    assert len(three) == 8 and "host memory read, NUMA node 0" in three
    assert six == {"host link d2h of GPU 0 with all GPUs at once, sm", "small copies d2h of GPU 0, pageable"}
    # The guard rail and one case moving alone: host memory (-57%, -44%) past its guard of 35%, and more.
    assert (
        missed["three", verdict.ALL_RULES] < three
        and "host memory read, NUMA node 0" not in missed["three", verdict.ALL_RULES]
    )


@pytest.mark.long  # the committed perflogs judged twice: with the other kinds' spreads pooled, and without
def test_the_h100_pairs_neighbour_night_is_seen_by_its_three_accepted_runs_with_the_pooled_spreads():
    """The pair of H100s, three accepted runs, a second process copying
    through GPU 1's host link both ways all night (2026-11-25 21:41). Judged
    on its three runs alone, 8 paths end flagged; with the spreads the
    single H100 measured of the same links (on GPU 0: a GPU's host link is
    its sibling's), 10: GPU 1's SM copies each way (-13%) too. Passed still,
    as alone: GPU 1's latency (+222%) and both ways by SMs, whose paths the
    single H100 measured in four runs only (a prior worth one degree of
    freedom, no more than its own kind's), its d2h by copy engine and h2d by
    SMs with all GPUs at once, which no other kind of H100 has, and host
    memory read (-43%: this kind's own three runs spread 54%)."""
    from reports.load import load

    outdir = runs.NIGHTLY_DIR / "hopper-vm" / "2026-11-25T214100"
    run = json.loads((outdir / "run.json").read_text())
    accepted = runs.read_accepted("hopper-vm", "2 x NVIDIA H100 80GB HBM3")
    assert len(accepted["runs"]) == 3
    frame = load(runs.PERFLOGS / "hopper-vm", warn=None).frame
    pool = nightly.others_pool(frame, "hopper-vm", accepted)
    flagged = {}
    for name, used in (("alone", verdict.NO_POOL), ("pooled", pool)):
        base = nightly.accepted_values(frame, "hopper-vm", accepted)
        judged = nightly.judge_window(frame, "hopper-vm", accepted, run, 0.05, base, used, STATISTICS)
        for key in select.RERUNS:
            if key in run:
                again = nightly.judge_window(frame, "hopper-vm", accepted, run[key], 0.05, base, used, STATISTICS)
                judged = nightly.Judgement(verdict.confirm(judged.verdict, again.verdict, by=key), judged.siblings)
        flagged[name] = set(judged.verdict.flagged_paths())
    assert len(flagged["alone"]) == 8 and len(flagged["pooled"]) == 10 and flagged["alone"] < flagged["pooled"]
    gpu1 = {p for p in flagged["pooled"] if "GPU 1" in p}
    assert gpu1 == {
        "host link both ways of GPU 1, ce",
        "host link d2h of GPU 1, ce",
        "host link d2h of GPU 1, sm",
        "host link h2d of GPU 1 with all GPUs at once, ce",
        "host link h2d of GPU 1, ce",
        "host link h2d of GPU 1, sm",
    }


@pytest.mark.long  # the committed perflogs judged
def test_the_committed_night_beside_a_cpu_neighbour_streaming_host_memory_is_contended_and_drains_nothing():
    """One H100 on PCIe Gen5 (2026-12-06 04:21), four processes copying 512 MiB
    buffers with the CPUs alone (no GPU) all night: host memory 39% worse, the
    host link's SM paths 48-51%, each confirmed by its rerun. Judged again by
    the nightly's own code from its perflogs and the host readings it kept:
    every finding on the host side, each CONTENDED by the processes named,
    none drained; the GPU's own paths (HBM, DAXPY) not flagged."""
    from reports.load import load

    outdir = runs.NIGHTLY_DIR / "hopper-vm" / "2026-12-06T042151"
    run = json.loads((outdir / "run.json").read_text())
    assert "mem-stream" in run["drill"] and run["drain"] == [] and run["exit"] == 2
    baseline, kind = nightly.baseline_of_node("hopper-vm", outdir)
    assert kind == "1 x NVIDIA H100 80GB HBM3"
    accepted = baseline | {"runs": [r for r in baseline["runs"] if r["stamp"] in run["accepted_runs"]]}
    frame = load(runs.PERFLOGS / "hopper-vm", warn=None).frame
    night = frame[select.run_rows(frame, "hopper-vm", [run])]
    assert night["code"].str.fullmatch(r"[0-9a-f]{12}").all()  # what measured each record
    judged = nightly.with_contention(nightly.judged_with_rerun(frame, "hopper-vm", accepted, run, 0.05), run, outdir)
    contended = run["contention"]["paths"]
    drain, kept = nightly.drain_reasons(judged.verdict, {"failed": []}, judged.siblings, contended)
    flagged = judged.verdict.flagged_paths()
    assert drain == [] and len(kept) == len(flagged) >= 6
    assert {"host memory read, NUMA node 0", "host link h2d of GPU 0, sm"} <= set(flagged)
    assert all("mem-stream" in contended[p] and "on the host's CPUs" in contended[p] for p in flagged)
    assert not any(p.startswith(("GPU memory", "DAXPY")) for p in flagged)
    facts = json.loads((outdir / "node-vm.json").read_text())["machine"]
    assert facts["cpu"]["cpus"] == 16 and facts["memory"]["size_gib"] > 100
