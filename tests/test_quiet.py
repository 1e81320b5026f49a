"""./suite run's output (runner/quiet.py): each reason a case was skipped for
said once, before ReFrame's last line, and where the run's perflogs or a dry
run's job scripts went; ReFrame's status passes through."""

import sys

from runner import quiet

REFRAME_LIKE = r"""
import sys
print("[ RUN      ] host_bandwidth /1a2b @local:default+gnu")
WHY = "no GPU on local:default: NVML not found"
for i in range(3):
    print(f"[     SKIP ] ({i + 1}/5) um_bandwidth %memory=m{i} /ab{i} @local:default+gnu [{WHY}]")
print(f"[ \x1b[33m    SKIP\x1b[0m ] (4/5) mem_scan %mode=single /cd @local:default+gnu [{WHY}]")
print("[     SKIP ] (5/5) gdrcopy_sanity /ef @local:default+gnu [no gdrdrv on local:default]")
print("[  PASSED  ] Ran 1/5 test case(s) from 5 check(s) (0 failure(s), 0 expected failure(s), 4 skipped, 0 aborted)")
sys.exit(int(sys.argv[1]))
"""


def test_skips_are_said_once_per_reason_before_the_last_line_and_the_status_passes(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "perflogs" / "local" / "default").mkdir(parents=True)
    measured = "open('perflogs/local/default/x.log', 'w').close()\n" + REFRAME_LIKE
    status = quiet.main(["--", sys.executable, "-c", measured, "0"])
    out = capsys.readouterr().out.splitlines()
    assert status == 0 and not any("SKIP" in line for line in out)
    assert out[1:3] == [
        "suite: 4 case(s) skipped (mem_scan, um_bandwidth): no GPU on local:default: NVML not found",
        "suite: 1 case(s) skipped (gdrcopy_sanity): no gdrdrv on local:default",
    ]
    assert out[3].startswith("[  PASSED  ] Ran 1/5")
    where = "perflogs/local/default"
    assert out[4] == f"suite: perflogs in {where} (x.log); ./suite report html {where} -o DIR draws them"
    monkeypatch.chdir(tmp_path / "perflogs")  # a checkout where nothing was measured
    assert quiet.main(["--", sys.executable, "-c", REFRAME_LIKE, "1"]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "suite: no perflog written: nothing was measured"


def test_a_dry_run_names_where_its_job_scripts_are(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write = (
        "import os; os.makedirs('stage/dgx/gpu/cuda/t1', exist_ok=True); open('stage/dgx/gpu/cuda/t1/rfm_job.sh', 'w');"
        "os.makedirs('stage/dgx/gpu/cuda/b1', exist_ok=True); open('stage/dgx/gpu/cuda/b1/rfm_build.sh', 'w')"
    )
    assert quiet.main(["--", sys.executable, "-c", write, "--dry-run"]) == 0
    # The builds' scripts counted with the cases': the total agrees with the per-check lines and ReFrame's Ran.
    assert capsys.readouterr().out.splitlines()[-1] == (
        "suite: 2 job script(s) (1 rfm_job.sh, 1 rfm_build.sh) under stage/dgx/gpu/cuda; nothing submitted"
    )


def test_a_run_killed_by_a_signal_exits_as_a_shell_says_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert quiet.main(["--", sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"]) == 143


DRY_LIKE = r"""
for env in ("cuda", "spack"):
    print(f"[ DRY      ] path_matrix %paths=peer-ce /b5{env} @dgx:gpu+{env}")
    print(f"[       OK ] (1/3) path_matrix %paths=peer-ce /b5{env} @dgx:gpu+{env}")
print("[ DRY      ] gdrcopy_sanity /ef @dgx:gpu+cuda")
print("[     SKIP ] (3/3) gdrcopy_sanity /ef @dgx:gpu+cuda [no gdrdrv on dgx:gpu]")
print("[  FAILED  ] (4/3) mem_scan /aa @dgx:gpu+cuda")
print("[  PASSED  ] Ran 2/3 test case(s) from 2 check(s) (0 failure(s), 0 expected failure(s), 1 skipped, 0 aborted)")
"""


def test_a_dry_run_says_each_check_once_with_the_environments_its_job_scripts_cover(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert quiet.main(["--", sys.executable, "-c", DRY_LIKE, "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == [
        "[  FAILED  ] (4/3) mem_scan /aa @dgx:gpu+cuda",  # what is not a case's DRY or OK line passes
        "suite: 2 job script(s) of path_matrix for dgx:gpu+cuda, dgx:gpu+spack",
        "suite: 1 case(s) skipped (gdrcopy_sanity): no gdrdrv on dgx:gpu",
        "[  PASSED  ] Ran 2/3 test case(s) from 2 check(s) (0 failure(s), 0 expected failure(s), 1 skipped, 0 aborted)",
    ]


def test_skips_over_the_case_budget_are_one_reason_with_the_range_of_expected_times():
    skips = quiet.Skips()
    budget = "over the case budget of 2 min 00 s (-S case_budget_s=SECONDS runs it)"
    for i, expected in enumerate(["3 min 19 s", "62 min 04 s", "3 min 19 s", "10 min 35 s"]):
        assert skips.take(
            f"[     SKIP ] ({i + 1}/9) um_bandwidth %op=read /a{i} @x:gpu+cuda [{budget}: expected {expected}]"
        )
    assert skips.take("[     SKIP ] (5/9) daxpy /b @x:gpu+cuda [system memory needs ATS or HMM]")
    assert skips.lines() == [
        f"suite: 4 case(s) skipped (um_bandwidth): {budget}: expected 3 min 19 s to 62 min 04 s",
        "suite: 1 case(s) skipped (daxpy): system memory needs ATS or HMM",
    ]
