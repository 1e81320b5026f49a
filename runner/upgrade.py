"""A CUDA upgrade as a designed experiment: the sides interleaved, paired, judged by the verdict.

    ./suite upgrade VERSION [--system NAME] [--runs N] [--resume NAME] [-- reframe options]
    ./suite upgrade driver [--system NAME] [--kind KIND]

A VERSION newer than the environments' nvcc is a runtime upgrade; an older
one (12.9 beside nvcc 13.0) is the toolkit the centre upgrades from.

The sides run interleaved, N rounds (3 by default, the verdict's MIN_RUNS):
old, new, old, new, ... each its own ReFrame run of the nightly's cases and
settings, so that whatever drifts with time on the node (other tenants, the
host's clocks, a link's temperature) falls on both sides alike. Each path is
then judged old against new with the verdict's paired design
(`verdict.judge_pairs`): per pair of runs that ran side by side, the change
of every figure, its median over the pairs against the path's floor, with
the nightly's vocabulary, floors, priors and correction. A flagged path's
cases run once more on both sides, and the flag stands only where the new
side's rerun is still off the old side's runs (`verdict.confirm`, as the
nightly confirms). The report per path: old, new, the change with its 95%
interval, the verdict; results/upgrades/<name>-paths.csv and <name>.csv (the
figures), the rounds' windows in <name>.json.

A runtime upgrade installs NVIDIA's runtime wheel of VERSION (e.g. 13.5.37)
under build/cuda-runtimes/ unless it is there; each environment whose nvcc
has that major version gets a twin, <env>-rt<X>_<Y> (systems/toolkits.py),
the new side. An older release is made a toolkit from NVIDIA's wheels under
build/cuda-toolkits/ (systems/cuda-wheels-toolkit) and, with the node's own
CUDA, compiled by clang (clang-cuda<X>_<Y>): each round runs clang <old>,
clang <new> and the nvcc environment in turn, and three comparisons say
which change did what: the toolkit alone, the compiler alone, and both (the
upgrade as a centre makes it, whose verdict is the exit status).

`driver` runs nothing: the nights since the accepted runs under another
driver are judged as one against them (`driver_upgrade`).

Exit status: 0 nothing moved, 1 a check failed (did not measure) or a
measurement is broken, 2 a path moved or is unstable, 3 not judged (a usage
error, nothing to run the new side in, too few rounds).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.files import write_json
from experiments.roots import PERFLOGS, REPO, UPGRADES
from judge import verdict
from judge.compare import path_lines, status_of
from judge.select import accepted_masks, run_rows, windows_of
from judge.status import AS_ACCEPTED, FAILED, UNJUDGED
from reports.load import from_perflogs, load
from reports.runs import finished_runs, now, read_accepted, read_baselines, selected_system
from runner import lock
from runner.nightly import as_nights, hash_selection, health_options, option_mistakes, others_pool, outcomes, reframe
from systems import detect, toolkits

RUNTIMES = REPO / "build" / "cuda-runtimes"
TOOLKITS = REPO / "build" / "cuda-toolkits"


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
    from rfmconfig import settings as rfm

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
    """upgrade in the suite's one parser (commands/cli.py)."""
    p = sub.add_parser("upgrade", help=__doc__.split("\n\n")[0], epilog="Options after '--' go to ReFrame.")
    p.add_argument(
        "version",
        help="a newer CUDA runtime as NVIDIA's wheel numbers it (13.5.37), "
        "an older release (12.9) to compare the environments' nvcc with, "
        "or 'driver': the nights since the accepted runs under another driver, against them",
    )
    p.add_argument("--system", help="the system to run (default: the one ReFrame picks here)")
    p.add_argument(
        "--runs",
        type=int,
        default=verdict.MIN_RUNS,
        help=f"rounds, each side once (default and least {verdict.MIN_RUNS})",
    )
    p.add_argument(
        "--kind", help="driver: the kind of node whose accepted runs to compare with (default: the only one)"
    )
    p.add_argument(
        "--resume",
        metavar="NAME",
        type=folder_name,
        help="go on with the upgrade results/upgrades/NAME/ left unfinished",
    )
    lock.add_wait(p)
    p.set_defaults(func=lock.holding(run), reframe=[])  # ReFrame's options: what follows '--' (commands/cli.py)


def run(args) -> int:
    if args.runs < verdict.MIN_RUNS:
        print(
            f"upgrade: --runs {args.runs}: the verdict needs {verdict.MIN_RUNS} pairs of runs or more", file=sys.stderr
        )
        return UNJUDGED
    try:
        return upgrade(args, args.reframe)
    except (OSError, RuntimeError, subprocess.CalledProcessError) as err:
        print(f"upgrade: {err}", file=sys.stderr)
        return UNJUDGED


def upgrade(args, reframe_options: list[str]) -> int:
    if args.version == "driver":
        return driver_upgrade(selected_system(args.system), args.kind)
    if option_mistakes(reframe_options) != 0:  # named on stderr: a usage error, nothing installed or run
        return UNJUDGED
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
    system = selected_system(args.system)
    twins = twins_of(system)
    if not twins:
        print(
            f"upgrade: {system} has no environment to run runtime {new} in: its environments are declared, "
            f"or none has an nvcc of CUDA {new.split('.')[0]} (systems/toolkits.py)",
            file=sys.stderr,
        )
        return UNJUDGED
    sides = {base: sorted({toolkits.base_environment(t) for t in twins}), new: twins}
    experiment = Experiment(system, f"{system}-cuda-runtime-{base}-to-{new}", sides, args.runs, reframe_options)
    if args.resume:
        experiment.resume(args.resume)
    return experiment.run([(f"runtime {base} to {new}", base, new)])


def toolkit_upgrade(args, old: str, new: str, reframe_options: list[str]) -> int:
    """From toolkit `old` (made from wheels, built by clang) to the nvcc of `new` the environments have."""
    folder = install_toolkit(old, TOOLKITS)
    own = os.path.dirname(os.path.dirname(os.path.realpath(detect.find_nvcc("nvcc") or "")))
    os.environ[toolkits.TOOLKITS_VARIABLE] = os.pathsep.join([str(folder), own])
    system = selected_system(args.system)
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
    sides = {env: [env] for env in dict.fromkeys(env for _, *envs in comparisons for env in envs)}
    experiment = Experiment(system, f"{system}-cuda-{old}-to-{new}", sides, args.runs, reframe_options)
    if args.resume:
        experiment.resume(args.resume)
    # The last, both changes together, is the upgrade's verdict.
    return experiment.run(comparisons)


def driver_upgrade(system: str, kind: str | None) -> int:
    """A driver upgrade: the nights since the accepted runs that ran under
    another driver (the newest one, if several), judged as one against the
    accepted runs (`verdict.judge`, their median against the runs' band),
    each path's change from the old driver to the new. Nothing runs: the
    nightly measured both sides. Both drivers are named; the tables go to
    results/upgrades/<system>-driver-<old>-to-<new>.csv and -paths.csv."""
    accepted = read_accepted(system, kind)
    if accepted is None:
        print(
            f"upgrade: no accepted runs of {system}{f' on {kind}' if kind else ''} (name the --kind)", file=sys.stderr
        )
        return UNJUDGED
    since = max(run["end"] for run in accepted["runs"])
    later = [r for r in finished_runs(system, kind=accepted.get("kind", kind)) if r["start"] > since]
    baselines = [r for b in read_baselines(system).values() for r in b["runs"]]  # the others' pool's too
    frame = load([PERFLOGS / system], warn=None, windows=windows_of([*accepted["runs"], *later, *baselines])).frame
    frame = frame[from_perflogs(frame)]
    masks = accepted_masks(frame, system, accepted)
    old = _drivers(frame, masks.values())
    if len(old) != 1:
        print(
            f"upgrade: the accepted runs ran under {len(old)} drivers ({', '.join(old) or 'none'}), not one",
            file=sys.stderr,
        )
        return UNJUDGED
    nights = {}
    for run in later:
        mask = run_rows(frame, system, [run])
        drivers = _drivers(frame, [mask])
        if run["start"] > since and drivers and drivers != old:
            nights[run["stamp"]] = (drivers[-1], mask)
    if not nights:
        print(
            f"upgrade: no night since the accepted runs ({since}) ran under another driver than {old[0]}",
            file=sys.stderr,
        )
        return UNJUDGED
    new = max((d for d, _ in nights.values()), key=lambda d: tuple(int(x) for x in d.split(".") if x.isdigit()))
    stamps = [stamp for stamp, (driver, _) in nights.items() if driver == new]
    pool = others_pool(frame, system, accepted)  # as the nightly judges a night of this kind
    result = verdict.judge(frame, masks, [nights[s][1] for s in stamps], physical=True, pool=pool)
    what = (
        f"driver {old[0]} ({len(masks)} accepted runs) -> {new} ({len(stamps)} night(s): {', '.join(stamps)}), "
        "judged as one against the accepted runs"
    )
    return publish(f"{system}-driver-{old[0]}-to-{new}", what, result)


def windows_in(record) -> list[tuple[str, str]]:
    """Every window (a dict with a start and an end) an upgrade's record holds, its rounds' and reruns' sides:
    the rows its comparisons read, not the system's years."""
    found = []
    if isinstance(record, dict):
        if isinstance(record.get("start"), str) and isinstance(record.get("end"), str):
            found.append(record)
        for value in record.values():
            found += [{"start": s, "end": e} for s, e in windows_in(value)]
    elif isinstance(record, list):
        for value in record:
            found += [{"start": s, "end": e} for s, e in windows_in(value)]
    return windows_of(found)


def folder_name(text: str) -> str:
    """--resume's NAME: one folder of results/upgrades/ (letters, digits, '.', '_', '-'), never a path."""
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*", text) or len(text) > 200:
        raise argparse.ArgumentTypeError(f"{text[:60]!r}: give the name of a folder of results/upgrades/, not a path")
    return text


#: The checks that measure no GPU: an upgrade that ran only these judged none of what a CUDA upgrade changes.
HOST_ONLY = ("host_bandwidth", "node_health", "SuiteBuild", "GdrCopyBuild")


def not_judged_without_gpus(ran: dict[str, set[str]]) -> int:
    """An upgrade whose every GPU check was skipped (no GPU on this node) and nothing moved: not judged,
    with the count, never 'nothing moved'; AS_ACCEPTED otherwise."""
    gpu_ran = ran["passed"] - set(HOST_ONLY)
    gpu_skipped = ran["skipped"] - set(HOST_ONLY)
    if gpu_skipped and not gpu_ran:
        print(
            f"upgrade: not judged: every GPU check was skipped ({len(gpu_skipped)}: {', '.join(sorted(gpu_skipped))}; "
            "no GPU on this node?), so only the host's paths were compared; run it on a GPU node",
            file=sys.stderr,
        )
        return UNJUDGED
    return AS_ACCEPTED


def publish(stem: str, what: str, result: verdict.Verdict) -> int:
    """The verdict's tables, results/upgrades/<stem>-paths.csv and <stem>.csv
    (the figures), and its lines per path; its exit status."""
    UPGRADES.mkdir(parents=True, exist_ok=True)
    result.paths.to_csv(UPGRADES / f"{stem}-paths.csv", index=False)
    result.figures.to_csv(UPGRADES / f"{stem}.csv", index=False)
    print(f"upgrade: {what}: {verdict.summary_line(result)}")
    for line in path_lines(result.paths):
        print(f"upgrade:   {line}")
    print(f"upgrade: tables in {UPGRADES / stem}-paths.csv and .csv", flush=True)
    return status_of(result)


def _drivers(frame: pd.DataFrame, masks) -> list[str]:
    """The driver versions the masked rows name, sorted."""
    rows = frame[np.logical_or.reduce([m.to_numpy() for m in masks])] if masks else frame.iloc[:0]
    return sorted({str(d) for d in rows["driver_version"].dropna() if str(d) not in ("", "unknown", "None")})


def side_options(environments: list[str], *options: str) -> tuple[str, ...]:
    """ReFrame's options for a side's run: measured as nights are (the
    nightly mode's options, spelled out), in `environments` alone, then `options`."""
    selected = "|".join(f"^{re.escape(env)}$" for env in environments)
    return as_nights("-p", selected, *options)


class Experiment:
    """The sides (name -> ReFrame environments) run in interleaved rounds, then compared in pairs."""

    def __init__(self, system: str, name: str, sides: dict[str, list[str]], rounds: int, options: list[str]):
        self.system, self.sides, self.rounds, self.options = system, sides, rounds, options
        self.name = f"{name}-{now().replace(':', '')}"
        self.record: dict = {"system": system, "sides": sides, "options": options, "rounds": [], "reruns": []}
        self.failed: list[str] = []
        self.ran: dict[str, set[str]] = {"passed": set(), "skipped": set()}  # the checks, by name

    @property
    def folder(self) -> Path:
        return UPGRADES / self.name

    def resume(self, name: str) -> None:
        """Go on with an earlier upgrade of the same sides (its rounds kept, a
        round it did not finish run again, its ReFrame options used), as when
        a job's time limit ended it: each round's sides ran on one node, so its
        pair stays a pair whichever node the next round runs on."""
        record = json.loads((UPGRADES / name / "rounds.json").read_text())
        if record["system"] != self.system or record["sides"] != self.sides:
            raise RuntimeError(f"{name} compared {', '.join(record['sides'])} on {record['system']}, not these sides")
        if self.options and self.options != record.get("options"):
            raise RuntimeError(f"{name} ran with its own ReFrame options ({' '.join(record.get('options', []))})")
        self.name, self.record, self.options = name, record, record.get("options", [])

    def run(self, comparisons: list[tuple[str, str, str]]) -> int:
        self.folder.mkdir(parents=True, exist_ok=True)
        began, done = time.monotonic(), len(self.record["rounds"])
        for i in range(done + 1, self.rounds + 1):
            left = (time.monotonic() - began) / (i - 1 - done) * (self.rounds - i + 1) if i > done + 1 else None
            expect = f", about {left / 60:.0f} min to go" if left else ""
            print(f"upgrade: round {i} of {self.rounds}: {', '.join(self.sides)}{expect}", flush=True)
            self.record["rounds"].append({side: self._side_run(side, f"round{i}") for side in self.sides})
            self._save()
        status = UNJUDGED
        for what, old, new in comparisons:
            status = self._compare(what, old, new)
        for report in self.folder.glob("*-report.json"):  # kept as results, a tenth of the size
            with report.open("rb") as plain, gzip.open(report.with_name(report.name + ".gz"), "wb") as packed:
                packed.writelines(plain)
            report.unlink()
        if self.failed:
            return FAILED
        return not_judged_without_gpus(self.ran) if status == AS_ACCEPTED else status

    def _save(self) -> None:
        write_json(self.folder / "rounds.json", self.record)

    def _side_run(self, side: str, label: str, *selection: str) -> dict:
        """One ReFrame run of a side's environments, measured as nights are (a
        rerun's `selection` in place of the command line's); its window and report."""
        report = self.folder / f"{label}-{side}-report.json"
        window = {"start": now()}
        given = health_options(self.options) if selection else self.options
        reframe(self.system, report, *side_options(self.sides[side], *selection, *given))
        window.update(end=now(), report=report.name)  # in the upgrade's folder
        found = outcomes(report)
        self.failed += [f"{label} {side}: {why}" for why in found["failed"] + found["suite"]]
        for outcome in self.ran:
            self.ran[outcome] |= {name.split()[0] for name in found[outcome]}
        return window

    def _frame(self, old: str, new: str) -> pd.DataFrame:
        """The system's records, the two sides' environments under one name so
        that old and new pair up (`ran_in` keeps which side ran each)."""
        frame = load([PERFLOGS / self.system], warn=None, windows=windows_in(self.record)).frame
        compared = set(self.sides[old]) | set(self.sides[new])
        return frame.assign(
            ran_in=frame["environ"], environ=frame["environ"].where(~frame["environ"].isin(compared), "upgrade")
        )

    def _mask(self, frame: pd.DataFrame, side: str, window: dict) -> pd.Series:
        return run_rows(frame, self.system, [window]) & frame["ran_in"].isin(self.sides[side])

    def _compare(self, what: str, old: str, new: str) -> int:
        frame = self._frame(old, new)
        pairs = [(self._mask(frame, old, r[old]), self._mask(frame, new, r[new])) for r in self.record["rounds"]]
        result = verdict.judge_pairs(frame, pairs, physical=True)
        if result.flagged_paths():
            result = self._confirm(what, old, new, result)
        return self._report(what, old, new, result)

    def _confirm(self, what: str, old: str, new: str, result: verdict.Verdict) -> verdict.Verdict:
        """The flagged paths' cases once more on both sides; the new side's
        rerun judged against every old run, as a night against its accepted runs."""
        flagged = result.flagged_paths()
        print(f"upgrade: {what}: {', '.join(flagged)} flagged: rerunning their cases on both sides", flush=True)
        wanted = verdict.cases_of_paths(result, flagged)
        selections = {side: self._selection(wanted, side) for side in (old, new)}
        if not all(selections.values()):
            return result  # nothing to rerun by: the flags stand, unconfirmed
        label = f"rerun{len(self.record['reruns']) + 1}"
        rerun = {side: self._side_run(side, label, *selections[side]) for side in (old, new)}
        self.record["reruns"].append(rerun)
        self._save()
        frame = self._frame(old, new)
        olds = [r[old] for r in self.record["rounds"]] + [rerun[old]]
        accepted = {f"old{i}": self._mask(frame, old, w) for i, w in enumerate(olds, start=1)}
        return verdict.confirm(
            result, verdict.judge(frame, accepted, self._mask(frame, new, rerun[new]), physical=True)
        )

    def _selection(self, wanted: pd.DataFrame, side: str) -> list[str]:
        """ReFrame's options that select, by hash, the wanted cases as the side's first round ran them."""
        # By test and case: the sides' environments differ by name, and the verdict named them alike.
        keys = {(t, c) for t, c, _ in wanted.itertuples(index=False, name=None)}
        return hash_selection(read_report(self.folder / self.record["rounds"][0][side]["report"]), keys, ("case",))

    def _report(self, what: str, old: str, new: str, result: verdict.Verdict) -> int:
        stem = f"{self.name}-{what.replace(' ', '-')}" if len(self.sides) > 2 else self.name
        status = publish(stem, f"{what} ({old} -> {new}), {self.rounds} pairs of runs interleaved", result)
        for why in self.failed:
            print(f"upgrade: FAILED {why}")
        return status


def read_report(path: Path) -> dict:
    """A ReFrame run report, or the same gzipped (as a finished upgrade keeps it)."""
    if path.exists():
        return json.loads(path.read_text())
    with gzip.open(path.with_name(path.name + ".gz"), "rt") as text:
        return json.load(text)
