"""reports/: loading perflogs (bad lines included), comparing runs, and the
figures drawn from the perflogs committed under perflogs/."""

import io
import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest
from committed import PERFLOGS as COMMITTED

import experiments
from commands.cli import main
from judge import compare as cmp
from judge import select
from reports.figures import render_all
from reports.figures.copy_latency import latency_crossovers, latency_curves
from reports.figures.daxpy import daxpy_crossover_table
from reports.figures.mem_scan import scan_speed_of_light
from reports.html import write_report
from reports.load import load, split_display_name
from rfmconfig.settings import PERFLOG_FORMAT, perflog_ignore_keys
from runner.histories import report_histories

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
PERFLOGS = REPO / "perflogs"
H100 = "NVIDIA H100 80GB HBM3"

# %(check_#ALL)s, sorted, parameters and the case as fields: a check 'Fake'...
HEADER = (
    "job_completion_time|reframe version|case|cuda_runtime_version|cuda_version|display_name|driver_version|"
    "environ|gpu_count|gpu_model|host_link|job_nodelist|jobid|name|op|partition|size|system|result|perf_var|"
    "perf_value|perf_unit|perf_ref|perf_lower_thres|perf_upper_thres"
)
# ... and one 'Latency' without a case.
NEW_HEADER = (
    "job_completion_time|reframe version|cuda_runtime_version|cuda_version|display_name|driver_version|environ|"
    "gpu_model|host_link|job_nodelist|jobid|latency_size|name|partition|system|result|perf_var|perf_value|"
    "perf_unit|perf_ref|perf_lower_thres|perf_upper_thres"
)


def line(time, var, value, driver="580.65.06", op="read", size="1G"):
    display = f"Fake %op={op} %size={size}"
    return (
        f"{time}|reframe 4.10.4|op={op} size={size}|13.0|13.0|{display}|{driver}|gnu|1|NVIDIA H100|pcie gen5 x16|"
        f"node1|41|{display}|{op}|default|{size}|local|pass|{var}|{value}|GiB/s|0|null|null"
    )


def new_line(time, var, value, size="8"):
    display = f"Latency %latency_size={size}"
    return (
        f"{time}|reframe 4.10.4|12.8|13.0|{display}|580.65.06|gnu|NVIDIA H200|pcie gen5 x16|node2|42|{size}|"
        f"{display}|default|local|pass|{var}|{value}|us|0|null|null"
    )


# --- loading -----------------------------------------------------------------


def test_display_names_give_their_parameters():
    assert split_display_name("um_bandwidth %memory=managed+accessed-by %op=read") == (
        "um_bandwidth",
        {"memory": "managed+accessed-by", "op": "read"},
    )
    assert split_display_name("SuiteBuild ~local:default+gnu") == ("SuiteBuild", {})


def test_malformed_and_truncated_lines_are_reported_and_the_rest_kept(tmp_path):
    lines = [
        HEADER,
        line("2026-11-22T16:43:19", "steady_bw", "47.5"),
        "2026-11-22T16:43:20|reframe 4.10.4|Fake|only a few fields",  # line 3: malformed
        line("2026-11-22T16:43:21", "steady_bw", "not-a-number"),  # line 4: malformed value
        line("2026-11-22T16:43:22", "steady_bw", "48.0"),
        line("2026-11-22T16:43:23", "steady_bw", "48.1")[:60],  # line 6: cut short, no newline
    ]
    log = tmp_path / "local" / "default" / "Fake.log"
    log.parent.mkdir(parents=True)
    log.write_text("\n".join(lines))
    warnings = io.StringIO()
    loaded = load(tmp_path, warn=warnings)
    assert list(loaded.frame["value"]) == [47.5, 48.0]
    assert [(i.line, i.kind) for i in loaded.issues] == [(3, "malformed"), (4, "malformed"), (6, "truncated")]
    text = warnings.getvalue()
    assert f"{log}:3: malformed" in text and f"{log}:6: truncated" in text
    assert loaded.files[str(log)] == 2
    counts = loaded.issue_counts().set_index("kind")["lines"]
    assert counts["malformed"] == 2 and counts["truncated"] == 1


def test_a_perflog_reframe_set_aside_for_a_new_column_is_read_by_its_own_header(tmp_path):
    # A new column (the fingerprint `code`) makes ReFrame rename NAME.log to NAME.log.h0 and start NAME.log anew.
    folder = tmp_path / "local" / "default"
    folder.mkdir(parents=True)
    (folder / "Fake.log.h0").write_text(HEADER + "\n" + line("2026-11-20T10:00:00+00:00", "steady_bw", "47") + "\n")
    fields = HEADER.split("|")
    at = fields.index("result")
    header = "|".join([*fields[:at], "code", *fields[at:]])
    newer = line("2026-11-22T10:00:00+00:00", "steady_bw", "48").split("|")
    (folder / "Fake.log").write_text(header + "\n" + "|".join([*newer[:at], "a1b2c3d4e5f6", *newer[at:]]) + "\n")
    (folder / "Fake.log.bak").write_text("not a perflog\n")
    loaded = load(tmp_path, warn=None)
    assert not loaded.issues
    frame = loaded.frame.sort_values("time")
    assert frame["value"].tolist() == [47.0, 48.0]
    assert frame["code"].isna().tolist() == [True, False] and frame["code"].iloc[1] == "a1b2c3d4e5f6"


def test_a_file_without_header_is_reported_not_dropped_silently(tmp_path):
    (tmp_path / "Fake.log").write_text(line("2026-11-22T16:43:19", "steady_bw", "1") + "\n")
    loaded = load(tmp_path, warn=None)
    assert loaded.frame.empty
    assert [i.kind for i in loaded.issues] == ["unreadable"]


def test_perflogs_of_checks_with_their_own_fields_load_into_one_table(tmp_path):
    (tmp_path / "Fake.log").write_text(HEADER + "\n" + line("2026-11-20T10:00:00+00:00", "steady_bw", "47") + "\n")
    (tmp_path / "Latency.log").write_text(
        NEW_HEADER + "\n" + new_line("2026-11-22T10:00:00+00:00", "h2d_latency", "2.5") + "\n"
    )
    loaded = load(tmp_path, warn=None)
    frame = loaded.frame.set_index("test")
    assert not loaded.issues
    assert frame.loc["Fake", "op"] == "read" and frame.loc["Fake", "size"] == "1G"
    assert frame.loc["Fake", "case"] == "op=read size=1G" and frame.loc["Fake", "gpu_count"] == "1"
    assert frame.loc["Latency", "case"] == "" and frame.loc["Latency", "gpu_count"] == ""
    assert frame.loc["Latency", "cuda_runtime_version"] == "12.8"
    assert frame.loc["Latency", "latency_size"] == "8"
    assert frame.loc["Latency", "node"] == "node2" and frame.loc["Latency", "unit"] == "us"
    assert frame["time"].notna().all()


def test_check_fields_named_like_table_columns_keep_apart(tmp_path):
    header = NEW_HEADER.replace("|latency_size|", "|time|")
    (tmp_path / "Latency.log").write_text(header + "\n" + new_line("2026-11-22T10:00:00", "h2d", "2.5", "30s") + "\n")
    row = load(tmp_path, warn=None).frame.iloc[0]
    assert row["param_time"] == "30s" and row["time"] == pd.Timestamp("2026-11-22T10:00:00", tz="UTC")


def test_json_run_reports_load(tmp_path):
    report = {
        "session_info": {"version": "4.10.4"},
        "runs": [
            {
                "testcases": [
                    {
                        "name": "Fake %op=write",
                        "display_name": "Fake %op=write",
                        "system": "local",
                        "partition": "default",
                        "environ": "gnu",
                        "job_nodelist": ["node3"],
                        "job_completion_time": "2026-11-22T10:00:00+00:00",
                        "result": "pass",
                        "gpu_model": "NVIDIA H100",
                        "case": "op=write",
                        "perfvalues": {"local:default:steady_bw": [48.2, 0, None, None, "GiB/s", "pass"]},
                    }
                ]
            }
        ],
    }
    (tmp_path / "run-report-1.json").write_text(json.dumps(report))
    frame = load(tmp_path, warn=None).frame
    row = frame.iloc[0]
    assert (row["test"], row["op"], row["case"], row["perf_var"], row["value"], row["node"]) == (
        "Fake",
        "write",
        "op=write",
        "steady_bw",
        48.2,
        "node3",
    )


def test_committed_perflogs_load_without_issues():
    loaded = load(COMMITTED, warn=None)
    assert not loaded.issues
    frame = loaded.frame
    assert {"um_bandwidth", "host_bandwidth"} <= set(frame["test"])
    um = frame[frame["test"] == "um_bandwidth"]
    assert {"memory", "touch_on_host", "op", "size_class"} <= set(um.columns)
    assert set(um["gpu_model"]) == {H100, "NVIDIA H200"}  # the H200 ran it alone too


# --- the perflog format --------------------------------------------------------


def test_perflog_records_carry_every_check_attribute_but_reframes_own():
    assert "%(check_#ALL)s" in PERFLOG_FORMAT
    ignored = set(perflog_ignore_keys())
    kept = {"check_display_name", "check_system", "check_partition", "check_environ", "check_job_nodelist"}
    node_facts = {"check_gpu_model", "check_driver_version", "check_cuda_version", "check_cuda_runtime_version"}
    assert not (kept | node_facts | {"check_host_link", "check_memory", "check_op"}) & ignored
    assert {"check_executable_opts", "check_perfvalues", "check_env_vars", "check_stagedir"} <= ignored


@pytest.mark.parametrize(
    "check", sorted(p.stem for p in (PERFLOGS / "hopper-vm" / "default").glob("*.log") if not p.stem.endswith("Build"))
)
def test_each_check_logs_the_columns_of_its_committed_perflog(check):
    """The columns a check's records have (its loggable attributes, less what
    the perflogs leave out) are its committed perflog's: a column more or
    less makes ReFrame set the perflog aside (.h0) and start anew, and a
    night's records would be lost to the committed one."""
    import importlib

    from reframe.core.pipeline import RegressionTest

    module = importlib.import_module(f"checks.{check.split('_')[0] if check.startswith('gdrcopy') else check}")
    classes = [c for c in vars(module).values() if isinstance(c, type) and issubclass(c, RegressionTest)]
    tests = [c for c in classes if c.__name__ == check or c.variant_name() == check]
    ignored = set(perflog_ignore_keys())
    names = sorted({alt or name for name, alt in tests[0].loggable_attrs()} - {k[len("check_") :] for k in ignored})
    header = (PERFLOGS / "hopper-vm" / "default" / f"{check}.log").open().readline().rstrip("\n").split("|")
    if check in NOT_YET_FINGERPRINTED:  # its next night sets this perflog aside once, for the new column
        assert "code" in names and "code" not in header
        names.remove("code")
    assert header[2:-7] == names


#: Checks of several GPUs, which no committed night has run since every record
#: carried its fingerprint (`code`, 2026-12-06): their perflogs have the columns before it.
NOT_YET_FINGERPRINTED = {"mem_scan", "p2p_pingpong"}


# --- comparison (the verdict's designs: tests/test_compare.py) -------------------


def synthetic(tmp_path, base_values, new_values, var="steady_bw"):
    lines = [HEADER]
    for day, (driver, values) in enumerate((("570.86.15", base_values), ("580.65.06", new_values)), start=1):
        for i, value in enumerate(values):
            lines.append(line(f"2026-11-{day:02d}T10:{i:02d}:00", var, f"{value:.4f}", driver=driver))
    (tmp_path / "Fake.log").write_text("\n".join(lines) + "\n")
    return load(tmp_path, warn=None).frame


def test_runs_chosen_by_date_range(tmp_path):
    frame = synthetic(tmp_path, [50.0] * 4, [45.0] * 4)
    assert len(select.select(frame, "time", "2026-11-01")) == 4
    assert len(select.select(frame, "time", "2026-11-02..")) == 4
    assert len(select.select(frame, "time", "..2026-11-02")) == 8


def test_runs_chosen_by_version_prefix_glob_and_wildcard(tmp_path):
    frame = synthetic(tmp_path, [50.0] * 2, [45.0] * 3)
    assert len(select.select(frame, "driver_version", "580")) == 3
    assert len(select.select(frame, "driver_version", "570.x")) == 2
    assert len(select.select(frame, "driver_version", "5*")) == 5
    with pytest.raises(KeyError, match="no field 'nothing'"):
        select.select(frame, "nothing", "1")


def test_figures_logged_before_samples_pool_into_samples_of_one_figure(tmp_path):
    lines = [HEADER]
    for hour, driver, level in ((10, "570.1", 50), (11, "580.1", 40)):
        for i in range(1, 6):
            lines.append(line(f"2026-11-01T{hour}:00:00", f"run{i}_bw", f"{level + i * 0.1}", driver=driver))
    (tmp_path / "Fake.log").write_text("\n".join(lines) + "\n")
    frame = cmp.pool(load(tmp_path, warn=None).frame, "run([2-9]|[1-9][0-9]+)_bw=steady_runs")
    pooled = frame[frame["figure"] == "steady_runs"]
    assert sorted(pooled.groupby("driver_version")["sample"].max()) == [4, 4]
    result = cmp.compare(frame, "driver_version", "570", "580").result
    assert list(result.figures["figure"]) == ["steady_runs"]  # only figures with samples are judged


# --- figures -------------------------------------------------------------------


@pytest.fixture(scope="module")
def committed():
    return load(COMMITTED, warn=None)


@pytest.fixture(scope="module")
def report(committed, tmp_path_factory):
    """The report of every committed perflog, as `./suite report html
    perflogs` makes it (its index opening with the latest night of each kind
    of node), drawn once for the tests below."""
    from runner.pages import latest_nights

    outdir = tmp_path_factory.mktemp("report")
    histories = report_histories(committed.frame, outdir)
    nights = latest_nights(committed.frame, outdir, histories)
    return write_report(committed, outdir, "test report", histories=histories, nights=nights)


@pytest.fixture(scope="module")
def rendered(report):
    """The figures of each experiment (reports/figures/), the versions' overlays left out."""
    return [f for f in report.figures if not f.path.name.startswith("versions-")]


@pytest.mark.long
def test_every_figure_renders_from_the_committed_perflogs(rendered):
    figures = rendered
    kinds = {f.path.name.split("-")[0] + "-" + f.path.name.split("-")[1] for f in figures}
    assert {"um-per", "um-steady", "host-bandwidth", "daxpy-fig1", "daxpy-fig8", "latency-hopper"} <= kinds
    assert not any(k.startswith("generic") for k in kinds)  # checks with figures of their own get no bars
    for figure in figures:
        assert figure.path.stat().st_size > 10_000
        gpus = (H100, "NVIDIA H200")
        assert any(gpu in figure.caption for gpu in gpus) and "580.159.04" in figure.caption, figure.caption


@pytest.mark.long
def test_the_report_names_what_it_covers(report):
    pages = {test: page.read_text() for test, page in report.pages.items()}
    index = report.index.read_text()
    text = "\n".join([index, *pages.values()])
    for png in report.index.parent.glob("*.png"):
        assert f'src="{png.name}"' in text
    for test in pages:
        assert f"href='{test}.html'" in index and "href='index.html'" in pages[test]
    assert (
        "href='history-hopper-vm-1xNVIDIA-H100-80GB-HBM3/history.html'" in index
    )  # the nights and the accepted runs are committed
    assert set(pages) == {e.NAME for e in experiments.every()} - {"gdrcopy"}  # no GPU here had gdrdrv
    assert "CUDA runtime" in text and "580.159.04" in text and "pcie gen5 x16" in text
    # One unit of bandwidth on every page (docs/glossary.md): the seeds' GiB/s converted, never shown.
    assert "steady_bw (GB/s)" in text and "GiB/s" not in text
    assert "managed+prefetch vs explicit" in text and "Crossovers" in text  # the DAXPY crossover table
    assert "overtakes (from size)" in text  # the latency table
    assert "plateau, % of speed of light" in text and re.search(r"<td>\d\d\.\d%</td>", text)  # the scan table
    assert "slowdown vs baseline (x)" in text  # the ping-pong table
    assert "gbs_s4_w4" not in text  # no table of every point
    # The index opens with the latest night of each kind of node, each linked, its verdict and next step.
    assert index.index("The latest night of each kind of node") < index.index("<h2>Checks</h2>")
    for kind in ("1xNVIDIA-H100-80GB-HBM3", "2xNVIDIA-H200", "4xNVIDIA-H200", "1xNVIDIA-H100-80GB-HBM3-partition"):
        assert f"href='night-hopper-vm-{kind}/index.html'" in index, kind
    assert "exit 0 (as accepted)" in index and "<b>nothing to do</b>" in index and "<b>drain</b>" in index


def test_html_command_writes_the_report(tmp_path):
    # The records before the fingerprint column, which ReFrame set aside (.h0): the committed history.
    assert main(["html", str(PERFLOGS / "hopper-vm" / "default" / "host_bandwidth.log.h0"), "-o", str(tmp_path)]) == 0
    assert (tmp_path / "index.html").exists() and (tmp_path / "host-bandwidth-numa.png").exists()
    assert (
        "href='../index.html'" in (tmp_path / "history-hopper-vm-1xNVIDIA-H100-80GB-HBM3" / "history.html").read_text()
    )


def test_records_without_a_night_give_a_report_without_history(tmp_path):
    """The H200's ping-pong ran in no nightly (the pair's records of 2026-11-25 left out): its report has no history."""
    lines = (PERFLOGS / "hopper-vm" / "default" / "p2p_pingpong.log").read_text().splitlines()
    h200 = tmp_path / "perflogs" / "p2p_pingpong.log"
    h200.parent.mkdir()
    h200.write_text("\n".join([lines[0], *(line for line in lines[1:] if line < "2026-11-25")]) + "\n")
    assert main(["html", str(h200), "-o", str(tmp_path / "report")]) == 0
    assert "History of" not in (tmp_path / "report" / "index.html").read_text()
    assert not list((tmp_path / "report").glob("history-*"))


@pytest.mark.long
def test_daxpy_figures_1_to_8_render_from_the_committed_perflog(rendered):
    # A set of runs per driver and CUDA runtime: figures 1 to 8 for each.
    daxpy = [f for f in rendered if f.test == "daxpy" and "h100" in f.path.name]
    for runtime in ("13-0", "13-5"):
        found = [f.path.name.split("-")[1] for f in daxpy if f.path.name.endswith(f"-13-0-{runtime}.png")]
        assert found == [f"fig{n}" for n in range(1, 9)], runtime
    figures = [f for f in daxpy if f.path.name.endswith("-13-0-13-0.png")]
    for figure in figures:
        assert figure.test == "daxpy" and figure.path.stat().st_size > 10_000
        assert "NVIDIA H100 80GB HBM3" in figure.caption and "580.159.04" in figure.caption
        assert "CUDA runtime: 13.0" in figure.caption and "nodes: vm" in figure.caption
    assert "system memory" in figures[0].caption  # the H100 has neither ATS nor HMM: says why no system line


def test_daxpy_crossover_table_has_a_row_per_data_size_and_a_column_per_comparison(committed):
    from experiments.daxpy import COMPARISONS, DATA_SIZES

    table = daxpy_crossover_table(h100(committed.frame))
    comparisons = [f"{c} vs {b}" for c, b in COMPARISONS]
    assert list(table.columns) == ["set of runs", "data size (B per block)", *comparisons]
    assert list(table["data size (B per block)"]) == DATA_SIZES
    assert (table["managed vs system"] == "not run").all()  # no system memory on the H100
    cells = set(table[comparisons[2:]].values.ravel())
    assert cells <= {"—"} | {str(i) for i in range(1, 17)} and "—" in cells


def h100(frame):
    """The committed records of the H100 with its own CUDA runtime (the H200
    ran the single-GPU checks once too, and the H100 also ran with runtime
    13.5: a set of runs of its own)."""
    return frame[(frame["gpu_model"] == H100) & (frame["cuda_runtime_version"] == "13.0")]


def latest(frame):
    """Each case's latest execution: the perflogs hold several runs, the report takes their medians."""
    last = frame.groupby(["test", "params"], dropna=False)["time"].transform("max")
    return frame[frame["time"] == last]


def test_daxpy_crossovers_agree_with_the_checks_own_computation(committed):
    from experiments.daxpy import crossovers
    from reports.figures.daxpy import _daxpy_table, daxpy_points

    frame = latest(h100(committed.frame))
    points = daxpy_points(_daxpy_table(frame))
    table = daxpy_crossover_table(frame).set_index("data size (B per block)")
    for label, by_size in crossovers(points).items():
        for size, inner in by_size.items():
            assert table.loc[size, label] == ("—" if inner is None else str(inner))


@pytest.mark.long
def test_latency_figure_renders_with_crossovers_and_the_link(committed, rendered):
    [figure] = [
        f
        for f in rendered
        if f.test == "copy_latency" and "h100" in f.path.name and f.path.name.endswith("-13-0-13-0.png")
    ]
    assert figure.test == "copy_latency" and figure.path.stat().st_size > 10_000
    assert H100 in figure.caption and "580.159.04" in figure.caption
    assert "PCIe Gen5 x16" in figure.caption  # the speed of light drawn in
    frame = h100(committed.frame)
    data = frame[(frame["test"] == "copy_latency") & frame["sample"].isna()]
    # The check logged its crossovers until its whole curve went beside the perflog (copy_latency.curves),
    # from which the reports compute them: the latest run that logged them, computed again from its curve.
    logging = data[data["perf_var"].str.startswith("crossover_")]
    assert not logging.empty
    run = data[data["time"] == logging["time"].max()]
    logged = {r.perf_var: r.value for r in run.itertuples() if r.perf_var.startswith("crossover_")}
    assert latency_crossovers(latency_curves(run)) == logged


def test_latency_table_has_a_row_per_method_and_direction(committed):
    from experiments.copy_latency import TABLE_SIZES as LATENCY_SIZES
    from reports.figures.copy_latency import table as latency_table

    table = latency_table(h100(committed.frame))
    assert len(table) == 8 and set(table["direction"]) == {"h2d", "d2h"}
    assert len(table.columns) == 2 + len(LATENCY_SIZES) + 1


@pytest.mark.long
def test_scan_figures_per_gpu_count_and_buffer_with_the_latest_speed_of_light(committed, rendered):
    # N/(N-1) differs with N, and small segments with the buffer's size.
    found = [(re.search(r"(\d+gpus-[0-9-]+x)\.png$", f.path.name), f) for f in rendered if f.test == "mem_scan"]
    scans = {m[1]: f for m, f in found if m}
    assert set(scans) == {"2gpus-0-05x", "2gpus-0-5x", "4gpus-0-05x", "4gpus-0-45x", "4gpus-0-5x"}  # "-" for "."
    pair, four = scans["2gpus-0-5x"], scans["4gpus-0-5x"]
    assert pair.path.stat().st_size > 10_000
    assert "NVIDIA H200" in pair.caption and "580.159.04" in pair.caption and "Buffer: 0.5 of" in pair.caption
    # NVIDIA's 450 GB/s per direction x 2/1 and x 4/3; the link limits each run measured.
    assert "900 GB/s" in pair.caption and "600 GB/s" in four.caption
    # The latest runs' yardsticks: 675-676 GB/s read and 733 write on the pair, 429 read on four.
    limits = re.search(r"Link limit measured in the run: read (\d+) GB/s, write (\d+) GB/s", pair.caption)
    assert limits and abs(int(limits[1]) - 675) <= 2 and abs(int(limits[2]) - 733) <= 2, pair.caption
    assert "read 429 GB/s" in four.caption
    # The first runs logged the signalling rate (478 GB/s per direction); the figures take the latest.
    scan = committed.frame[committed.frame["test"] == "mem_scan"]
    sol, gpus = scan_speed_of_light(scan[scan["time"] == scan["time"].min()])
    assert gpus == 2 and sol == pytest.approx(478 * 2, rel=0.01)


def test_generic_figures_on_request_leave_out_the_checks_that_show_every_variable(committed, tmp_path):
    """--generic-for-all: bars for checks whose own figures leave variables
    out, none for those (GENERIC = False) with hundreds of variables or whose
    table says it all; each check's last run."""
    frame = committed.frame[committed.frame["sample"].isna()]
    last = frame[frame["time"] == frame.groupby("test")["time"].transform("max")]
    figures = render_all(last, tmp_path, generic_for_all=True)
    kinds = {f.path.name.split("-")[0] + "-" + f.path.name.split("-")[1] for f in figures}
    assert {"generic-um", "generic-host"} <= kinds
    generic = ("generic-daxpy", "generic-copy", "generic-mem", "generic-p2p", "generic-path")
    assert not any(k.startswith(generic) for k in kinds)
    assert [f.test for f in figures].count("p2p_pingpong") == 0  # its table says it all


def test_a_slow_node_stands_out_in_the_per_node_table():
    import pandas as pd

    from reports.html import node_table

    rows = [
        {"node": node, "params": "", "perf_var": var, "figure": var, "sample": None, "value": value}
        for node, scale in (("n1", 1.0), ("n2", 1.01), ("n3", 0.6))
        for var, value in (("read_bw_node0", 68.0 * scale), ("read_bw_node0_run1", 67.0 * scale))
    ]
    table = node_table(pd.DataFrame(rows), headline={"read_bw_node0"}).set_index("node")
    assert list(table.columns) == ["read_bw_node0", "worst vs median node"]  # headline figures only
    assert table.loc["n3", "worst vs median node"] == pytest.approx(0.6, abs=0.01)
    assert table.loc["n1", "worst vs median node"] == pytest.approx(1.0, abs=0.01)
    assert node_table(pd.DataFrame(rows[:2]), headline={"read_bw_node0"}) is None  # one node: nothing to compare


# --- the report in a browser (reports/browser.py) -------------------------------

SCREENSHOTS = REPO / "docs" / "report"


@pytest.fixture(scope="module")
def browser_ready():
    """Debian's chromium and chromium-driver; CI installs them (.ci/run)."""
    from reports import browser

    try:
        browser.find_chromium()
    except SystemExit as missing:
        if os.environ.get("CI"):
            pytest.fail(str(missing))
        pytest.skip(str(missing))
    return browser


@pytest.mark.long
def test_every_page_of_the_report_loads_in_chromium(report, browser_ready, tmp_path):
    from reports.history import slug
    from reports.runs import read_baselines
    from runner import pages

    # The nights README shows beside the index's (`./suite report screenshots`), their verdicts alone here.
    extra = []
    for system, stamp in pages.SHOWCASE_NIGHTS:
        folder = pages.find_night(stamp, system)
        outdir = report.index.parent / f"night-{folder.name}"
        extra.append(pages.draw_night(folder, outdir, verdict_only=True, back="../index.html"))
    looks = browser_ready.look_at_report(report.index.parent, tmp_path, extra=extra)
    names = {seen.screenshot.stem for seen in looks}
    kinds = [slug(kind) for kind in read_baselines("hopper-vm")]  # a history per kind of node accepted
    nights = {p.parent.name for p in report.index.parent.glob("night-*/index.html")}
    assert {"night-hopper-vm-1xNVIDIA-H100-80GB-HBM3", "night-2026-11-25T214100"} <= nights
    partition = "night-hopper-vm-1xNVIDIA-H100-80GB-HBM3-partition"
    assert partition in nights and f"{partition}-node-2026-11-24T223455" in names  # its named node's history
    nodes = {n for n in names if n.startswith(f"{partition}-node-")}
    assert names == {"index", *report.pages, *(f"history-hopper-vm-{kind}" for kind in kinds), *nights, *nodes}
    assert [problem for seen in looks for problem in seen.problems()] == []
    assert sum(seen.images for seen in looks) >= len(report.figures)  # every figure shown, the history's too
    for seen in looks:
        assert seen.screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and seen.screenshot.stat().st_size > 20_000
    # The screenshots beside README are of these same pages.
    assert {p.stem for p in SCREENSHOTS.glob("*.png")} == names


def test_a_broken_image_a_dead_link_and_a_script_error_are_named(browser_ready, tmp_path):
    page = tmp_path / "index.html"
    page.write_text(
        "<!DOCTYPE html><html><body><h1>broken</h1><img src='missing.png'><a href='gone.html#x'>gone</a>"
        "<a href='index.html'>here</a><script>undefined_function();</script></body></html>"
    )
    with browser_ready.chromium() as session:
        seen = browser_ready.look(session, page, tmp_path / "shot.png")
    assert seen.broken == ["missing.png"] and not seen.ok
    assert seen.dead == [tmp_path.resolve() / "gone.html"]  # the page's own link is alive
    assert any("undefined_function" in error for error in seen.errors), seen.errors
    assert len(seen.problems()) == 4  # the image is also a console error: a resource that failed to load


@pytest.mark.parametrize(("value", "kind"), [("nan", "not-a-number"), ("inf", "impossible"), ("-3", "impossible")])
def test_a_rate_that_is_not_a_positive_finite_number_is_named_at_load_and_kept(tmp_path, value, kind):
    source = REPO / "perflogs" / "hopper-vm" / "default" / "host_bandwidth.log"
    header, *lines = source.read_text().splitlines()
    fields = lines[-1].split("|")
    fields[header.split("|").index("perf_value")] = value
    (tmp_path / "host_bandwidth.log").write_text("\n".join([header, "|".join(fields)]) + "\n")
    loaded = load(tmp_path, warn=None)
    assert [issue.kind for issue in loaded.issues] == [kind]
    assert len(loaded.frame) == 1  # kept, for the verdict to judge its figure broken
