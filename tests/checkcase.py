"""A check's hooks and deferred figures, evaluated outside ReFrame on a
committed or planted program output."""

from pathlib import Path

from checks.suite.base import NodeFacts


class Case:
    """What a check's hooks read of a test case, for evaluating its figures
    outside ReFrame: the run's output and the case's parameters."""

    headline = NodeFacts.headline

    def __init__(self, check, stdout: Path, stderr: Path | None = None, features=(), **values):
        self.check, self.stdout, self.stderr = check, str(stdout), str(stderr or stdout)
        self.current_partition = type("Partition", (), {"features": list(features)})()
        self.sol = None
        self.__dict__.update(values)

    def __getattr__(self, name):
        # The check's variables at their defaults, and its methods bound to this case.
        if name in self.check._rfm_var_space:
            return self.check._rfm_var_space[name].default_value
        found = getattr(self.check, name)
        return found.__get__(self) if callable(found) else found

    def sol_gbs(self):
        # The scan's speed of light: the one the run's figures were taken against.
        return self.sol
