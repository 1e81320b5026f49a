"""Turn the system files into ReFrame's site configuration.

Each partition's node description (declared, or detected at run time for
systems with ``detect: true``) becomes partition features, a ``devices`` entry
and ``extras`` that the checks read: the node itself, its speed-of-light
figures in bytes per second, the CUDA architectures to build for and the
launcher's defaults. Nothing here is specific to one system.
"""

from __future__ import annotations

import copy
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from experiments import metrics, roots
from experiments.roots import REPO
from rfmconfig import (
    NODES_VARIABLE,
    ON_NODE_VARIABLE,
    launchers,  # noqa: F401  (registers the jsrun launcher)
)
from systems import data, detect, toolkits

# Architectures a build covers when the partition names none (no GPU seen).
DEFAULT_CUDA_ARCHS = [70, 80, 90]


@lru_cache(maxsize=1)
def detected_node() -> detect.Detected:
    """This node, detected once per ReFrame process."""
    found = detect.detect_node()
    data.validate(
        {
            "name": "detected",
            "description": "",
            "hostnames": [],
            "environments": [{"name": "x"}],
            "partitions": [
                {
                    "name": "p",
                    "description": "",
                    "scheduler": "local",
                    "launcher": "local",
                    "environments": ["x"],
                    "node": found.node,
                }
            ],
        },
        "detected node",
    )
    return found


def _processor(node: dict[str, Any]) -> dict[str, Any]:
    cpu = node["cpu"]
    cores = cpu["sockets"] * cpu["cores_per_socket"]
    return {
        "arch": cpu["arch"],
        "model": cpu["model"],
        "num_cpus": cores * cpu["threads_per_core"],
        "num_cpus_per_core": cpu["threads_per_core"],
        "num_cpus_per_socket": cpu["cores_per_socket"] * cpu["threads_per_core"],
        "num_sockets": cpu["sockets"],
    }


def _devices(node: dict[str, Any]) -> list[dict[str, Any]]:
    gpus = node["gpus"]
    if gpus["count"] == 0:
        return []
    arch = "sm_" + gpus["compute_capability"].replace(".", "")
    return [{"type": "gpu", "arch": arch, "num_devices": gpus["count"]}]


#: The project or account jobs are charged to (``account.option`` of a partition).
ACCOUNT_VARIABLE = "GPU_MEMPATHS_ACCOUNT"


def dry_run() -> bool:
    """Whether this ReFrame process only dry-runs. ReFrame shows a
    configuration no command line; a dry run must work anywhere (no site
    modules, no module system, no account) and measures nothing, so it writes
    no perflog and says once what a real run would still need."""
    return "--dry-run" in sys.argv[1:]


#: What a dry run could not resolve here and a real run will need, said once
#: (system, note).
_DRY_RUN_NOTES: list[tuple[str, str]] = []


def selected_system(systems: dict[str, dict[str, Any]]) -> str | None:
    """The system this ReFrame process runs: --system NAME[:PART], else
    $RFM_SYSTEM, else the one this host's name selects."""
    import socket

    args = sys.argv[1:]
    for i, arg in enumerate(args):
        if arg == "--system" and i + 1 < len(args):
            return args[i + 1].split(":")[0]
        if arg.startswith("--system="):
            return arg.split("=", 1)[1].split(":")[0]
    if os.environ.get("RFM_SYSTEM"):
        return os.environ["RFM_SYSTEM"].split(":")[0]
    return data.system_for_host(systems, socket.gethostname())


def account_access(system: dict[str, Any], part: dict[str, Any]) -> tuple[list[str], str | None]:
    """The scheduler option that charges jobs to $GPU_MEMPATHS_ACCOUNT, and
    what is missing where the scheduler needs one and none is set."""
    account = part.get("account")
    value = os.environ.get(ACCOUNT_VARIABLE, "").strip()
    if not account:
        return [], None
    if value:
        return [account["option"].format(account=value)], None
    if account.get("required"):
        option = account["option"].format(account="<project>")
        missing = (
            f"{system['name']}:{part['name']} charges every job to a project ({option}): "
            f"set {ACCOUNT_VARIABLE}=<project> (see systems/{system['name']}.yaml)"
        )
        if dry_run():  # the scripts show where it goes
            _DRY_RUN_NOTES.append((system["name"], missing))
            return [option], None
        return [], missing
    return [], None


def _nodes_at_once() -> int:
    value = os.environ.get(NODES_VARIABLE, "1")
    return int(value) if value.isdigit() and int(value) > 0 else 1


def _partition(system: dict[str, Any], part: dict[str, Any], found: detect.Detected | None) -> dict[str, Any]:
    node = found.node if found else part["node"]
    account, account_missing = account_access(system, part)
    archs = part.get("cuda_archs") or (detect.cuda_archs_of(node) if found else []) or DEFAULT_CUDA_ARCHS
    extras = {
        "node": node,
        "speed_of_light": data.speed_of_light(node),
        "cuda_archs": archs,
        "launcher_settings": part.get("launcher_settings", {}),
        "gpu_resource": part.get("gpu_resource"),
        "account_missing": account_missing,
        "gdrcopy_prefix": part.get("gdrcopy_prefix"),
        "nvbit_tool": part.get("nvbit_tool"),
        "clock_events_allowed": part.get("health", {}).get("clock_events_allowed", []),
        "detected": bool(found),
        "detection_notes": found.notes if found else [],
        "node_info": found.info if found else {},
    }
    config = {
        "name": part["name"],
        "descr": part["description"],
        "scheduler": part["scheduler"],
        "launcher": part["launcher"],
        "access": part.get("access", []) + account,
        "environs": part["environments"],
        "max_jobs": part.get("max_jobs", 1) * _nodes_at_once(),
        "processor": _processor(node),
        "devices": _devices(node),
        "features": data.features(node) + (["detected"] if found else []),
        "extras": extras,
    }
    if "time_limit" in part:
        config["time_limit"] = part["time_limit"]
    if os.environ.get(ON_NODE_VARIABLE):
        # A task of the LSF job over a partition's nodes (runner/partition.py): already on its node.
        config.update(scheduler="local", launcher="local", access=[], max_jobs=1)
        return config
    if "gpu_resource" in part:
        config["resources"] = [{"name": "_rfm_gpu", "options": [part["gpu_resource"]]}]
    return config


def _environment(system: dict[str, Any], env: dict[str, Any], detected: bool) -> dict[str, Any]:
    env = copy.deepcopy(env)
    features = list(env.get("features", []))
    extras = {"cmake_options": env.get("cmake_options", []), "spack_specs": env.get("spack_specs", [])}
    # No Fortran anywhere: an empty ftn keeps ReFrame from passing 'ftn' to CMake.
    config = {
        "name": env["name"],
        "target_systems": [system["name"]],
        "features": features,
        "extras": extras,
        "ftn": "",
    }
    for key in ("modules", "env_vars", "prepare_cmds", "cc", "cxx"):
        if key in env:
            config[key] = env[key]
    if "nvcc" in env:
        nvcc = detect.find_nvcc(env["nvcc"]) if detected else env["nvcc"]
        if nvcc:
            config["nvcc"] = nvcc
        else:
            # No CUDA compiler on this machine: host programs only.
            config["features"] = [f for f in features if f != "cuda"]
    return config


def modules_system(system: dict[str, Any]) -> str:
    """The system's module system; in a dry run where it is absent, none (the
    job scripts then name no modules, and a note says which a real run loads)."""
    declared = system.get("modules_system", "nomod")
    present = {"lmod": "LMOD_CMD", "tmod4": "MODULESHOME", "tmod32": "MODULESHOME"}.get(declared)
    if dry_run() and present and not os.environ.get(present):
        modules = sorted({m for env in system["environments"] for m in env.get("modules", [])})
        note = (
            f"{system['name']}: no {declared} here (${present} unset): the job scripts name no modules; "
            f"a real run loads {', '.join(modules) or 'none'}"
        )
        _DRY_RUN_NOTES.append((system["name"], note))
        return "nomod"
    return declared


def systems_and_environments(systems: dict[str, dict[str, Any]]) -> tuple[list, list]:
    """ReFrame 'systems' and 'environments' entries; 'local' (catch-all) last."""
    ordered = sorted(systems.values(), key=lambda s: ".*" in s["hostnames"])
    rfm_systems, rfm_envs = [], []
    for system in ordered:
        found = detected_node() if system.get("detect") else None
        partitions = [_partition(system, p, found) for p in system["partitions"]]
        envs = [_environment(system, e, bool(found)) for e in system["environments"]]
        if found:
            # Machines described at run time also run under the CUDA runtimes installed beside them.
            toolkits.with_runtime_twins(envs, partitions, toolkits.runtimes_found())
            # ... and with the CUDA toolkits named beside them, compiled by clang.
            found_toolkits = toolkits.toolkits_found()
            if found_toolkits:
                toolkits.with_toolkit_environments(envs, partitions, found_toolkits, toolkits.cuda_clang())
        rfm_systems.append(
            {
                "name": system["name"],
                "descr": system["description"],
                "hostnames": system["hostnames"],
                "modules_system": modules_system(system),
                "partitions": partitions,
            }
        )
        rfm_envs += envs
    return rfm_systems, rfm_envs


# One line per performance variable, '|'-separated with a header, so that a
# perflog is a table pandas reads directly (reports/ reads it by its header).
# %(check_#ALL)s is every loggable attribute of the check, one field each,
# sorted by name: name, display_name, system, partition, environ, job_nodelist,
# jobid, the check's parameters and variables, and the node facts of
# checks/suite/base.py (gpu_model, driver_version, cuda_version,
# cuda_runtime_version, host_link). PERFLOG_KEEP says which of ReFrame's own
# attributes stay; the rest (resources, paths, commands) are ignore_keys.
PERFLOG_FORMAT = (
    "%(check_job_completion_time)s|reframe %(version)s|%(check_#ALL)s|"
    "%(check_result)s|%(check_perf_var)s|%(check_perf_value)s|%(check_perf_unit)s|"
    "%(check_perf_ref)s|%(check_perf_lower_thres)s|%(check_perf_upper_thres)s"
)
PERFLOG_KEEP = {"name", "display_name", "system", "partition", "environ", "job_nodelist", "jobid"}


#: The suite's own loggable variables that are for the run's plan (ReFrame's
#: report), not the perflogs: a new perflog column would make ReFrame start
#: every perflog anew (checks/suite/base.py).
PLAN_ONLY = {"expected_s", "left_out_because", "sized_down"}


def perflog_ignore_keys() -> list[str]:
    """ReFrame's own loggable attributes, and the plan's, that perflog lines leave out."""
    from reframe.core.pipeline import CompileOnlyRegressionTest, RunOnlyRegressionTest

    names = {
        alt or name for cls in (RunOnlyRegressionTest, CompileOnlyRegressionTest) for name, alt in cls.loggable_attrs()
    }
    return sorted(f"check_{name}" for name in (names - PERFLOG_KEEP) | PLAN_ONLY)


# The nightly mode (what ./suite nightly runs after the health checks, its options
# spelled out by runner/nightly.py's as_nights; `reframe --mode nightly` by hand):
# every performance check, measuring what the verdict judges, in what a
# night has. The nightly judges headline figures, not the studies' curves:
# the Unified Memory reprex runs three repeats of its five runs, each on a
# fresh allocation (three samples of each figure; its fault-driven cases are
# a third of the night), which changes no case. DAXPY keeps its whole sweep:
# its headline points measured alone ran 15-25% faster at 800 KB a block
# (two nights of two H100s, 2026-11-25 21:16 and 21:28, against the sweep's
# 20:58 and the single H100's accepted runs), a state the sweep's earlier
# points leave, so the sweep is part of what the figure measures. A site's
# own -S settings on the nightly's command line come later and win.
NIGHTLY_SETTINGS = ["um_bandwidth.repeats=3"]
#: The mode's options spelled out, for a run that selects environments with
#: -p: ReFrame adds a -p given beside --mode to the mode's default ('.*'),
#: which selects every environment (ReFrame 4.10).
NIGHTLY_OPTIONS = ["-T", "health", *(f"-S{s}" for s in NIGHTLY_SETTINGS)]
MODES = [{"name": "nightly", "options": list(NIGHTLY_OPTIONS)}]


def logging_config(perflog_dir: Path) -> list[dict[str, Any]]:
    return [
        {
            "perflog_multiline": True,
            "handlers": [
                {"type": "stream", "name": "stdout", "level": "info", "format": "%(message)s"},
                {
                    "type": "file",
                    "name": "reframe.log",
                    # Not debug: ReFrame gathers every variable of the test for each record the logger takes,
                    # and its debug records made a sixth of its time loading and setting up the checks
                    # (a failed case's job script and output stay in its stage folder).
                    "level": "verbose",
                    "format": "[%(asctime)s] %(levelname)s: %(check_info)s: %(message)s",
                    "append": False,
                },
            ],
            "handlers_perflog": [
                {
                    "type": "filelog",
                    "prefix": "%(check_system)s/%(check_partition)s",
                    "basedir": str(perflog_dir),
                    "level": "info",
                    "format": PERFLOG_FORMAT,
                    # With the UTC offset: the nightly's time windows are UTC.
                    "datefmt": "%FT%T%:z",
                    "ignore_keys": perflog_ignore_keys(),
                    "append": True,
                }
            ],
        }
    ]


def metrics_logging(systems: dict[str, dict[str, Any]], base: dict[str, Any]) -> list[dict[str, Any]]:
    """Per system whose data names a metrics endpoint, its logging: the
    perflogs and ReFrame's httpjson handler to the endpoint (experiments/metrics.py)."""
    entries = []
    for name, system in sorted(systems.items()):
        url = metrics.endpoint(system)
        if url:
            handlers = [*base["handlers_perflog"], metrics.perflog_handler(url)]
            entries.append({**base, "handlers_perflog": handlers, "target_systems": [name]})
    return entries


def site_configuration(systems_dir: Path | None = None, perflog_dir: Path | None = None) -> dict[str, Any]:
    systems = data.load_all(systems_dir or data.SYSTEMS_DIR)
    rfm_systems, rfm_envs = systems_and_environments(systems)
    logging = logging_config(perflog_dir or roots.PERFLOGS)
    logging = [*metrics_logging(systems, logging[0]), *logging]
    general = general_config(systems)
    if dry_run():
        for entry in logging:  # nothing measured, nothing logged
            entry["handlers_perflog"] = []
        for entry in general:  # modules are named, not loaded
            entry["resolve_module_conflicts"] = False
        chosen = selected_system(systems)
        for name, note in dict.fromkeys(_DRY_RUN_NOTES):
            if chosen in (None, name):
                print(f"dry run: {note}", file=sys.stderr)
    return {
        "systems": rfm_systems,
        "environments": rfm_envs,
        "modes": MODES,
        # ReFrame's results database: every session, for
        # --list-stored-sessions and --performance-compare; in the checkout
        # (results/reframe/), not the home directory.
        "storage": [{"enable": True, "sqlite_db_file": str(roots.REFRAME / "results.db")}],
        "logging": logging,
        "general": general,
    }


def general_config(systems: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """ReFrame's general options; the first entry that targets a system wins.

    ReFrame polls its jobs less and less often, down to once every 10 s; a job
    of the local scheduler is a process of this machine, which costs nothing
    to poll, so there it polls at least twice a second (a nightly of 41 jobs of
    a few seconds each lost a minute to polling)."""
    search = {
        "check_search_path": [str(REPO / "checks")],
        # The report of a run not given --report-file: beside the results database, not in the home directory.
        "report_file": str(roots.REFRAME / "reports" / "run-report-{sessionid}.json"),
    }
    local = sorted(n for n, s in systems.items() if all(p["scheduler"] == "local" for p in s["partitions"]))
    return [{"target_systems": local, **search, "poll_rate_min": 2.0}, search] if local else [search]
