"""runner/partition.py's choices before anything runs: which nodes, which Slurm partition, whose failure."""

import pytest

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
