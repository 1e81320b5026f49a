"""The layers, lowest first: systems/ (what a system is, as data),
experiments/ (each experiment's one home, the data roots), judge/ (pure
functions from tables to verdicts), reports/ (perflogs and results read,
figures and pages drawn), runner/ (ReFrame driven, results written), and at
the top commands/, the one command line, which nothing imports. ReFrame is
imported by its glue (rfmconfig/) and the checks (checks/) alone, so the
reports run where it is not installed. Nothing imports what is above it, and
no modules import each other in a circle, lazy imports included; there are
no exemptions."""

import ast
import functools
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

import experiments

REPO = Path(__file__).resolve().parent.parent

#: Each package's floor: it may import its own and lower floors' packages only.
FLOORS = {"systems": 0, "experiments": 1, "judge": 2, "reports": 3, "rfmconfig": 3, "runner": 4, "commands": 5}
#: ReFrame's own layer: the checks and the glue may import ReFrame; the checks sit beside the runner.
REFRAME_LAYER = {"rfmconfig", "checks"}
FLOORS_WITH_CHECKS = {**FLOORS, "checks": 4}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache  # each test of this module reads every source again
def _imports(path: Path) -> frozenset[str]:
    """Every module a file imports, lazy imports included, relative ones made absolute."""
    found = set()
    package = _module_name(path).split(".") if path.name == "__init__.py" else _module_name(path).split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found |= {f"{module}.{alias.name}" for alias in node.names} | {module}
    return frozenset(found)


def _sources() -> dict[str, Path]:
    return {_module_name(p): p for package in FLOORS_WITH_CHECKS for p in sorted((REPO / package).rglob("*.py"))}


def test_no_package_imports_one_above_it_and_only_reframes_layer_imports_reframe():
    bad = []
    for name, path in _sources().items():
        own = name.split(".")[0]
        for module in _imports(path):
            top = module.split(".")[0]
            if top == "reframe" and own not in REFRAME_LAYER:
                bad.append(f"{name} imports {module}: ReFrame, outside its layer")
            elif top in FLOORS_WITH_CHECKS and top != own and FLOORS_WITH_CHECKS[top] >= FLOORS_WITH_CHECKS[own]:
                bad.append(f"{name} imports {module}, which is not below it")
    assert not bad, "\n".join(bad)


def test_no_modules_import_each_other_in_a_circle():
    sources = _sources()
    graph = {
        name: {m for m in _imports(path) if m in sources and m != name and not name.startswith(f"{m}.")}
        for name, path in sources.items()
    }
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as err:
        pytest.fail(f"an import circle: {' -> '.join(err.args[1])}")


def test_nothing_imports_the_command_line():
    users = [
        name
        for name, path in _sources().items()
        if not name.startswith("commands") and any(m.split(".")[0] == "commands" for m in _imports(path))
    ]
    assert not users


def test_every_experiment_has_one_home_named_after_it():
    for module in experiments.every():
        assert module.NAME == Path(module.__file__).stem
    assert experiments.find("gdrcopy_copylat").NAME == "gdrcopy"
    assert experiments.find("node_health") is None


def _small_perflogs(folder: Path, lines: int = 300) -> None:
    """The committed perflogs' header and last lines, with their curves."""
    source = REPO / "perflogs" / "hopper-vm" / "default"
    for path in sorted(source.glob("*.log")) + sorted(source.glob("*.curves")):
        text = path.read_text().splitlines(keepends=True)
        (folder / path.name).write_text("".join(text[:1] + text[1:][-lines:]))


@pytest.mark.long
def test_the_report_is_made_without_reframe(tmp_path):
    """The import rule above, at run time (a module imported by name would
    escape the static reading): a whole report drawn with ReFrame unimportable."""
    perflogs = tmp_path / "perflogs" / "hopper-vm" / "default"
    perflogs.mkdir(parents=True)
    _small_perflogs(perflogs)
    # ReFrame made unimportable: any import of it fails.
    code = (
        "import runpy, sys; sys.modules['reframe'] = None; "
        f"sys.argv = ['reports', 'html', {str(tmp_path / 'perflogs')!r}, '-o', {str(tmp_path / 'report')!r}]; "
        "runpy.run_module('commands', run_name='__main__')"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    index = (tmp_path / "report" / "index.html").read_text()
    for name in ("um_bandwidth", "copy_latency", "path_matrix", "mem_scan", "daxpy"):
        assert f"href='{name}.html'" in index
        assert f"id='{name}'" in (tmp_path / "report" / f"{name}.html").read_text()


def test_no_committed_data_under_a_code_package():
    # Results live under results/ and perflogs/ (experiments/roots.py), beside the code that made them.
    tracked = subprocess.run(
        ["git", "ls-files", "reports", "checks", "experiments"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert tracked and not [path for path in tracked if not path.endswith(".py")]


def test_the_reports_draw_what_the_judge_found_and_judge_nothing():
    users = [
        name
        for name, path in _sources().items()
        if name.startswith("reports") and any(m.split(".")[0] == "judge" for m in _imports(path))
    ]
    assert not users, f"{users} import the judge: runner/histories.py judges what a report draws"
