"""The host in a node's facts (systems/host.py): detected from a fake /sys and
/proc, compared with the accepted runs' host, and what a night on another
host says and does (runner/nightly.py, judge/explain.py): its host first,
exit 3 ('other-host') and nothing drained where a path moved, exit 0 with a
note where nothing did. The nights of the fake node on another host are in
tests/test_fake_gpu.py."""

import json
from pathlib import Path

import pandas as pd
import pytest

from judge import explain, siblings, verdict
from judge.status import FAILED, MOVED, UNJUDGED
from reports.html import verdict_section
from runner import accept, nightly
from systems import host
from systems.health import main

# --- detection ----------------------------------------------------------------------------------------------


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def fake_tree(root: Path) -> tuple[Path, Path]:
    """Two sockets of two cores, two threads each, a NUMA node per socket and
    a GPU's memory node without CPUs, 512 GiB, under QEMU's firmware."""
    sysfs, proc = root / "sys", root / "proc"
    for cpu in range(8):
        topo = sysfs / f"devices/system/cpu/cpu{cpu}/topology"
        _write(topo / "physical_package_id", f"{cpu // 4}\n")
        _write(topo / "core_id", f"{cpu % 4 // 2}\n")
    for node, cpus, kib in ((0, "0-3", 268435456), (1, "4-7", 268435456), (2, "", 100663296)):
        _write(sysfs / f"devices/system/node/node{node}/cpulist", f"{cpus}\n")
        _write(sysfs / f"devices/system/node/node{node}/meminfo", f"Node {node} MemTotal:       {kib} kB\n")
    dmi = {"bios_vendor": "SeaBIOS", "bios_version": "1.16.3", "bios_date": "04/01/2014", "sys_vendor": "QEMU"}
    for name, value in {**dmi, "product_name": "Standard PC (Q35 + ICH9, 2009)"}.items():
        _write(sysfs / "class/dmi/id" / name, value + "\n")
    cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
    _write(proc / "cpuinfo", cpuinfo + "flags\t\t: fpu sse2 hypervisor avx512f\n\nprocessor\t: 1\n")
    _write(proc / "meminfo", "MemTotal:       536870912 kB\nMemFree:        1 kB\n")
    _write(proc / "sys/kernel/osrelease", "5.14.0-427.el9.x86_64\n")
    return sysfs, proc


def no_programs(argv):
    return None, "", f"{argv[0]} is not installed"


def refused(argv):
    """A node without root: dmidecode refused, no systemd-detect-virt, no lscpu."""
    if argv[0] == "dmidecode":
        return 1, "", "/sys/firmware/dmi/tables/smbios_entry_point: Permission denied\n"
    return no_programs(argv)


def test_the_host_of_a_fake_tree(tmp_path):
    sysfs, proc = fake_tree(tmp_path)
    facts = host.host_facts(sysfs, proc, refused)
    assert {k: v for k, v in facts["cpu"].items() if k != "arch"} == {
        "model": "Intel(R) Xeon(R) Platinum 8480+",
        "cpus": 8,
        "sockets": 2,
        "cores": 4,
        "threads_per_core": 2,
    }
    assert facts["numa"] == {
        "nodes": 2,  # the GPU's memory node, without CPUs, is listed, not counted
        "layout": {
            "0": {"cpus": "0-3", "memory_gib": 256.0},
            "1": {"cpus": "4-7", "memory_gib": 256.0},
            "2": {"cpus": "", "memory_gib": 96.0},
        },
    }
    assert facts["memory"] == {"size_gib": 512.0, "speed_mts": "unknown"}
    assert facts["kernel"] == "5.14.0-427.el9.x86_64"
    assert facts["firmware"]["bios_version"] == "1.16.3" and facts["firmware"]["sys_vendor"] == "QEMU"
    assert facts["hypervisor"] == "qemu"  # no systemd-detect-virt: named by the firmware's maker
    assert facts["notes"] == [
        "memory speed unknown: dmidecode refused (/sys/firmware/dmi/tables/smbios_entry_point: Permission denied): "
        "it usually needs root"
    ]
    json.dumps(facts)  # as the facts file keeps it


def test_nothing_readable_is_unknown_with_its_reasons_and_nothing_fails(tmp_path):
    facts = host.host_facts(tmp_path / "sys", tmp_path / "proc", no_programs)
    assert facts["cpu"]["model"] == "unknown" and facts["cpu"]["sockets"] == "unknown"
    assert facts["numa"]["nodes"] == "unknown" and facts["memory"] == {"size_gib": "unknown", "speed_mts": "unknown"}
    assert facts["kernel"] == "unknown" and set(facts["firmware"].values()) == {"unknown"}
    assert facts["hypervisor"] == "none"
    said = " | ".join(facts["notes"])
    for what in (
        "CPU model",
        "CPU topology",
        "NUMA layout",
        "memory size",
        "memory speed",
        "firmware",
        "kernel release",
    ):
        assert f"{what} unknown" in said


def test_dmidecode_lscpu_and_systemd_detect_virt_where_they_answer(tmp_path):
    sysfs, proc = fake_tree(tmp_path)
    _write(proc / "cpuinfo", "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd4f\n")  # Grace: no model name
    dimms = "Memory Device\n\tType: LPDDR5\n\tSpeed: 6400 MT/s\n\tConfigured Memory Speed: 6400 MT/s\n" * 2
    answers = {
        "dmidecode": (0, dimms.replace("Configured Memory Speed: 6400", "Configured Memory Speed: 5600", 1), ""),
        "lscpu": (0, "Architecture:   aarch64\nModel name:     Neoverse-V2\n", ""),
        "systemd-detect-virt": (1, "none\n", ""),  # bare metal, whatever the firmware says
    }
    facts = host.host_facts(sysfs, proc, lambda argv: answers[argv[0]])
    assert facts["cpu"]["model"] == "Neoverse-V2"
    assert facts["memory"]["speed_mts"] == 5600 and facts["memory"]["type"] == "LPDDR5"  # the slowest DIMM's
    assert facts["hypervisor"] == "none" and facts["notes"] == []
    answers["lscpu"] = (None, "", "lscpu is not installed")
    assert host.host_facts(sysfs, proc, lambda argv: answers[argv[0]])["cpu"]["model"] == "implementer 0x41 part 0xd4f"


def test_health_writes_the_host_into_the_node_facts(tmp_path, capsys):
    from test_health import FakeGpu, _detect

    machine = host.host_facts(*fake_tree(tmp_path / "tree"), refused)
    args = ["--system", "local", "--partition", "default", "--facts-dir", str(tmp_path)]
    assert main(args, detect=_detect([FakeGpu()]), describe_host=lambda: machine) == 0
    (record,) = [json.loads(p.read_text()) for p in tmp_path.glob("node-*.json")]
    assert record["machine"]["cpu"]["model"] == "Intel(R) Xeon(R) Platinum 8480+"
    assert record["machine"]["driver_version"] == "535.104.05"  # recorded, not compared
    assert "NOTE host: memory speed unknown: dmidecode refused" in capsys.readouterr().out


# --- comparison ---------------------------------------------------------------------------------------------


@pytest.fixture
def accepted_host(tmp_path):
    return host.host_facts(*fake_tree(tmp_path), refused)


def _with(facts: dict, **changes) -> dict:
    """A copy of `facts` with 'section.key' values changed."""
    copy = json.loads(json.dumps(facts))
    for where, value in changes.items():
        *sections, key = where.split("__")
        place = copy
        for section in sections:
            place = place[section]
        place[key] = value
    return copy


def test_what_differs_is_said_tonight_first_against_the_accepted(accepted_host):
    tonight = _with(accepted_host, cpu__model="AMD EPYC 9654", memory__size_gib=256.0, hypervisor="none")
    found = host.differences(tonight, accepted_host)
    assert found == ["CPU AMD EPYC 9654 against Intel(R) Xeon(R) Platinum 8480+", "memory 256 GiB against 512 GiB",
                     "hypervisor none against qemu"]  # fmt: skip
    assert host.differs_line(found[:2]) == (
        "the host differs from the accepted nodes': CPU AMD EPYC 9654 against Intel(R) Xeon(R) Platinum 8480+; "
        "memory 256 GiB against 512 GiB"
    )
    for changed in (
        {"cpu__sockets": 1},
        {"cpu__cores": 8},
        {"cpu__threads_per_core": 1},
        {"numa__nodes": 8},
        {"firmware__bios_version": "2.0"},
        {"kernel": "6.8.0"},
    ):
        assert len(host.differences(_with(accepted_host, **changed), accepted_host)) == 1, changed


def test_what_does_not_change_performance_or_is_unknown_is_not_compared(accepted_host):
    alike = _with(
        accepted_host,
        memory__size_gib=500.0,  # within 5%: the kernel's reservations
        firmware__bios_date="01/01/2025",
        firmware__product_name="another",
        numa__layout={},
        notes=["another note"],
        driver_version="590.48.01",  # ./suite upgrade judges drivers and CUDA
        cuda_driver_version="13.1",
    )
    assert host.differences(alike, accepted_host) == []
    known = _with(accepted_host, memory__speed_mts=4800)
    assert host.differences(known, accepted_host) == []  # unknown on one side: not compared
    assert host.differences(known, _with(accepted_host, memory__speed_mts=5600)) == [
        "memory speed 4800 MT/s against 5600 MT/s"
    ]
    assert host.differences(_with(accepted_host, cpu__model="unknown"), accepted_host) == []


def _night(outdir: Path, machine: dict | None) -> Path:
    outdir.mkdir(parents=True, exist_ok=True)
    record = {"host": "gpu01.example", "partition": "default", "gpus": []}
    if machine is not None:
        record["machine"] = machine
    (outdir / "node-gpu01.json").write_text(json.dumps(record))
    return outdir


def test_a_night_is_compared_with_its_kinds_accepted_host_once_there_is_one(tmp_path, accepted_host):
    other = _with(accepted_host, memory__size_gib=256.0)
    night = _night(tmp_path / "night", other)
    with_host = {"runs": [], "node": {"default": {"gpus": [], "machine": accepted_host}}}
    assert nightly.host_against_accepted(with_host, night) == {
        "host_differs": "the host differs from the accepted nodes': memory 256 GiB against 512 GiB"
    }
    before = {"runs": [], "node": {"default": {"gpus": []}}}  # accepted before host facts were
    assert nightly.host_against_accepted(before, night) == {"host_note": "the accepted runs recorded no host facts"}
    assert nightly.host_against_accepted(with_host, _night(tmp_path / "same", accepted_host)) == {}
    assert nightly.host_against_accepted(None, night) == {}  # no baseline: nothing to compare with
    assert nightly.host_against_accepted(with_host, _night(tmp_path / "old", None)) == {}


# --- the night on another host ------------------------------------------------------------------------------


def _verdict(*paths):
    names = [f"p{i}" for i in range(len(paths))]
    figures = pd.DataFrame({"path": names, "verdict": ["pass"] * len(paths), "reason": [""] * len(paths)})
    return verdict.Verdict(figures, pd.DataFrame({"path": names, "verdict": list(paths)}))


DIFFERS = {"host_differs": "the host differs from the accepted nodes': memory 256 GiB against 512 GiB"}


@pytest.mark.parametrize(
    "run, paths, failed, lagging, reasons, status",
    [
        (DIFFERS, ["pass", "moved"], [], [], ["other-host"], UNJUDGED),  # the move may be the host's: not judged
        (DIFFERS, ["unstable"], [], [], ["other-host"], UNJUDGED),
        ({}, ["pass", "moved"], [], [], [], MOVED),  # the same host: moved, as before
        (DIFFERS, ["pass", "pass"], [], [], [], 0),  # nothing moved: as accepted, its host named
        (DIFFERS, ["moved"], ["health: gpu0 ecc"], [], ["other-host"], FAILED),  # a failed check still fails
        (DIFFERS, ["moved"], [], ["host link h2d of GPU 1, ce"], ["other-host"], MOVED),  # siblings of one host
    ],
)
def test_a_night_on_another_host_is_not_judged_where_a_path_moved(run, paths, failed, lagging, reasons, status):
    result = _verdict(*paths)
    assert nightly.other_host(run, result) == reasons
    assert nightly.nightly_status({"failed": failed}, result, reasons, False, lagging=lagging) == status


def test_a_held_change_on_another_host_is_not_judged_either():
    change = type("Change", (), {"worse": True})()
    assert nightly.other_host(DIFFERS, _verdict("pass"), [change]) == ["other-host"]
    assert nightly.nightly_status({"failed": []}, _verdict("pass"), ["other-host"], False, [change]) == UNJUDGED


def test_paths_moved_on_another_host_are_not_drained_a_failed_check_is(tmp_path):
    result = _verdict("moved")
    result.paths = result.paths.assign(
        change_pct=-50.0, agree=1, figures=1, spread_pct=0.5, floor_pct=3.0, instability=1.0, reason="", better="higher"
    )
    lags = pd.DataFrame(columns=siblings.COLUMNS)
    run = {**DIFFERS, "unjudged_reasons": ["other-host"]}
    nightly.write_drain(tmp_path, run, result, {"failed": []}, lags)
    assert (tmp_path / "drain.txt").read_text() == "" and run["drain"] == []
    nightly.write_drain(tmp_path, run, result, {"failed": ["health: gpu0 ecc_uncorrected"]}, lags)
    assert run["drain"] == ["GMP-501 failed health: gpu0 ecc_uncorrected"]
    same = {"unjudged_reasons": []}
    nightly.write_drain(tmp_path, same, result, {"failed": []}, lags)
    assert same["drain"] == [
        "GMP-101 moved against the accepted runs: " + nightly.path_line(next(result.paths.itertuples()))
    ]


def test_the_page_says_the_host_first_and_asks_to_accept_it_or_investigate():
    paths = pd.DataFrame({"path": ["a"], "verdict": ["moved"], "change_pct": [-50.0], "reason": [""]})
    run = {**DIFFERS, "exit": 3, "meaning": "not judged", "unjudged_reasons": ["other-host"]}
    paths, _, found, step = nightly.explained(run, paths, None)
    assert step == (explain.Step.OTHER_HOST, explain.STEP_TEXT[explain.Step.OTHER_HOST])
    assert [f.step for f in found] == [explain.Step.OTHER_HOST]  # not DRAIN
    page = "\n".join(verdict_section(run, paths, [], nightly.UNJUDGED_REASONS, None, found, step))
    first = page.index("the host differs from the accepted nodes&#x27;: memory 256 GiB against 512 GiB")
    assert first < page.index("Next step: accept this host or investigate") < page.index("Not judged (other-host)")
    # Nothing moved: a note, no alarm.
    calm = {**DIFFERS, "exit": 0, "meaning": "as accepted", "unjudged_reasons": []}
    _, _, found, step = nightly.explained(calm, None, None)
    assert step[0] == explain.Step.NOTHING
    page = "\n".join(verdict_section(calm, None, [], nightly.UNJUDGED_REASONS, None, found, step))
    assert "<b>Note</b>: the host differs" in page and "Nothing moved." in page


def test_accept_names_a_run_on_another_host_not_one_a_few_mib_apart(tmp_path, capsys, accepted_host):
    def night(name: str, machine: dict) -> Path:
        return _night(tmp_path / name, machine)

    nights = [night("a", accepted_host), night("b", _with(accepted_host, memory__size_gib=511.0))]
    facts = accept.node_facts_of(nights)
    assert facts["default"]["machine"] == accepted_host and capsys.readouterr().err == ""
    accept.node_facts_of([*nights, night("c", _with(accepted_host, cpu__model="AMD EPYC 9654"))])
    assert "is on another host than the first node of default: CPU AMD EPYC 9654 against" in capsys.readouterr().err
