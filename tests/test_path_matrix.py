"""The path matrix (checks/path_matrix.py): its cells from the system data,
their names from the program's records, their limits, the sanity that names
a missing or unreachable cell, and the report's heat maps."""

from pathlib import Path

import pandas as pd
import pytest
import reframe.utility.sanity as sn

from checks import path_matrix as pm
from experiments.path_matrix import CASES, MATRICES, cell_name, describe, expected_cells, samples_by_cell
from reports.figures.path_matrix import cell_label, cell_table, path_heat_maps
from systems import data


def node_of(system: str) -> dict:
    return data.load_all()[system]["partitions"][0]["node"]


def test_a_two_gpu_pcie_node_has_every_gpu_numa_pair_and_latency_cell():
    # x86-pcie's 2 V100 on PCIe Gen3 hang off two sockets: no peer cells.
    declared = node_of("x86-pcie")
    assert expected_cells(declared, [0, 1], "peer") == []
    # Under one socket's PCIe switch they are peers through the fabric.
    node = {**declared, "gpus": {**declared["gpus"], "numa_affinity": [0, 0]}, "gpu_link": {"type": "pcie"}}
    cells = [c for m in MATRICES for c in expected_cells(node, [0, 1], m)]
    host = expected_cells(node, [0, 1], "host")
    assert len(host) == 2 * 2 * 2 * 4  # GPUs x NUMA nodes x engines x (h2d, d2h, each alone and both at once)
    assert {"gpu1_d2h_numa0_both_sm", "gpu0_h2d_allgpus_ce", "gpu1_read_gpu0_sm", "gpu0_write_gpu1_both_ce"} <= set(
        cells
    )
    assert not [c for c in cells if c.endswith("_bulk")]  # Volta has no bulk copies
    assert {"gpu0_latency_numa1", "gpu1_latency_gpu0"} <= set(cells)
    assert len(cells) == len(set(cells))


def test_hopper_pairs_add_bulk_reads_and_every_nvswitch_pair_is_a_cell():
    node = node_of("dgx-a100")
    node = {**node, "gpus": {**node["gpus"], "compute_capability": "9.0"}}
    cells = expected_cells(node, node["numa_nodes"], "peer")
    assert len([c for c in cells if c.endswith("_bulk") and "_both_" not in c]) == 8 * 7
    # Each case's figures stay in the hundreds (ReFrame formats them all into each perflog line).
    assert max(len(expected_cells(node, node["numa_nodes"], *case)) for case in CASES) <= 8 * 8 * 4
    assert "gpu7_read_gpu3_both_bulk" in cells and "gpu3_write_gpu7_bulk" not in cells


@pytest.mark.parametrize(
    "line, name",
    [
        ("path=host engine=ce op=copy dir=h2d gpu=0 peer=-1 numa=1", "gpu0_h2d_numa1_ce"),
        ("path=host engine=sm op=copy dir=d2h-both gpu=1 peer=-1 numa=-1", "gpu1_d2h_unbound_both_sm"),
        ("path=host-all engine=ce op=copy dir=d2h gpu=3 peer=-1 numa=1", "gpu3_d2h_allgpus_ce"),
        ("path=peer engine=bulk op=read dir=both gpu=1 peer=0 numa=-1", "gpu1_read_gpu0_both_bulk"),
        ("path=latency engine=sm op=chase dir=peer gpu=0 peer=1 numa=-1", "gpu0_latency_gpu1"),
        ("path=latency engine=sm op=chase dir=host gpu=0 peer=-1 numa=0", "gpu0_latency_numa0"),
    ],
)
def test_each_record_of_the_program_names_its_cell(line, name):
    from experiments.records import fields

    assert cell_name(fields(line)) == name


def test_cells_read_in_words_and_against_their_own_link():
    assert describe("gpu1_read_gpu0_sm") == "GPU 1 -> GPU 0 read, SM"
    assert describe("gpu0_d2h_numa1_both_ce") == "GPU 0 GPU -> host (NUMA node 1), copy engine, both ways at once"
    assert describe("gpu2_latency_gpu5") == "GPU 2 latency through GPU 5"
    node = node_of("dgx-a100")  # 12 NVLink3 links per GPU to NVSwitch: 300 GB/s; PCIe Gen4 x16 to the host
    assert pm.path_matrix.limit_of("gpu3_read_gpu5_sm", {}, node) == pytest.approx(300, rel=0.01)
    assert pm.path_matrix.limit_of("gpu0_h2d_numa0_ce", {}, node) == pytest.approx(data.host_link_bandwidth(node) / 1e9)
    assert pm.path_matrix.limit_of("gpu0_latency_numa0", {}, node) is None


def output(tmp_path, cells: dict, samples: int = 3, extra: str = "") -> str:
    """A program output with `samples` samples of each cell {record fields: GB/s}."""
    lines = [
        f"Cell: {fields} sample={k} bytes=268435456 seconds=0.005 gbs={gbs}"
        for fields, gbs in cells.items()
        for k in range(1, samples + 1)
    ]
    path = tmp_path / "out"
    path.write_text("\n".join([*lines, extra, f"Verified: cells={len(cells)} samples={samples}"]) + "\n")
    return str(path)


def test_a_cell_missing_from_the_output_fails_the_sanity_naming_it(tmp_path):
    out = output(tmp_path, {"path=peer engine=sm op=read dir=one gpu=1 peer=0 numa=-1": 370.0})
    assert sn.evaluate(pm.cell_samples(out, "gpu1_read_gpu0_sm", 3)) == [370.0] * 3
    with pytest.raises(sn.SanityError, match=r"GPU 0 -> GPU 1 read, SM \(gpu0_read_gpu1_sm\): 0 samples, expected 3"):
        sn.evaluate(pm.cell_samples(out, "gpu0_read_gpu1_sm", 3))


def test_a_joined_pair_that_does_not_reach_fails_the_sanity(tmp_path):
    out = output(tmp_path, {}, extra="Unreachable: gpu=3 peer=5 reason=cudaDeviceCanAccessPeer is 0")
    assert sn.evaluate(pm.joined_pairs_reach(out, [(0, 1)]))
    with pytest.raises(sn.SanityError, match="GPU 3 and GPU 5: no peer access, though the system data joins them"):
        sn.evaluate(pm.joined_pairs_reach(out, [(3, 5)]))


RUNS = Path(__file__).parent / "data" / "runs"


@pytest.mark.parametrize("case", ["host-ce", "host-sm", "latency-sm"])
def test_an_h100_run_gives_every_cell_of_its_case_with_every_sample(case):
    # The program's output on one H100 on PCIe Gen5 with one NUMA node (nvcc
    # 13.0, 2026-11-23): the cells the check expects there, five samples each.
    node = node_of("x86-pcie")
    node = {**node, "gpus": {**node["gpus"], "count": 1}}
    matrix, engine = case.rsplit("-", 1)
    text = (RUNS / f"path_matrix_h100_{case}.out").read_text()
    found = samples_by_cell(text)
    assert sorted(found) == sorted(expected_cells(node, [0], matrix, engine))
    assert all(len(samples) == 5 for samples in found.values())
    assert f"\nVerified: cells={len(found)} samples=5\n" in text


def test_an_h100_run_is_near_its_link_and_beside_nvbandwidth():
    # Same node, same session: NVIDIA's nvbandwidth v0.8 (512 MiB, -i 5) gave
    # 55.08/54.94 GB/s by copy engine and 51.01/52.36 by SMs (host to device,
    # device to host), 1193 ns host latency; the path matrix agrees within 1%
    # on the one-way cells (its chase is random and uncached, nvbandwidth's a
    # fixed 128-byte stride: 3% apart).
    cells = {}
    for case in ("host-ce", "host-sm", "latency-sm"):
        cells.update(samples_by_cell((RUNS / f"path_matrix_h100_{case}.out").read_text()))
    median = {cell: sorted(values)[len(values) // 2] for cell, values in cells.items()}
    nvbandwidth = {
        "gpu0_h2d_numa0_ce": 55.08,
        "gpu0_d2h_numa0_ce": 54.94,
        "gpu0_h2d_numa0_sm": 51.01,
        "gpu0_d2h_numa0_sm": 52.36,
        "gpu0_latency_numa0": 1192.97,
    }
    for cell, theirs in nvbandwidth.items():
        assert median[cell] == pytest.approx(theirs, rel=0.01 if "latency" not in cell else 0.04), cell
    assert median["gpu0_d2h_numa0_sm"] > 0.8 * 63.0  # PCIe Gen5 x16: 63 GB/s per direction before framing


def records_of_a_pair(slow: float = 1.0) -> pd.DataFrame:
    """A run on two H200 joined by NV18 (478 GB/s): peer reads, one slow by `slow`, with their limits."""
    rows = []
    for figure, value in (
        ("gpu0_read_gpu1_sm", 376.0),
        ("gpu1_read_gpu0_sm", 376.0 * slow),
        ("gpu0_h2d_numa0_ce", 55.0),
        ("gpu0_latency_gpu1", 1650.0),
    ):
        unit = "ns" if "latency" in figure else "GB/s"
        base = {
            "test": "path_matrix",
            "system": "local",
            "partition": "default",
            "gpu_model": "H200",
            "host_link": "pcie gen5 x16",
            "driver_version": "580",
            "cuda_version": "13.0",
            "cuda_runtime_version": "13.0",
            "node": "n1",
            "time": pd.Timestamp("2026-11-23T12:00Z"),
            "params": "",
            "unit": unit,
            "ref": 0.0,
        }
        rows.append({**base, "figure": figure, "sample": None, "value": value})
        if unit == "GB/s":
            limit = 478.0 if "gpu1" in figure and "read" in figure or "read_gpu1" in figure else 63.0
            rows.append({**base, "figure": f"limit_{figure}", "sample": None, "value": limit})
    return pd.DataFrame(rows)


def test_the_heat_maps_place_each_cell_with_its_limit(tmp_path):
    table = cell_table(records_of_a_pair(slow=0.5)).set_index("figure")
    slow = table.loc["gpu1_read_gpu0_sm"]
    assert (slow["matrix"], slow["panel"], slow["row"], slow["column"]) == ("peer", "read, SM", "GPU 1", "GPU 0")
    assert slow["median"] / slow["limit"] == pytest.approx(188 / 478)
    assert table.loc["gpu0_latency_gpu1", "matrix"] == "latency"
    figures = path_heat_maps(records_of_a_pair(), Path(tmp_path))
    assert sorted(f.path.name.split("-")[1] for f in figures) == ["host", "latency", "peer"]
    assert all(f.path.is_file() for f in figures)


def test_a_cells_label_never_turns_to_e_notation():
    cell = {"median": 1237.4, "limit": float("nan"), "accepted": 1231.0}
    assert cell_label(cell) == "1237\nacc. 1231"
    assert cell_label({"median": 52.13, "limit": 63.0, "accepted": 0.8734}) == "52.1\n83% of 63\nacc. 0.873"
