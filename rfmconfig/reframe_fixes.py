"""Costs of ReFrame 4.10 that the suite's checks run into, mended where
ReFrame loads its settings (reframe_settings.py), each only where ReFrame
still has it: the output is ReFrame's own, to the byte.

- **Deprecation warnings.** ReFrame's ``user_deprecation_warning`` finds
  the frame to blame (the first one outside ReFrame) by walking
  ``inspect.stack()``, which reads every frame's source lines, even where
  the warning is suppressed. ReFrame calls it for each deprecated variable
  of each test it instantiates (``variables``, the alias of ``env_vars``):
  242 times in a nightly's dry run of one GPU, 3.2 of its 8.4 s. Replaced
  by a function that gives the same warning at the same frame by walking
  the frames alone.
- **The loggable attributes of a log record.** ReFrame's LoggerAdapter
  appends the test's loggable attributes to one list on every record it
  takes and never empties it, and the perflog's formatter sorts that list
  for each record: a case's N figures, logged one a line, cost N-squared
  (a path matrix of eight GPUs logs hundreds: 35 of a fake night's 53 s).
  The list is made anew for each record, as the first record of a test
  finds it. And for each of those records ReFrame gathers every loggable
  variable of the test again, with a warnings filter set up and taken down
  for each (a seventh of that night): within one ``log_result`` nothing
  changes them, so the records after its first keep what the first gathered.
- **Records no handler takes.** ReFrame's logger takes every level (the
  settings set none), so each debug record is made, its test's variables
  gathered, and then every handler drops it: half of a dry run of a DGX's
  186 cases. Its logger now makes a record only where one of its handlers
  would take it; -v lowers the handlers' levels, and with them this.
"""

from __future__ import annotations

import inspect
import sys
import warnings

import reframe
import semver
from reframe.core import logging as reframe_logging
from reframe.core import warnings as reframe_warnings

_ORIGINAL = reframe_warnings.user_deprecation_warning
_ORIGINAL_EXTRAS = reframe_logging.LoggerAdapter._update_check_extras
_ORIGINAL_LOG_RESULT = reframe_logging.LoggerAdapter.log_result


def _in_reframe(frame) -> bool:
    """Whether the frame runs ReFrame's own code (the test ReFrame's function makes through inspect.getmodule)."""
    return str(frame.f_globals.get("__name__", "")).startswith("reframe")


def user_deprecation_warning(message: str, from_version: str = "0.0.0") -> None:
    """ReFrame's user_deprecation_warning, with the frames walked, not inspected."""
    # This function stands where ReFrame's did: one of ReFrame's frames, then its callers.
    level, frame = 2, sys._getframe(1)
    while frame is not None and _in_reframe(frame):
        level += 1
        frame = frame.f_back
    version = semver.VersionInfo.parse(reframe.VERSION)
    if version.prerelease:  # a prerelease warns as its release would
        version = semver.VersionInfo(version.major, version.minor, version.patch)
    if reframe_warnings._RAISE_DEPRECATION_ALWAYS or version >= semver.VersionInfo.parse(from_version):
        warnings.warn(message, reframe_warnings.ReframeDeprecationWarning, stacklevel=level)


def walks_the_stack(function) -> bool:
    """Whether `function` is the ReFrame function replaced here: it calls inspect.stack()."""
    code = getattr(function, "__code__", None)
    return code is not None and {"inspect", "stack"} <= set(code.co_names)


#: Set on a LoggerAdapter while its log_result logs a test's records: 'first' before the first record, 'kept' after.
_IN_LOG_RESULT = "_gpu_mempaths_in_log_result"


def update_check_extras(self) -> None:
    """ReFrame's LoggerAdapter._update_check_extras, its list of loggable
    attributes made anew; within one log_result, for its first record only."""
    if self.__dict__.get(_IN_LOG_RESULT) == "kept":
        return
    if self.check is not None:
        self.extra["__rfm_loggable_attrs__"] = []
    _ORIGINAL_EXTRAS(self)
    if _IN_LOG_RESULT in self.__dict__:
        self.__dict__[_IN_LOG_RESULT] = "kept"


def log_result(self, *args, **kwargs):
    """ReFrame's LoggerAdapter.log_result, the test's variables gathered for its first record only."""
    self.__dict__[_IN_LOG_RESULT] = "first"
    try:
        return _ORIGINAL_LOG_RESULT(self, *args, **kwargs)
    finally:
        del self.__dict__[_IN_LOG_RESULT]


def grows_the_list(method) -> bool:
    """Whether `method` is ReFrame's that appends to the record's list of loggable attributes without emptying it."""
    try:
        source = inspect.getsource(method)
    except (OSError, TypeError):
        return False
    return "['__rfm_loggable_attrs__'].append" in source and "'__rfm_loggable_attrs__'] = " not in source


_ORIGINAL_ENABLED = reframe_logging.Logger.isEnabledFor


def is_enabled_for(self, level: int) -> bool:
    """ReFrame's Logger.isEnabledFor, and a handler of the logger that takes
    the level; a logger with none hands its records to Python's last resort
    (stderr: ReFrame's warnings while it sets its loggers up), as before."""
    if not _ORIGINAL_ENABLED(self, level):
        return False
    return not self.handlers or any(level >= handler.level for handler in self.handlers)


def makes_every_record(logger_class) -> bool:
    """Whether ReFrame's logger is one with no parent to hand records to and
    no filter of its own on its handlers' levels: the one this module mends."""
    return logger_class.isEnabledFor is _ORIGINAL_ENABLED and "reframe" in logger_class.__module__


def install() -> list[str]:
    """Mends what this ReFrame still has of the two; the names of those mended."""
    mended = []
    if walks_the_stack(_ORIGINAL):
        for name, module in list(sys.modules.items()):
            if name.startswith("reframe") and getattr(module, "user_deprecation_warning", None) is _ORIGINAL:
                module.user_deprecation_warning = user_deprecation_warning
        mended.append("deprecation warnings")
    if grows_the_list(_ORIGINAL_EXTRAS) and logs_a_record_a_figure(_ORIGINAL_LOG_RESULT):
        reframe_logging.LoggerAdapter._update_check_extras = update_check_extras
        reframe_logging.LoggerAdapter.log_result = log_result
        mended.append("loggable attributes")
    if makes_every_record(reframe_logging.Logger):
        reframe_logging.Logger.isEnabledFor = is_enabled_for
        mended.append("records no handler takes")
    return mended


def logs_a_record_a_figure(method) -> bool:
    """Whether `method` is ReFrame's log_result that this module expects: each
    performance variable a record through self.log, check_partition and
    check_environ set once before them."""
    try:
        source = inspect.getsource(method)
    except (OSError, TypeError):
        return False
    return "for var, info in self.check.perfvalues.items()" in source and "self.log(level, msg)" in source
