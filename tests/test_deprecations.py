"""rfmconfig/deprecations.py: ReFrame's deprecation warnings, the same
warning at the same line, without ReFrame's inspect.stack() walk."""

import inspect
import sys
import warnings

import pytest
import reframe as rfm

from rfmconfig import deprecations


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
    ours = warned_by(deprecations.user_deprecation_warning, monkeypatch)
    assert ours == warned_by(deprecations._ORIGINAL, monkeypatch)
    [(category, filename, _, message)] = ours
    assert filename == __file__ and "env_vars" in message and issubclass(category, DeprecationWarning)


def test_no_stack_is_inspected(monkeypatch):
    def refused(*args, **kwargs):
        raise AssertionError("inspect.stack() called")

    monkeypatch.setattr(inspect, "stack", refused)
    with pytest.raises(AssertionError, match="inspect.stack"):
        warned_by(deprecations._ORIGINAL, monkeypatch)  # ReFrame's own walks it: the probe sees that
    assert warned_by(deprecations.user_deprecation_warning, monkeypatch)


def test_installed_in_every_reframe_module_that_holds_it_and_only_over_reframes_stack_walk(monkeypatch):
    for module in holders():
        monkeypatch.setattr(module, "user_deprecation_warning", deprecations._ORIGINAL)
    assert deprecations.install()
    assert all(m.user_deprecation_warning is deprecations.user_deprecation_warning for m in holders())
    assert deprecations.walks_the_stack(deprecations._ORIGINAL)
    assert not deprecations.walks_the_stack(deprecations.user_deprecation_warning)  # a fixed ReFrame: left alone
