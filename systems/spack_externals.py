"""Write a system's Spack data (systems/spack/<name>.yaml) from what Spack
finds on this node, so that spack.yaml builds the suite on any site:

    ./suite spack-externals [--system NAME] [--cuda-arch 90[,100]]

`spack external find` looks for CUDA, CMake, GNU make, GCC and numactl; the
result keeps only what it found (its `--not-buildable` also pins virtuals
such as `c` and `golang`, which would stop concretization), one CUDA per
version, and libnuma from pkg-config when the numactl program is absent
(Debian's libnuma-dev ships the library, not the program). The GPU
architectures come from systems/<name>.yaml, else from this node's GPUs,
else from --cuda-arch. `local`'s file is the user's own and git ignores it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from systems import data, detect

SPACK_DIR = data.SYSTEMS_DIR / "spack"
WANTED = ("gcc", "cuda", "cmake", "gmake", "numactl")


class ExternalsError(RuntimeError):
    pass


def _is_toolkit_root(prefix: str) -> bool:
    # A toolkit's root has nvcc itself in bin/; /usr/local, which Spack finds
    # through a wrapper script in /usr/local/bin, does not.
    try:
        with open(Path(prefix) / "bin" / "nvcc", "rb") as nvcc:
            return nvcc.read(4) == b"\x7fELF"
    except OSError:
        return False


def _nvcc_version(prefix: str) -> str | None:
    try:
        out = subprocess.run([str(Path(prefix) / "bin" / "nvcc"), "--version"], capture_output=True, text=True).stdout
    except OSError:
        return None
    found = re.search(r"release \S+, V(\S+)", out)
    return found.group(1) if found else None


def _toolkit_roots() -> list[str]:
    return [p for p in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda") if p]


def _one_cuda_per_version(
    entries: list[dict[str, Any]], is_root=_is_toolkit_root, version_of=_nvcc_version, roots=_toolkit_roots
) -> list[dict[str, Any]]:
    """One external per CUDA version, at the toolkit's root: of the prefixes
    found, a root; else a usual root (CUDA_HOME, /usr/local/cuda) whose nvcc
    has that version."""
    chosen: dict[str, dict[str, Any]] = {}
    for entry in entries:
        kept = chosen.get(entry["spec"])
        if kept is None or (is_root(entry["prefix"]) and not is_root(kept["prefix"])):
            chosen[entry["spec"]] = entry
    for spec, entry in chosen.items():
        if not is_root(entry["prefix"]):
            version = spec.split("@", 1)[1]
            root = next((r for r in roots() if is_root(r) and version_of(r) == version), None)
            if root:
                chosen[spec] = {**entry, "prefix": root}
    return list(chosen.values())


def select_externals(found: dict[str, Any], **cuda_lookups) -> dict[str, Any]:
    """The packages of `spack external find`'s environment that the suite
    needs and that have an installation: each pinned, nothing else."""
    packages: dict[str, Any] = {}
    for name in WANTED:
        externals = (found.get(name) or {}).get("externals") or []
        if name == "cuda":
            externals = _one_cuda_per_version(externals, **cuda_lookups)
        if externals:
            packages[name] = {"externals": externals, "buildable": False}
    return packages


def libnuma_from_pkg_config(run=subprocess.run) -> dict[str, Any] | None:
    """numactl as an external from libnuma's pkg-config file, or None."""
    try:
        version = run(["pkg-config", "--modversion", "numa"], capture_output=True, text=True, check=True)
        prefix = run(["pkg-config", "--variable=prefix", "numa"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return {
        "externals": [{"spec": f"numactl@{version.stdout.strip()}", "prefix": prefix.stdout.strip()}],
        "buildable": False,
    }


def cuda_archs(system: dict[str, Any], given: list[int] | None) -> list[int]:
    """The architectures to build for: --cuda-arch, else the system's
    declared ones, else this node's GPUs."""
    if given:
        return given
    declared = {tuple(p["cuda_archs"]) for p in system["partitions"] if p.get("cuda_archs")}
    if len(declared) > 1:
        raise ExternalsError(f"{system['name']}'s partitions build for {sorted(declared)}: give --cuda-arch")
    if declared:
        return list(declared.pop())
    archs = detect.cuda_archs_of(detect.detect_node().node)
    if not archs:
        raise ExternalsError("no GPU on this node to take the architecture from: give --cuda-arch (for example 90)")
    return archs


def spack_data(packages: dict[str, Any], archs: list[int], system: str, host: str) -> str:
    gpu = {"gpu-mempaths": {"require": [f"cuda_arch={','.join(str(a) for a in archs)}"]}}
    # gdrcopy stays unbuildable until the site names its installation.
    body = yaml.safe_dump({"packages": {**gpu, **packages, "gdrcopy": {"buildable": False}}}, sort_keys=False)
    return (
        f"# Spack externals of {system}, found with `spack external find` on {host}\n"
        f"# ({datetime.date.today()}; ./suite spack-externals --system {system}).\n"
        "# Selected by spack.yaml when GPU_MEMPATHS_SYSTEM=" + system + ". GDRCopy is not\n"
        "# looked for: list its installation under gdrcopy to run checks/gdrcopy.py.\n" + body
    )


def find_with_spack(spack: str) -> dict[str, Any]:
    """`spack external find` into a throw-away environment; its packages."""
    with tempfile.TemporaryDirectory(prefix="gpu-mempaths-externals-") as env:
        for cmd in ([spack, "env", "create", "-d", env], [spack, "-e", env, "external", "find", *WANTED]):
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise ExternalsError(f"`{' '.join(cmd)}` failed:\n{done.stdout}{done.stderr}")
        manifest = yaml.safe_load((Path(env) / "spack.yaml").read_text())
    return manifest["spack"].get("packages", {})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="./suite spack-externals", description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", default="local", help="a system under systems/ (default: local)")
    parser.add_argument("--cuda-arch", help="GPU architectures, comma-separated (default: the system's or this node's)")
    parser.add_argument("--spack", default=os.environ.get("SPACK", "spack"), help="the spack command")
    parser.add_argument("-o", "--output", type=Path, help="default: systems/spack/<system>.yaml")
    args = parser.parse_args(argv)
    try:
        given = [int(a) for a in args.cuda_arch.split(",")] if args.cuda_arch else None
    except ValueError:
        parser.error(f"--cuda-arch {args.cuda_arch}: give numbers such as 90 or 80,90")
    systems = data.load_all()
    if args.system not in systems:
        parser.error(f"--system {args.system}: not one of {', '.join(sorted(systems))}")
    if shutil.which(args.spack) is None:
        print(f"spack-externals: '{args.spack}' is not on PATH; spack/README.md says how to get Spack", file=sys.stderr)
        return 3
    try:
        archs = cuda_archs(systems[args.system], given)
        found = find_with_spack(args.spack)
    except ExternalsError as err:
        print(f"spack-externals: {err}", file=sys.stderr)
        return 3
    packages = select_externals(found)
    if "numactl" not in packages and (numa := libnuma_from_pkg_config()):
        packages["numactl"] = numa
    missing = [name for name in WANTED if name not in packages]
    out = args.output or SPACK_DIR / f"{args.system}.yaml"
    out.write_text(spack_data(packages, archs, args.system, socket.gethostname()))
    print(
        f"spack-externals: wrote {out}" + (f"; not found, Spack would build: {', '.join(missing)}" if missing else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
