"""A busy GPU told from a slow one (judge/contention.py): a finding is
contended only where another process was on its GPUs during its cases in
every run that flagged it; a rerun that still lags with nobody else there
is the GPU's own."""

import pandas as pd
import pytest

from judge.contention import (
    GPU_COLUMNS,
    HOST_COLUMNS,
    HOST_TRAFFIC_GBS,
    OTHER_COLUMNS,
    describe,
    explain,
    figure_gpus,
    path_shares,
    processes,
)

CASE = ("path_matrix", "paths=host-ce size=256M", "gnu")
OTHER_CASE = ("um_bandwidth", "memory=pinned op=read", "gnu")


def gpus_table(*runs, cases=(CASE, OTHER_CASE), count=4, own=(0, 1, 2, 3)) -> pd.DataFrame:
    rows = [
        [run, *case[:2], case[2], "n1", g, g in own, 10, 50.0 if g == 0 else 1.0, 49.0 if g == 0 else 1.0, 0.0, 0.0]
        for run in runs
        for case in cases
        for g in range(count)
    ]
    return pd.DataFrame(rows, columns=GPU_COLUMNS)


def others_table(*rows) -> pd.DataFrame:
    """rows: (run, case, gpu)."""
    return pd.DataFrame(
        [[run, *case, "n1", gpu, 4242, "copier", 9, 10, 1024.0] for run, case, gpu in rows], columns=OTHER_COLUMNS
    )


def finding(
    path="host link h2d of GPU 0, ce", gpus=frozenset({0}), runs=("tonight", "rerun"), cases=(CASE,), shares=None
):
    row = {"path": path, "cases": list(cases), "gpus": set(gpus) if gpus else None, "runs": list(runs)}
    return pd.DataFrame([row | {"shares": shares}])


def test_another_process_on_the_gpu_in_every_run_that_flagged_it_contends():
    others = others_table(("tonight", CASE, 0), ("rerun", CASE, 0))
    [row] = explain(finding(), gpus_table("tonight", "rerun"), others).itertuples()
    assert row.contended
    assert row.by == "pid 4242 (copier, 1.0 GiB) on GPU 0 in 1 case(s); GPU 0's PCIe 50.0 GB/s in, 49.0 out"


def test_a_rerun_that_still_lags_with_nobody_else_on_the_gpu_is_the_gpus_own():
    others = others_table(("tonight", CASE, 0))  # the neighbour had gone when the rerun measured it
    [row] = explain(finding(), gpus_table("tonight", "rerun"), others).itertuples()
    assert not row.contended and row.by == ""


@pytest.mark.parametrize(
    "where, contended",
    [
        ((1,), False),  # another GPU's neighbour does not explain GPU 0's lag
        ((0,), True),
    ],
)
def test_only_the_findings_own_gpus_count(where, contended):
    others = others_table(*[(run, CASE, g) for run in ("tonight", "rerun") for g in where])
    assert explain(finding(), gpus_table("tonight", "rerun"), others)["contended"].tolist() == [contended]


def one_gpu_case(gpus: pd.DataFrame) -> pd.DataFrame:
    """`gpus` and OTHER_CASE's rows, a case whose program used GPU 0 alone, in its first run."""
    return pd.concat([gpus, gpus_table(gpus["run"].iloc[0], cases=(OTHER_CASE,), own=(0,))], ignore_index=True)


def busy(gpus: pd.DataFrame, gpu: int, gbs: float) -> pd.DataFrame:
    """The table with `gpu`'s host link carrying `gbs` each way during every case."""
    at = gpus["gpu"] == gpu
    return gpus.assign(pcie_rx_gbs=gpus["pcie_rx_gbs"].where(~at, gbs), pcie_tx_gbs=gpus["pcie_tx_gbs"].where(~at, gbs))


@pytest.mark.parametrize(
    "shares, gbs, contended",
    [
        ("host", 55.0, True),  # the measured neighbour: 50-57 GB/s each way through GPU 2's link
        ("host", HOST_TRAFFIC_GBS / 2 - 0.5, False),  # an idle context on another GPU explains nothing
        (None, 55.0, False),  # a peer link or GPU memory does not cross the host side
    ],
)
def test_a_path_through_the_host_side_is_contended_by_a_neighbour_copying_through_any_gpus_link(shares, gbs, contended):
    """On four H200s a neighbour copying through GPU 2's host link made GPU 1's and 3's host paths 8-13%
    slower: the host's memory and root complex are every host link's. It is seen moving data where a
    case did not use GPU 2 (OTHER_CASE: GPU 0 alone), so that its traffic is not the suite's."""
    gpus = busy(one_gpu_case(gpus_table("tonight", "rerun", cases=(CASE,))), 2, gbs)
    others = others_table(("tonight", CASE, 2), ("rerun", CASE, 2), ("tonight", OTHER_CASE, 2))
    lag = finding("host link d2h of GPU 1, sm", gpus={1}, shares=shares)
    [row] = explain(lag, gpus, others).itertuples()
    assert row.contended == contended
    if contended:
        assert row.by.startswith("pid 4242 (copier, 1.0 GiB) on GPU 2 in 1 case(s); GPU 2's PCIe 55.0 GB/s in")
        assert row.by.endswith("(on the host side every GPU's host link shares)")


def hosts_table(*rows) -> pd.DataFrame:
    """rows: (run, case): a neighbour busy on the host's CPUs (a HostUse record) during the case."""
    return pd.DataFrame(
        [[run, *case, "n1", 77, "stream", 31.0, 3.9, 2048.0, 10, 10] for run, case in rows], columns=HOST_COLUMNS
    )


@pytest.mark.parametrize(
    "path, gpus, shares, contended",
    [
        ("host link d2h of GPU 1, sm", {1}, "host", True),  # every GPU's host-side paths: the host's memory
        ("host memory read, 8 threads", None, "host", True),
        ("GPU 1 memory read", {1}, None, False),  # a GPU's own memory: no CPU neighbour explains it
        ("peer GPU 0 to GPU 1, ce", {0, 1}, None, False),
    ],
)
def test_a_neighbour_busy_on_the_hosts_cpus_contends_the_host_side_alone(path, gpus, shares, contended):
    """A neighbour streaming memory with the CPUs is on no GPU: NVML does not list it, yet the host's
    memory and root complex are every host link's."""
    gpus_seen = gpus_table("tonight", "rerun", cases=(CASE,))
    hosts = hosts_table(("tonight", CASE), ("rerun", CASE))
    [row] = explain(finding(path, gpus=gpus, shares=shares), gpus_seen, others_table(), hosts).itertuples()
    assert row.contended == contended
    if contended:
        assert row.by == (
            "pid 77 (stream, 3.9 CPUs, 2.0 GiB resident) on the host's CPUs in 1 case(s) "
            "(on the host side every GPU's host link shares)"
        )


def test_a_host_neighbour_must_be_there_in_every_run_that_flagged_the_finding():
    lag = finding("host link d2h of GPU 1, sm", gpus={1}, shares="host")
    gpus = gpus_table("tonight", "rerun", cases=(CASE,))
    assert not explain(lag, gpus, others_table(), hosts_table(("tonight", CASE)))["contended"].any()
    assert not explain(lag, gpus, others_table(), hosts_table(("tonight", OTHER_CASE), ("rerun", OTHER_CASE)))[
        "contended"
    ].any()  # busy during another case: not during the finding's
    # A GPU neighbour tonight and a CPU one in the rerun: the shared side was busy in both.
    [row] = explain(lag, gpus, others_table(("tonight", CASE, 1)), hosts_table(("rerun", CASE))).itertuples()
    assert row.contended and "on GPU 1" in row.by and "on the host's CPUs" in row.by


def test_host_users_are_listed_beside_the_gpus_others():
    listed = processes(others_table(("tonight", CASE, 0)), hosts_table(("tonight", CASE), ("rerun", CASE)))
    assert [p["gpu"] for p in listed] == [0, None]
    assert listed[1] == {
        "node": "n1",
        "gpu": None,
        "pid": 77,
        "name": "stream",
        "cpus": 3.9,
        "rss_gib": 2.0,
        "cases": 1,
        "tests": ["path_matrix"],
    }


def test_a_host_side_neighbour_gone_in_the_rerun_leaves_the_lag_the_gpus_own():
    gpus = busy(one_gpu_case(gpus_table("tonight", "rerun", cases=(CASE,))), 2, 55.0)
    lag = finding("host link d2h of GPU 1, sm", gpus={1}, shares="host")
    assert not explain(lag, gpus, others_table(("tonight", CASE, 2), ("tonight", OTHER_CASE, 2)))["contended"].any()


def test_traffic_on_a_gpu_the_suite_used_is_no_sign_of_a_neighbour_moving_data():
    """An idle context on GPU 0, which every case used (its 50 GB/s are the suite's copies): GPU 1's
    host path is not explained by it; nor is a neighbour seen only where its GPU was the suite's."""
    gpus = gpus_table("tonight", "rerun", cases=(CASE,))
    lag = finding("host link d2h of GPU 1, sm", gpus={1}, shares="host")
    idle = others_table(("tonight", CASE, 0), ("rerun", CASE, 0))
    assert not explain(lag, gpus, idle)["contended"].any()
    assert not explain(lag, busy(gpus, 2, 55.0), others_table(("tonight", CASE, 2), ("rerun", CASE, 2)))[
        "contended"
    ].any()


@pytest.mark.parametrize(
    "path, case, figure, shares",
    [
        ("host link h2d of GPU 1, ce", CASE, "gpu1_h2d_numa0_ce", "host"),
        ("host link latency of GPU 1, SM loads", CASE, "gpu1_latency_numa0", "host"),
        ("peer link GPU 0 -> GPU 1, ce", CASE, "gpu1_read_gpu0_ce", None),
        ("peer link latency GPU 1 -> GPU 0", CASE, "gpu1_latency_gpu0", None),
        ("small copies h2d of GPU 0, pinned", ("copy_latency", "", "gnu"), "lat_us_pinned_h2d_8", "host"),
        ("host memory read, NUMA node 0", ("host_bandwidth", "", "gnu"), "read_bw_node0", "host"),
        ("GPU memory of GPU 0", ("um_bandwidth", "memory=device op=read", "gnu"), "steady_bw", None),
    ],
)
def test_what_a_path_shares_is_read_from_the_paths_rules(path, case, figure, shares):
    assert path_shares(path, [case], [figure]) == shares
    assert path_shares("a path no rule names", [case], [figure]) is None


def test_only_the_findings_own_cases_count():
    others = others_table(("tonight", OTHER_CASE, 0), ("rerun", OTHER_CASE, 0))
    assert not explain(finding(), gpus_table("tonight", "rerun"), others)["contended"].any()


def test_a_figure_without_a_gpu_is_on_the_gpus_its_program_used():
    # um_bandwidth's figures name no GPU: its program used GPU 0 alone.
    gpus = gpus_table("tonight", cases=(OTHER_CASE,), own=(0,))
    lag = finding("Unified Memory pinned read", gpus=None, runs=("tonight",), cases=(OTHER_CASE,))
    assert explain(lag, gpus, others_table(("tonight", OTHER_CASE, 0)))["contended"].tolist() == [True]
    assert explain(lag, gpus, others_table(("tonight", OTHER_CASE, 2)))["contended"].tolist() == [False]


def test_a_run_that_did_not_measure_the_cases_does_not_count():
    # The later measure ran other cases: the night and its rerun decide.
    gpus = pd.concat([gpus_table("tonight", "rerun"), gpus_table("later", cases=(OTHER_CASE,))])
    others = others_table(("tonight", CASE, 0), ("rerun", CASE, 0))
    lag = finding(runs=("tonight", "rerun", "later"))
    assert explain(lag, gpus, others)["contended"].tolist() == [True]


def test_nothing_watched_is_nothing_contended():
    empty_gpus, empty_others = pd.DataFrame(columns=GPU_COLUMNS), pd.DataFrame(columns=OTHER_COLUMNS)
    assert explain(finding(), empty_gpus, empty_others)["contended"].tolist() == [False]
    assert processes(empty_others) == []


def test_figure_gpus_are_named_by_the_figures():
    assert figure_gpus(pd.Series(["gpu1_read_gpu0_ce", "gpu1_h2d_numa0_ce"])) == {0, 1}
    assert figure_gpus(pd.Series(["steady_bw"])) is None


def test_the_nights_processes_are_listed_once_per_gpu():
    others = others_table(("tonight", CASE, 0), ("tonight", OTHER_CASE, 0), ("rerun", CASE, 0))
    [seen] = processes(others)
    assert seen == {
        "node": "n1",
        "gpu": 0,
        "pid": 4242,
        "name": "copier",
        "used_gib": 1.0,
        "cases": 2,
        "tests": ["path_matrix", "um_bandwidth"],
    }
    assert "in 2 case(s)" in describe(others.assign(pcie_rx_gbs=float("nan"), pcie_tx_gbs=float("nan")))


def test_each_runs_watch_is_kept_as_it_ended_though_the_rerun_writes_over_the_same_outputs(tmp_path):
    """The rerun runs the same cases in the same stage and output folders: the night's tables are kept
    as soon as it ends (runner/contention.py's snapshot), and a neighbour gone in the rerun stays in the night's."""
    import json

    from runner import contention as night

    out = tmp_path / "path_matrix_1" / "rfm_job.out"
    out.parent.mkdir()
    case = {"display_name": "path_matrix %paths=host-ce", "case": CASE[1], "environ": "gnu", "job_nodelist": ["vm"]}
    case |= {"job_stdout": out.name, "outputdir": str(out.parent)}
    for key in ("run", "rerun"):
        (tmp_path / f"{key}-report.json").write_text(json.dumps({"runs": [{"testcases": [case]}]}))
    out.write_text(
        "GpuUse: gpu=0 own=yes samples=9\nContention: gpu=0 pid=7 seen=9 samples=9 used_mib=1024 name=cp\n"
        "HostUse: pid=8 cpu_s=9.0 cpus=1.00 rss_mib=10 seen=9 samples=9 name=stream\n"
    )
    night.snapshot(tmp_path, "tonight")
    out.write_text("GpuUse: gpu=0 own=yes samples=9\n")  # the rerun's: nobody else
    night.snapshot(tmp_path, "rerun")
    gpus, others, hosts = night.read_night(tmp_path)
    assert hosts[["run", "pid", "name", "cpus"]].values.tolist() == [["tonight", 8, "stream", 1.0]]
    assert others[["run", "pid"]].values.tolist() == [["tonight", 7]] and set(gpus["run"]) == {"tonight", "rerun"}
    assert not explain(finding(), gpus, others)["contended"].any()  # the lag outlived the neighbour: the GPU's own
