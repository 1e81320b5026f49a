"""ReFrame's command line as the suite's commands start it: by the Python
running them, with the suite's settings and checks.

    python -m runner.rfm [reframe options]      (what ./suite run starts)

ReFrame logs its first steps, before it reads any settings, to a file it
makes in the temporary directory and never removes (rfm-*.log: hundreds
gather in /tmp). The suite's ReFrame makes that file in a folder of its own
and removes the folder when ReFrame ends: it writes nothing outside the
checkout that the settings do not name (rfmconfig/settings.py puts the rest
under results/reframe/)."""

from __future__ import annotations

import sys

from experiments.roots import REPO

#: ReFrame's command line, run by this Python; self-contained, so that it runs from any folder.
RUN_REFRAME = (
    "import shutil, sys, tempfile; from reframe.frontend.cli import main; "
    "boot = tempfile.mkdtemp(prefix='rfm-boot-'); tempfile.tempdir = boot\n"
    "try: status = main()\n"
    "finally: tempfile.tempdir = None; shutil.rmtree(boot, ignore_errors=True)\n"
    "sys.exit(status)"
)


def reframe_command(
    system: str | None, *options: str, settings=REPO / "reframe_settings.py", checks=REPO / "checks"
) -> list[str]:
    """ReFrame by this Python, with the suite's settings and checks (or those
    given), on `system` (None: the one ReFrame picks, or the options name)."""
    chosen = ["--system", system] if system else []
    return [sys.executable, "-c", RUN_REFRAME, "-C", str(settings), "-c", str(checks), *chosen, *options]


if __name__ == "__main__":
    sys.argv[0] = "reframe"
    exec(RUN_REFRAME)
