"""Acting on the scheduler within limits (runner/act.py): the nodes a night names are drained with the
suite's name and the finding's code, only the suite's own drains are resumed and only once they pass, a
node someone else drained is left alone, and past the cap the breaker drains nothing more until reset.
Planned from made-up states, then done for real against a Slurm of four nodes on this host (as CI has)."""

import argparse
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from runner import act
from runner.act import Acts, CannotAct, Limits, Night, Slurm, plan

REPO = Path(__file__).resolve().parent.parent
SLURM = REPO / ".ci" / "slurm"
NOW = 1_800_000_000.0


def empty() -> dict:
    return {"drains": [], "tripped": None}


def test_within_the_cap_the_named_nodes_are_drained_and_past_it_none_and_one_finding():
    night = Night("partition", True, [(f"n{k}", f"GMP-231 behind its siblings: path {k}") for k in range(5)])
    acts = plan(night, {}, empty(), Limits("10%", 3600), 20, NOW, Slurm())
    assert acts.drained == ["n0", "n1"] and acts.held_back == ["n2", "n3", "n4"]
    assert acts.commands[0] == [
        "scontrol",
        "update",
        "nodename=n0",
        "state=drain",
        "reason=gpu-mempaths GMP-231 partition: behind its siblings: path 0",
    ]
    assert acts.finding.startswith("GMP-701 the suite's breaker is open") and "n2, n3, n4" in acts.finding
    # The drains of the last hour count; older ones do not.
    record = {"drains": [{"node": "x", "when": NOW - 60}, {"node": "y", "when": NOW - 7200}], "tripped": None}
    assert plan(night, {}, record, Limits("2", 3600), 20, NOW, Slurm()).drained == ["n0"]
    # A tripped breaker drains nothing, whatever the room, until reset.
    tripped = {"drains": [], "tripped": {"when": NOW - 86400, "held_back": ["n9"]}}
    assert plan(night, {}, tripped, Limits("10", 3600), 20, NOW, Slurm()).held_back == [f"n{k}" for k in range(5)]


def test_a_node_someone_else_drained_is_left_alone_and_only_the_suites_own_are_resumed():
    night = Night("nightly", True, [("a", "GMP-101 moved against the accepted runs: x")], passed=["b", "c", "d"])
    now = {
        "a": "admin: bad dimm",  # someone else's, named tonight: left alone, its reason kept
        "b": "gpu-mempaths GMP-101 nightly: moved",  # the suite's, by this tier, passed: resumed
        "c": "maintenance until friday",  # someone else's, passed: left drained
        "d": "gpu-mempaths GMP-231 partition: behind",  # the suite's, but another tier drained it: not this one's
    }
    acts = plan(night, now, empty(), Limits("10", 3600), 20, NOW, Slurm())
    assert acts.left_alone == ["a"] and acts.resumed == ["b"] and acts.drained == []
    assert acts.commands == [["scontrol", "update", "nodename=b", "state=resume"]]


def test_a_node_the_night_names_is_not_resumed_and_its_worst_finding_leads_its_reason():
    # A partition's node whose state is ok but whose check failed: named, so never resumed tonight.
    night = Night("partition", True, [("a", "GMP-232 behind its siblings, its GPUs shared: x | GMP-501 failed y")])
    night.passed = ["a"]
    now = {"a": "gpu-mempaths GMP-231 partition: behind its siblings: z"}
    assert plan(night, now, empty(), Limits("9", 60), 9, NOW, Slurm()).resumed == []
    # Its reason leads with the most severe code (a failed check, critical; not 'shared', a warning).
    reason = act.reason_of("GMP-232 behind its siblings, its GPUs shared: x | GMP-501 failed y", "partition")
    assert reason == "gpu-mempaths GMP-501 partition: behind its siblings, its GPUs shared: x | failed y"
    # The tier that drained a node is the word after the code, not any ' partition: ' in its text.
    assert act.tier_of("gpu-mempaths GMP-320 health: gpu0 says partition: x") == "health"
    assert act.tier_of("admin: gpu-mempaths GMP-320 health: y") == ""


def test_a_node_that_acts_for_itself_needs_a_shared_record(tmp_path, monkeypatch):
    monkeypatch.setattr(act, "ACTED", tmp_path / "act")
    monkeypatch.delenv("GPU_MEMPATHS_DATA", raising=False)
    night = Night("health", True, [("n1", "GMP-320 gpu0 ecc_uncorrected: expected 0, found 3")])
    with pytest.raises(CannotAct, match="set GPU_MEMPATHS_DATA to a directory every node shares"):
        act.act_on(night, "ci-slurm", Slurm(), False, "health of n1", NOW)
    assert not (tmp_path / "act").exists()


def test_a_night_not_judged_drains_and_resumes_nothing():
    night = Night("nightly", False, [("a", "GMP-501 failed x")], passed=["a"])
    assert plan(night, {"a": "gpu-mempaths GMP-101 nightly: m"}, empty(), Limits("9", 60), 9, NOW, Slurm()) == Acts()


def night_folder(root: Path, name: str, drain: dict[str, str], ok: list[str], exit_status: int = 2) -> Path:
    """A partition's night kept as runner/partition.py keeps it: run.json (its drain rows) and nodes.csv."""
    folder = root / name
    folder.mkdir(parents=True)
    rows = [{"node": n, "state": "behind its siblings", "reasons": [r]} for n, r in drain.items()]
    run = {"system": "ci-slurm", "stamp": name, "state": "done", "exit": exit_status, "drain": rows}
    run["counts"] = {"nodes": len(drain) + len(ok)}
    (folder / "run.json").write_text(json.dumps(run))
    states = [f"{n},behind its siblings" for n in drain] + [f"{n},ok" for n in ok]
    (folder / "nodes.csv").write_text("node,state\n" + "\n".join(states) + "\n")
    return folder


def args(night=None, **kw) -> argparse.Namespace:
    return argparse.Namespace(night=night, system=None, scheduler="slurm", dry_run=False, reset=None, **kw)


def test_a_node_name_that_is_not_a_host_name_is_refused_and_nothing_done(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(act, "ACTED", tmp_path / "act")
    folder = night_folder(tmp_path, "n1", {"ci1,ci2": "GMP-231 behind its siblings: x"}, [])
    assert act.main(args(folder)) == 3
    assert "node name 'ci1,ci2' is not a plain host name" in capsys.readouterr().err
    assert not (folder / "act.json").exists()
    lsf = argparse.Namespace(night=folder, system=None, scheduler="lsf", dry_run=False, reset=None)
    assert act.main(lsf) == 3 and "acts in a dry run only" in capsys.readouterr().err
    typo = argparse.Namespace(night=None, system=None, scheduler="slurm", dry_run=False, reset="ci-slrum")
    assert act.main(typo) == 3 and "no system 'ci-slrum'" in capsys.readouterr().err


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A Slurm of four nodes ci1..ci4 on this host, its own ports (other test modules' clusters may run)."""
    if shutil.which("slurmctld") is None or os.geteuid() != 0:
        pytest.skip("needs root and Slurm (apt-get install slurmctld slurmd slurm-client munge), as CI has")
    rundir = tmp_path_factory.mktemp("slurm-act")
    env = {**os.environ, "SLURM_CI_NODES": "4", "SLURM_CI_PORT": "7717"}
    try:
        subprocess.run(["bash", str(SLURM / "start.sh"), str(rundir)], check=True, timeout=120, env=env)
        yield str(rundir / "slurm.conf")
    finally:
        subprocess.run(["bash", str(SLURM / "stop.sh"), str(rundir)], check=False, timeout=120)


def reasons(conf: str) -> dict[str, str]:
    out = subprocess.run(
        ["sinfo", "-R", "-h", "-N", "-o", "%N|%E"], capture_output=True, text=True, check=True, env=conf_env(conf)
    ).stdout
    return dict(line.split("|", 1) for line in out.splitlines())


def conf_env(conf: str) -> dict:
    return {**os.environ, "SLURM_CONF": conf}


@pytest.mark.slow  # starts a Slurm
def test_slurm_drains_resumes_leaves_others_drains_alone_and_the_breaker_trips(slurm, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SLURM_CONF", slurm)
    monkeypatch.setattr(act, "ACTED", tmp_path / "act")
    subprocess.run(["scontrol", "update", "nodename=ci3", "state=drain", "reason=admin: bad dimm"], check=True)
    # A night names ci2 and ci3: ci2 drained with the suite's reason, ci3's own reason kept.
    first = night_folder(tmp_path, "night1", {"ci2": "GMP-231 behind its siblings: h2d -40%", "ci3": "GMP-231 x"}, [])
    assert act.main(args(first)) == 0
    now = reasons(slurm)
    assert now["ci2"] == "gpu-mempaths GMP-231 partition: behind its siblings: h2d -40%"
    assert now["ci3"] == "admin: bad dimm" and "left alone" in capsys.readouterr().out
    # The next night names two more: the cap (10% of four nodes: one) is used, the breaker trips.
    second = night_folder(tmp_path, "night2", {"ci1": "GMP-231 y", "ci4": "GMP-231 z"}, ["ci2"])
    assert act.main(args(second, **{})) == 2
    assert "GMP-701 the suite's breaker is open" in capsys.readouterr().err
    assert set(reasons(slurm)) == {"ci3"}  # ci2 passed and was resumed; ci1 and ci4 not drained
    # Open until reset: a dry run says what it would do and does nothing.
    third = night_folder(tmp_path, "night3", {"ci4": "GMP-231 w"}, [])
    dry = argparse.Namespace(night=third, system=None, scheduler="slurm", dry_run=True, reset=None)
    kept = (tmp_path / "act" / "ci-slurm.json").read_text()
    assert act.main(dry) == 2 and set(reasons(slurm)) == {"ci3"}
    assert (tmp_path / "act" / "ci-slurm.json").read_text() == kept  # a dry run keeps nothing
    reset = argparse.Namespace(night=None, system=None, scheduler="slurm", dry_run=False, reset="ci-slurm")
    assert act.main(reset) == 0
    capsys.readouterr()
    # As ./suite nightly --act acts after its verdict: through the scheduler of the system's partitions.
    assert act.after_night(third) == 0 and reasons(slurm)["ci4"].startswith("gpu-mempaths GMP-231 partition: ")
    # ci3 passes a night: someone else drained it, so it stays drained.
    fourth = night_folder(tmp_path, "night4", {}, ["ci3", "ci4"], exit_status=0)
    assert act.main(args(fourth)) == 0 and set(reasons(slurm)) == {"ci3"}
    assert json.loads((fourth / "act.json").read_text())["resumed"] == ["ci4"]


def test_a_scheduler_command_that_fails_is_not_done_and_every_drain_tried_is_counted(tmp_path, monkeypatch):
    monkeypatch.setattr(act, "ACTED", tmp_path / "act")
    ran = []

    def output(command):
        ran.append(command)
        if "nodename=b" in command:
            raise CannotAct("scontrol update nodename=b: exit 1: Invalid node name specified")
        return ""

    monkeypatch.setattr(act, "_output", output)
    monkeypatch.setattr(Slurm, "drained", lambda self: {})
    monkeypatch.setattr(Slurm, "listed", lambda self: 100)
    folder = night_folder(tmp_path, "night", {"a": "GMP-231 x", "b": "GMP-231 y", "c": "GMP-231 z"}, [])
    assert act.main(args(folder)) == 3
    kept = json.loads((tmp_path / "act" / "ci-slurm.json").read_text())
    # Each drain is recorded before its command runs (a kill after it still counts): b, whose command failed,
    # counts too, the breaker erring toward a person; c never ran.
    assert [d["node"] for d in kept["drains"]] == ["a", "b"] and len(ran) == 2


def test_nightly_act_acts_on_the_night_just_judged_and_keeps_its_exit(tmp_path, monkeypatch):
    """./suite nightly --act: the verdict's folder handed to act after the night (runner/partition.py night);
    without --act, nothing acts."""
    from runner import lock, nightly
    from runner import partition as part

    acted = []
    monkeypatch.setattr(lock, "held", lambda *a, **k: __import__("contextlib").nullcontext())

    def judged(args):
        args.night_dir = tmp_path / "night"
        return 2

    monkeypatch.setattr(nightly, "nightly", judged)
    monkeypatch.setattr(act, "after_night", lambda folder: acted.append(folder) or 3)
    options = dict(on_node=None, nodes=None, dry_run=False, partition=None, wait=False)
    assert part.night(argparse.Namespace(act=True, **options)) == 2 and acted == [tmp_path / "night"]
    assert part.night(argparse.Namespace(act=False, **options)) == 2 and acted == [tmp_path / "night"]


def test_a_scheduler_command_is_cut_at_the_callers_deadline(tmp_path, monkeypatch):
    """A short tier acts within its own limit: a slurmctld that does not answer held `sinfo` for 60 s,
    past NHC's 30 s watchdog. Within a deadline each command gets what is left, and none once it is spent."""
    import time

    hang = tmp_path / "sinfo"
    hang.write_text("#!/bin/sh\nsleep 30\n")
    hang.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    started = time.monotonic()
    with act.within(started + 0.5), pytest.raises(CannotAct, match="sinfo"):
        Slurm().listed()
    assert time.monotonic() - started < 5
    with act.within(time.monotonic() - 1), pytest.raises(CannotAct, match="no time left"):
        Slurm().listed()
