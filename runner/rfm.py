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


def named_system(options: list[str]) -> str | None:
    """The system ReFrame's options name (--system X, --system=X), if any."""
    for i, option in enumerate(options):
        if option == "--system" and i + 1 < len(options):
            return options[i + 1]
        if option.startswith("--system="):
            return option.split("=", 1)[1]
    return None


def main(argv: list[str]) -> int:
    """python -m runner.rfm [reframe options]: exit 3 naming a mistake in the
    options before ReFrame runs (./suite run calls it first): a system no
    systems/*.yaml declares; 0 otherwise."""
    from systems import data

    system = named_system(argv)
    try:
        if system is not None:
            data.known_system(system)
    except SystemExit as err:
        print(f"suite: {err.code}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
