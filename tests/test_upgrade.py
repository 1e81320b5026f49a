"""./suite upgrade (runner/upgrade.py): the runtime installed beside the
environments, every check run, and the run's records compared by runtime."""

import datetime as dt
import json
import os

import pandas as pd
import pytest
from test_toolkits import wheel

from commands import cli
from rfmconfig.settings import NIGHTLY_OPTIONS
from runner import upgrade
from systems import toolkits


@pytest.fixture(autouse=True)
def _environment_restored(monkeypatch):
    """An upgrade names its toolkits and runtimes in the environment, for the
    ReFrame it starts; the tests after these must not inherit them."""
    for name in (toolkits.RUNTIMES_VARIABLE, toolkits.TOOLKITS_VARIABLE):
        monkeypatch.setenv(name, os.environ.get(name, ""))
        monkeypatch.delenv(name)


def test_the_wheel_of_each_cuda_major_version():
    assert upgrade.wheel_of("13.5.37") == "nvidia-cuda-runtime==13.5.37"
    assert upgrade.wheel_of("12.9.79") == "nvidia-cuda-runtime-cu12==12.9.79"


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A machine whose nvcc is CUDA 13.0, with runtime 13.5.37 installed already."""
    wheel(tmp_path / "runtimes" / "13.5.37", "13.5.37")
    for name, folder in (("RUNTIMES", "runtimes"), ("UPGRADES", "upgrades"), ("PERFLOGS", "perflogs")):
        monkeypatch.setattr(upgrade, name, tmp_path / folder)
    monkeypatch.setattr(upgrade, "base_release", lambda: "13.0")
    monkeypatch.setattr(upgrade, "twins_of", lambda system: ["gnu-rt13_5"])
    monkeypatch.delenv(toolkits.RUNTIMES_VARIABLE, raising=False)
    return tmp_path


CASE = "memory=managed op=read size_class=small small_size=1G touch_on_host=notouch"
#: The two figures of the fake runs, on two paths: GPU memory (3% floor) and the migration (5%).
LEVELS = {"steady_bw": 1900.0, "first_run_bw": 20.0}


@pytest.fixture
def clock(monkeypatch):
    """The runs' clock: a minute passes at every reading, so that each side's run has a window of its own."""
    times = iter(dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(minutes=m) for m in range(10_000))
    state = {"now": None}

    def now():
        state["now"] = next(times)
        return state["now"].strftime("%Y-%m-%dT%H:%M:%S")

    monkeypatch.setattr(upgrade, "now", now)
    return state


def fake_reframe(site, clock, planted: dict[str, dict[str, float]], failed=(), calls=None):
    """What ReFrame would log for each side's run: the um_bandwidth case in
    the environments the run selects, five samples of two figures; a run's
    level drifts by up to 1% round to round, alike on both sides (what the
    interleaving is for); `planted` maps an environment to {figure: factor},
    or {figure: factor} under (environment, run number) for one run only."""

    failed = [
        {"display_name": name, "result": "fail", "fail_phase": "sanity", "fail_reason": "no output"} for name in failed
    ]
    runs = {}

    def run(system, report, *options):
        pattern = options[options.index("-p") + 1]
        environs = [e.strip("^$").replace("\\", "") for e in pattern.split("|")]
        if calls is not None:
            calls.append((environs, options))
        when = (clock["now"] + dt.timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%S+00:00")
        header = "job_completion_time|display_name|system|partition|environ|case|gpu_model|host_link|"
        lines = [header + "perf_var|perf_value|perf_unit|perf_ref|perf_lower_thres|perf_upper_thres"]
        for environ in environs:
            runs[environ] = n = runs.get(environ, 0) + 1
            drift = 1 + 0.01 * ((n * 7) % 3 - 1)  # the same on both sides of a round
            for figure, level in LEVELS.items():
                level *= drift * planted.get(environ, {}).get(figure, 1.0)
                level *= planted.get((environ, n), {}).get(figure, 1.0)
                common = f"{when}|um_bandwidth %op=read|{system}|default|{environ}|{CASE}|H100|pcie gen5 x16"
                lines += [f"{common}|{figure}.s{k}|{level * (1 + k / 1000)}|GB/s|0|null|null" for k in range(1, 6)]
        log = site / "perflogs" / system / "default" / "um_bandwidth.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        new_file = not log.exists()
        with log.open("a") as out:
            out.write("\n".join(lines if new_file else lines[1:]) + "\n")
        report.parent.mkdir(parents=True, exist_ok=True)
        ran = [{"display_name": "um_bandwidth %op=read", "case": CASE, "hashcode": "c0ffee", "result": "pass"}]
        report.write_text(json.dumps({"runs": [{"testcases": ran + failed}]}))
        return 1 if failed else 0

    return run


def path_verdicts(site, pattern: str) -> dict[str, str]:
    (table,) = (site / "upgrades").glob(pattern)
    return pd.read_csv(table).set_index("path")["verdict"].to_dict()


GPU_MEMORY, MIGRATION = "GPU memory of GPU 0", "Unified Memory migration, GPU 0"


@pytest.mark.parametrize("planted, status", [({}, 0), ({"gnu-rt13_5": {"steady_bw": 0.93}}, 2)])
def test_an_upgrade_runs_the_sides_interleaved_and_judges_each_path_in_pairs(site, clock, monkeypatch, planted, status):
    calls = []
    monkeypatch.setattr(upgrade, "reframe", fake_reframe(site, clock, planted, calls=calls))
    assert cli.main(["upgrade", "13.5.37", "--system", "local", "--", "-n", "um_bandwidth"]) == status
    sides = [environs for environs, _ in calls]
    assert sides[:6] == [["gnu"], ["gnu-rt13_5"]] * 3  # old, new, old, new, old, new
    assert all(options[-2:] == ("-n", "um_bandwidth") for _, options in calls[:6])
    assert all(tuple(NIGHTLY_OPTIONS) == options[:3] for _, options in calls)  # measured as nights are
    verdicts = path_verdicts(site, "local-cuda-runtime-13.0-to-13.5-*-paths.csv")
    assert verdicts == {GPU_MEMORY: "moved" if planted else "pass", MIGRATION: "pass"}
    if planted:  # the flagged path's case ran once more on both sides before it was called moved
        assert sides[6:] == [["gnu"], ["gnu-rt13_5"]]
        assert all(options[-2:] == ("-n", "/c0ffee") for _, options in calls[6:])  # its cases alone


def test_a_transient_in_one_run_of_the_new_side_is_not_called_moved(site, clock, monkeypatch):
    planted = {("gnu-rt13_5", 2): {"steady_bw": 0.6}}
    monkeypatch.setattr(upgrade, "reframe", fake_reframe(site, clock, planted))
    assert cli.main(["upgrade", "13.5.37", "--system", "local"]) == 0
    assert path_verdicts(site, "local-cuda-runtime-13.0-to-13.5-*-paths.csv")[GPU_MEMORY] == "pass"


def test_a_move_the_rerun_does_not_show_is_transient(site, clock, monkeypatch):
    # Every new run of the rounds 7% slower, the rerun (the fourth) not: no move that lasts.
    planted = {("gnu-rt13_5", n): {"steady_bw": 0.93} for n in (1, 2, 3)}
    monkeypatch.setattr(upgrade, "reframe", fake_reframe(site, clock, planted))
    assert cli.main(["upgrade", "13.5.37", "--system", "local"]) == 0
    assert path_verdicts(site, "local-cuda-runtime-13.0-to-13.5-*-paths.csv")[GPU_MEMORY] == "transient"


def test_a_check_that_did_not_measure_fails_the_upgrade(site, clock, monkeypatch):
    monkeypatch.setattr(upgrade, "reframe", fake_reframe(site, clock, {}, failed=["daxpy %allocator=managed"]))
    assert cli.main(["upgrade", "13.5.37", "--system", "local"]) == 1


def test_fewer_rounds_than_the_verdict_needs_are_refused(site, capsys):
    assert cli.main(["upgrade", "13.5.37", "--runs", "2"]) == 3
    assert "needs 3 pairs of runs" in capsys.readouterr().err


def test_no_upgrade_without_an_nvcc_twins_or_sense(site, monkeypatch, capsys):
    assert cli.main(["upgrade", "13.0.96"]) == 3  # the release the environments have already
    assert cli.main(["upgrade", "--bogus"]) == 3  # a usage error is never the 2 of a move
    monkeypatch.setattr(upgrade, "twins_of", lambda system: [])
    assert cli.main(["upgrade", "13.5.37", "--system", "summit"]) == 3
    assert "summit has no environment to run runtime 13.5 in" in capsys.readouterr().err
    monkeypatch.setattr(upgrade, "base_release", lambda: None)
    assert cli.main(["upgrade", "13.5.37"]) == 3


@pytest.fixture
def toolkit_site(site, monkeypatch):
    """The site, with CUDA 12.9 made from wheels already and clang to build it."""
    monkeypatch.setattr(upgrade, "TOOLKITS", site / "toolkits")
    monkeypatch.setattr(upgrade, "install_toolkit", lambda release, folder: folder / release)
    monkeypatch.setattr(upgrade.detect, "find_nvcc", lambda name: "/usr/local/cuda-13.0/bin/nvcc")
    envs = [{"name": "gnu", "nvcc": "nvcc"}, {"name": "clang-cuda12_9"}, {"name": "clang-cuda13_0"}]
    monkeypatch.setattr(upgrade, "environments_of", lambda system: envs)
    monkeypatch.delenv(toolkits.TOOLKITS_VARIABLE, raising=False)
    return site


@pytest.mark.parametrize(
    "planted, status, moved",
    [
        ({}, 0, {}),
        # The toolkit moved GPU memory: seen in the toolkit's comparison and in the upgrade, not the compiler's.
        (
            {"clang-cuda13_0": {"steady_bw": 0.8}, "gnu": {"steady_bw": 0.8}},
            2,
            {"toolkit-only": GPU_MEMORY, "toolkit-and-compiler": GPU_MEMORY},
        ),
        # nvcc moved the migration: the compiler's comparison and the upgrade's.
        ({"gnu": {"first_run_bw": 0.8}}, 2, {"compiler-only": MIGRATION, "toolkit-and-compiler": MIGRATION}),
    ],
)
def test_an_upgrade_from_an_older_toolkit_tells_toolkit_and_compiler_apart(
    toolkit_site, clock, monkeypatch, planted, status, moved
):
    calls = []
    monkeypatch.setattr(upgrade, "reframe", fake_reframe(toolkit_site, clock, planted, calls=calls))
    assert cli.main(["upgrade", "12.9", "--system", "local"]) == status
    assert os.environ[toolkits.TOOLKITS_VARIABLE].endswith(os.pathsep + "/usr/local/cuda-13.0")
    assert [e for e, _ in calls[:9]] == [["clang-cuda12_9"], ["clang-cuda13_0"], ["gnu"]] * 3  # interleaved
    for what in ("toolkit-only", "compiler-only", "toolkit-and-compiler"):
        verdicts = path_verdicts(toolkit_site, f"local-cuda-12.9-to-13.0-*-{what}-paths.csv")
        expected = {p: "moved" if moved.get(what) == p else "pass" for p in (GPU_MEMORY, MIGRATION)}
        assert verdicts == expected, what


def test_no_toolkit_upgrade_without_its_environments(toolkit_site, monkeypatch, capsys):
    monkeypatch.setattr(upgrade, "environments_of", lambda system: [{"name": "gnu", "nvcc": "nvcc"}])
    assert cli.main(["upgrade", "12.9", "--system", "local"]) == 3
    assert "local has no environment clang-cuda12_9, clang-cuda13_0" in capsys.readouterr().err


def test_an_upgrade_a_time_limit_ended_goes_on_where_it_stopped(site, clock, monkeypatch, capsys):
    calls = []
    run = fake_reframe(site, clock, {}, calls=calls)

    def limited(system, report, *options):
        if len(calls) == 4:  # round 3's old side: the job's time is up
            raise RuntimeError("the job's time limit")
        return run(system, report, *options)

    monkeypatch.setattr(upgrade, "reframe", limited)
    assert cli.main(["upgrade", "13.5.37", "--system", "local", "--", "-n", "um_bandwidth"]) == 3
    (folder,) = (site / "upgrades").glob("local-cuda-runtime-13.0-to-13.5-*")
    assert len(json.loads((folder / "rounds.json").read_text())["rounds"]) == 2
    assert cli.main(["upgrade", "13.5.37", "--system", "local", "--resume", folder.name, "--", "-n", "daxpy"]) == 3
    assert "ran with its own ReFrame options (-n um_bandwidth)" in capsys.readouterr().err
    monkeypatch.setattr(upgrade, "reframe", run)
    assert cli.main(["upgrade", "13.5.37", "--system", "local", "--resume", folder.name]) == 0
    assert [e for e, _ in calls[4:]] == [["gnu"], ["gnu-rt13_5"]]  # round 3 alone
    assert all(options[-2:] == ("-n", "um_bandwidth") for _, options in calls[4:])  # with the first run's options
    assert path_verdicts(site, f"{folder.name}-paths.csv") == {GPU_MEMORY: "pass", MIGRATION: "pass"}


def driver_site(site, monkeypatch, new_driver: str, drop: float):
    """Three accepted runs under driver 580.1, then two nights under `new_driver`, GPU memory `drop` lower in them."""
    runs = [(f"2030-01-01T0{h}:00:00", "580.1", 1.0 + 0.003 * h) for h in (1, 2, 3)]
    runs += [("2030-01-02T01:00:00", new_driver, 1 - drop), ("2030-01-03T01:00:00", new_driver, 1 - drop * 1.01)]
    header = "job_completion_time|display_name|system|partition|environ|case|gpu_model|host_link|driver_version|"
    lines = [header + "perf_var|perf_value|perf_unit|perf_ref|perf_lower_thres|perf_upper_thres"]
    stamps = []
    for when, driver, factor in runs:
        common = f"{when}|um_bandwidth %op=read|local|default|gnu|{CASE}|H100|pcie gen5 x16|{driver}"
        for figure, level in LEVELS.items():
            level *= factor if figure == "steady_bw" else 1.0
            lines += [f"{common}|{figure}.s{k}|{level * (1 + k / 1000)}|GB/s|0|null|null" for k in range(1, 6)]
        start = dt.datetime.fromisoformat(when) - dt.timedelta(minutes=1)
        stamps.append(
            {
                "stamp": start.strftime("%Y-%m-%dT%H:%M:%S"),
                "start": start.strftime("%Y-%m-%dT%H:%M:%S"),
                "end": (start + dt.timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%S"),
            }
        )
    log = site / "perflogs" / "local" / "default" / "um_bandwidth.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("\n".join(lines) + "\n")
    accepted = {"kind": "1 x H100", "runs": stamps[:3]}
    monkeypatch.setattr(upgrade, "read_accepted", lambda system, kind: accepted)
    monkeypatch.setattr(upgrade, "finished_runs", lambda system, kind=None: stamps)


@pytest.mark.parametrize("drop, status", [(0.0, 0), (0.2, 2)])
def test_a_driver_upgrade_judges_the_nights_under_the_new_driver_against_the_accepted_runs(
    site, monkeypatch, capsys, drop, status
):
    driver_site(site, monkeypatch, "590.2", drop)
    assert cli.main(["upgrade", "driver", "--system", "local"]) == status
    out = capsys.readouterr().out
    assert "driver 580.1 (3 accepted runs) -> 590.2 (2 night(s)" in out  # both drivers named
    verdicts = path_verdicts(site, "local-driver-580.1-to-590.2-paths.csv")
    assert verdicts == {GPU_MEMORY: "moved" if drop else "pass", MIGRATION: "pass"}


def test_no_driver_upgrade_without_a_night_under_another_driver(site, monkeypatch, capsys):
    driver_site(site, monkeypatch, "580.1", 0.0)
    assert cli.main(["upgrade", "driver", "--system", "local"]) == 3
    assert "ran under another driver than 580.1" in capsys.readouterr().err
