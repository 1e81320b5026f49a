"""A CUDA upgrade, run and judged in one command.

    ./suite upgrade VERSION [--system NAME] [--threshold PCT] [-- reframe options]

A VERSION newer than the environments' nvcc is a runtime upgrade; an older
one (12.9 beside nvcc 13.0) is the toolkit the centre upgrades from.

installs NVIDIA's runtime wheel of VERSION (e.g. 13.5.37) under
build/cuda-runtimes/ unless it is there, runs every check in every
environment with that runtime beside the others (systems/toolkits.py: each
environment whose nvcc has that major version gets a twin, <env>-rt<X>_<Y>),
and compares the run's records by ``cuda_runtime_version``: the environments'
own runtime (their nvcc's release) against VERSION. The table goes to
reports/upgrades/<system>-cuda-runtime-<base>-to-<new>-<stamp>.csv, and the
exit status is the comparison's: 0 nothing moved, 2 something moved, 3 not
judged (nothing ran in both, a figure could not be judged, a usage error or
a runtime that could not be installed), 1 a check failed (did not measure; a
figure outside its reference is the comparison's to judge, not a failure).

An older release is made a toolkit from NVIDIA's wheels under
build/cuda-toolkits/ (systems/cuda-wheels-toolkit) and, with the node's own
CUDA, compiled by clang (systems/toolkits.py: clang-cuda<X>_<Y>); every check
runs in those two environments and in the nvcc ones, and three comparisons
by environment say which change did what: the toolkit alone (clang 12.9 to
clang 13.0), the compiler alone (clang 13.0 to nvcc 13.0), and both, the
upgrade as a centre makes it (clang 12.9 to nvcc 13.0), whose verdict is
the exit status. Tables: reports/upgrades/<system>-cuda-<old>-to-<new>-<what>-<stamp>.csv,
<what> one of toolkit-only, compiler-only and toolkit-and-compiler.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from systems import detect, toolkits

from . import cli
from .nightly import outcomes, reframe
from .runs import now, selected_system
from .status import FAILED, MOVED, UNJUDGED

REPO = Path(__file__).resolve().parent.parent
RUNTIMES = REPO / "build" / "cuda-runtimes"
TOOLKITS = REPO / "build" / "cuda-toolkits"
UPGRADES = REPO / "reports" / "upgrades"
PERFLOGS = REPO / "perflogs"


def wheel_of(version: str) -> str:
    """NVIDIA's wheel of a CUDA runtime: 'nvidia-cuda-runtime==13.5.37' (CUDA 13 on), '-cu12' before."""
    major = int(version.split(".")[0])
    return f"nvidia-cuda-runtime{'' if major >= 13 else f'-cu{major}'}=={version}"


def install_runtime(version: str, folder: Path) -> Path:
    """The folder holding the runtime of `version`, installed there with pip if it is not."""
    target = folder / version
    if not toolkits.runtimes_found(str(target)):
        print(f"upgrade: installing {wheel_of(version)} into {target}", flush=True)
        cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), wheel_of(version)]
        subprocess.run(cmd, check=True)
    found = toolkits.runtimes_found(str(target))
    if not found:
        raise RuntimeError(f"no CUDA runtime {version} in {target} after installing {wheel_of(version)}")
    return target


def base_release() -> str | None:
    """The release of the nvcc the environments build with ('13.0'), whose runtime the new one is compared to."""
    nvcc = detect.find_nvcc("nvcc")
    return toolkits.nvcc_release(nvcc) if nvcc else None


def environments_of(system: str) -> list[dict]:
    """The environments ReFrame's configuration has for a system."""
    from systems import rfm

    return [e for e in rfm.site_configuration()["environments"] if system in e.get("target_systems", [])]


def twins_of(system: str) -> list[str]:
    """The runtime twins ReFrame's configuration has for a system (made on machines described at run time)."""
    return [e["name"] for e in environments_of(system) if toolkits.TWIN_SUFFIX.search(e["name"])]


def nvcc_environment(system: str) -> str | None:
    """The system's first environment that builds with nvcc ('gnu'), or None."""
    return next((e["name"] for e in environments_of(system) if e.get("nvcc")), None)


def install_toolkit(release: str, folder: Path) -> Path:
    """A CUDA toolkit of `release` from NVIDIA's wheels, made under `folder` unless it is there."""
    target = folder / release
    if not (target / ".done").exists():
        print(f"upgrade: making CUDA {release} from NVIDIA's wheels in {target}", flush=True)
        subprocess.run([str(REPO / "systems" / "cuda-wheels-toolkit"), str(target), release], check=True)
    return target


def toolkit_comparisons(old: str, new: str, nvcc_env: str) -> list[tuple[str, str, str]]:
    """(what changed, environment before, environment after): the toolkit alone, the compiler alone, both."""
    clang_old, clang_new = (f"clang-cuda{r.replace('.', '_')}" for r in (old, new))
    return [
        ("toolkit-only", clang_old, clang_new),
        ("compiler-only", clang_new, nvcc_env),
        ("toolkit-and-compiler", clang_old, nvcc_env),
    ]


def add_parsers(sub) -> None:
    """upgrade in the suite's one parser (reports/cli.py)."""
    p = sub.add_parser("upgrade", help=__doc__.split("\n\n")[0], epilog="Options after '--' go to ReFrame.")
    p.add_argument(
        "version",
        help="a newer CUDA runtime as NVIDIA's wheel numbers it (13.5.37), "
        "or an older release (12.9) to compare the environments' nvcc with",
    )
    p.add_argument("--system", help="the system to run (default: the one ReFrame picks here)")
    p.add_argument("--threshold", type=float, help="practical threshold in percent (default: each figure's own)")
    p.set_defaults(func=run, reframe=[])  # ReFrame's options: what follows '--' (reports/cli.py)


def run(args) -> int:
    try:
        return upgrade(args, args.reframe)
    except (OSError, RuntimeError, subprocess.CalledProcessError) as err:
        print(f"upgrade: {err}", file=sys.stderr)
        return UNJUDGED


def main(argv=None) -> int:
    return cli.main(["upgrade", *(sys.argv[1:] if argv is None else argv)])


def upgrade(args, reframe_options: list[str]) -> int:
    base, new = base_release(), ".".join(args.version.split(".")[:2])
    if base is None:
        print("upgrade: no nvcc here, so no environment to run the new runtime beside", file=sys.stderr)
        return UNJUDGED
    if base == new:
        print(f"upgrade: the environments' nvcc is CUDA {base} already; name a newer runtime", file=sys.stderr)
        return UNJUDGED
    if tuple(map(int, new.split("."))) < tuple(map(int, base.split("."))):
        return toolkit_upgrade(args, new, base, reframe_options)
    folder = install_runtime(args.version, RUNTIMES)
    os.environ[toolkits.RUNTIMES_VARIABLE] = os.pathsep.join(
        filter(None, [str(folder), os.environ.get(toolkits.RUNTIMES_VARIABLE, "")])
    )
    system, stamp = selected_system(args.system), now()
    if not twins_of(system):
        print(
            f"upgrade: {system} has no environment to run runtime {new} in: its environments are declared, "
            f"or none has an nvcc of CUDA {new.split('.')[0]} (systems/toolkits.py)",
            file=sys.stderr,
        )
        return UNJUDGED
    name = f"{system}-cuda-runtime-{base}-to-{new}-{stamp.replace(':', '')}"
    failed = run_checks(system, name, reframe_options)
    return verdict(judge(system, ("cuda_runtime_version", base, new), stamp, name, args.threshold), failed)


def run_checks(system: str, name: str, reframe_options: list[str]) -> list[str]:
    """Every check, its run report reports/upgrades/<name>.json; the cases that did not measure."""
    UPGRADES.mkdir(parents=True, exist_ok=True)
    reframe(system, UPGRADES / f"{name}.json", *reframe_options)
    return outcomes(UPGRADES / f"{name}.json")["failed"]


def judge(system: str, sides: tuple[str, str, str], since: str, name: str, threshold: float | None) -> int:
    """The comparison of the run's records (by, base, new) into reports/upgrades/<name>.csv; its exit status."""
    by, base, new = sides
    compare = [
        "compare",
        str(PERFLOGS / system),
        "--by",
        by,
        "--base",
        base,
        "--new",
        new,
        "--since",
        since,
        "--csv",
        str(UPGRADES / f"{name}.csv"),
    ]
    return cli.main(compare + (["--threshold", str(threshold)] if threshold is not None else []))


def verdict(status: int, failed: list[str]) -> int:
    for why in failed:
        print(f"upgrade: FAILED {why}")
    # A check that did not measure hides its figures from both sides: that fails the upgrade.
    return FAILED if failed and status != MOVED else status


def toolkit_upgrade(args, old: str, new: str, reframe_options: list[str]) -> int:
    """From toolkit `old` (made from wheels, built by clang) to the nvcc of `new` the environments have."""
    folder = install_toolkit(old, TOOLKITS)
    own = os.path.dirname(os.path.dirname(os.path.realpath(detect.find_nvcc("nvcc") or "")))
    os.environ[toolkits.TOOLKITS_VARIABLE] = os.pathsep.join([str(folder), own])
    system, stamp = selected_system(args.system), now()
    nvcc_env = nvcc_environment(system)
    names = {e["name"] for e in environments_of(system)}
    comparisons = toolkit_comparisons(old, new, nvcc_env or "")
    missing = sorted({env for _, *envs in comparisons for env in envs} - names)
    if nvcc_env is None or missing:
        print(
            f"upgrade: {system} has no environment {', '.join(missing) or 'with nvcc'}: its environments are "
            f"declared, or this node has no clang++-<N> (systems/toolkits.py)",
            file=sys.stderr,
        )
        return UNJUDGED
    name, when = f"{system}-cuda-{old}-to-{new}", stamp.replace(":", "")
    failed = run_checks(system, f"{name}-{when}", reframe_options)
    for what, before, after in comparisons:
        print(f"upgrade: {what}: {before} against {after}", flush=True)
        # The last, both changes together, is the upgrade's verdict.
        status = judge(system, ("environ", before, after), stamp, f"{name}-{what}-{when}", args.threshold)
    return verdict(status, failed)


if __name__ == "__main__":
    sys.exit(main())
