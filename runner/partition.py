"""A partition's night: health and every check on every node at once, each
node judged against its siblings of the same night and the partition
against the accepted runs of its kind (judge/partition.py).

    ./suite nightly --nodes all|N|NODE,NODE... [--system NAME] [--dry-run] [-- reframe options]

- **Slurm** (``scheduler: slurm`` or ``squeue``): ReFrame's own
  ``--distribute`` (``=all`` with ``--nodelist`` of the chosen nodes):
  each check becomes one job per node, pinned with ``--nodelist``, all
  submitted at once, so the night takes about one node's time where the
  partition runs them side by side. ``all`` is every node of the system's
  Slurm partition (``sinfo``) in a state ReFrame's ``--distribute=avail``
  takes, the others listed as not available; ``N`` the first N of those; a
  list those named.
- **LSF with CSM and jsrun** (``lsf-nnodes``; plain LSF is refused): one job over the nodes,
  as ``node_health.nodes`` runs health: its script (partition-job.sh) starts
  one task per node (``jsrun -n N -r 1``), each running health and the
  checks on its own node (``nightly --on-node``, ReFrame's local scheduler
  there, perflogs under perflogs/<system>/nodes/<host>/); the runner
  submits it, waits for its end and judges what the nodes logged.

Every record carries its node (ReFrame's job_nodelist, the perflogs' node).
The nodes the night asked for are the expected ones: one that logged
nothing did not report, is named and fails the night. The results, under
results/nightly/<system>/<stamp>/: cells.csv (node x path), fleet.csv,
nodes.csv, drain.txt (one node per line, then its reasons, for a scheduler
script: ``scontrol update nodename=$node state=drain reason=...``),
run.json (the exit status, the drain list, the fleet changes) and the
partition's page (index.html: heat map, drain list, each node's history).
Exit statuses are the nightly's: 1 a check failed or a node did not report
or did not measure a path the others did; 2 a node behind its siblings or a
fleet change for the worse; 3 not judged (nothing judged at all, or no
accepted runs of two nights for the fleet, unless --allow-unjudged); 0 as
accepted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from experiments import metrics
from experiments.files import DamagedFile, read_json
from experiments.keys import FIGURE_KEY
from experiments.roots import DRY_RUNS, REPO
from judge import contention as judge_contention
from judge import explain, partition, verdict
from judge.select import accepted_masks, run_rows, windows_of
from judge.status import FAILED, MEANING, MOVED, UNJUDGED
from reports import store
from reports.load import load, nodes_logged
from reports.names import split_display_name
from reports.runs import (
    NIGHTLY_DIR,
    PERFLOGS,
    NightState,
    finished_runs,
    now,
    read_accepted,
    read_baselines,
    selected_system,
)
from rfmconfig import NODES_VARIABLE, ON_NODE_VARIABLE
from runner import act, contention, lock, nightly
from systems import data
from systems.finding_codes import code_of, tagged

SLURM = {"slurm", "squeue"}
#: LSF with CSM (whole nodes, jsrun): one job over the nodes. Plain LSF has no jsrun to start a task a node.
LSF = {"lsf-nnodes"}
#: How long the runner waits for the LSF job over the nodes (the job's own -W bounds it too).
LSF_WAIT_S = 6 * 3600


class NodesError(ValueError):
    """--nodes names what the partition does not have."""


#: A node's name as the nodes may be named (a hostname's labels; '_', which some sites' node names have):
#: nothing else reaches a job script, a here-document or a command line.
HOSTNAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9_-]{0,62})(?:\.[A-Za-z0-9_-]{1,63})*")


def batch_partition(system: str, named: str | None = None) -> dict:
    """The system's partition a partition's night runs on: the named one, else its first batch one."""
    parts = data.load_all()[system]["partitions"]
    for part in parts:
        if (named is None or part["name"] == named) and part["scheduler"] == "lsf":
            raise NodesError(
                f"--nodes: {system}:{part['name']} is under plain LSF: a partition's night starts one task a node "
                "with jsrun, which needs LSF with CSM (scheduler lsf-nnodes); run ./suite nightly on each node"
            )
        if (named is None or part["name"] == named) and part["scheduler"] in SLURM | LSF:
            return part
    raise NodesError(
        f"--nodes: {system}{':' + named if named else ''} has no partition under Slurm or LSF "
        f"(its schedulers: {', '.join(sorted({p['scheduler'] for p in parts}))}); run ./suite nightly on each node"
    )


def slurm_partition_name(part: dict) -> str | None:
    """The Slurm partition the system's access options name (--partition=X, -p X), if any."""
    access = " ".join(part.get("access", []))
    found = re.search(r"(?:^|\s)(?:--partition[= ]|-p\s*)(\S+)", access)
    return found.group(1) if found else None


#: The Slurm states ReFrame's --distribute=avail runs on (its Slurm backend's `_available_states`).
AVAILABLE = {"allocated", "completing", "idle", "planned", "reserved"}


def slurm_nodes(part: dict, dry_run: bool = False) -> dict[str, str]:
    """Every node of the Slurm partition and its state ('idle', 'down', 'drained', ...), in sinfo's order."""
    name = slurm_partition_name(part)
    cmd = ["sinfo", "-h", "-N", "-o", "%N %T", *(["-p", name] if name else [])]
    try:
        listed = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        listed = subprocess.CompletedProcess(cmd, 127, "", "sinfo: not installed on this machine")
    if listed.returncode != 0:
        lines = listed.stderr.strip().splitlines()
        why = lines[-1] if lines else f"exit {listed.returncode}"  # Slurm's last line says what it could not do
        hint = "; a dry run with the nodes named (--nodes n1,n2) needs no controller" if dry_run else ""
        raise NodesError(f"--nodes: {' '.join(cmd)} failed ({why}): Slurm lists no nodes here{hint}")
    pairs = [line.split()[:2] for line in listed.stdout.splitlines() if line.strip()]
    return {node: (state[0] if state else "unknown").lower() for node, *state in pairs}


def available(nodes: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The nodes ReFrame's --distribute=avail would run on (their state one of
    AVAILABLE, with no flag but '-', planned: 'idle*' does not respond,
    'idle~' is powered down), and the others with their states: those are
    reported as not available, not as silent."""
    usable = [n for n, state in nodes.items() if state.removesuffix("-") in AVAILABLE]
    return usable, {n: state for n, state in nodes.items() if n not in usable}


def chosen_nodes(spec: str, known: list[str] | None) -> list[str] | int:
    """--nodes as nodes: 'all' (the known ones), N (the first N known; a count
    where none are known until the job runs) or a comma-separated list, which
    must be among the known where they are known."""
    if spec == "all":
        if known is None:
            raise NodesError("--nodes all: this scheduler cannot list its nodes; give N or the nodes' names")
        return known
    if spec.isdigit():
        count = int(spec)
        if count < 1:
            raise NodesError(f"--nodes {spec}: give at least one node")
        if known is None:
            return count
        if count > len(known):
            raise NodesError(f"--nodes {count}: the partition has {len(known)} node(s)")
        return known[:count]
    names = [n for n in spec.split(",") if n]
    bad = [n for n in names if not HOSTNAME.fullmatch(n)]
    if bad:
        shown = ", ".join(repr(n if len(n) <= 40 else n[:37] + "...") for n in bad[:3])
        raise NodesError(f"--nodes: {shown} not a node's name (a hostname: letters, digits, '-', '.', '_')")
    unknown = [n for n in names if known is not None and n not in known]
    if not names or unknown:
        raise NodesError(f"--nodes: no node {', '.join(unknown) or repr(spec)} in the partition")
    return names


def dry_run_node_list(folder: Path, part: dict, nodes: list[str]) -> dict[str, str]:
    """The environment of a Slurm dry run with the nodes named: ReFrame asks
    `scontrol` for the partition's nodes even to write the job scripts of
    --distribute, and a machine without a controller has none to ask. A dry
    run submits nothing, so an `scontrol` first on PATH that lists the named
    nodes (idle, in the partition, with the features its access asks for)
    writes the same scripts a real night would."""
    access = " ".join(part.get("access", []))
    features = re.findall(r"(?:^|\s)(?:--constraint[= ]|-C\s*)(\S+)", access)
    partition = slurm_partition_name(part) or "default"
    listed = [
        f"NodeName={node} Partitions={partition} State=IDLE ActiveFeatures={','.join(features) or '(null)'}"
        for node in nodes
    ]
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(
        "#!/bin/sh\n# What a dry run lists to ReFrame (runner/partition.py)\n"
        + "".join(f"printf '%s\\n' {shlex.quote(line)}\n" for line in listed)
    )
    scontrol.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def dry_run_scripts(reports: list[Path]) -> list[Path]:
    """The job scripts a dry run's ReFrame reports say it wrote (each case's stage directory)."""
    scripts = []
    for report in (r for r in reports if r.exists()):
        for run in json.loads(report.read_text()).get("runs", []):
            stages = (Path(case["stagedir"]) / "rfm_job.sh" for case in run["testcases"] if case.get("stagedir"))
            scripts += [script for script in stages if script.exists()]
    return sorted(set(scripts))


def distribute_options(nodes: list[str]) -> list[str]:
    """ReFrame's options that run each selected check once on each of `nodes` (Slurm): exactly those, which
    the runner chose among the available ones, whatever state they are in by the time ReFrame asks."""
    return ["--distribute=all", f"--job-option=--nodelist={','.join(nodes)}"]


# --- LSF: one job over the nodes ------------------------------------------------


def lsf_script(system: str, part: dict, nodes: list[str] | int, outdir: Path, options: list[str]) -> str:
    """The LSF job over the nodes: one jsrun task per node, each its node's
    health and checks (`nightly --on-node`); the hosts LSF gave it recorded first."""
    count = nodes if isinstance(nodes, int) else len(nodes)
    account = os.environ.get("GPU_MEMPATHS_ACCOUNT", "").strip() or "<project>"
    lines = ["#!/bin/bash", f"#BSUB -J gpu-mempaths-{system}-night", f"#BSUB -nnodes {count}"]
    if part.get("account"):
        lines.append("#BSUB " + part["account"]["option"].format(account=account))
    if not isinstance(nodes, int):
        lines.append(f'#BSUB -m "{" ".join(nodes)}"')
    lines += [
        f"#BSUB -W {part.get('night_limit', '2:00')}",
        f"#BSUB -o {shlex.quote(str(outdir))}/partition-job.out",
        "",
    ]
    lines += [
        f"cd {shlex.quote(str(REPO))}",
        "# The hosts LSF gave the job (the launch node first): what is expected to report.",
        f'echo "$LSB_MCPU_HOSTS" > {shlex.quote(str(outdir))}/hosts',
        f"export {ON_NODE_VARIABLE}=1",
        f"jsrun -n {count} -r 1 -a 1 -c ALL_CPUS -g ALL_GPUS --bind none \\",
        f"    ./suite nightly --system {shlex.quote(system)} --on-node {shlex.quote(str(outdir))} -- "
        + " ".join(shlex.quote(o) for o in options),
    ]
    return "\n".join(lines) + "\n"


def lsf_hosts(outdir: Path, asked: list[str] | int) -> list[str]:
    """The compute hosts the job was given ($LSB_MCPU_HOSTS: 'host slots' pairs, the launch node
    first), else those asked."""
    path = outdir / "hosts"
    words = path.read_text().split() if path.exists() else []
    hosts = list(dict.fromkeys(short(h) for h in words[0::2][1:]))
    return hosts or (asked if isinstance(asked, list) else [])


def submit_lsf(script: Path) -> str:
    """bsub the script and wait for the job's end; its id."""
    with script.open() as stdin:
        out = subprocess.run(["bsub"], stdin=stdin, capture_output=True, text=True, timeout=120)
    found = re.search(r"Job <(\d+)>", out.stdout)
    if out.returncode != 0 or not found:
        raise RuntimeError(f"bsub: {out.stdout.strip()} {out.stderr.strip()}")
    job = found.group(1)
    print(f"nightly: LSF job {job} over the nodes submitted; waiting for its end", flush=True)
    try:
        waited = subprocess.run(["bwait", "-w", f"ended({job})", "-t", str(LSF_WAIT_S // 60)], timeout=LSF_WAIT_S + 60)
    except subprocess.TimeoutExpired:
        waited = None
    if waited is None or waited.returncode != 0:
        # Judged now, every node would be silent while the job may still run: the night is not judged.
        raise RuntimeError(f"LSF job {job} had not ended after {LSF_WAIT_S // 3600} h (bkill {job}, or judge it later)")
    return job


def on_node(args) -> int:
    """One node's part of an LSF night: health and the checks on this node,
    no verdict. Its ReFrame stage, log and results database are its own
    (stage/nodes/<host>/: every node of the job shares the checkout), its
    perflogs under perflogs/<system>/nodes/<host>/, its reports under DIR/<host>/."""
    system = selected_system(args.system)
    host = short(socket.gethostname())
    outdir = Path(args.on_node) / host
    work = REPO / "stage" / "nodes" / host
    for folder in (outdir, work):
        folder.mkdir(parents=True, exist_ok=True)
    own = ["--prefix", str(work), "--perflogdir", str(PERFLOGS / system / "nodes" / host)]
    where = {
        "cwd": work,
        "env": {**os.environ, "RFM_SQLITE_DB_FILE": str(work / "results.db")},
        "who": f"nightly: {host}",
    }
    health = nightly.reframe(
        system, outdir / "health-report.json", *own, "-t", "health", "-S", f"node_health.facts_dir={outdir}", **where
    )
    if health != 0:
        return FAILED
    return nightly.reframe(system, outdir / "run-report.json", *own, *nightly.as_nights(*args.reframe), **where)


# --- the night ---------------------------------------------------------------------


def failed_by_node(report: Path, suite: bool = False) -> dict[str, list[str]]:
    """The failed cases of a ReFrame run report by the node they ran on ('' where unknown): the evidence
    about nodes, or with `suite` the suite's own failures (nightly.suite_cause: its build, a case not run
    because of it or before it reached the node; a report ReFrame did not write), which drain no node."""
    found: dict[str, list[str]] = {}
    if not report.exists():
        return {"": [f"no {report.name}: the job or ReFrame did not finish"]} if suite else {}
    if report.suffix != ".json":
        return {}
    try:
        runs = read_json(report).get("runs", [])[-1:]
    except DamagedFile as err:
        return {"": [f"ReFrame's run report is unreadable: {err}"]} if suite else {}
    for run in runs:
        for case in run["testcases"]:
            if case["result"] in ("pass", "skip") or (nightly.suite_cause(case) is not None) != suite:
                continue
            nodes = case.get("job_nodelist") or [split_display_name(case["display_name"])[1].get(".nid", "")]
            why = (
                nightly.suite_cause(case)
                if suite
                else f"{case['display_name'].split()[0]}: {nightly.fail_reason(case)}"
            )
            for node in nodes if isinstance(nodes, list) else [nodes]:
                found.setdefault(node, []).append(why)
    return found


#: Nodes whose records are read at once: a partition's night of thousands of nodes is judged from their run
#: medians, each chunk's records read, reduced and let go (a node's records are about 2,600 rows).
NODE_CHUNK = 200
#: What node_values and run_rows read of each record of a partition's night.
NODE_VALUE_COLUMNS = ["time", "node", *FIGURE_KEY, "sample", "value", "gpu_count"]


def tables(system: str, run: dict, accepted: dict | None):
    """Tonight's run medians by node and figure, and the accepted runs' by run, both with their paths: read
    from the store a chunk of nodes at a time, never the night's records (nor the years') at once."""
    top = PERFLOGS / system
    nodes = nodes_logged(top, windows_of([run]))
    parts = []
    for chunk in [nodes[i : i + NODE_CHUNK] for i in range(0, len(nodes), NODE_CHUNK)] or [[]]:
        frame = load([top], warn=None, windows=windows_of([run]), nodes=chunk, columns=NODE_VALUE_COLUMNS).frame
        parts.append(partition.node_values(frame, run_rows(frame, system, [run])))
    tonight = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    tonight["node"] = tonight["node"].map(short)
    past = None
    if accepted:
        frame = load([top], warn=None, windows=windows_of(accepted["runs"])).frame
        past = verdict.attach_paths(verdict.run_values(frame, accepted_masks(frame, system, accepted), physical=True))
    return verdict.attach_paths(tonight), past


def partition_status(
    result: partition.Partition, failed: dict, judged_any: bool, history: bool, allow: bool, suite: dict = None
) -> int:
    """The night's exit status (module docstring): a node silent or with paths not measured because the
    suite itself failed there (`suite`, by node; '' the whole night's) is no failed node."""
    unmeasured = result.cells.loc[result.cells["verdict"] == partition.Cell.NOT_MEASURED, "node"]
    broken = [n for n in {*result.silent, *unmeasured} if not explained_by_suite(n, suite, result)]
    if failed or broken:
        return FAILED
    moved = not result.faults().empty or not result.fleet_changes().empty or not result.contended().empty
    if suite and not moved:
        return UNJUDGED
    if not result.faults().empty or not result.fleet_changes().empty or not result.contended().empty:
        return MOVED
    if not judged_any or (not history and not allow):
        return UNJUDGED
    return 0


@dataclass
class Night:
    """What the steps of a partition's night share."""

    system: str
    part: dict
    run: dict  # run.json as it grows
    outdir: Path
    options: list[str]  # ReFrame's, from the command line
    dry_run: bool = False


def partition_nightly(args) -> int:
    system = selected_system(args.system)
    if nightly.option_mistakes(args.reframe) != 0:  # named on stderr: a usage error, no night of it
        return UNJUDGED
    unavailable: dict[str, str] = {}
    try:
        if args.drill or args.confirm_later is not None:
            raise NodesError("--drill and --confirm-later are a node's night's; a partition's confirms by its siblings")
        part = batch_partition(system, args.partition)
        if part["scheduler"] in LSF:
            nodes = chosen_nodes(args.nodes, None)
            missing_account(part, args.dry_run)
        elif args.dry_run and not (args.nodes == "all" or args.nodes.isdigit()):
            nodes = chosen_nodes(args.nodes, None)  # named: their job scripts need no controller to be written
        else:
            known = slurm_nodes(part, args.dry_run)
            usable, down = available(known)
            # 'all' and N count the nodes Slurm can run jobs on; named ones that it cannot are not available.
            counted = args.nodes == "all" or args.nodes.isdigit()
            nodes = chosen_nodes(args.nodes, usable if counted else list(known))
            unavailable = down if counted else {n: down[n] for n in nodes if n in down}
            nodes = [n for n in nodes if n not in down]
            if not nodes:
                raise NodesError(f"--nodes {args.nodes}: no node Slurm can run jobs on ({len(down)} not available)")
    except NodesError as err:
        print(f"nightly: {err}", file=sys.stderr)
        return UNJUDGED
    stamp = now()
    # A dry run writes its scripts, never a night: nothing of it goes where the nights are kept, and
    # nothing outside the checkout (build/ is ignored by git).
    outdir = (DRY_RUNS if args.dry_run else NIGHTLY_DIR / system) / stamp.replace(":", "")
    if args.dry_run:
        outdir = outdir.with_name(f"{system}-{outdir.name}")
    outdir.mkdir(parents=True, exist_ok=True)
    run = {"system": system, "stamp": stamp, "start": stamp, "partition": part["name"], "nodes_asked": args.nodes}
    args.night_dir = None if args.dry_run else outdir  # where --act finds the verdict (night)
    if not args.dry_run:  # a night killed from now on reads as incomplete, never as judged
        run.update(state=NightState.RUNNING.value, phase="checks")
        nightly.save_run(outdir, run)
    os.environ[metrics.NIGHT_VARIABLE] = stamp
    night = Night(system, part, run, outdir, args.reframe, args.dry_run)
    stop = None
    with nightly.stopped_by_signals():
        try:
            return measured_and_judged(night, nodes, unavailable, args)
        except nightly.Stopped as err:
            stop = err.signal_name
    return nightly.stopped(outdir, run, stop)


def measured_and_judged(night: Night, nodes, unavailable: dict[str, str], args) -> int:
    """A partition's night once its nodes are chosen: every node measured, judged against its siblings and
    the accepted runs, confirmed by a rerun; its exit status (module docstring)."""
    system, run, outdir = night.system, night.run, night.outdir
    expected, reports, status = measure(night, nodes, outdir, args.reframe)
    if args.dry_run:
        return 0 if status == 0 else UNJUDGED
    used = contention.read_reports(reports, "tonight")  # before a rerun replaces the cases' outputs
    run["nodes"] = expected = [short(n) for n in expected]
    if not expected:  # an LSF job that ended before its script recorded the hosts it was given
        reports = [*reports, outdir / "hosts"]
    run["unavailable"] = unavailable
    run["end"] = now()
    nightly.enter(outdir, run, "judgement")
    failed = by_expected(failed_cases(reports), expected)
    run["kind"] = nightly.kind_of_facts(outdir)
    accepted = read_accepted(system, run["kind"]) if run["kind"] else None
    tonight, past = tables(system, run, accepted)
    # Only the nodes asked for are judged and judge each other: a record of another host (a login node's build,
    # a node Slurm gave a job it was not pinned to) is named, not a sibling.
    run["unexpected_nodes"] = sorted(set(tonight["node"]) - set(expected))
    tonight = tonight[tonight["node"].isin(expected)]
    result = partition.judge(partition.levels(tonight, past), args.alpha, expected=expected)
    result, again = confirm_by_rerun(night, result, tonight, past, args.alpha)
    result = with_contention(result, tonight, used, contention.read_reports(again, "rerun"), run)
    rerun_failed = {node: [f"rerun: {line}" for line in lines] for node, lines in failed_cases(again).items()}
    failed = merge(failed, by_expected(rerun_failed, expected))
    suite = by_expected(merge(failed_cases(reports, suite=True), failed_cases(again, suite=True)), expected)
    if suite:
        run["suite_errors"] = [
            f"{node or 'the night'}: {line}" for node, lines in sorted(suite.items()) for line in lines
        ]
    run["health"] = run["checks"] = "fail" if failed.get("") else "pass"  # the night's own, not a node's
    return write_night(night, result, failed, accepted, args.allow_unjudged, not args.no_report, suite)


def explained_by_suite(node: str, suite: dict | None, result: partition.Partition | None = None) -> bool:
    """Whether the suite's own failures explain what a node lacks: its own (`suite` by node), or the whole
    night's ('': a build on the login node) where no node measured more than it (every node in its state:
    a node that went silent while its siblings measured is a node's failure, whatever else failed)."""
    if not suite:
        return False
    if node in suite:
        return True
    if "" not in suite or result is None:
        return False
    state = result.nodes.set_index("node")["state"]
    return node in state.index and (state == state[node]).all()


def short(host: str) -> str:
    """A host's name without its domain, as ReFrame's local scheduler and Slurm name nodes."""
    return host.split(".")[0]


def by_expected(failed: dict[str, list[str]], expected: list[str]) -> dict[str, list[str]]:
    """Failures keyed by expected node; any other host's (a login node's build) are the night's ('')."""
    out: dict[str, list[str]] = {}
    for node, lines in failed.items():
        key = short(node) if short(node) in expected else ""
        out.setdefault(key, []).extend(lines if key or not node else [f"{node}: {line}" for line in lines])
    return out


def missing_account(part: dict, dry_run: bool) -> None:
    """A project the scheduler charges every job to, refused before any job is written where it is not set."""
    account = part.get("account") or {}
    if account.get("required") and not os.environ.get("GPU_MEMPATHS_ACCOUNT", "").strip():
        option = account["option"].format(account="<project>")
        why = f"{part['name']} charges every job to a project ({option}): set GPU_MEMPATHS_ACCOUNT"
        if not dry_run:
            raise NodesError(f"--nodes: {why}")
        print(f"nightly: dry run: {why} before the night itself (the scripts say <project>)", file=sys.stderr)


def measure(
    night: Night, nodes: list[str] | int, folder: Path, options: list[str]
) -> tuple[list[str], list[Path], int]:
    """Health and the checks on `nodes`, their reports in `folder`: the
    nodes expected to report, the ReFrame reports and the status of the
    last ReFrame run (a dry run's)."""
    system, part = night.system, night.part
    if part["scheduler"] in LSF:
        script = folder / "partition-job.sh"
        script.write_text(lsf_script(system, part, nodes, folder, options))
        print(f"nightly: the job over the nodes: {script}", flush=True)
        if night.dry_run:
            print(script.read_text())
            return [], [], 0
        night.run.setdefault("jobs", []).append(submit_lsf(script))
        reports = sorted(folder.glob("*/run-report.json")) + sorted(folder.glob("*/health-report.json"))
        return lsf_hosts(folder, nodes), reports, 0
    where = [f"--system={system}:{part['name']}", *distribute_options(list(nodes))]
    # Each node may run its partition's max_jobs at once (rfmconfig/settings.py).
    env = {**os.environ, NODES_VARIABLE: str(len(nodes))}
    if night.dry_run:
        env.update(dry_run_node_list(folder, part, list(nodes)))
    how = {"action": "--dry-run" if night.dry_run else "-r", "env": env}
    health = ["-t", "health", "-S", f"node_health.facts_dir={folder}", *where, *nightly.health_options(options)]
    status = nightly.reframe(None, folder / "health-report.json", *health, **how)
    checks = [*nightly.KEEP_THE_BUILD, *nightly.as_nights(*where, *options)]
    if not night.dry_run and folder == night.outdir:
        night.run["plan"] = nightly.announce_plan(system, list(nightly.as_nights(*options)))
        print("nightly: the nodes run side by side: the partition's night takes about one node's", flush=True)
    status |= nightly.reframe(None, folder / "run-report.json", *checks, **how)
    if night.dry_run:
        scripts = dry_run_scripts([folder / "health-report.json", folder / "run-report.json"])
        where = ", ".join(sorted({str(p.parent.parent) for p in scripts})) or "nowhere"
        print(f"nightly: dry run: {len(scripts)} job script(s) for {', '.join(nodes)} under {where}", flush=True)
    return list(nodes), [folder / "health-report.json", folder / "run-report.json"], status


def confirm_by_rerun(night: Night, result: partition.Partition, tonight, past, alpha: float):
    """The nodes behind their siblings measure the checks of those paths
    again (results in rerun/), and stay behind only where the rerun agrees;
    the partition so confirmed, and the rerun's ReFrame reports."""
    faults = result.faults()
    if faults.empty:
        return result, []
    nodes = sorted(faults["node"].unique())
    tests = sorted(tonight.loc[tonight["path"].isin(faults["path"]), "test"].unique())
    # ReFrame matches -n against the display name without its spaces: 'path_matrix%paths=...'.
    print(f"nightly: confirming {len(faults)} node fault(s): rerunning {', '.join(tests)} on {', '.join(nodes)}")
    folder = night.outdir / "rerun"
    folder.mkdir(exist_ok=True)
    window = {"start": now()}
    # The site's options but those that select checks: the rerun selects the flagged paths' own.
    selection = [*nightly.health_options(night.options), "-n", f"^({'|'.join(tests)})(%|$)"]
    try:
        _, reports, _ = measure(night, nodes, folder, selection)
    except RuntimeError as err:  # the rerun's LSF job did not end: the faults stand, unconfirmed
        print(f"nightly: the rerun was not measured: {err}", file=sys.stderr)
        return result, [folder / "run-report.json"]
    window["end"] = now()
    night.run["rerun"] = {**window, "nodes": nodes}
    nightly.save_run(night.outdir, night.run)
    frame = load([PERFLOGS / night.system], warn=None, windows=windows_of([window])).frame
    again = partition.node_values(frame, run_rows(frame, night.system, [window]))
    rerun = verdict.attach_paths(
        again[again["node"].map(short).isin(nodes)].assign(node=lambda t: t["node"].map(short))
    )
    second = partition.judge(partition.levels(partition.with_rerun(tonight, rerun), past), alpha, night.run["nodes"])
    return partition.confirm(result, second, partition.measured_pairs(rerun)), reports


def with_contention(
    result: partition.Partition, tonight: pd.DataFrame, used: tuple, again: tuple, run: dict
) -> partition.Partition:
    """The partition with each node fault that another process on the node's
    GPUs explains, in the run and in the node's rerun, contended, not a fault
    (judge/contention.py, from the GpuUse and Contention tables of the run,
    `used`, and of its rerun, `again`: runner/contention.py's read_reports);
    run.json's `contention`, every other process seen."""
    gpus = pd.concat([used[0], again[0]], ignore_index=True)
    others = pd.concat([used[1], again[1]], ignore_index=True)
    hosts = pd.concat([used[2], again[2]], ignore_index=True)  # busy on the host's CPUs (HostUse)
    gpus["node"], others["node"], hosts["node"] = (t["node"].map(short) for t in (gpus, others, hosts))
    rerun_nodes = set(run.get("rerun", {}).get("nodes", []))
    # Each table split by node (and tonight's by cell) once: a mask over them per fault made a night of
    # thousands of nodes, hundreds of them named, cost the square of its size.
    cells = tonight.groupby(["node", "path"]).indices
    gpus_of, others_of, hosts_of = (_by_node(t) for t in (gpus, others, hosts))
    contended = {}
    for (node, path), _ in result.faults().groupby(["node", "path"]):
        rows = tonight.iloc[cells.get((node, path), [])]
        cases = list(rows[["test", "case", "environ"]].drop_duplicates().itertuples(index=False, name=None))
        runs = ["tonight", "rerun"] if node in rerun_nodes else ["tonight"]
        gpus_named = judge_contention.figure_gpus(rows["figure"])
        shares = judge_contention.path_shares(path, cases, rows["figure"].drop_duplicates())
        finding = pd.DataFrame([{"path": path, "cases": cases, "gpus": gpus_named, "runs": runs, "shares": shares}])
        [explained] = judge_contention.explain(finding, gpus_of(node), others_of(node), hosts_of(node)).itertuples()
        if explained.contended:
            contended[(node, path)] = explained.by
    run["contention"] = {
        "processes": judge_contention.processes(others, hosts),
        "cells": {f"{node}: {path}": by for (node, path), by in contended.items()},
    }
    return partition.contend(result, contended)


def _by_node(table: pd.DataFrame):
    """A function of a node: `table`'s rows of that node (none: its columns, no row)."""
    parts = table.groupby("node").indices
    return lambda node: table.iloc[parts.get(node, [])]


def failed_cases(reports: list[Path], suite: bool = False) -> dict[str, list[str]]:
    """failed_by_node over several reports (`suite`: the suite's own failures)."""
    found: dict[str, list[str]] = {}
    for path in reports:
        found = merge(found, failed_by_node(path, suite))
    return found


def merge(a: dict[str, list[str]], b: dict[str, list[str]]) -> dict[str, list[str]]:
    return {k: a.get(k, []) + b.get(k, []) for k in {*a, *b}}


def write_night(
    night: Night, result, failed: dict, accepted, allow: bool, report: bool = True, suite: dict | None = None
) -> int:
    """The night's results written and sent, its report drawn and said (module docstring); the exit status.
    `suite`: the suite's own failures by node, which drain none."""
    system, run, outdir = night.system, night.run, night.outdir
    judged = [partition.Cell.PASS, partition.Cell.NODE_FAULT, partition.Cell.BOTH, partition.Cell.TRANSIENT]
    history = accepted is not None and (result.fleet["verdict"] != partition.Fleet.UNJUDGED).any()
    judged_any = result.cells["verdict"].isin(judged).any() or history
    status = partition_status(result, failed, judged_any, history, allow, suite)
    write_results(outdir, run, result, failed, status, accepted, suite)
    send(system, run, result, status)
    if report:
        write_page(system, run, result, outdir)
    say(run, result, failed, status, outdir, bool(read_baselines(system)) and accepted is None)
    return status


def drain_rows(result: partition.Partition, failed: dict[str, list[str]], suite: dict | None = None) -> list[dict]:
    """The nodes to drain, each with its state, its reasons and figures; not a node that lacks what the
    suite's own failures explain (`suite`: silent or not measured because the build or the job failed)."""
    rows = []
    unmeasured = (partition.NodeState.SILENT, partition.NodeState.INCOMPLETE)
    for row in result.nodes.itertuples():
        lines = failed.get(row.node, [])
        if row.state in (partition.NodeState.OK, partition.NodeState.CONTENDED) and not lines:
            continue
        if row.state in unmeasured and not lines and explained_by_suite(row.node, suite, result):
            continue
        reasons = [node_reason(row, result.cells)] if row.state != partition.NodeState.OK else []
        rows.append({"node": row.node, "state": str(row.state), "reasons": reasons + failed_reasons(lines)})
    for node in sorted(set(failed) - set(result.nodes["node"]) - {""}):
        rows.append({"node": node, "state": "failed checks", "reasons": failed_reasons(failed[node])})
    return rows


def node_reason(row, cells: pd.DataFrame) -> str:
    """A node's drain reason in the partition: its state's code, then what it found (partition.node_line)."""
    return tagged("node-state", row.state, partition.node_line(row, cells))


def failed_reasons(lines: list[str]) -> list[str]:
    """Failed checks as drain reasons, each with the code of a failed check."""
    return [tagged("check", "failed", f"failed {line}") for line in lines]


def write_results(
    outdir: Path, run: dict, result: partition.Partition, failed: dict, status: int, accepted, suite=None
) -> None:
    result.cells.to_csv(outdir / "cells.csv", index=False)
    keep_cells(run, result.cells)
    result.fleet.to_csv(outdir / "fleet.csv", index=False)
    result.nodes.to_csv(outdir / "nodes.csv", index=False)
    drain = drain_rows(result, failed, suite)
    (outdir / "drain.txt").write_text("".join(f"{r['node']}\t{' | '.join(r['reasons'])}\n" for r in drain))
    run["exit"], run["meaning"] = status, MEANING[status]
    run["state"] = NightState.DONE.value
    if suite and status == UNJUDGED:
        run["unjudged_reasons"] = ["suite-error"]
        run["unjudged_codes"] = [code_of("night", "suite-error").code]
    run["drain"] = drain
    run["not_drained"] = [
        {"node": r.node, "reasons": [node_reason(r, result.cells)]}
        for r in result.nodes.itertuples()
        if r.state == partition.NodeState.CONTENDED and not failed.get(r.node)
    ]
    run["fleet_changes"] = [
        tagged("fleet", r.verdict, partition.fleet_line(r)) for r in result.fleet_changes().itertuples()
    ]
    run["improved"] = [r.path for r in result.fleet.itertuples() if r.verdict == partition.Fleet.IMPROVED]
    run["counts"] = {
        "nodes": len(result.nodes),
        "reported": len(result.nodes) - len(result.silent),
        "paths": int(result.cells["path"].nunique()),
        "node_faults": int(len(result.faults())),
        "fleet_changes": int(len(result.fleet_changes())),
        "accepted_runs": len(accepted["runs"]) if accepted else 0,
    }
    run["checks_failed"] = sum(len(v) for v in failed.values())
    nightly.save_run(outdir, run)


def keep_cells(run: dict, cells: pd.DataFrame) -> None:
    """The night's cells kept in the store for the nodes' histories; a store that cannot be written leaves
    them in cells.csv alone (node_histories reads them there)."""
    with contextlib.suppress(*store.failures()):
        with store.opened(PERFLOGS / run["system"]) as con:
            store.keep_cells(con, run["stamp"], cells)


def send(system: str, run: dict, result: partition.Partition, status: int) -> None:
    """The night's status and each node's deviation by path to the metrics endpoint, the node a label."""
    url = metrics.endpoint(data.load_all().get(system, {}))
    if not url:
        return
    when = nightly.end_ms(run)
    lines = metrics.night_line(system, run["stamp"], run.get("kind") or "unknown", status, MEANING[status], when)
    lines += "\n" + metrics.partition_lines(system, run["stamp"], result.cells, result.fleet, when)
    if run.get("contention", {}).get("processes"):
        lines += "\n" + metrics.contention_lines(system, run["stamp"], run["contention"]["processes"], {}, when)
    why = metrics.post(url, lines)
    if why:
        print(f"nightly: warning: metrics endpoint {why}: the verdict is in the night's folder only", file=sys.stderr)


def write_page(system: str, run: dict, result: partition.Partition, outdir: Path) -> None:
    """The partition's page and a history page for each node it names; a
    page that cannot be drawn changes no verdict."""
    from reports.partition import write_partition_page

    try:
        # The nodes the page names, each with its history: to drain, and behind while their GPUs were shared.
        named = list(dict.fromkeys([r["node"] for r in run["drain"] + run.get("not_drained", [])]))
        found = explain.partition_findings(run, result.cells, result.fleet)
        step = explain.partition_next_step(run)
        page = write_partition_page(run, result, outdir, node_histories(system, named), found=found, step=step)
        print(f"report written to {page}")
    except Exception as err:  # matplotlib and pandas raise many kinds
        print(f"nightly: warning: no partition page: {err!r}", file=sys.stderr)


def node_histories(system: str, nodes: list[str]) -> dict[str, pd.DataFrame]:
    """Each named node's levels on every path over the system's partition nights so far: their cells as
    kept in the store when each night was judged (a night kept before the store, from its cells.csv once)."""
    nights = [n for n in finished_runs(system, partitions=True) if n.get("nodes")]
    try:
        with store.opened(PERFLOGS / system) as con:
            kept = store.cell_nights(con)
            for night in nights:
                cells = NIGHTLY_DIR / system / night["stamp"].replace(":", "") / "cells.csv"
                if night["stamp"] not in kept and cells.exists():
                    store.keep_cells(con, night["stamp"], pd.read_csv(cells))
            found = store.read_cells(con, nodes)
    except store.failures():  # a store that cannot be written: the nights' files, as before it
        found = pd.concat(
            [
                pd.read_csv(path).assign(night=n["stamp"])
                for n in nights
                if (path := NIGHTLY_DIR / system / n["stamp"].replace(":", "") / "cells.csv").exists()
            ]
            or [pd.DataFrame(columns=["node", "night"])]
        )
        found = found[found["node"].isin(nodes)]
    found = found[found["night"].isin({n["stamp"] for n in nights})]
    found = found.assign(worse_pct=explain.cell_worse(found)) if not found.empty else found  # kept before it was
    found = found.sort_values("night", key=lambda c: c.map({n["stamp"]: i for i, n in enumerate(nights)}))
    return {node: rows.reset_index(drop=True) for node, rows in found.groupby("node")}


def say(run: dict, result: partition.Partition, failed: dict, status: int, outdir: Path, other_kind: bool) -> None:
    for node, lines in sorted(failed.items()):
        for line in lines:
            print(f"nightly: FAILED {node or 'the night'}: {line}", file=sys.stderr)
    for line in run.get("suite_errors", []):
        print(f"nightly: SUITE ERROR {line}", file=sys.stderr)
    for row in run["drain"]:
        print(f"nightly: DRAIN {row['node']}: {' | '.join(row['reasons'])}", file=sys.stderr)
    for line in run["fleet_changes"]:
        print(f"nightly: FLEET CHANGE {line}", file=sys.stderr)
    if run.get("unavailable"):
        listed = ", ".join(f"{n} ({state})" for n, state in sorted(run["unavailable"].items()))
        print(f"nightly: not available to Slurm, not measured: {listed}")
    if other_kind:
        print("nightly: no accepted runs of this kind of node: the partition is judged against its siblings only")
    counts = run["counts"]
    print(
        f"nightly: {counts['reported']} of {counts['nodes']} node(s) reported, {counts['paths']} paths; "
        f"{counts['node_faults']} node fault(s), {counts['fleet_changes']} fleet change(s); "
        f"drain list in {outdir / 'drain.txt'}"
    )
    cause = run.get("suite_errors", [])[:1] if status == UNJUDGED else []
    why = f"; the suite failed, not the nodes, none drained for it: {cause[0]}" if cause else ""
    print(f"nightly: exit {status} ({MEANING[status]}); results in {outdir}{why}")


def add_arguments(p) -> None:
    """The partition's options of the nightly's command (runner/nightly.py's parser)."""
    whole = p.add_argument_group("a partition's night (runner/partition.py)")
    whole.add_argument(
        "--nodes",
        metavar="all|N|NODE,...",
        help="every node of the partition, its first N, or those named, all at once: each judged against its "
        "siblings of the night and the partition against its accepted runs (Slurm: ReFrame's --distribute; LSF: "
        "one job over the nodes)",
    )
    whole.add_argument(
        "--partition", metavar="NAME", help="the system's partition for --nodes (default: its first batch one)"
    )
    whole.add_argument(
        "--dry-run",
        action="store_true",
        help="with --nodes: write the job scripts (ReFrame's under Slurm, the one job's under LSF) and submit nothing",
    )
    whole.add_argument("--on-node", metavar="DIR", help=argparse.SUPPRESS)  # a task of the LSF job over the nodes
    p.set_defaults(func=night)


def night(args) -> int:
    """One node's night, a partition's (--nodes), or one node's part of an LSF partition's (--on-node)."""
    if args.on_node:  # a task of a partition's night, whose launch holds the lock
        return on_node(args)
    if args.nodes and args.dry_run:  # writes job scripts under build/ alone
        return partition_nightly(args)
    if not args.nodes and (args.dry_run or args.partition):
        raise SystemExit("nightly: --dry-run and --partition go with --nodes")
    with lock.held(lock.command_line(), wait=args.wait):
        status = partition_nightly(args) if args.nodes else nightly.nightly(args)
        if getattr(args, "act", False) and getattr(args, "night_dir", None):
            act.after_night(args.night_dir)
        return status
