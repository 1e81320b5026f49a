"""The layers: experiments/ (each experiment's one home) and reports/ need no
ReFrame, so the reports run where it is not installed; checks/ run the
experiments through ReFrame; nothing below imports what is above it."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import experiments

REPO = Path(__file__).resolve().parent.parent


def _imports(path: Path) -> set[str]:
    """Every module a file imports, lazy imports included."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


@pytest.mark.parametrize("layer", ["experiments", "reports", "systems"])
def test_no_layer_below_checks_imports_reframe_or_a_check(layer):
    for path in sorted((REPO / layer).rglob("*.py")):
        if path.name in ("rfm.py", "launchers.py"):  # ReFrame's configuration and its jsrun launcher
            continue
        bad = sorted(m for m in _imports(path) if m.split(".")[0] in ("reframe", "checks"))
        assert not bad, f"{path.relative_to(REPO)} imports {bad}"


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


@pytest.mark.slow
def test_the_report_is_made_without_reframe(tmp_path):
    perflogs = tmp_path / "perflogs" / "hopper-vm" / "default"
    perflogs.mkdir(parents=True)
    _small_perflogs(perflogs)
    # ReFrame made unimportable: any import of it fails.
    code = (
        "import runpy, sys; sys.modules['reframe'] = None; "
        f"sys.argv = ['reports', 'html', {str(tmp_path / 'perflogs')!r}, '-o', {str(tmp_path / 'report')!r}]; "
        "runpy.run_module('reports', run_name='__main__')"
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
