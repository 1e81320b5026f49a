"""./suite upgrade (reports/upgrade.py): the runtime installed beside the
environments, every check run, and the run's records compared by runtime."""

import datetime as dt
import json
import os

import pandas as pd
import pytest
from test_toolkits import wheel

from reports import upgrade
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


def fake_reframe(site, planted: str | None, failed=()):
    """What ReFrame would log: one case in gnu (13.0) and gnu-rt13_5 (13.5), five samples
    of two figures each; `planted` 20% down in 13.5."""

    failed = [
        {"display_name": name, "result": "fail", "fail_phase": "sanity", "fail_reason": "no output"} for name in failed
    ]

    def run(system, report, *options):
        assert str(site / "runtimes" / "13.5.37") in os.environ[toolkits.RUNTIMES_VARIABLE].split(os.pathsep)
        assert options == ("-n", "um_bandwidth")
        when = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%S+00:00")
        header = "job_completion_time|display_name|system|partition|environ|case|gpu_model|host_link|"
        lines = [
            header + "cuda_runtime_version|perf_var|perf_value|perf_unit|perf_ref|perf_lower_thres|perf_upper_thres"
        ]
        for environ, runtime in (("gnu", "13.0"), ("gnu-rt13_5", "13.5")):
            for figure, level in (("steady_bw", 47.0), ("copy_engine_bw", 51.0)):
                level *= 0.8 if runtime == "13.5" and figure == planted else 1.0
                common = f"{when}|um_bandwidth|{system}|default|{environ}|op=read|H100|pcie gen5 x16|{runtime}"
                lines += [f"{common}|{figure}.s{k}|{level * (1 + k / 1000)}|GiB/s|0|null|null" for k in range(1, 6)]
        (site / "perflogs" / system / "default").mkdir(parents=True, exist_ok=True)
        (site / "perflogs" / system / "default" / "um_bandwidth.log").write_text("\n".join(lines) + "\n")
        (site / "upgrades" / report.name).write_text(json.dumps({"runs": [{"testcases": failed}]}))
        return 1 if failed else 0

    return run


@pytest.mark.parametrize("planted, status", [(None, 0), ("steady_bw", 2)])
def test_an_upgrade_runs_beside_the_new_runtime_and_judges_by_runtime(site, monkeypatch, planted, status):
    monkeypatch.setattr(upgrade, "reframe", fake_reframe(site, planted))
    assert upgrade.main(["13.5.37", "--system", "local", "--threshold", "5", "--", "-n", "um_bandwidth"]) == status
    (table,) = (site / "upgrades").glob("local-cuda-runtime-13.0-to-13.5-*.csv")
    verdicts = pd.read_csv(table).set_index("figure")["verdict"].to_dict()
    assert verdicts == {"copy_engine_bw": "pass", "steady_bw": "regression" if planted else "pass"}


def test_a_check_that_did_not_measure_fails_the_upgrade_unless_something_moved(site, monkeypatch):
    monkeypatch.setattr(upgrade, "reframe", fake_reframe(site, None, failed=["daxpy %allocator=managed"]))
    options = ["13.5.37", "--system", "local", "--threshold", "5", "--", "-n", "um_bandwidth"]
    assert upgrade.main(options) == 1
    monkeypatch.setattr(upgrade, "reframe", fake_reframe(site, "steady_bw", failed=["daxpy %allocator=managed"]))
    assert upgrade.main(options) == 2


def test_no_upgrade_without_an_nvcc_twins_or_sense(site, monkeypatch, capsys):
    assert upgrade.main(["13.0.96"]) == 3  # the release the environments have already
    assert upgrade.main(["--bogus"]) == 3  # a usage error is never the 2 of a move
    monkeypatch.setattr(upgrade, "twins_of", lambda system: [])
    assert upgrade.main(["13.5.37", "--system", "summit"]) == 3
    assert "summit has no environment to run runtime 13.5 in" in capsys.readouterr().err
    monkeypatch.setattr(upgrade, "base_release", lambda: None)
    assert upgrade.main(["13.5.37"]) == 3


def fake_toolkit_run(site, planted: dict[str, str]):
    """What ReFrame would log for an upgrade from 12.9: one case in each of
    clang-cuda12_9, clang-cuda13_0 and gnu (nvcc 13.0), five samples of two
    figures; `planted` maps an environment to the figure 20% down in it."""

    def run(system, report, *options):
        assert os.environ[toolkits.TOOLKITS_VARIABLE].split(os.pathsep)[0] == str(site / "toolkits" / "12.9")
        when = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%S+00:00")
        lines = [
            "job_completion_time|display_name|system|partition|environ|case|gpu_model|host_link|"
            "perf_var|perf_value|perf_unit|perf_ref|perf_lower_thres|perf_upper_thres"
        ]
        for environ in ("clang-cuda12_9", "clang-cuda13_0", "gnu"):
            for figure, level in (("steady_bw", 47.0), ("copy_engine_bw", 51.0)):
                level *= 0.8 if planted.get(environ) == figure else 1.0
                common = f"{when}|um_bandwidth|{system}|default|{environ}|op=read|H100|pcie gen5 x16"
                lines += [f"{common}|{figure}.s{k}|{level * (1 + k / 1000)}|GiB/s|0|null|null" for k in range(1, 6)]
        (site / "perflogs" / system / "default").mkdir(parents=True, exist_ok=True)
        (site / "perflogs" / system / "default" / "um_bandwidth.log").write_text("\n".join(lines) + "\n")
        (site / "upgrades" / report.name).write_text(json.dumps({"runs": [{"testcases": []}]}))
        return 0

    return run


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
        # The toolkit moved steady_bw: seen in the toolkit's comparison and in the upgrade, not the compiler's.
        (
            {"clang-cuda13_0": "steady_bw", "gnu": "steady_bw"},
            2,
            {"toolkit-only": "steady_bw", "toolkit-and-compiler": "steady_bw"},
        ),
        # nvcc moved copy_engine_bw: the compiler's comparison and the upgrade's.
        ({"gnu": "copy_engine_bw"}, 2, {"compiler-only": "copy_engine_bw", "toolkit-and-compiler": "copy_engine_bw"}),
    ],
)
def test_an_upgrade_from_an_older_toolkit_tells_toolkit_and_compiler_apart(
    toolkit_site, monkeypatch, planted, status, moved
):
    monkeypatch.setattr(upgrade, "reframe", fake_toolkit_run(toolkit_site, planted))
    assert upgrade.main(["12.9", "--system", "local", "--threshold", "5"]) == status
    assert os.environ[toolkits.TOOLKITS_VARIABLE].endswith(os.pathsep + "/usr/local/cuda-13.0")
    for what in ("toolkit-only", "compiler-only", "toolkit-and-compiler"):
        (table,) = (toolkit_site / "upgrades").glob(f"local-cuda-12.9-to-13.0-{what}-*.csv")
        verdicts = pd.read_csv(table).set_index("figure")["verdict"].to_dict()
        expected = {f: "regression" if moved.get(what) == f else "pass" for f in ("steady_bw", "copy_engine_bw")}
        assert verdicts == expected, what


def test_no_toolkit_upgrade_without_its_environments(toolkit_site, monkeypatch, capsys):
    monkeypatch.setattr(upgrade, "environments_of", lambda system: [{"name": "gnu", "nvcc": "nvcc"}])
    assert upgrade.main(["12.9", "--system", "local"]) == 3
    assert "local has no environment clang-cuda12_9, clang-cuda13_0" in capsys.readouterr().err
