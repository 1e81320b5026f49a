"""A system's records read back from VictoriaMetrics, as the loader's table.

Where the perflogs of earlier years are archived away from the machine that
judges, the nightly's window (tonight, its reruns, the accepted runs) can be
read from the time-series database every record was sent to
(experiments/metrics.py: one sample of ``gpu_mempaths_figure`` per figure,
its facts as labels). `read_window` asks VictoriaMetrics' export API
(``/api/v1/export``: the raw samples as imported, not the query engine's
interpolated ones) for each window and gives the rows with the column names
and dtypes of reports/load.py's table, so that the judges read them alike.

What a sample does not carry (`NOT_CARRIED`) is filled with what the loader
would give where it follows from the labels, else a placeholder named there.
The records VictoriaMetrics holds are the perflog lines' only: never the
curves kept beside a perflog (checks/suite/curves.py), nor a figure whose
value was not a finite number (victoria_lines sends none), which the loader
keeps and the verdict judges broken.

Anything that keeps the window from being read (a server that is down or
slow, an HTTP error, a body that is not JSON lines) raises `Unreachable`,
naming the URL and the cause: for the nightly a night not judged, never a
node drained.
"""

from __future__ import annotations

import http.client
import json
import math
import urllib.error
import urllib.parse
import urllib.request

import numpy as np
import pandas as pd

from experiments.keys import SOFTWARE_FACTS, parse_case, sample_name
from experiments.metrics import FIGURE
from reports.load import CORE
from reports.names import split_display_name

EXPORT = "/api/v1/export"
#: The import endpoint a system's data names (metrics: {url: ...}); `read_window` takes it as well as the server's.
IMPORT = "/api/v1/import"

#: Labels that are the loader's columns of the same name, as text (experiments/metrics.py's _LABELS and its own).
TEXT_LABELS = (
    "system",
    "partition",
    "environ",
    "node",
    "gpu_model",
    *SOFTWARE_FACTS,
    "host_link",
    "gpu_count",
    "test",
    "case",
    "figure",
    "unit",
)
#: ... of which the loader writes 'unknown' where a record did not say (reports/load.py's _load).
UNKNOWN_WHEN_EMPTY = ("node", "gpu_model", "host_link", *SOFTWARE_FACTS)

#: The loader's columns that a sample does not carry, and what fills them.
NOT_CARRIED = {
    "params": "missing, unless a display_name label says (the display name's parameters are not sent)",
    "display_name": "missing, unless a label of that name says (only its first word, the test, is sent)",
    "ref": "NaN: ReFrame's reference is not sent (the judge finds no bound on the line)",
    "lower_thres": "NaN, as ref",
    "upper_thres": "NaN, as ref",
    "result": "missing: a record of a check that failed looks like one that passed to fillna('pass')",
    "reframe_version": "missing",
    "jobid": "missing",
    "source": "the export URL the row was read from (from_perflogs() is False for it)",
    "line": "0, as the loader gives a record of no line (a run report's)",
    "(a check's variables)": "those of its case from the case label; the others missing",
}
#: Numeric columns of the loader that a label may fill, where one is sent (extras of the perflog handler).
NUMERIC = ("ref", "lower_thres", "upper_thres")
#: The dtypes pandas gives the loader's columns of text (object before pandas 3, str from it) and its times (read
#: as the loader reads a perflog's), whichever pandas runs.
_TEXT = pd.Series(["text"]).dtype
_TIME = pd.to_datetime(pd.Series(["2026-01-01T00:00:00+00:00"]), format="ISO8601", utc=True).dtype


class Unreachable(Exception):
    """The window could not be read: the server at `url` did not answer, refused, or said what is no export."""

    def __init__(self, url: str, cause: object):
        super().__init__(f"{url}: {cause}")
        self.url = url
        self.cause = cause


def read_window(url: str, system: str, windows: list[tuple[str, str]], timeout_s: float = 30.0) -> pd.DataFrame:
    """The records of `system` that VictoriaMetrics at `url` holds within `windows` ((start, end) as run.json
    writes them: ISO times, UTC where they name no offset; a bare date is the whole day), as the loader's table.

    A row is in a window as judge/select.py's run_rows would take its perflog line: the perflog writes the
    completion time to the second, so a record is in [start, end] when its whole second is. `time` keeps the
    milliseconds the sample has. `timeout_s` bounds each request (one per window). Raises Unreachable (URL and
    cause) for whatever keeps the window from being read, ValueError for an empty system name (a selector for it
    would match every series without the label).
    """
    if not system:
        raise ValueError("no system named: every series without a system label would match")
    base = server_of(url)
    match = selector(system)
    rows, seen = [], set()
    for start, end in windows:
        low, high = window_ms(start, end)
        for series in export(base, match, low, high, timeout_s):
            for row in sample_rows(series, low, high):
                key = (tuple(sorted(series["metric"].items())), row["__ms"])
                if key not in seen:  # windows that overlap give a sample once
                    seen.add(key)
                    rows.append(row)
    frame = as_loaded(rows, base + EXPORT)
    return frame[frame["system"] == system].reset_index(drop=True)


def server_of(url: str) -> str:
    """The server's base URL from itself or from the import endpoint a system's data names, so that the nightly
    passes what experiments/metrics.py's endpoint() gives."""
    url = url.rstrip("/")
    return url[: -len(IMPORT)] if url.endswith(IMPORT) else url


def promql_string(value: str) -> str:
    """`value` as a double-quoted PromQL string: a system name is outside input, and a quote or backslash in it
    must not end the string or escape the next character (PromQL strings follow Go's escapes)."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def selector(system: str) -> str:
    """The series of the suite's figures of one system: an exact match (=), never a regular expression."""
    return f"{{__name__={promql_string(FIGURE)},system={promql_string(system)}}}"


def window_ms(start: str, end: str) -> tuple[int, int]:
    """The milliseconds [low, high] whose records run_rows would take in [start, end] from their perflog lines,
    which write the completion time to the second: from the first whole second at or after start through the
    last millisecond of end's second (of end's day, where end is a bare date)."""
    first, last = _utc(start), _utc(end)
    low = math.ceil(first.value / 1e9) * 1000
    if len(end.strip()) <= 10:  # a date: through the end of that day, as select_mask takes it
        high = (last + pd.Timedelta(days=1)).value // 10**6 - 1
    else:
        high = (last.value // 10**9) * 1000 + 999
    return low, high


def _utc(text: str) -> pd.Timestamp:
    """An ISO time as UTC; one that names no offset is UTC already, as run.json's and the loader's are."""
    when = pd.Timestamp(text)
    return when.tz_localize("UTC") if when.tzinfo is None else when.tz_convert("UTC")


def _seconds(ms: int) -> str:
    """Milliseconds as the export API's seconds with milliseconds after the point (what every version reads)."""
    return f"{ms // 1000}.{ms % 1000:03d}"


def export(base: str, match: str, low_ms: int, high_ms: int, timeout_s: float) -> list[dict]:
    """The series matching `match` with their raw samples in [low, high], as the export API's JSON lines."""
    query = urllib.parse.urlencode({"match[]": match, "start": _seconds(low_ms), "end": _seconds(high_ms)})
    url = f"{base}{EXPORT}?{query}"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            body = answer.read()
    except urllib.error.HTTPError as err:  # before URLError, its base: the server answered, and said why not
        raise Unreachable(base + EXPORT, f"HTTP {err.code}: {_said(err)}") from err
    except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
        raise Unreachable(base + EXPORT, getattr(err, "reason", None) or err) from err
    return parse_lines(base + EXPORT, body)


def _said(err: urllib.error.HTTPError) -> str:
    """The first line of what the server said with an HTTP error (VictoriaMetrics says why), or its reason."""
    try:
        text = err.read().decode("utf-8", errors="replace").strip()
    except OSError:
        text = ""
    return text.splitlines()[0][:300] if text else str(err.reason)


def parse_lines(url: str, body: bytes) -> list[dict]:
    """Each JSON line of an export as {'metric', 'values', 'timestamps'}; anything else is no export of
    VictoriaMetrics (a proxy's page, a cut body) and raises Unreachable rather than giving a window short."""
    series = []
    for number, line in enumerate(body.decode("utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            metric, values, stamps = item["metric"], item["values"], item["timestamps"]
            if not isinstance(metric, dict) or len(values) != len(stamps):
                raise ValueError("values and timestamps do not pair")
        except (ValueError, KeyError, TypeError) as err:
            raise Unreachable(url, f"line {number} is no export line ({err}): {line[:120]!r}") from err
        series.append({"metric": metric, "values": values, "timestamps": stamps})
    return series


def sample_rows(series: dict, low_ms: int, high_ms: int) -> list[dict]:
    """One row per sample of a series within [low, high] (the export's own range is not taken on trust), with
    the labels the loader has as columns, the perf_var they were split from, and the case's variables."""
    labels = series["metric"]
    common = {name: str(labels.get(name, "")) for name in TEXT_LABELS}
    for name in UNKNOWN_WHEN_EMPTY:
        common[name] = common[name] or "unknown"
    sample = labels.get("sample", "median")
    common["sample"] = None if sample in ("", "median") else int(sample)
    common["perf_var"] = (
        common["figure"] if common["sample"] is None else sample_name(common["figure"], common["sample"])
    )
    common.update(_case_columns(common["case"]))
    common.update(_display_columns(labels.get("display_name")))
    for name in NUMERIC:
        if name in labels:
            common[name] = _number(labels[name])
    for name in ("result", "reframe_version", "jobid"):
        if labels.get(name):
            common[name] = str(labels[name])
    rows = []
    for value, ms in zip(series["values"], series["timestamps"]):
        if low_ms <= int(ms) <= high_ms:
            rows.append({**common, "__ms": int(ms), "value": _number(value)})
    return rows


def _number(value) -> float:
    """A sample's value or a numeric label as a float; null (or text that is none) as NaN."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _case_columns(case: str) -> dict[str, str]:
    """The columns a case's variables fill in the loader's table (each its perflog field of the same name; one
    named as a column of the table is param_NAME there)."""
    try:
        items = parse_case(case)
    except ValueError:  # a case the writer could not have sent: its variables are not known
        return {}
    return {(f"param_{name}" if name in CORE else name): value for name, value in items.items()}


def _display_columns(display: str | None) -> dict[str, str]:
    """The display name and its parameters, where a label carries it (not what experiments/metrics.py sends
    today: one that does gives the loader's params)."""
    if not display:
        return {}
    _, params = split_display_name(display)
    text = " ".join(f"{k}={v}" for k, v in params.items() if not k.startswith("."))
    return {"display_name": display, "params": text}


def as_loaded(rows: list[dict], source: str) -> pd.DataFrame:
    """The rows as the loader's table: its columns in its order (CORE, then the check's variables, sorted), its
    dtypes, and NOT_CARRIED's placeholders."""
    frame = pd.DataFrame(rows)
    if frame.empty:
        frame = pd.DataFrame(columns=[*TEXT_LABELS, "__ms", "value", "sample", "perf_var"])
    frame["time"] = pd.to_datetime(frame["__ms"].astype("int64"), unit="ms", utc=True).astype(_TIME)
    frame = frame.drop(columns="__ms")
    frame["source"] = source
    frame["line"] = np.zeros(len(frame), dtype="int64")
    for column in CORE:
        if column not in frame:
            frame[column] = np.nan if column in NUMERIC else None
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce").astype("float64")
    for column in NUMERIC:
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("float64")
    frame["sample"] = pd.array(frame["sample"], dtype="Int64")
    extra = sorted(c for c in frame.columns if c not in CORE)
    frame = frame[CORE + extra]
    for column in frame.columns:
        if column not in ("time", "value", "sample", "line", *NUMERIC):
            frame[column] = frame[column].astype(_TEXT)
    return frame
