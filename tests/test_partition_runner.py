"""runner/partition.py's choices before anything runs: which nodes, which Slurm partition, whose failure."""

import json

import numpy as np
import pytest
from test_partition import table

from judge import partition as judge_partition
from runner import contention
from runner import partition as night


def test_all_and_n_count_the_nodes_slurm_can_run_on_and_a_list_is_checked():
    states = {"a": "idle", "b": "drained", "c": "allocated", "d": "down", "e": "mixed", "f": "idle*", "g": "planned-"}
    usable, down = night.available(states)
    assert usable == ["a", "c", "g"] and down == {"b": "drained", "d": "down", "e": "mixed", "f": "idle*"}
    assert night.chosen_nodes("all", usable) == ["a", "c", "g"] and night.chosen_nodes("1", usable) == ["a"]
    assert night.chosen_nodes("c,b", ["a", "b", "c"]) == ["c", "b"]
    for spec, known, words in [("3", ["a"], "has 1 node"), ("x", ["a"], "no node x"), ("0", ["a"], "at least one")]:
        with pytest.raises(night.NodesError, match=words):
            night.chosen_nodes(spec, known)
    with pytest.raises(night.NodesError, match="cannot list its nodes"):
        night.chosen_nodes("all", None)
    assert night.chosen_nodes("4608", None) == 4608


def test_the_slurm_partition_is_read_from_the_access_options_alone():
    assert night.slurm_partition_name({"access": ["--partition=dgx"]}) == "dgx"
    assert night.slurm_partition_name({"access": ["-p gpu"]}) == "gpu"
    assert night.slurm_partition_name({"access": ["--gpus-per-node=8", "--ntasks-per-node=1"]}) is None


def test_a_failure_on_a_host_not_asked_for_is_the_nights_not_a_nodes():
    failed = {"login1.site": ["SuiteBuild: build failed"], "n2.site": ["host_bandwidth: sanity"], "": ["crash"]}
    assert night.by_expected(failed, ["n1", "n2"]) == {
        "": ["login1.site: SuiteBuild: build failed", "crash"],
        "n2": ["host_bandwidth: sanity"],
    }


def test_lsf_hosts_are_the_compute_hosts_the_job_was_given(tmp_path):
    (tmp_path / "hosts").write_text("batch3 1 h41n01.summit 42 h41n02.summit 42\n")
    assert night.lsf_hosts(tmp_path, 2) == ["h41n01", "h41n02"]
    assert night.lsf_hosts(tmp_path / "none", ["x", "y"]) == ["x", "y"]


def test_a_node_fault_another_process_explains_in_the_run_and_its_rerun_is_contended(tmp_path):
    """runner/partition.py's with_contention, from run reports and the watch's records in the cases' outputs."""
    rng = np.random.default_rng(2)
    nodes, paths = ["n1", "n2", "n3", "n4"], ["gpu0 read", "gpu0 write"]
    tonight = table(nodes, paths, rng, moves={("n3", "gpu0 read"): 0.5, ("n1", "gpu0 write"): 0.5})
    tonight["figure"] = tonight["figure"].str.replace(" ", "_")  # 'gpu0_read_f0': GPU 0's figures
    past = table([f"r{k}" for k in range(5)], paths, rng, label="run")
    result = judge_partition.judge(judge_partition.levels(tonight, past))

    def report(folder, neighbours):
        folder.mkdir()
        cases = []
        for node in nodes:
            out = folder / f"{node}.out"
            lines = ["GpuUse: gpu=0 own=yes samples=9", "GpuUse: gpu=1 own=yes samples=9"]
            lines += [
                f"Contention: gpu={g} pid=77 seen=9 samples=9 used_mib=1024 name=copier"
                for g in neighbours.get(node, [])
            ]
            out.write_text("\n".join(lines) + "\n")
            cases.append(
                {
                    "display_name": "host_bandwidth",
                    "case": "",
                    "environ": "gnu",
                    "job_nodelist": [f"{node}.site"],
                    "job_stdout": out.name,
                    "outputdir": str(folder),
                }
            )
        (folder / "run-report.json").write_text(json.dumps({"runs": [{"testcases": cases}]}))
        return folder / "run-report.json"

    # n3 had a neighbour on GPU 0 in the run and its rerun; n1 had one on GPU 1 only, beside its GPU 0 path.
    run = {"rerun": {"nodes": ["n1", "n3"]}}
    first = report(tmp_path / "night", {"n3": [0], "n1": [1]})
    again = report(tmp_path / "rerun", {"n3": [0], "n1": [1]})
    read = contention.read_reports
    shared = night.with_contention(result, tonight, read([first], "tonight"), read([again], "rerun"), run)
    assert list(zip(shared.contended()["node"], shared.contended()["path"])) == [("n3", "gpu0 read")]
    assert shared.drain() == ["n1"]
    assert run["contention"]["cells"] == {"n3: gpu0 read": "pid 77 (copier, 1.0 GiB) on GPU 0 in 1 case(s)"}
    assert {(p["node"], p["gpu"]) for p in run["contention"]["processes"]} == {("n3", 0), ("n1", 1)}
    # Gone in n3's rerun: its lag is its own.
    gone = read([report(tmp_path / "rerun2", {})], "rerun")
    alone = night.with_contention(result, tonight, read([first], "tonight"), gone, {"rerun": {"nodes": ["n3"]}})
    assert alone.contended().empty and sorted(alone.drain()) == ["n1", "n3"]


def test_a_failed_build_drains_no_node_of_a_partition_and_the_night_is_not_judged(tmp_path):
    """A build that failed leaves every node without its measurements: the suite's failure, not theirs."""
    cases = [
        {"display_name": "SuiteBuild ~dgx:gpu+gnu", "result": "fail", "fail_phase": "compile_wait",
         "fail_reason": "build job failed with exit code: 127", "job_nodelist": ["login1"]},
        *({"display_name": f"host_bandwidth /{k}", "result": "fail_deps", "fail_phase": None,
           "fail_reason": None, "job_nodelist": [node]} for k, node in enumerate(["n1", "n2"])),
        {"display_name": "node_health /9", "result": "fail", "fail_phase": "sanity",
         "fail_reason": "an uncorrected ECC error", "job_nodelist": ["n3"]},
    ]  # fmt: skip
    report = tmp_path / "run-report.json"
    report.write_text(json.dumps({"runs": [{"testcases": cases}]}))
    failed = night.by_expected(night.failed_cases([report]), ["n1", "n2", "n3"])
    suite = night.by_expected(night.failed_cases([report], suite=True), ["n1", "n2", "n3"])
    assert failed == {"n3": ["node_health: an uncorrected ECC error"]}  # evidence about a node: drained
    assert set(suite) == {"", "n1", "n2"} and "the suite's build failed" in suite[""][0]
    rng = np.random.default_rng(3)
    tonight = table(["n3"], ["gpu0 read"], rng)  # n1 and n2 measured nothing
    result = judge_partition.judge(judge_partition.levels(tonight, None), expected=["n1", "n2", "n3"])
    assert set(result.silent) == {"n1", "n2"}
    assert night.partition_status(result, {}, True, False, True, suite) == 3
    assert night.drain_rows(result, {}, suite) == []
    assert night.partition_status(result, failed, True, False, True, suite) == 1
    assert [r["node"] for r in night.drain_rows(result, failed, suite)] == ["n3"]
    assert night.partition_status(result, {}, True, False, True, None) == 1  # silent with no cause: a failure


def test_a_node_silent_while_its_siblings_measured_is_drained_whatever_else_the_suite_failed():
    """A night-wide suite error (a GDRCopy build on the login node) explains no node that alone measured
    nothing: its siblings measured, so it is the node's failure."""
    rng = np.random.default_rng(4)
    tonight = table(["n1", "n3"], ["gpu0 read"], rng)
    result = judge_partition.judge(judge_partition.levels(tonight, None), expected=["n1", "n2", "n3"])
    suite = {"": ["login1: GdrCopyBuild: the suite's build failed: no GDRCopy"]}
    assert result.silent == ["n2"]
    assert night.partition_status(result, {}, True, False, True, suite) == 1
    assert [r["node"] for r in night.drain_rows(result, {}, suite)] == ["n2"]
    everyone = judge_partition.judge(
        judge_partition.levels(table(["n1"], ["gpu0 read"], rng).iloc[:0], None), expected=["n1", "n2"]
    )
    assert night.partition_status(everyone, {}, False, False, True, suite) == 3  # nobody measured: the suite's
    assert night.drain_rows(everyone, {}, suite) == []
