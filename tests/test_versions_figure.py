"""The HTML report's overlay of CUDA versions (reports/figures/versions.py):
each headline figure's samples under every version, against the oldest's median."""

from pathlib import Path

import pandas as pd
import pytest

from reports.figures.versions import version_shifts, versions_figures


def records(planted: str | None = None, compiler_13_5: str = "NVIDIA 13.0.88") -> pd.DataFrame:
    """One machine's um_bandwidth under runtimes 13.0 and 13.5, five samples of
    two figures each; `planted` 20% down under 13.5."""
    rows = []
    for runtime, compiler in (("13.0", "NVIDIA 13.0.88"), ("13.5", compiler_13_5)):
        for figure, level in (("steady_bw", 47.0), ("copy_engine_bw", 51.0)):
            level *= 0.8 if runtime == "13.5" and figure == planted else 1.0
            rows += [
                {
                    "test": "um_bandwidth",
                    "system": "local",
                    "partition": "default",
                    "gpu_model": "H100",
                    "host_link": "pcie gen5 x16",
                    "driver_version": "580.159.04",
                    "node": "vm",
                    "cuda_version": "13.0",
                    "cuda_runtime_version": runtime,
                    "cuda_compiler": compiler,
                    "params": "op=read",
                    "figure": figure,
                    "sample": k,
                    "value": level * (1 + k / 1000),
                    "time": pd.Timestamp("2026-11-23T09:00Z"),
                }
                for k in range(1, 6)
            ]
    return pd.DataFrame(rows)


def test_each_sample_is_a_share_of_the_oldest_versions_median():
    shifts = version_shifts(records(planted="steady_bw"))
    assert set(shifts["base"]) == {"13.0, NVIDIA 13.0.88"}
    medians = shifts.groupby(["version", "figure_key"])["percent"].median().round(1).to_dict()
    assert medians == {
        ("13.0, NVIDIA 13.0.88", "op=read copy_engine_bw"): 100.0,
        ("13.0, NVIDIA 13.0.88", "op=read steady_bw"): 100.0,
        ("13.5, NVIDIA 13.0.88", "op=read copy_engine_bw"): 100.0,
        ("13.5, NVIDIA 13.0.88", "op=read steady_bw"): 80.0,
    }


def test_the_oldest_release_is_the_base_whatever_the_order(tmp_path):
    frame = records()
    frame.loc[frame["cuda_runtime_version"] == "13.0", ["cuda_runtime_version", "cuda_compiler"]] = [
        "12.9",
        "Clang 22.1.8",
    ]
    assert set(version_shifts(frame.iloc[::-1])["base"]) == {"12.9, Clang 22.1.8"}


@pytest.mark.parametrize("compiler, drawn", [("NVIDIA 13.0.88", 1), ("unknown", 0)])
def test_a_machine_with_two_known_versions_gets_one_figure(tmp_path, compiler, drawn):
    figures = versions_figures(records(compiler_13_5=compiler), Path(tmp_path))
    assert len(figures) == drawn  # a record that names no compiler is no version to compare
    for figure in figures:
        assert figure.test == "um_bandwidth" and figure.path.is_file()
        assert "13.0, NVIDIA 13.0.88" in figure.caption
    assert versions_figures(records().query("cuda_runtime_version == '13.0'"), Path(tmp_path)) == []
