"""GDRCopy's test outputs for tests/test_gdrcopy*.py: the seed's, and GDRCopy
2.5's and 2.6's, and the job outputs the checks read."""

import re
from pathlib import Path

from experiments.gdrcopy import copylat_sizes

DATA = Path(__file__).parent / "data"
SEED_NODE = {
    "system": "local",
    "partition": "default",
    "gpu_model": "Tesla V100-SXM2-32GB",
    "host_link": "pcie gen3 x16",
}
GDR_ROWS = ["gdr_copy_to_mapping", "gdr_copy_from_mapping"]
ALL_ROWS = [*GDR_ROWS, "cuMemcpy_H2D", "cuMemcpy_D2H"]
SIZES_16M = copylat_sizes(16 * 2**20)
LIBGDRAPI = "libgdrapi: /opt/gdrcopy/lib/libgdrapi.so.2.6\n"


def seed_outputs() -> dict:
    """The seed's outputs by the command line that printed them."""
    outputs, command, lines = {}, None, []
    for line in (DATA / "gdrcopy_seed_tests.md").read_text().splitlines():
        if line.startswith("$ "):
            if command:
                outputs[command] = "\n".join(lines).rstrip("\n") + "\n"
            command, lines = line[2:].strip(), []
        elif line.startswith("```"):
            if command:
                outputs[command] = "\n".join(lines).rstrip("\n") + "\n"
            command, lines = None, []
        elif command:
            lines.append(line)
    return outputs


def fixture_text(name: str) -> str:
    return (DATA / "gdrcopy" / name).read_text()


def job_output(*runs: str, libgdrapi: str = LIBGDRAPI) -> str:
    """A job's output as the checks' scripts write it: the libgdrapi line,
    then each run after its "Repeat: k of n" line."""
    return libgdrapi + "".join(f"Repeat: {k} of {len(runs)}\n{run}" for k, run in enumerate(runs, start=1))


def line_number(text: str, line: str, occurrence: int = 1) -> int:
    """The number of the `occurrence`-th line of `text` that is `line`."""
    numbers = [n for n, found in enumerate(text.splitlines(), start=1) if found == line]
    return numbers[occurrence - 1]


def names(text: str, line: str, occurrence: int = 1) -> str:
    """The pattern of an error that names that line as the parsers do."""
    return re.escape(f"line {line_number(text, line, occurrence)}: {line!r}")


def replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


NUMA0 = "numactl -N 0 -l copybw -d 0 -s $((64 * 1024)) -o $((0 * 1024)) -c $((64 * 1024))"
NUMA1 = "numactl -N 1 -l copybw -d 0 -s $((64 * 1024)) -o $((0 * 1024)) -c $((64 * 1024))"
