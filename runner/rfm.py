"""ReFrame's command line as the suite's commands start it: by the Python
running them, with the suite's settings and checks."""

from __future__ import annotations

import sys

from experiments.roots import REPO

#: ReFrame's command line, run by this Python.
RUN_REFRAME = "import sys; from reframe.frontend.cli import main; sys.exit(main())"


def reframe_command(
    system: str | None, *options: str, settings=REPO / "reframe_settings.py", checks=REPO / "checks"
) -> list[str]:
    """ReFrame by this Python, with the suite's settings and checks (or those
    given), on `system` (None: the one ReFrame picks, or the options name)."""
    chosen = ["--system", system] if system else []
    return [sys.executable, "-c", RUN_REFRAME, "-C", str(settings), "-c", str(checks), *chosen, *options]
