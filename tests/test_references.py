"""Reference selection from systems/references/*.yaml."""

import math
import re
from pathlib import Path

import pytest
import yaml

from experiments.references import REFERENCES_DIR, load_entries, matching_values
from systems import data

ENTRIES = [
    {"where": {"system": "ac922"}, "values": {"steady_bw": [63.5, -0.05, 0.05, "GiB/s"]}},
    {
        "where": {"system": "ac922"},
        "case": {"allocator": "managed"},
        "values": {"steady_bw": [1.5, -0.5, 0.5, "GiB/s"]},
    },
    {
        "where": {"gpu_model": "NVIDIA H100 80GB HBM3", "host_link": "pcie gen5 x16"},
        "values": {"steady_bw": [47.5, -0.1, 0.1, "GiB/s"]},
    },
]


def _facts(**kw):
    return {"system": "local", "partition": "default", "gpu_model": "none", "host_link": "none", **kw}


def test_declared_system_matches_by_name():
    assert matching_values(ENTRIES, _facts(system="ac922"), {"allocator": "numa"}) == {
        "steady_bw": [63.5, -0.05, 0.05, "GiB/s"]
    }


def test_later_entries_refine_earlier_ones():
    values = matching_values(ENTRIES, _facts(system="ac922"), {"allocator": "managed"})
    assert values["steady_bw"][0] == 1.5


def test_detected_machine_matches_by_gpu_and_link_only():
    h100 = _facts(gpu_model="NVIDIA H100 80GB HBM3", host_link="pcie gen5 x16")
    assert matching_values(ENTRIES, h100, {})["steady_bw"][0] == 47.5
    h100_gen4 = _facts(gpu_model="NVIDIA H100 80GB HBM3", host_link="pcie gen4 x16")
    assert matching_values(ENTRIES, h100_gen4, {}) == {}


def test_malformed_entries_are_reported(tmp_path):
    (tmp_path / "X.yaml").write_text(yaml.safe_dump([{"where": {"system": "a"}, "values": {"bw": [1, 2]}}]))
    with pytest.raises(ValueError, match=r"X\.yaml: entry 0: bw: expected \[reference, lower, upper, unit\]"):
        load_entries("X", str(tmp_path))


@pytest.mark.parametrize("path", sorted(Path(REFERENCES_DIR).glob("*.yaml")), ids=lambda p: p.name)
def test_every_references_file_is_readable(path):
    entries = load_entries(path.stem, str(path.parent))
    assert isinstance(entries, list)


# --- no reference above what the hardware can reach -------------------------


def _check_classes() -> dict:
    """Every check class of checks/, by name (the references files' names)."""
    import importlib

    from checks.suite.base import NodeFacts

    found = {}
    for path in sorted((Path(REFERENCES_DIR).parent.parent / "checks").glob("*.py")):
        module = importlib.import_module(f"checks.{path.stem}")
        found.update({n: c for n, c in vars(module).items() if isinstance(c, type) and issubclass(c, NodeFacts)})
    return found


_PCIE_FACT = re.compile(r"^pcie gen(\d+) x(\d+)$")


def _nodes_of(where: dict) -> list:
    """The nodes an entry's 'where' names: a declared system's, or for a
    machine described at run time the little its node facts tell (the host
    link, the GPU count; no HBM or GPU link figure, so no limit from them)."""
    if "system" in where:
        system = data.load_all()[where["system"]]
        return [
            (f"{where['system']}:{p['name']}", p["node"])
            for p in system["partitions"]
            if "node" in p and where.get("partition", p["name"]) == p["name"]
        ]
    link = _PCIE_FACT.match(str(where.get("host_link", "")))
    if not link:
        return []
    node = {
        "gpus": {"count": int(where.get("gpu_count", 1))},
        "host_link": {"type": "pcie", "generation": int(link[1]), "width": int(link[2])},
    }
    return [(f"{where.get('gpu_model')} on {where['host_link']}", node)]


def above_the_limit(check, entries: list) -> list[str]:
    """Each reference of `entries` above its figure's physical limit."""
    found = []
    for entry in entries:
        for label, node in _nodes_of(entry["where"]):
            for figure, (ref, _, _, unit) in entry["values"].items():
                limit = check.limit_of(figure, entry.get("case", {}), node)
                if limit and unit != check.limit_unit:
                    found.append(f"{label}: {check.__name__} {figure} in {unit}, its limit in {check.limit_unit}")
                elif limit and ref > limit:
                    found.append(
                        f"{label}: {check.__name__} {entry.get('case', {})} {figure} {ref} {unit} > {limit:.4g}"
                    )
    return found


def test_no_reference_is_above_its_systems_speed_of_light():
    classes, judged = _check_classes(), 0
    bad = []
    for path in sorted(Path(REFERENCES_DIR).glob("*.yaml")):
        entries = load_entries(path.stem, str(path.parent))
        bad += above_the_limit(classes[path.stem], entries)
        judged += sum(
            1
            for e in entries
            for label, node in _nodes_of(e["where"])
            for f in e["values"]
            if classes[path.stem].limit_of(f, e.get("case", {}), node)
        )
    assert judged > 50, f"only {judged} references have a known limit: the test judged too little"
    assert not bad, "references above the hardware's limit:\n" + "\n".join(bad)


def test_the_seeds_ac922_figure_would_be_rejected_on_summit():
    from checks.um_bandwidth import um_bandwidth

    seed = {
        "where": {"system": "ac922"},
        "case": {"memory": "numa"},
        "values": {"steady_bw": [63.54, -0.03, 0.03, "GiB/s"]},
    }
    assert above_the_limit(um_bandwidth, [seed]) == []  # 3 bricks: 69.8 GiB/s
    on_summit = {**seed, "where": {"system": "summit"}}
    assert above_the_limit(um_bandwidth, [on_summit]) == [
        "summit:batch: um_bandwidth {'memory': 'numa'} steady_bw 63.54 GiB/s > 46.57"
    ]
    # Data resident on the GPU is bounded by HBM instead: 900 GB/s, not the link.
    resident = {**on_summit, "case": {"memory": "managed"}, "values": {"steady_bw": [207.4, -0.05, 0.05, "GiB/s"]}}
    assert above_the_limit(um_bandwidth, [resident]) == []


def test_a_reference_in_another_unit_than_its_limit_is_rejected():
    from checks.um_bandwidth import um_bandwidth

    entry = {"where": {"system": "ac922"}, "case": {"memory": "numa"}, "values": {"steady_bw": [60, -0.1, 0.1, "GB/s"]}}
    assert above_the_limit(um_bandwidth, [entry]) == ["ac922:node: um_bandwidth steady_bw in GB/s, its limit in GiB/s"]


def test_a_pair_figure_above_both_directions_of_its_link_is_rejected():
    from checks.mem_scan import mem_scan
    from checks.p2p_pingpong import p2p_pingpong

    entry = {
        "where": {"system": "dgx-a100"},
        "case": {"variant": "baseline"},
        "values": {"bandwidth": [600, -0.1, 0.1, "GiB/s"]},
    }
    assert above_the_limit(p2p_pingpong, [entry]) == [
        "dgx-a100:gpu: p2p_pingpong {'variant': 'baseline'} bandwidth 600 GiB/s > 558.8"
    ]
    scan = {
        "where": {"system": "dgx-a100"},
        "case": {"op": "read"},
        "values": {"plateau_gbs": [350, -0.1, 0.1, "GB/s"]},
    }
    assert above_the_limit(mem_scan, [scan]) == ["dgx-a100:gpu: mem_scan {'op': 'read'} plateau_gbs 350 GB/s > 342.9"]


def test_gpu_count_keeps_a_pairs_figures_off_a_four_gpu_node():
    entries = [
        {"where": {"gpu_model": "NVIDIA H200", "gpu_count": 2}, "values": {"plateau_gbs": [668, -0.1, 0.1, "GB/s"]}}
    ]
    pair = _facts(gpu_model="NVIDIA H200", gpu_count=2)
    four = _facts(gpu_model="NVIDIA H200", gpu_count=4)
    assert matching_values(entries, pair, {}) and not matching_values(entries, four, {})


@pytest.mark.slow  # parses the whole committed history: 13 s on two cores the first time after a clone
def test_every_case_an_accepted_run_ran_has_a_reference_for_each_headline_figure():
    # References come from the accepted runs (./suite accept --write-references):
    # each case they ran, on each kind of node, is judged by one. A case run
    # only outside them (a setting tried once) has none to come from. The
    # committed systems' only: a site's own accepted runs (perflogs/local) are
    # not this checkout's to test.
    import json

    from committed import accepted_files

    from experiments.keys import parse_case
    from judge.select import run_rows
    from reports.load import load
    from systems.health import baselines_in

    perflogs = Path(REFERENCES_DIR).parent.parent / "perflogs"
    missing, judged = [], 0
    for accepted_file in accepted_files():
        system = accepted_file.parent.name
        frame = load(perflogs / system, warn=None).frame
        runs = [
            run for accepted in baselines_in(json.loads(accepted_file.read_text())).values() for run in accepted["runs"]
        ]
        heads = frame[run_rows(frame, system, runs) & frame["sample"].notna()]
        keys = ["test", "case", "system", "partition", "gpu_model", "gpu_count", "host_link"]
        for (test, case, *facts), group in heads.groupby(keys):
            facts = dict(zip(keys[2:], facts))
            values = matching_values(load_entries(test), facts, parse_case(case))
            for figure in sorted(group["figure"].unique()):
                judged += 1
                if figure not in values:
                    missing.append(f"{system} {facts['gpu_model']}: {test} {case} {figure}")
    assert judged > 0, "no accepted machine's cases found: the test checked nothing"
    assert not missing, f"{len(missing)} of {judged} headline figures have no reference:\n" + "\n".join(missing[:20])


def test_a_scan_layout_is_judged_only_by_references_that_name_it():
    # The page-reach study's layouts are slower on purpose: the default
    # layout's reference must not flag them as moves, one naming the layout may judge it.
    from checks.mem_scan import mem_scan
    from experiments.references import references_for

    class Scan:
        reference_applies, layout_items = mem_scan.reference_applies, mem_scan.layout_items
        layout_variables = mem_scan.layout_variables
        current_partition = type("Partition", (), {"fullname": "dgx-a100:gpu"})()
        reference_bounds = "tolerance"

        def __init__(self, **layout):
            self.map_granularity, self.launch_span = layout.get("map_granularity", "chunk"), "chunk"

        def node_facts(self):
            return {"system": "dgx-a100"}

        def case_items(self):
            return {"op": "read", **self.layout_items()}

        def figure_limit(self, name):
            return None

    Scan.__name__ = "mem_scan"
    assert references_for(Scan())["dgx-a100:gpu"]["plateau_gbs"][0] == 260
    assert references_for(Scan(map_granularity="2M")) == {}
    study = {"where": {"system": "dgx-a100"}, "case": {"op": "read", "map_granularity": "2M"}, "values": {}}
    assert Scan(map_granularity="2M").reference_applies(study)
    assert not Scan(map_granularity="2M").reference_applies({"where": {}, "case": {"op": "read"}, "values": {}})


def test_the_nightly_holds_references_to_physical_bounds_only():
    from experiments.references import physical_bounds

    # A rate: no lower bound (the verdict judges moves), its link's limit above.
    assert physical_bounds([50.0, -0.06, None, "GB/s"], 63.0, None) == (50.0, None, 0.26, "GB/s")
    # A time: its path's floor below (0.5 us of a 1229 ns latency), nothing above.
    assert physical_bounds([1229.0, None, 0.2, "ns"], None, 0.5) == (1229.0, pytest.approx(500 / 1229 - 1), None, "ns")
    assert physical_bounds([10.0, None, 0.2, "us"], None, None) == (10.0, None, None, "us")


def test_a_physical_reference_gives_its_bound_back():
    from experiments.references import bound_of, physical_bounds

    ref, lower, upper, unit = physical_bounds([50.0, -0.06, None, "GB/s"], 63.0, None)
    assert bound_of(unit, ref, lower, upper) == pytest.approx(63.0)
    ref, lower, upper, unit = physical_bounds([1229.0, None, 0.2, "ns"], None, 0.5)
    assert bound_of(unit, ref, lower, upper) == pytest.approx(500.0)
    assert math.isnan(bound_of("GB/s", *physical_bounds([50.0, -0.06, None, "GB/s"], None, None)[:3]))
    assert math.isnan(bound_of("GB/s", 0.0, None, None))  # no reference, nothing known


def _dgx_node() -> dict:
    return next(p["node"] for p in data.load_all()["dgx-a100"]["partitions"] if "node" in p)


def test_host_memory_is_bounded_by_its_sockets_channels():
    from checks.host_bandwidth import host_bandwidth

    # EPYC 7742: 8 channels of DDR4-3200 a socket.
    assert host_bandwidth.limit_of("read_bw_node3", {}, _dgx_node()) == pytest.approx(204.8e9 / 2**30)
    unknown = {"cpu": {"model": "unknown"}, "gpus": {"count": 0}, "host_link": {"type": "none"}}
    assert host_bandwidth.limit_of("read_bw_node0", {}, unknown) is None


def test_a_daxpy_points_floor_counts_its_kernels_and_bytes():
    from checks.daxpy import daxpy

    case = {"allocator": "managed", "prefetch": "off", "data_size": "800", "rows": "100"}
    # 16 kernels of at least a microsecond each, far above the path's own kind (migration has none).
    assert daxpy.floor_us_of("kernel_us_i4_o4", case, _dgx_node()) == pytest.approx(16.0)
    assert daxpy.floor_us_of("per_kernel_us_i4_o4", case, _dgx_node()) == pytest.approx(1.0)
    # 800 KB a row: three passes over 80 MB at 2039 GB/s, 117.7 us a kernel.
    big = {**case, "data_size": "800000"}
    assert daxpy.floor_us_of("total_us_i7_o4", big, _dgx_node()) == pytest.approx(28 * 3 * 80e6 / 2039e9 * 1e6)
    assert daxpy.floor_us_of("touch_us_i4_o4", case, _dgx_node()) is None


def test_a_figure_without_a_reference_is_held_to_its_bound_alone():
    # A kind's first nights have no references; the nightly holds each figure to what the node's facts bound.
    import reframe.utility.sanity as sn

    from experiments.references import bound_of, is_bound_only, references_for

    class Check:
        current_partition = type("Partition", (), {"fullname": "new:default"})()
        reference_bounds = "physical"
        perf_variables = {
            "h2d_bw": sn.make_performance_function(1.0, "GB/s"),
            "h2d_bw.s1": sn.make_performance_function(1.0, "GB/s"),  # held through its median
            "lat_us": sn.make_performance_function(1.0, "us"),
            "of_sol": sn.make_performance_function(1.0, "fraction"),  # a ratio: no bound of its own
            "unknown_bw": sn.make_performance_function(1.0, "GB/s"),  # nothing known of its path
        }

        def node_facts(self):
            return {"system": "new"}

        def case_items(self):
            return {}

        def reference_applies(self, entry):
            return True

        def figure_limit(self, figure):
            return {"h2d_bw": 63.0}.get(figure)

        def figure_floor_us(self, figure):
            return {"lat_us": 0.5}.get(figure)

    Check.__name__ = "no_such_check"  # no references file
    found = references_for(Check())["new:default"]
    assert found == {"h2d_bw": (63.0, None, 0.0, "GB/s"), "lat_us": (0.5, 0.0, None, "us")}
    assert bound_of("GB/s", *found["h2d_bw"][:3]) == pytest.approx(63.0)
    assert bound_of("us", *found["lat_us"][:3]) == pytest.approx(0.5)
    assert is_bound_only("GB/s", *found["h2d_bw"][:3]) and is_bound_only("us", *found["lat_us"][:3])
    # ReFrame fails a rate above it and a time below it, and passes what is within.
    for unit, value, ok in (
        ("h2d_bw", 63.5, False),
        ("h2d_bw", 62.0, True),
        ("lat_us", 0.4, False),
        ("lat_us", 9, True),
    ):
        ref, lower, upper, _ = found[unit]
        if ok:
            assert sn.evaluate(sn.assert_reference(value, ref, lower, upper))
        else:
            with pytest.raises(sn.SanityError):
                sn.evaluate(sn.assert_reference(value, ref, lower, upper))
    # A run by hand is held to the references' tolerances alone.
    Check.reference_bounds = "tolerance"
    assert references_for(Check()) == {}


def test_only_a_bound_alone_is_not_drawn_as_a_reference():
    from experiments.references import is_bound_only, physical_bounds

    assert not is_bound_only("GB/s", *physical_bounds([50.0, -0.06, None, "GB/s"], 63.0, None)[:3])
    assert not is_bound_only("us", 7.2, -0.3, 0.4)
    assert not is_bound_only("GB/s", math.nan, math.nan, math.nan)
    assert is_bound_only("GB/s", 63.0, math.nan, 0.0)  # as the loader reads a perflog's empty field
