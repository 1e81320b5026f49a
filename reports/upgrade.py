"""A CUDA runtime upgrade, run and judged in one command.

    ./suite upgrade VERSION [--system NAME] [--threshold PCT] [-- reframe options]

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
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from systems import detect, toolkits

from . import cli
from .nightly import FAILED, now, outcomes, reframe, selected_system

REPO = Path(__file__).resolve().parent.parent
RUNTIMES = REPO / "build" / "cuda-runtimes"
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


def twins_of(system: str) -> list[str]:
    """The runtime twins ReFrame's configuration has for a system (made on machines described at run time)."""
    from systems import rfm

    config = rfm.site_configuration()
    return [e["name"] for e in config["environments"]
            if system in e.get("target_systems", []) and toolkits.TWIN_SUFFIX.search(e["name"])]  # fmt: skip


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="suite upgrade", description=__doc__.split("\n\n")[0])
    p.add_argument("version", help="the new CUDA runtime, as NVIDIA's wheel numbers it (13.5.37)")
    p.add_argument("--system", help="the system to run (default: the one ReFrame picks here)")
    p.add_argument("--threshold", type=float, help="practical threshold in percent (default: each figure's own)")
    p.epilog = "Options after '--' go to ReFrame (e.g. -- -n um_bandwidth)."
    return p


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ours, reframe_options = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    try:
        args = parser().parse_args(ours)
    except SystemExit as exit:  # a usage error judged nothing: 3, never the 2 of a move
        return 0 if exit.code == 0 else cli.UNJUDGED
    try:
        return upgrade(args, reframe_options)
    except (OSError, RuntimeError, subprocess.CalledProcessError) as err:
        print(f"upgrade: {err}", file=sys.stderr)
        return cli.UNJUDGED


def upgrade(args, reframe_options: list[str]) -> int:
    base, new = base_release(), ".".join(args.version.split(".")[:2])
    if base is None:
        print("upgrade: no nvcc here, so no environment to run the new runtime beside", file=sys.stderr)
        return cli.UNJUDGED
    if base == new:
        print(f"upgrade: the environments' nvcc is CUDA {base} already; name a newer runtime", file=sys.stderr)
        return cli.UNJUDGED
    folder = install_runtime(args.version, RUNTIMES)
    os.environ[toolkits.RUNTIMES_VARIABLE] = os.pathsep.join(
        filter(None, [str(folder), os.environ.get(toolkits.RUNTIMES_VARIABLE, "")])
    )
    system, stamp = selected_system(args.system), now()
    if not twins_of(system):
        print(f"upgrade: {system} has no environment to run runtime {new} in: its environments are declared, "
              f"or none has an nvcc of CUDA {new.split('.')[0]} (systems/toolkits.py)", file=sys.stderr)  # fmt: skip
        return cli.UNJUDGED
    UPGRADES.mkdir(parents=True, exist_ok=True)
    name = f"{system}-cuda-runtime-{base}-to-{new}-{stamp.replace(':', '')}"
    reframe(system, UPGRADES / f"{name}.json", *reframe_options)
    failed = outcomes(UPGRADES / f"{name}.json")["failed"]
    compare = ["compare", str(PERFLOGS / system), "--by", "cuda_runtime_version", "--base", base,
               "--new", new, "--since", stamp, "--csv", str(UPGRADES / f"{name}.csv")]  # fmt: skip
    if args.threshold is not None:
        compare += ["--threshold", str(args.threshold)]
    status = cli.main(compare)
    for why in failed:
        print(f"upgrade: FAILED {why}")
    # A check that did not measure hides its figures from both sides: that fails the upgrade.
    return FAILED if failed and status != cli.REGRESSION else status


if __name__ == "__main__":
    sys.exit(main())
