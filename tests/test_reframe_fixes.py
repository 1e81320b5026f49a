"""rfmconfig/reframe_fixes.py: ReFrame's deprecation warning, the same
warning at the same line without its inspect.stack() walk; and each log
record's list of loggable attributes, the same attributes without ReFrame's
growing list."""

import inspect
import sys
import warnings

import pytest
import reframe as rfm
from reframe.core import logging as reframe_logging

from rfmconfig import reframe_fixes


def holders() -> list:
    """ReFrame's modules that hold their deprecation function by name."""
    return [
        m for n, m in list(sys.modules.items()) if n.startswith("reframe") and hasattr(m, "user_deprecation_warning")
    ]


def warned_by(function, monkeypatch) -> list[tuple]:
    """The warnings a test's body that sets a deprecated variable gives, with `function` ReFrame's."""
    with monkeypatch.context() as patch:
        for module in holders():
            patch.setattr(module, "user_deprecation_warning", function)
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")

            class Deprecated(rfm.RunOnlyRegressionTest):
                variables = {"OMP_NUM_THREADS": "1"}  # the alias of env_vars

    return [(w.category, w.filename, w.lineno, str(w.message)) for w in got]


def test_the_warning_is_reframes_own_at_the_same_line(monkeypatch):
    ours = warned_by(reframe_fixes.user_deprecation_warning, monkeypatch)
    assert ours == warned_by(reframe_fixes._ORIGINAL, monkeypatch)
    [(category, filename, _, message)] = ours
    assert filename == __file__ and "env_vars" in message and issubclass(category, DeprecationWarning)


def test_no_stack_is_inspected(monkeypatch):
    def refused(*args, **kwargs):
        raise AssertionError("inspect.stack() called")

    monkeypatch.setattr(inspect, "stack", refused)
    with pytest.raises(AssertionError, match="inspect.stack"):
        warned_by(reframe_fixes._ORIGINAL, monkeypatch)  # ReFrame's own walks it: the probe sees that
    assert warned_by(reframe_fixes.user_deprecation_warning, monkeypatch)


class Check:
    """What ReFrame's LoggerAdapter reads of a test: its loggable attributes, parameters and info."""

    raw_params: dict = {}
    name, jobid = "host_bandwidth", 42

    @classmethod
    def loggable_attrs(cls):
        return [("name", None), ("jobid", None)]

    def info(self):
        return "host_bandwidth @local:default+gnu"


def records_lists(update, monkeypatch, records: int = 100) -> tuple[list, dict]:
    """The loggable attributes a record's extras name after `records` records, with `update` ReFrame's."""
    monkeypatch.setattr(reframe_logging.LoggerAdapter, "_update_check_extras", update)
    adapter = reframe_logging.LoggerAdapter(logger=None, check=Check())
    for _ in range(records):
        adapter.process("a record", {})
    extras = {k: v for k, v in adapter.extra.items() if k.startswith("check_") and k != "check_job_completion_time"}
    return adapter.extra["__rfm_loggable_attrs__"], extras


def test_a_records_loggable_attributes_are_named_once_each_however_many_came_before(monkeypatch):
    grown, before = records_lists(reframe_fixes._ORIGINAL_EXTRAS, monkeypatch)
    kept, after = records_lists(reframe_fixes.update_check_extras, monkeypatch)
    assert len(grown) == 200  # ReFrame's own: two names a record, for ever
    assert kept == ["check_name", "check_jobid"] and sorted(set(grown)) == sorted(kept)
    assert after == before  # the values a record carries are ReFrame's


class PerformanceCheck(Check):
    """A test of two figures whose loggable attributes name its partition, as ReFrame's own do."""

    current_partition = "fake:default"
    perfvalues = {
        "fake:default:read_bw": (61.5, 60.0, -0.1, 0.1, "GB/s", "pass"),
        "fake:default:lat_us": (2.1, 2.0, None, 0.2, "us", "pass"),
    }

    @classmethod
    def loggable_attrs(cls):
        return [*super().loggable_attrs(), ("current_partition", "partition")]

    def is_performance_check(self):
        return True


class Named:
    def __init__(self, name):
        self.name = name


class Task:
    testcase = (None, Named("default"), Named("gnu"))
    result, succeeded = "pass", True


def logged_records(update, log_result, monkeypatch) -> list[dict]:
    """Each record a test's log_result gives a handler (its check_ fields and
    loggable attributes), with `update` and `log_result` ReFrame's."""
    import logging

    monkeypatch.setattr(reframe_logging.LoggerAdapter, "_update_check_extras", update)
    monkeypatch.setattr(reframe_logging.LoggerAdapter, "log_result", log_result)
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            fields = {k: v for k, v in vars(record).items() if k.startswith("check_")}
            seen.append({**fields, "attrs": sorted(set(record.__rfm_loggable_attrs__))})

    logger = logging.getLogger(f"reframe-fixes-{len(seen)}-{id(update)}")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(Keep())
    adapter = reframe_logging.LoggerAdapter(logger=logger, check=PerformanceCheck())
    adapter.log_result(logging.INFO, Task(), multiline=True)
    adapter.info("after the figures")  # and a record outside log_result, gathered as ReFrame gathers it
    return seen


def test_a_tests_figures_are_logged_with_the_fields_reframe_gives_them(monkeypatch):
    ours = logged_records(reframe_fixes.update_check_extras, reframe_fixes.log_result, monkeypatch)
    theirs = logged_records(reframe_fixes._ORIGINAL_EXTRAS, reframe_fixes._ORIGINAL_LOG_RESULT, monkeypatch)
    assert len(ours) == 3 and ours == theirs
    assert [r["check_perf_var"] for r in ours[:2]] == ["read_bw", "lat_us"]
    assert ours[0]["check_partition"] == "fake:default"  # the attribute's, gathered after log_result set its own


def test_a_record_is_made_where_a_handler_takes_it_and_where_verbose_output_asks_for_it(monkeypatch):
    import logging

    monkeypatch.setattr(reframe_logging.Logger, "isEnabledFor", reframe_fixes.is_enabled_for)
    logger = reframe_logging.Logger("reframe")
    assert logger.isEnabledFor(logging.WARNING)  # no handler yet: Python's last resort prints it
    stdout, log_file = logging.StreamHandler(), logging.NullHandler()
    stdout.setLevel(logging.INFO)
    log_file.setLevel(reframe_logging.VERBOSE)
    logger.addHandler(stdout)
    logger.addHandler(log_file)
    assert logger.isEnabledFor(logging.INFO) and logger.isEnabledFor(reframe_logging.VERBOSE)
    assert not logger.isEnabledFor(logging.DEBUG) and not logger.isEnabledFor(reframe_logging.DEBUG2)
    stdout.setLevel(logging.DEBUG)  # what -vv does to the stream handlers
    assert logger.isEnabledFor(logging.DEBUG) and not logger.isEnabledFor(reframe_logging.DEBUG2)
    logger.setLevel(logging.WARNING)  # the logger's own level still holds
    assert not logger.isEnabledFor(logging.INFO)


def test_installed_only_over_what_reframe_still_has(monkeypatch):
    for module in holders():
        monkeypatch.setattr(module, "user_deprecation_warning", reframe_fixes._ORIGINAL)
    monkeypatch.setattr(reframe_logging.LoggerAdapter, "_update_check_extras", reframe_fixes._ORIGINAL_EXTRAS)
    monkeypatch.setattr(reframe_logging.LoggerAdapter, "log_result", reframe_fixes._ORIGINAL_LOG_RESULT)
    monkeypatch.setattr(reframe_logging.Logger, "isEnabledFor", reframe_fixes._ORIGINAL_ENABLED)
    assert reframe_fixes.install() == ["deprecation warnings", "loggable attributes", "records no handler takes"]
    assert reframe_logging.Logger.isEnabledFor is reframe_fixes.is_enabled_for
    assert all(m.user_deprecation_warning is reframe_fixes.user_deprecation_warning for m in holders())
    assert reframe_logging.LoggerAdapter._update_check_extras is reframe_fixes.update_check_extras
    assert reframe_logging.LoggerAdapter.log_result is reframe_fixes.log_result
    # A ReFrame that mended them itself is left alone.
    assert not reframe_fixes.walks_the_stack(reframe_fixes.user_deprecation_warning)
    assert not reframe_fixes.grows_the_list(reframe_fixes.update_check_extras)
