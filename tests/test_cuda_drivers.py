"""The minimum driver follows from the toolkit a system builds with."""

import copy

import pytest

from systems import data
from systems.cuda_drivers import minimum_driver, newest


@pytest.mark.parametrize(
    ("cuda", "driver"),
    [
        ("10.1", "418.39"),
        ("10.2.89", "440.33"),
        ("11.0", "450.80.02"),
        ("11.7.1", "450.80.02"),
        ("12.2.140", "525.60.13"),
        ("12.9", "525.60.13"),
        ("13.0.88", "580.65.06"),
    ],
)
def test_each_toolkit_names_its_oldest_driver(cuda, driver):
    assert minimum_driver(cuda) == driver


def test_an_unknown_toolkit_is_an_error_not_a_guess():
    with pytest.raises(ValueError, match="CUDA 9.2: no minimum driver known"):
        minimum_driver("9.2")


def test_versions_compare_as_numbers():
    assert newest("470.82", "525.60.13", None) == "525.60.13"
    assert newest("580.9", "580.65.06") == "580.65.06"
    assert newest(None) is None


@pytest.mark.parametrize(
    ("system", "driver"),
    [("summit", "450.80.02"), ("ac922", "450.80.02"), ("dgx-a100", "525.60.13"), ("x86-pcie", "525.60.13")],
)
def test_every_declared_system_needs_the_driver_of_its_toolkits(system, driver):
    described = data.load_all()[system]
    assert all(data.driver_min(described, part) == driver for part in described["partitions"])


def test_a_driver_older_than_the_toolkit_needs_is_refused():
    summit = copy.deepcopy(data.load_all()["summit"])
    summit["partitions"][0]["health"]["driver_min"] = "418.67"
    with pytest.raises(data.SystemDataError, match=r"driver_min: 418.67 is older than the 450.80.02"):
        data.validate(summit, "summit.yaml")
    summit["partitions"][0]["health"]["driver_min"] = "535.54.03"  # a site may ask for more
    assert data.driver_min(data.validate(summit, "summit.yaml"), summit["partitions"][0]) == "535.54.03"


def test_a_cuda_module_and_the_declared_toolkit_agree():
    summit = copy.deepcopy(data.load_all()["summit"])
    summit["environments"][0]["cuda"] = "12.0"
    with pytest.raises(data.SystemDataError, match=r"the module cuda/11.7.1 builds with CUDA 11.7.1"):
        data.validate(summit, "summit.yaml")
