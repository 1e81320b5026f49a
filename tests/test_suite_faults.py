"""The suite's own failures are never the node's (runner/nightly.py, runner/lock.py,
runner/preflight.py, experiments/files.py): each fault planted in the suite
itself ends as "not judged" with its cause named, and no outside string
reaches a shell or a path outside results/. The nights on the fake node,
killed and crowded, are in tests/test_fake_gpu_faults.py."""

import contextlib
import errno
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from checks.suite import options
from commands.cli import main
from experiments import files
from reports import runs
from runner import lock, nightly, pages, partition, preflight

REPO = Path(__file__).resolve().parent.parent

#: Strings an outsider may put where the suite takes a name, a stamp, a value or a path: each must be
#: refused or quoted, never run nor followed out of results/.
HOSTILE = [
    "n1\nEOF\ntouch PWNED\ncat <<EOF",
    "n1; touch PWNED",
    "$(touch PWNED)",
    "`touch PWNED`",
    "n1' 'touch PWNED",
    'n1" "touch PWNED',
    "n1 touch PWNED",
    "../../../etc",
    "/etc/passwd",
    "x" * 5000,
    "nœud-é",
    "n1|touch PWNED",
    "n1&&touch PWNED",
    "*",
]


# --- one night at a time --------------------------------------------------------------------------------------


@contextlib.contextmanager
def holding(path: Path, what: str, seconds: float):
    """Another process holding the node's lock at `path` as `what` (a Python expression) for `seconds`,
    killed (SIGKILL: no pid file is left to block the next) once the block ends."""
    hold = (
        f"from runner import lock; from pathlib import Path; import time; "
        f"lock.acquire({what}, path=Path({str(path)!r})); print('held', flush=True); time.sleep({seconds})"
    )
    holder = subprocess.Popen([sys.executable, "-c", hold], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        yield
    finally:
        holder.kill()
        holder.wait()


def test_a_second_command_is_refused_naming_the_holder_and_the_lock_goes_with_its_holder(tmp_path, monkeypatch):
    monkeypatch.setattr(lock, "RESULTS", tmp_path)  # this test's lock, not the checkout's
    path = lock.lock_path()
    with holding(path, "'./suite nightly --system x'", 60):
        with pytest.raises(lock.Busy, match=r"pid \d+ since .* UTC: ./suite nightly --system x; one night at a time"):
            lock.acquire("./suite nightly")
    with lock.held("the next night"):
        assert "the next night" in path.read_text()


def test_a_night_waits_for_a_health_check_measuring_and_a_health_check_never_waits(tmp_path, monkeypatch):
    """A short tier names itself brief (done within its limit): a nightly Slurm starts while a health check
    measures for seconds runs after it, where it used to end not judged; a health check that finds the node
    held goes on at once (CONTENDED), never past its own limit; a brief holder past its word is Busy."""
    monkeypatch.setattr(lock, "RESULTS", tmp_path)
    path = lock.lock_path()
    with holding(path, "lock.brief('./suite health --system x', 1.5)", 1.5):
        with pytest.raises(lock.Busy, match=r"./suite health --system x \(done by \d+\)"):
            lock.acquire("./suite health --system x", brief_wait_s=0)
        started = time.monotonic()
        with lock.held("./suite nightly"):  # waits for the health check's end, then holds the node
            assert "./suite nightly" in path.read_text()
        assert time.monotonic() - started < 10
    # Said it would be done a minute ago: not waited for.
    with holding(path, "lock.brief('a tier that overstays', -60)", 60):
        started = time.monotonic()
        with pytest.raises(lock.Busy, match="a tier that overstays"):
            lock.acquire("./suite nightly")
        assert time.monotonic() - started < 2 * lock.POLL_S + 1


def test_a_night_that_finds_the_lock_taken_but_not_yet_named_waits_for_the_name(tmp_path, monkeypatch):
    """flock is taken before the holder writes its name, over the last holder's (which the file keeps): a
    nightly that looked in between read no name, or a dead nightly's, took the health check for a night and
    exited 3 beside a holder that ended a second later. A holder that never names itself is Busy, the dead
    name said to be dead (a night's ReFrame, handed its lock, holds it after the night was killed)."""
    monkeypatch.setattr(lock, "RESULTS", tmp_path)
    path = lock.lock_path()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = f"pid {dead.stdout.strip()} since 2026-12-06T01:00:00 UTC: ./suite nightly --system x\n"
    # The holder takes the lock, then names itself brief only when told to (a pipe, not a race with a sleep).
    hold = (
        "import fcntl, os, sys, time; from runner import lock; "
        f"fd = os.open({str(path)!r}, os.O_RDWR); fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); "
        "told = sys.stdin.readline(); "
        "told and os.pwrite(fd, lock.brief('./suite health', 0.6).encode().ljust(200), 0); "
        "time.sleep(0.6 if told else 9)"
    )
    for named in (True, False):
        path.write_text(stale)
        holder = subprocess.Popen(
            [sys.executable, "-c", hold], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            assert holder.stdout.readline() == "held\n"
            assert "./suite nightly" in lock.holder_of(path)  # the dead holder's name, still in the file
            monkeypatch.setattr(lock, "NAMING_S", 1.0 if named else 0.3)  # named: at 0.2 s, well within
            if named:
                threading.Timer(0.2, lambda told=holder.stdin: (told.write("go\n"), told.flush())).start()
                with lock.held("./suite nightly"):  # read the name once written, waited for the brief holder
                    assert holder.poll() is not None
            else:
                holder.stdin.close()
                started = time.monotonic()
                with pytest.raises(lock.Busy, match=r"./suite nightly --system x \(ended: a process it started"):
                    lock.acquire("./suite nightly")
                assert time.monotonic() - started >= lock.NAMING_S
        finally:
            holder.kill()
            holder.wait()


def test_runner_lock_holds_the_lock_across_exec_for_the_command(tmp_path, monkeypatch):
    """./suite run's form: the lock is the command's own once it runs, and a second is refused with 3."""
    monkeypatch.setattr(lock, "RESULTS", tmp_path)
    with lock.held("a nightly"):
        ran = subprocess.run(
            [sys.executable, "-c", f"import sys, pathlib; from runner import lock; "
             f"lock.RESULTS = pathlib.Path({str(tmp_path)!r}); sys.exit(lock.main(['--', 'true']))"],
            cwd=REPO, capture_output=True, text=True,
        )  # fmt: skip
    assert ran.returncode == 3 and "pid" in ran.stderr and "a nightly" in ran.stderr


def test_a_nightly_accept_rejudge_and_upgrade_hold_the_lock_a_dry_run_does_not(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(lock, "RESULTS", tmp_path)
    with lock.held("the first nightly"):
        for argv in (
            ["nightly", "--system", "local"],
            ["accept", "2026-11-20T03:00:00", "--system", "local"],
            ["rejudge", "2026-11-20T03:00:00", "--system", "local"],
            ["upgrade", "13.5.37", "--system", "local"],
        ):
            assert main(argv) == 3, argv
            assert "holds this checkout's lock on this node" in capsys.readouterr().err
    assert (
        "--wait"
        in subprocess.run(
            [sys.executable, "-m", "commands", "nightly", "--help"], cwd=REPO, capture_output=True, text=True
        ).stdout
    )


# --- the suite's failures, not the node's ---------------------------------------------------------------------


def case(name: str, result: str = "fail", phase: str | None = "sanity", why: str = "no output") -> dict:
    return {"display_name": name, "result": result, "fail_phase": phase, "fail_reason": why}


def report_of(tmp_path: Path, *cases: dict) -> Path:
    path = tmp_path / "run-report.json"
    path.write_text(json.dumps({"runs": [{"testcases": list(cases)}]}))
    return path


def test_a_failed_build_and_what_it_left_unrun_are_the_suites_failures_never_drained(tmp_path):
    found = nightly.outcomes(
        report_of(
            tmp_path,
            case("SuiteBuild /abc", phase="compile_wait", why="build job failed with exit code: 127"),
            case("daxpy %mode=managed /def", result="fail_deps", phase=None),
            case("um_bandwidth %x=1 /0a1", phase="setup", why="SettingError: samples=99"),
            case("copy_latency /1b2", why="/stage/bin/copy_latency: error while loading shared libraries"),
            case("daxpy /4e5", why="CUDA error: cudaErrorInsufficientDriver (CUDA driver version is insufficient)"),
            case("path_matrix /2c3", why="cudaErrorIllegalAddress on GPU 0"),
            case("host_bandwidth /3d4", phase="performance", why="read_bw 900 GiB/s beyond its bound"),
        )
    )
    assert [line.split(":")[0].split()[0] for line in found["suite"]] == [
        "SuiteBuild",
        "daxpy",
        "um_bandwidth",
        "copy_latency",
        "daxpy",
    ]
    assert [line.split()[0] for line in found["failed"]] == ["path_matrix", "host_bandwidth"]
    reasons, _ = nightly.drain_reasons(None, {**found, "failed": []}, nightly.pd.DataFrame(columns=["verdict"]), {})
    assert reasons == []  # the suite's failures alone drain nothing


def test_a_missing_or_cut_run_report_is_the_suites_failure(tmp_path):
    assert nightly.outcomes(tmp_path / "none.json")["suite"] == ["no run report (none.json): ReFrame did not finish"]
    (tmp_path / "cut.json").write_text('{"runs": [{"testc')
    found = nightly.outcomes(tmp_path / "cut.json")
    assert found["failed"] == [] and "cut.json: damaged (not JSON" in found["suite"][0]


def test_suite_errors_alone_exit_3_and_a_node_failure_beside_them_still_1():
    suite_only = {"passed": [], "skipped": [], "failed": [], "suite": ["SuiteBuild: the suite's build failed"]}
    assert nightly.nightly_status(suite_only, None, ["suite-error"], allow_unjudged=True) == 3
    both = {**suite_only, "failed": ["node_health: an uncorrected ECC error"]}
    assert nightly.nightly_status(both, None, ["suite-error"], allow_unjudged=False) == 1


def test_the_preflight_names_a_missing_tool_and_a_full_or_unwritable_folder(tmp_path, monkeypatch):
    system = {"environments": [{"name": "gnu", "cc": "gcc", "cxx": "no-such-compiler++ -std=c++17"}]}
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on it: no cmake either
    found = preflight.missing_tools(system)
    assert found[0].startswith("cmake is not on PATH") and any("no-such-compiler++" in f for f in found)
    assert preflight.missing_tools({"environments": [{"name": "s", "suite_prefix": "/opt/gm", "cc": "x"}]}) == []
    assert "a night needs 10000000 MB" in preflight.space_problems([tmp_path], least_mb=10_000_000)[0]
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        assert "cannot be written" in preflight.space_problems([locked])[0]


def test_a_full_disk_while_writing_is_named_and_leaves_the_old_record_whole(tmp_path, monkeypatch):
    path = tmp_path / "run.json"
    files.write_json(path, {"state": "running"})

    def full(fd, *_):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(files.os, "fsync", full)
    with pytest.raises(OSError) as err:
        files.write_json(path, {"state": "done", "exit": 0})
    assert json.loads(path.read_text()) == {"state": "running"}  # the old one whole, no temporary left
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
    assert files.disk_problem(err.value) == f"no space left on the file system of {path}: free some, then run again"


def test_a_perflog_cut_by_a_kill_is_closed_so_the_next_line_starts_whole(tmp_path):
    log = tmp_path / "default" / "daxpy.log"
    log.parent.mkdir()
    log.write_text("header|x\nwhole|1\nhalf|")
    (tmp_path / "default" / "whole.log").write_text("header|x\n")
    closed = preflight.seal_perflogs(tmp_path)
    assert len(closed) == 1 and str(log) in closed[0]
    with log.open("a") as out:
        out.write("tonight|2\n")
    assert log.read_text().splitlines()[-1] == "tonight|2"
    assert preflight.seal_perflogs(tmp_path) == []


# --- damaged and incomplete nights ----------------------------------------------------------------------------


def night(root: Path, stamp: str, **record) -> Path:
    folder = root / "local" / stamp.replace(":", "")
    folder.mkdir(parents=True)
    files.write_json(folder / "run.json", {"system": "local", "stamp": stamp, "start": stamp, **record})
    return folder


def test_killed_stopped_and_damaged_nights_are_no_finished_night(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runs, "NIGHTLY_DIR", tmp_path)
    night(tmp_path, "2026-11-20T03:00:00", end="2026-11-20T03:05:00")  # from before states: ended
    night(tmp_path, "2026-11-21T03:00:00", end="2026-11-21T03:05:00", state="done", exit=0)
    night(tmp_path, "2026-11-22T03:00:00", state="running", phase="checks")  # SIGKILL
    night(tmp_path, "2026-11-23T03:00:00", state="stopped", stopped={"by": "SIGTERM", "during": "the rerun"})
    (night(tmp_path, "2026-11-24T03:00:00") / "run.json").write_text('{"stamp": "2026-11-24T03:0')  # a full disk
    assert [r["stamp"] for r in runs.finished_runs("local")] == ["2026-11-20T03:00:00", "2026-11-21T03:00:00"]
    assert "2026-11-24T030000/run.json: damaged (not JSON" in capsys.readouterr().err
    _, killed = runs.find_run("local", "2026-11-22T03:00:00")
    assert runs.incomplete_why(killed) == "killed during checks (run.json still says 'running')"
    _, stopped = runs.find_run("local", "2026-11-23T03:00:00")
    assert runs.incomplete_why(stopped) == "stopped by SIGTERM during the rerun"
    with pytest.raises(SystemExit, match=r"2026-11-24T030000/run.json: damaged \(not JSON"):
        runs.find_run("local", "2026-11-24T03:00:00")


def test_accept_refuses_a_night_that_did_not_end_and_leaves_the_baseline(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runs, "NIGHTLY_DIR", tmp_path)
    monkeypatch.setattr(runs, "accepted_file", lambda system: tmp_path / "accepted.json")
    done = {"end": "x", "state": "done", "exit": 0, "checks": "pass", "health": "pass"}
    night(tmp_path, "2026-11-20T03:00:00", **done)
    night(tmp_path, "2026-11-21T03:00:00", **done)
    night(tmp_path, "2026-11-22T03:00:00", end="x", state="running", phase="judgement", checks="pass", health="pass")
    stamps = ["2026-11-20T03:00:00", "2026-11-21T03:00:00", "2026-11-22T03:00:00"]
    assert main(["accept", *stamps, "--system", "local"]) == 3
    err = capsys.readouterr().err
    assert "a night that did not end is no baseline: 2026-11-22T03:00:00 (killed during judgement" in err
    assert not (tmp_path / "accepted.json").exists()
    assert main(["rejudge", "2026-11-22T03:00:00", "--system", "local"]) == 3
    assert "the night did not end" in capsys.readouterr().err


def test_a_damaged_accepted_json_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(runs, "accepted_file", lambda system: tmp_path / "accepted.json")
    (tmp_path / "accepted.json").write_text("{\n")
    with pytest.raises(files.DamagedFile, match=r"accepted.json: damaged \(not JSON: .* line 2"):
        runs.read_baselines("local")
    (tmp_path / "accepted.json").write_text('["a list"]')
    with pytest.raises(files.DamagedFile, match="not a baseline"):
        runs.read_baselines("local")


def test_a_night_stamped_ahead_of_the_clock_is_named():
    assert runs.in_the_future("2027-01-05T03:00:00", at="2026-12-06T03:00:00")
    assert not runs.in_the_future("2026-12-06T03:05:00", at="2026-12-06T03:00:00")  # minutes off: ordinary
    run = {"stamp": "2026-11-06T03:00:00", "accepted_runs": ["2026-11-20T03:00:00", "2026-11-25T03:00:00"]}
    nightly.say_clock(run)
    assert run["clock"].endswith("before its latest accepted run 2026-11-25T03:00:00: this node's clock is behind")


# --- hostile input ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("word", HOSTILE)
def test_no_hostile_stamp_reads_outside_results(word, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for argv in (["accept", word], ["rejudge", word], ["night", word]):
        assert main([*argv, "--system", "hopper-vm"]) == 3, argv
        err = capsys.readouterr().err
        assert "not a night's stamp" in err or "no night" in err or "outside" in err, err
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("word", HOSTILE)
def test_no_hostile_node_name_reaches_a_script(word):
    with pytest.raises(partition.NodesError):
        partition.chosen_nodes(f"n2,{word}", None)


def test_the_dry_runs_scontrol_lists_nodes_as_words_alone(tmp_path):
    env = partition.dry_run_node_list(tmp_path, {"access": ["-C gpu"]}, ["n1", "n2.site"])
    listed = subprocess.run([tmp_path / "bin" / "scontrol"], capture_output=True, text=True, check=True).stdout
    assert listed.splitlines() == [
        "NodeName=n1 Partitions=default State=IDLE ActiveFeatures=gpu",
        "NodeName=n2.site Partitions=default State=IDLE ActiveFeatures=gpu",
    ]
    assert env["PATH"].startswith(str(tmp_path / "bin"))


@pytest.mark.parametrize("word", HOSTILE)
def test_no_hostile_setting_or_folder_reaches_reframe(word):
    found = options.unsafe_words(
        ["-S", f"p2p_pingpong.nvbit_tool={word}", "--prefix", word, "-o", word, f"--stage={word}"]
    )
    kinds = {line.split()[0] for line in found}
    if options.SAFE_WORD.fullmatch(word):  # a plain path ('../../../etc') is a folder ReFrame may use
        assert found == []
    else:
        assert kinds == {"-S", "--prefix", "--output", "--stage"}, found


def test_plain_settings_and_folders_pass():
    assert (
        options.unsafe_words(["-S", "daxpy.samples=9", "-S", "gpus=0,1", "-S", "size=2x", "--prefix", "/s/r-1"]) == []
    )


def test_the_hostile_set_meets_every_command_that_takes_a_word(tmp_path, monkeypatch):
    """The whole command line: nothing of the hostile set runs (no PWNED file), each refused with 3."""
    monkeypatch.chdir(tmp_path)
    for word in HOSTILE[:7]:
        assert main(["nightly", "--system", word]) == 3
        assert main(["nightly", "--system", "ci-slurm", "--nodes", word, "--dry-run"]) == 3
    assert not (tmp_path / "PWNED").exists() and not (REPO / "PWNED").exists()


def test_report_night_reads_no_folder_outside_results(tmp_path, monkeypatch):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "run.json").write_text(json.dumps({"system": "x", "stamp": "2026-11-20T03:00:00"}))
    with pytest.raises(SystemExit, match="outside"):
        pages.find_night(str(outside))


def test_accept_and_the_nightly_read_the_perflogs_of_the_runs(monkeypatch):
    from judge.select import runs_without_rows

    frame = nightly.pd.DataFrame(
        {"system": ["local"], "time": nightly.pd.to_datetime(["2026-11-20T03:01:00"], utc=True), "node": ["n1"]}
    )
    runs = [
        {"stamp": s, "start": s, "end": s.replace(":00:00", ":09:00")}
        for s in ("2026-11-20T03:00:00", "2026-11-21T03:00:00")
    ]
    assert runs_without_rows(frame, "local", runs) == ["2026-11-21T03:00:00"]


def test_a_setting_out_of_its_range_and_a_tag_no_check_has_are_refused_before_anything_runs(capfd):
    assert options.mistakes(["-S", "daxpy.samples=99"]) == [
        "-S daxpy.samples='99': must be a whole number from 1 to 20"
    ]
    assert options.mistakes(["-S", "reps=3"]) == ["-S copy_latency.reps='3': must be a whole number from 10 to 100000"]
    assert options.mistakes(["-S", "daxpy.samples=9", "-S", "reps=50", "-t", "um|health"]) == []
    (tag,) = options.mistakes(["-t", "umm"])
    assert tag.startswith("-t: no check has the tag 'umm': not known (did you mean um?)")
    assert main(["nightly", "--system", "local", "--", "-S", "daxpy.samples=99"]) == 3
    assert "must be a whole number from 1 to 20" in capfd.readouterr().err


def test_a_report_commands_typo_names_the_nearest(capsys):
    assert main(["htm", "perflogs"]) == 3
    assert "no command 'htm': not known (did you mean html?)" in capsys.readouterr().err


def test_a_night_the_suite_failed_says_fix_the_suite_never_drain(tmp_path):
    from judge import explain

    run = {
        "system": "local",
        "stamp": "2026-11-20T03:00:00",
        "exit": 3,
        "unjudged_reasons": ["suite-error"],
        "suite_errors": ["SuiteBuild: the suite's build failed: build job failed with exit code: 127"],
        "drain": [],
    }
    *_, found, step = nightly.explained(run, None, None)
    assert [(f.verdict, f.step) for f in found] == [("SUITE ERROR", explain.Step.FIX_THE_SUITE)]
    assert step[0] == explain.Step.FIX_THE_SUITE and step[1].startswith("keep the node in service")
    nightly.write_verdict_only("local", run, tmp_path)
    page = (tmp_path / "index.html").read_text()
    assert "SUITE ERROR" in page and "keep the node in service" in page
    assert "What the night found" in page and "What moved" not in page  # a suite error is no move


def test_an_upgrade_that_ran_no_gpu_check_is_not_judged():
    from runner import upgrade

    host_only = {"passed": {"host_bandwidth", "SuiteBuild"}, "skipped": {"daxpy", "um_bandwidth", "copy_latency"}}
    assert upgrade.not_judged_without_gpus(host_only) == 3
    on_one_gpu = {"passed": {"host_bandwidth", "daxpy"}, "skipped": {"mem_scan", "p2p_pingpong"}}
    assert upgrade.not_judged_without_gpus(on_one_gpu) == 0


def test_a_night_stamped_a_month_ahead_hides_no_real_latest_night(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runs, "NIGHTLY_DIR", tmp_path)
    monkeypatch.setattr(pages, "NIGHTLY_DIR", tmp_path)
    night(tmp_path, "2026-12-05T03:00:00", end="x", state="done", exit=2, kind="1 x H100")
    night(tmp_path, "2027-01-05T03:00:00", end="x", state="done", exit=0, kind="1 x H100")  # a clock 30 days ahead
    latest = pages.latest_runs("local", at="2026-12-06T03:00:00")
    assert latest[("1 x H100", False)]["stamp"] == "2026-12-05T03:00:00"
    assert "2027-01-05T03:00:00 of local is stamped later than this machine's clock" in capsys.readouterr().err


def test_the_lock_names_its_holder_as_the_user_typed_it(monkeypatch):
    monkeypatch.setenv("GPU_MEMPATHS_PROG", "./suite")
    assert lock.command_line(["/x/commands/__main__.py", "nightly", "--system", "my site"]) == (
        "./suite nightly --system 'my site'"
    )


def test_a_damaged_system_file_is_named_without_a_traceback(tmp_path, monkeypatch, capsys):
    from systems import data

    broken = tmp_path / "mine.yaml"
    broken.write_text("name: mine\npartitions: [\n")
    real = data.load_all

    monkeypatch.setattr(data, "load_all", lambda directory=None: real(tmp_path))
    assert main(["nightly", "--system", "mine"]) == 3
    err = capsys.readouterr().err
    assert f"{broken}: not valid YAML" in err and "Traceback" not in err


def test_each_night_stages_in_its_own_folder_and_only_the_latest_few_are_kept(tmp_path):
    assert nightly.own_folders(tmp_path / "n1") == (
        "--stage",
        str(tmp_path / "n1/stage"),
        "--output",
        str(tmp_path / "n1/output"),
    )
    for stamp in ("2026-12-01T030000", "2026-12-02T030000", "2026-12-03T030000", "2026-12-04T030000"):
        for name in ("stage", "output"):
            (tmp_path / stamp / name).mkdir(parents=True)
        (tmp_path / stamp / "run.json").write_text("{}")
    removed = nightly.prune_stages(tmp_path, keep=3)
    assert removed == [tmp_path / "2026-12-01T030000/stage", tmp_path / "2026-12-01T030000/output"]
    assert (tmp_path / "2026-12-01T030000/run.json").exists() and (tmp_path / "2026-12-02T030000/stage").exists()


def test_power_on_a_system_of_several_kinds_lists_each_kind_to_give(capsys):
    assert main(["power", "--system", "hopper-vm"]) == 3
    err = capsys.readouterr().err
    assert "has accepted runs of several kinds of node: give one:" in err
    assert "--kind '1 x NVIDIA H100 80GB HBM3'" in err and "--kind '4 x NVIDIA H200'" in err


def test_an_abbreviated_option_cannot_slip_a_value_past_the_checks():
    found = options.unsafe_words(["--setv", "x=$(touch PWNED)", "--stag=/tmp/a;b", "--outp", "o"])
    assert [line.split(":")[0] for line in found] == ["--setv", "--stag", "--outp"]
    assert options.unsafe_words(["--setvar", "daxpy.samples=3", "--stage", "/scratch/s"]) == []


def test_an_upgrade_resumes_a_folder_of_results_upgrades_never_a_path(capsys):
    for name in ("../../etc", "/etc", "a/b", ".."):
        assert main(["upgrade", "13.5.37", "--resume", name]) == 3
        assert "give the name of a folder of results/upgrades/, not a path" in capsys.readouterr().err


def test_a_night_that_found_a_node_failure_before_the_suite_failed_still_drains_for_it(tmp_path, capsys):
    run = {"system": "local", "stamp": "2026-11-20T03:00:00", "start": "2026-11-20T03:00:00", "state": "running"}
    found = {**nightly.no_outcomes(), "failed": ["node_health: an uncorrected ECC error"]}
    status = nightly.not_judged_by_the_suite(tmp_path, run, ["no space left on the file system of X"], False, found)
    assert status == 1 and run["drain"] == ["GMP-501 failed node_health: an uncorrected ECC error"]
    assert "an uncorrected ECC error" in (tmp_path / "drain.txt").read_text()
    alone = {"system": "local", "stamp": "2026-11-20T03:00:00", "start": "2026-11-20T03:00:00", "state": "running"}
    assert nightly.not_judged_by_the_suite(tmp_path, alone, ["cmake is not on PATH"], False) == 3
    assert (tmp_path / "drain.txt").read_text() == ""


def test_a_stop_after_the_verdict_keeps_it(tmp_path, capsys):
    run = {"system": "local", "stamp": "2026-11-20T03:00:00", "state": "done", "exit": 2, "phase": "drawing"}
    assert nightly.stopped(tmp_path, run, "SIGTERM") == 2 and run["state"] == "done"
    assert "its verdict stands: exit 2" in capsys.readouterr().out


def test_a_night_still_running_keeps_its_stage(tmp_path):
    for stamp in ("2026-12-01T030000", "2026-12-02T030000"):
        (tmp_path / stamp / "stage").mkdir(parents=True)
    files.write_json(tmp_path / "2026-12-01T030000/run.json", {"state": "running", "start": runs.now()})
    assert nightly.prune_stages(tmp_path, keep=0) == [tmp_path / "2026-12-02T030000/stage"]


def test_a_cut_run_report_leaves_the_contention_and_the_rerun_empty_not_a_traceback(tmp_path):
    from runner import contention

    (tmp_path / "run-report.json").write_text('{"runs": [{"testc')
    gpus, others, hosts = contention.read_report(tmp_path / "run-report.json", "tonight")
    assert gpus.empty and others.empty and hosts.empty


def test_reframe_holds_the_nights_lock_too(tmp_path, monkeypatch):
    """Killed outright, the night lets the node go only when the ReFrame it started ends: ReFrame inherits
    the lock's descriptor (and ./suite run's, through runner.lock)."""
    with lock.held("a nightly", path=tmp_path / ".lock-n1"):
        (fd,) = lock.held_fds()
        probe = [sys.executable, "-c", f"import os; os.fstat({fd})"]  # fails where the descriptor is closed
        monkeypatch.setattr(nightly, "reframe_command", lambda system, *options: probe)
        assert nightly.reframe("local", tmp_path / "report.json") == 0
    assert lock.held_fds() == ()


def test_report_alone_and_a_reframe_option_it_refuses_are_usage_errors(tmp_path):
    alone = subprocess.run([str(REPO / "suite"), "report"], capture_output=True, text=True)
    assert alone.returncode == 3 and "./suite report load|compare|html" in alone.stderr
    from runner import quiet

    refused = quiet.main(["--", sys.executable, "-c", "import sys; sys.exit(2)"])
    assert refused == 3


def test_an_option_typo_names_the_nearest_option(capsys):
    assert main(["nightly", "--sytem", "local"]) == 3
    assert "no option '--sytem': not known (did you mean --system?)" in capsys.readouterr().err


def test_a_lock_that_cannot_be_taken_is_not_judged_never_a_traceback(tmp_path):
    """A directory where the lock file goes (or one another user made, a file system without flock):
    `./suite run`'s lock exited 1 with a traceback, a failed node's status."""
    env = {**os.environ, "GPU_MEMPATHS_DATA": str(tmp_path)}
    (tmp_path / "results" / lock.lock_path().name).mkdir(parents=True)
    done = subprocess.run(
        [sys.executable, "-m", "runner.lock", "--", "true"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == 3 and "could not be taken" in done.stderr and "Traceback" not in done.stderr


def test_a_pid_given_to_a_later_process_is_not_the_holder(tmp_path):
    """The lock file outlives its holder and a pid is given again: a process started after the file was
    written is not the one it names."""
    path = tmp_path / ".lock-node"
    with subprocess.Popen(["sleep", "30"]) as later:
        try:
            path.write_text(f"pid {later.pid} since 2026-12-06T01:00:00 UTC: ./suite nightly\n")
            assert lock._alive(path.read_text(), path)
            os.utime(path, (time.time() - 3600, time.time() - 3600))  # written an hour before it started
            assert not lock._alive(path.read_text(), path)
        finally:
            later.kill()
