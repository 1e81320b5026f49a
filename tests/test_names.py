"""One name per experiment: README's table is the map, and every layer uses
its names and no other: src/<name>/, experiments/<name>.py, checks/<name>.py
with the ReFrame test <name> (GDRCopy's: gdrcopy_<its test>), reports/figures/<name>.py,
systems/references/<name>.yaml."""

import ast
import re
import subprocess
from pathlib import Path

from experiments import gdrcopy

REPO = Path(__file__).resolve().parent.parent


def readme_names() -> list[str]:
    text = (REPO / "README.md").read_text()
    table = text[text.index("| name | experiment |") :].split("\n\n")[0]
    return re.findall(r"^\| `(\w+)` \|", table, re.MULTILINE)


def registered_tests(name: str) -> list[str]:
    """The ReFrame tests (@rfm.simple_test classes) of checks/<name>.py."""
    tree = ast.parse((REPO / "checks" / f"{name}.py").read_text())
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.ClassDef) and any("simple_test" in ast.unparse(d) for d in node.decorator_list)
    ]


def test_every_experiment_has_one_name_in_every_layer():
    names = readme_names()
    assert len(names) == len(set(names)) >= 8
    for name in names:
        assert (REPO / "checks" / f"{name}.py").exists(), f"no checks/{name}.py"
        tests = registered_tests(name)
        assert tests and all(t == name or t.startswith(f"{name}_") for t in tests), f"checks/{name}.py: {tests}"


def _a_gdrcopy_test(name: str) -> bool:
    """gdrcopy_<one of GDRCopy's test programs>: the GDRCopy experiment's tests."""
    return name in gdrcopy.TESTS


def test_no_layer_uses_a_name_the_table_does_not_give():
    names = set(readme_names())
    layers = {
        "src": [p.name for p in (REPO / "src").iterdir() if p.is_dir() and p.name not in ("common", "cmake")],
        "checks": [p.stem for p in (REPO / "checks").glob("*.py")],
        "experiments": [
            p.stem
            for p in (REPO / "experiments").glob("*.py")
            if p.stem
            not in (
                "__init__",
                "keys",
                "records",
                "paths",
                "references",
                "curves",
                "metrics",
                "budget",
                "roots",
                "caches",
                "progress",
                "gpu_use",
                "files",
                "code",
                "numbers",
            )
        ],
        "reports/figures": [
            p.stem
            for p in (REPO / "reports" / "figures").glob("*.py")
            if p.stem not in ("__init__", "axes", "common", "generic", "versions")
        ],
        "systems/references": [p.stem for p in (REPO / "systems" / "references").glob("*.yaml")],
        "perflogs": [
            p.name.split(".")[0]
            for p in (REPO / "perflogs").glob("*/*/*.log*")
            if not p.name.startswith(("SuiteBuild", "GdrCopyBuild"))
        ],
    }
    for layer, found in layers.items():
        strays = sorted(n for n in set(found) if n not in names and not _a_gdrcopy_test(n))
        assert not strays, f"{layer}: {strays} are not experiment names (README's table)"


def test_the_experiments_are_the_tables_in_its_order():
    import experiments

    assert list(experiments.NAMES) == [n for n in readme_names() if n != "node_health"]


def test_each_program_is_named_after_its_experiment():
    for program in (REPO / "src").iterdir():
        if program.is_dir() and program.name not in ("common", "cmake"):
            assert (REPO / "checks" / f"{program.name}.py").exists()
            assert (program / f"{program.name}{'.cpp' if program.name == 'host_bandwidth' else '.cu'}").exists()


def test_readmes_first_screen_has_both_commands_and_what_the_tests_need():
    """A newcomer sees how to run and how to test before scrolling, and the
    prerequisites name what ./suite test needs (its lint's clang-format)."""
    readme = (REPO / "README.md").read_text()
    first_screen = "\n".join(readme.splitlines()[:40])
    assert "./suite run" in first_screen and "./suite test" in first_screen and "without a GPU" in first_screen
    prerequisites = readme[readme.index("**Prerequisites**") : readme.index("```sh")]
    assert "clang-format" in prerequisites


def test_readme_is_a_guide_and_its_experiment_checklist_holds():
    """README stays short (the measurements live in docs/), and every
    experiment has what its 'Adding an experiment' checklist (docs/contributing.md) names."""
    import yaml

    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) < 150
    contributing = (REPO / "docs" / "contributing.md").read_text()
    assert "## Adding an experiment" in contributing and "## Adding a system" in contributing
    assert "docs/contributing.md" in readme
    rules = yaml.safe_load((REPO / "systems" / "paths" / "paths.yaml").read_text())["rules"]
    cmake = (REPO / "src" / "CMakeLists.txt").read_text()
    for name in readme_names():
        if name == "node_health":  # the health program is systems/health.py
            continue
        assert (REPO / "docs" / "results" / f"{name}.md").exists(), f"no docs/results/{name}.md"
        judged = [t for t in registered_tests(name) if t != "gdrcopy_sanity"]  # sanity has pass/fail only
        assert all(t in rules for t in judged), f"{name}: {judged} without paths in systems/paths/paths.yaml"
        if name == "gdrcopy":  # GDRCopy's own programs
            continue
        assert list((REPO / "src" / name).glob(f"{name}.c*")), f"no src/{name}/{name}.cu"
        assert re.search(rf"\b{name}\b", cmake), f"src/CMakeLists.txt does not build {name}"
        assert (REPO / "systems" / "references" / f"{name}.yaml").exists(), f"no systems/references/{name}.yaml"


def test_the_committed_report_is_made_from_the_committed_perflogs_alone():
    """`perflogs` also holds a site's own runs (perflogs/local, not in git):
    the committed report's command names the committed system's folder."""
    tracked = subprocess.run(["git", "ls-files", "perflogs"], cwd=REPO, capture_output=True, text=True).stdout
    systems = {line.split("/")[1] for line in tracked.splitlines()}
    assert systems == {"hopper-vm"}
    for doc in ("docs/perflogs.md", ".gitignore"):
        text = (REPO / doc).read_text()
        assert "./suite report html perflogs/hopper-vm" in text.replace("\n  ", " "), doc
        assert "report html perflogs -o" not in text.replace("\n  ", " "), doc
