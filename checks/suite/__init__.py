"""Shared pieces of the suite's checks: the build fixture and base classes."""

import reframe as rfm


def _log_without_deprecated_alias() -> None:
    """ReFrame adds every loggable variable of a test to each of its log
    records, and each read of the deprecated alias `variables` (of
    `env_vars`) walks the whole stack to place a warning that it then
    suppresses: over half of a dry run's time. The alias is left out of the
    records (the perflogs never kept it); `env_vars` stays. Done here, before
    any check class copies ReFrame's variables."""
    for base in (rfm.RegressionTest, rfm.RunOnlyRegressionTest, rfm.CompileOnlyRegressionTest):
        alias = base.var_space.vars.get("variables") if hasattr(base.var_space, "vars") else None
        if alias is not None and hasattr(alias, "_loggable"):
            alias._loggable = False


_log_without_deprecated_alias()
