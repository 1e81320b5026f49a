"""The nightly's window read back from VictoriaMetrics (reports/victoria.py): records sent by the suite's own
writer (experiments/metrics.py's victoria_lines, on records made as ReFrame's) come back as the loader's rows,
exactly those of the system asked for within the windows. The server is Debian's victoria-metrics, started as
tests/test_fake_gpu.py starts it (skipped where it is not installed, failed under CI, which installs it)."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from types import SimpleNamespace

import pandas as pd
import pytest
from test_fake_gpu import _exported, victoria  # noqa: F401 (a fixture)
from test_metrics import _record as metrics_record

from experiments import metrics
from reports import victoria as vm
from reports.load import load

#: A system's name as outside input: a quote, a brace and a regular expression that would widen the selector.
HOSTILE = 'site"} or {system=~".*'
BACKSLASHED = "site\\"

#: Two windows of run.json's form, two days apart, two days back (VictoriaMetrics takes no sample from beyond
#: two days ahead, nor from outside its retention: the fixture keeps 100 years).
DAY = pd.Timestamp.now(tz="UTC").floor("D") - pd.Timedelta(days=2)


def _window(day: pd.Timestamp) -> tuple[str, str]:
    """A night's four minutes from 03:00 as run.json writes them: to the second, UTC without an offset."""
    start = day + pd.Timedelta(hours=3)
    return start.strftime("%Y-%m-%dT%H:%M:%S"), (start + pd.Timedelta(minutes=4)).strftime("%Y-%m-%dT%H:%M:%S")


WINDOWS = [_window(DAY), _window(DAY - pd.Timedelta(days=2))]


def _unix(text: str, plus_s: float = 0.0) -> float:
    return pd.Timestamp(text, tz="UTC").timestamp() + plus_s


def _record(system: str, when: float, perf_var: str, value: float, **extra) -> SimpleNamespace:
    """A performance record as ReFrame hands it to the httpjson handler (tests/test_metrics.py's)."""
    return metrics_record(
        check_system=system,
        check_job_completion_time_unix=when,
        check_perf_var=perf_var,
        check_perf_value=value,
        **extra,
    )


def _records() -> tuple[list[SimpleNamespace], list[SimpleNamespace]]:
    """(sent, expected back for 'site'): within each window, at its first and last second, a figure with its
    samples and another check's case; outside, a millisecond before a start and a second after an end; and
    other systems' records, among them names that try to widen a selector, within the windows."""
    inside, outside = [], []
    for k, (start, end) in enumerate(WINDOWS):
        inside += [
            _record("site", _unix(start), "read_bw_node0", 41.3191 + k),
            _record("site", _unix(start, 0.25), "read_bw_node0.s1", 44.169 + k),
            _record("site", _unix(start, 0.25), "read_bw_node0.s2", 1 / 3 + k),
            _record(
                "site",
                _unix(end, 0.999),  # the perflog writes its second: run_rows takes it
                "steady_bw",
                123456.789 + k,
                check_display_name="um_bandwidth %memory=managed %op=read",
                check_case="memory=managed op=read size=1G",
                check_host_link=None,  # a fact not logged: 'unknown', as the loader says
            ),
        ]
        outside += [
            _record("site", _unix(start, -0.001), "read_bw_node0", 1.0),
            _record("site", _unix(end, 1.0), "read_bw_node0", 2.0),
            _record("other", _unix(start, 1), "read_bw_node0", 3.0),
            _record(HOSTILE, _unix(start, 2), "read_bw_node0", 4.0),
            _record(BACKSLASHED, _unix(start, 3), "read_bw_node0", 5.0),
        ]
    outside.append(_record("site", _unix(WINDOWS[1][1], 3600), "read_bw_node0", 6.0))  # between the windows
    return inside + outside, inside


def _ms(record) -> int:
    """The sample's time as the writer sends it."""
    return int(1000 * float(record.check_job_completion_time_unix))


def _key(system: str, test: str, case: str, perf_var: str, ms: int) -> tuple:
    return system, test, case, perf_var, ms


def _expected(records) -> dict[tuple, float]:
    return {
        _key(
            r.check_system, r.check_display_name.split()[0], r.check_case, r.check_perf_var, _ms(r)
        ): r.check_perf_value
        for r in records
    }


def _got(frame: pd.DataFrame) -> dict[tuple, float]:
    ms = frame["time"].map(lambda t: t.value // 10**6)
    return {_key(r.system, r.test, r.case, r.perf_var, m): r.value for r, m in zip(frame.itertuples(), ms)}


@pytest.fixture(scope="module")
def sent(victoria):  # noqa: F811 (the fixture imported)
    """The records imported through the suite's writer, and readable (flushed)."""
    if victoria is None:
        pytest.skip("victoria-metrics is not installed (Debian's victoria-metrics)")
    records, inside = _records()
    lines = "\n".join(metrics.victoria_lines(r, {}, []) for r in records)
    assert metrics.post(f"{victoria}/api/v1/import", lines) is None
    _exported(
        victoria,
        f'{{__name__="{metrics.FIGURE}"}}',
        least=len({(r.check_system, r.check_perf_var, r.check_case) for r in records}),
    )
    return victoria, records, inside


def test_exactly_the_systems_records_within_the_windows_come_back(sent):
    url, _, inside = sent
    frame = vm.read_window(url, "site", WINDOWS, timeout_s=10)
    got, expected = _got(frame), _expected(inside)
    assert got.keys() == expected.keys()  # times to the millisecond among the keys
    assert all(got[k] == pytest.approx(v, rel=1e-9, abs=0) for k, v in expected.items())


def test_a_name_with_a_quote_or_backslash_is_matched_as_itself(sent):
    url, records, _ = sent
    for name in (HOSTILE, BACKSLASHED):
        frame = vm.read_window(url, name, WINDOWS, timeout_s=10)
        theirs = [r for r in records if r.check_system == name]
        assert _got(frame).keys() == _expected(theirs).keys() and set(frame["system"]) == {name}


def test_the_rows_are_the_loaders_for_what_a_sample_carries(sent, tmp_path):
    """The same records through a perflog and reports/load.py: the same rows and dtypes in every column a sample
    carries (the time to the perflog's second), and NOT_CARRIED's placeholders in the rest."""
    url, _, inside = sent
    frame = vm.read_window(url, "site", WINDOWS, timeout_s=10)
    loaded = load(_perflog(inside, tmp_path / "host_bandwidth.log"), warn=None).frame
    carried = [*vm.TEXT_LABELS, "perf_var", "sample", "value", "buffer_size", "memory", "op", "size"]
    assert list(frame.columns[: len(vm.CORE)]) == list(vm.CORE) and set(carried) <= set(frame.columns)
    assert {c: str(frame[c].dtype) for c in ["time", *carried]} == {c: str(loaded[c].dtype) for c in ["time", *carried]}
    ours = frame.assign(time=frame["time"].dt.floor("s"))[["time", *carried]]
    theirs = loaded[["time", *carried]]
    order = ["time", "test", "case", "perf_var"]
    pd.testing.assert_frame_equal(
        ours.sort_values(order).reset_index(drop=True), theirs.sort_values(order).reset_index(drop=True), rtol=1e-9
    )
    assert (frame["line"] == 0).all() and (frame["source"] == f"{url}/api/v1/export").all()
    assert frame["ref"].isna().all() and frame["result"].isna().all() and frame["params"].isna().all()


def _perflog(records, path):
    """The records as the suite's perflog writes them (rfmconfig/settings.py: every loggable field, then the
    figure's), the completion time to the second with its offset."""
    fields = [
        "job_completion_time", "reframe version", "case", "cuda_runtime_version", "cuda_version", "display_name",
        "driver_version", "environ", "gpu_count", "gpu_model", "host_link", "job_nodelist", "jobid", "name",
        "partition", "system", "result", "buffer_size", "memory", "op", "size",
        "perf_var", "perf_value", "perf_unit", "perf_ref", "perf_lower_thres", "perf_upper_thres",
    ]  # fmt: skip
    lines = ["|".join(fields)]
    for r in records:
        case = dict(item.split("=") for item in r.check_case.split())
        when = pd.Timestamp(_ms(r), unit="ms", tz="UTC").floor("s").strftime("%Y-%m-%dT%H:%M:%S+00:00")
        values = [
            when, "reframe 4.10.4", r.check_case, r.check_cuda_runtime_version, r.check_cuda_version,
            r.check_display_name, r.check_driver_version, r.check_environ, str(r.check_gpu_count),
            r.check_gpu_model, r.check_host_link or "null", ",".join(r.check_job_nodelist), "1",
            r.check_display_name.split()[0], r.check_partition, r.check_system, "pass",
            case.get("buffer_size", "null"), case.get("memory", "null"), case.get("op", "null"),
            case.get("size", "null"), r.check_perf_var, repr(r.check_perf_value), r.check_perf_unit,
            "null", "null", "null",
        ]  # fmt: skip
        lines.append("|".join(values))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_window_is_taken_as_run_rows_takes_a_perflogs_lines():
    """From the first whole second at or after its start through the last millisecond of its end's second; a
    bare date is the whole day."""
    low, high = vm.window_ms("2026-11-26T05:09:22", "2026-11-26T05:11:57")
    assert (low, high) == (_unix("2026-11-26T05:09:22") * 1000, _unix("2026-11-26T05:11:57") * 1000 + 999)
    assert vm.window_ms("2026-11-26T05:09:22.5", "2026-11-26T06:11:57+01:00")[0] == low + 1000
    assert vm.window_ms("2026-11-26T05:09:22.5", "2026-11-26T06:11:57+01:00")[1] == high
    day = vm.window_ms("2026-11-26", "2026-11-26")
    assert day == (_unix("2026-11-26") * 1000, _unix("2026-11-27") * 1000 - 1)


def test_a_selector_keeps_a_hostile_name_inside_its_string():
    assert vm.selector('a"b\\c\nd') == '{__name__="gpu_mempaths_figure",system="a\\"b\\\\c\\nd"}'
    with pytest.raises(ValueError):
        vm.read_window("http://127.0.0.1:9", "", WINDOWS)


def test_a_dead_server_is_unreachable_at_once_and_named():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(vm.Unreachable) as caught:
        vm.read_window(f"http://127.0.0.1:{port}/api/v1/import", "site", WINDOWS, timeout_s=5)
    assert time.monotonic() - started < 5
    assert caught.value.url == f"http://127.0.0.1:{port}/api/v1/export" and str(caught.value).startswith(
        caught.value.url
    )


class _Answer(http.server.BaseHTTPRequestHandler):
    """A server that is not VictoriaMetrics: a proxy's page, or an error with a reason."""

    status, body = 200, b""

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(self.status)
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize(
    "status, body, said",
    [
        (200, b"<html><body>Sign in</body></html>\n", "line 1 is no export line"),
        (200, b'{"metric": {}, "values": [1, 2], "timestamps": [1]}\n', "do not pair"),
        (400, b"cannot parse match[]: unexpected token\n", "HTTP 400: cannot parse match[]"),
        (503, b"", "HTTP 503"),
    ],
)
def test_a_body_that_is_no_export_is_unreachable_with_its_cause(status, body, said):
    handler = type("Answer", (_Answer,), {"status": status, "body": body})
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        with pytest.raises(vm.Unreachable) as caught:
            vm.read_window(f"http://127.0.0.1:{server.server_port}", "site", WINDOWS, timeout_s=5)
        assert said in str(caught.value)
    finally:
        server.shutdown()
        server.server_close()
