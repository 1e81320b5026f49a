"""Every program, run with inputs nobody here wrote, on a machine without a GPU.

Each bad value must end the program with exit status 2 and a message that
names the option, before CUDA starts (so the error is the same on a GPU node);
each good value must get past the options (here it then fails on the missing
driver, which is not exit status 2). The size parser itself is tested on the
host with a small C++ driver, as test_checksums does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from host_cpp import build_driver

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
#: Where ``./suite test`` builds every program (build_all in ./suite).
BUILD = Path(os.environ.get("GPU_MEMPATHS_BUILD", REPO / "build" / "all-archs"))
PROGRAMS = ["um_bandwidth", "daxpy", "copy_latency", "host_bandwidth", "mem_scan", "p2p_pingpong", "path_matrix"]


def _cases(name: str) -> list[tuple]:
    """The rows of tests/data/<name>: 'program | arguments[ | option]', '#' comments;
    arguments split at spaces (none of them holds one), '' an empty one."""
    rows = []
    for line in (REPO / "tests" / "data" / name).read_text().splitlines():
        line = line.split("  #", 1)[0].strip()
        if line and not line.startswith("#"):
            program, args, *option = (field.strip() for field in line.split("|"))
            rows.append((program, ["" if a == "''" else a for a in args.split()], *option))
    return rows


@pytest.fixture(scope="module")
def built() -> Path:
    """The build directory, brought up to date with the sources (configured
    here if ./suite test has not; an up-to-date build takes a second)."""
    if os.environ.get("GPU_MEMPATHS_BUILD") and all((BUILD / p).exists() for p in PROGRAMS):
        return BUILD  # a build made elsewhere for these sources (the GPU node's)
    cmake = shutil.which("cmake")
    assert cmake, "cmake is needed to build the programs under test"
    if not (BUILD / "CMakeCache.txt").exists():
        subprocess.run([cmake, "-S", str(REPO / "src"), "-B", str(BUILD)], check=True)
    subprocess.run([cmake, "--build", str(BUILD), "-j", str(os.cpu_count() or 1)], check=True)
    return BUILD


@pytest.fixture(scope="module")
def run(built):
    # No program links the CUDA driver (mem_scan finds its VMM calls at run
    # time): each starts and checks its options where none is installed.
    env = dict(os.environ)

    def _run(program: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(built / program), *args], capture_output=True, text=True, env=env, timeout=60)

    return _run


# (program, arguments, the option the message must name)
BAD = _cases("bad_inputs.txt")


@pytest.mark.parametrize("program,args,option", BAD, ids=[f"{p} {' '.join(a)}" for p, a, _ in BAD])
def test_bad_input_is_a_named_error(run, program, args, option):
    result = run(program, *args)
    assert result.returncode == 2, f"exit {result.returncode}: {result.stdout}{result.stderr}"
    assert option in result.stderr, result.stderr
    assert "CUDA error" not in result.stderr  # refused before CUDA started
    assert not result.stdout, "nothing measured or printed before the error"


# Values the parser must take: each gets past the options (and then meets the
# missing GPU, or its absence is reported, but not as a usage error).
GOOD = _cases("good_inputs.txt")


@pytest.mark.parametrize("program,args", GOOD, ids=[f"{p} {' '.join(a)}" for p, a in GOOD])
def test_good_input_gets_past_the_options(run, program, args):
    result = run(program, *args)
    if program == "p2p_pingpong" and "the ping-pong needs two" in result.stderr:
        pytest.skip("a node of one GPU has no pair for the ping-pong: its devices are an argument error there")
    assert result.returncode != 2, result.stderr
    assert "see --help" not in result.stderr


def test_host_bandwidth_measures_with_good_input(run):
    result = run("host_bandwidth", "--size", "4M", "--runs", "1", "--op", "read", "--nodes", "0")
    assert result.returncode == 0, result.stderr
    assert "Bandwidth: node=0 op=read gibs=" in result.stdout


def test_two_gpu_programs_say_what_they_do_on_one(run):
    """mem_scan prints Skipped and exits 0 with fewer than two GPUs; the
    ping-pong, whose devices are named, calls either missing one an argument
    error; --help says so, and that the checks never run them there (tested
    in test_dryrun)."""
    help_text = run("mem_scan", "--help").stdout
    assert "Skipped" in help_text and "never runs it there" in help_text
    help_text = run("p2p_pingpong", "--help").stdout
    assert "argument error" in help_text and "never runs it there" in help_text


# ------------------------------------------------------- the size parser --

SIZE_DRIVER = r"""
#include <cstdio>
#include "suite.hpp"
int main(int argc, char **argv) {
    for (int i = 1; i < argc; ++i) {
        std::uint64_t v = 0;
        if (suite::parse_bytes(argv[i], v)) std::printf("%llu\n", static_cast<unsigned long long>(v));
        else std::puts("reject");
    }
}
"""

SIZES = {
    "4096": 4096,
    "4096B": 4096,
    "4096b": 4096,
    "64K": 65536,
    "64k": 65536,
    "64KB": 65536,
    "64KiB": 65536,
    "1.5M": 1572864,
    "32G": 32 << 30,
    "1T": 1 << 40,
    "18446744073709551615": 2**64 - 1,
    "0": 0,
    "1.0": 1,
    "": None,
    "nan": None,
    "nanx": None,
    "inf": None,
    "1e30": None,
    "1e3": None,
    "-1": None,
    "+1": None,
    " 1": None,
    "1 ": None,
    "0x10": None,
    "1.": None,
    ".5K": None,
    "0.1K": None,
    "1.5": None,
    "16777215T": (2**24 - 1) << 40,
    "16777216T": None,
    "18446744073709551616": None,
    "99999999999999999999999": None,
    "32GG": None,
    "32Gi": None,
    "32iB": None,
    "1P": None,
    "4096BB": None,
}


@pytest.fixture(scope="module")
def parse_bytes(tmp_path_factory):
    driver = build_driver(tmp_path_factory.mktemp("sizes"), SIZE_DRIVER)

    def _parse(texts: list[str]) -> list[int | None]:
        out = subprocess.run([str(driver), *texts], capture_output=True, text=True, check=True).stdout
        return [None if line == "reject" else int(line) for line in out.splitlines()]

    return _parse


def test_parse_bytes(parse_bytes):
    texts = list(SIZES)
    assert dict(zip(texts, parse_bytes(texts))) == SIZES


# ------------------------------------------------------------ on a GPU node --

needs_gpu = pytest.mark.skipif(not Path("/dev/nvidiactl").exists(), reason="needs a GPU node (its log is committed)")

# What only a GPU node can refuse: a device that is not there, and more
# memory than the GPU has free, each an argument error naming the option.
ON_GPU = _cases("bad_inputs_on_gpu.txt")


@needs_gpu
@pytest.mark.parametrize("program,args,option", ON_GPU, ids=[f"{p} {' '.join(a)}" for p, a, _ in ON_GPU])
def test_on_a_gpu_node_what_the_gpu_cannot_do_is_a_named_error(run, program, args, option):
    result = run(program, *args)
    assert result.returncode == 2, f"exit {result.returncode}: {result.stdout}{result.stderr}"
    assert option in result.stderr, result.stderr
    print(f"{program} {' '.join(args)}: exit 2: {result.stderr.strip()}")


def test_every_program_starts_without_a_cuda_driver(run):
    """--help works where no driver is installed: no program links libcuda
    (mem_scan finds the driver's VMM calls at run time)."""
    for program in PROGRAMS:
        result = run(program, "--help")
        assert result.returncode == 0 and "usage:" in result.stdout, f"{program}: {result.stderr}"


def test_no_program_links_the_cuda_driver(built):
    """So that the test above means the same on a machine with a driver."""
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("no readelf")
    for program in PROGRAMS:
        needed = subprocess.run([readelf, "-d", str(built / program)], capture_output=True, text=True).stdout
        assert "libcuda.so" not in needed, f"{program} links the CUDA driver"


#: A GPU past the visible ones: an argument error on a GPU node (bad_inputs_on_gpu.txt); where no
#: driver lets CUDA count the GPUs, the option named with why, never a CUDA error naming a call.
PAST_THE_GPUS = [
    ("copy_latency", ["--device", "99"], "option '--device'"),
    ("um_bandwidth", ["--size", "1G", "--device", "99"], "option '--device'"),
    ("daxpy", ["--device", "99"], "option '--device'"),
    ("p2p_pingpong", ["--src-device", "0", "--dst-device", "99"], "options '--src-device' and '--dst-device'"),
    ("path_matrix", ["--gpus", "0,99"], "option '--gpus'"),
    ("mem_scan", ["--gpus", "16"], "option '--gpus'"),
]


@pytest.mark.parametrize("program,args,option", PAST_THE_GPUS, ids=[p for p, _, _ in PAST_THE_GPUS])
def test_a_gpu_past_the_visible_ones_is_named_by_its_option_with_or_without_a_driver(run, program, args, option):
    result = run(program, *args)
    assert result.returncode != 0 and option in result.stderr, result.stderr
    assert "CUDA error" not in result.stderr
    if not Path("/dev/nvidiactl").exists():  # CI: no driver to count the GPUs with
        assert "cannot be checked: CUDA cannot count this node's GPUs" in result.stderr, result.stderr
