"""ReFrame's deprecation warnings at a fraction of their cost.

ReFrame's ``user_deprecation_warning`` finds the frame to blame (the first
one outside ReFrame) by walking ``inspect.stack()``, which reads every
frame's source lines, and does so even where the warning is suppressed.
ReFrame calls it for each deprecated variable of each test it instantiates:
``variables``, the alias of ``env_vars``, 242 times in a nightly's dry run of
one GPU, 3.2 of the 8.4 s it spends. ``install`` puts in its place a function
that gives the same warning at the same frame by walking the frames alone.
It leaves ReFrame alone where its function no longer walks the stack that
way (another version, or a ReFrame that fixed it)."""

from __future__ import annotations

import sys
import warnings

import reframe
import semver
from reframe.core import warnings as reframe_warnings

_ORIGINAL = reframe_warnings.user_deprecation_warning


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
    """Whether `function` is the ReFrame function this module replaces: it calls inspect.stack()."""
    code = getattr(function, "__code__", None)
    return code is not None and {"inspect", "stack"} <= set(code.co_names)


def install() -> bool:
    """Replaces ReFrame's function in every ReFrame module that holds it;
    whether it did (not where ReFrame's own no longer walks the stack)."""
    if not walks_the_stack(_ORIGINAL):
        return False
    for name, module in list(sys.modules.items()):
        if name.startswith("reframe") and getattr(module, "user_deprecation_warning", None) is _ORIGINAL:
            module.user_deprecation_warning = user_deprecation_warning
    return True
