"""um_bandwidth: what its program prints and what it means (parsing and
derivations), free of ReFrame; checks/um_bandwidth.py runs it, reports/ draw it."""

from __future__ import annotations

import re
import statistics

NAME = "um_bandwidth"

GiB = 2**30


# Advice only means something for managed memory, so allocator and advice
# are swept together: every managed advice of the seed, and the other
# allocators plain.
MEMORY_CASES = [
    ("managed", "none"),
    ("managed", "accessed-by"),
    ("managed", "read-mostly"),
    ("managed", "preferred-location-cpu"),
    ("numa", "none"),
    ("pinned", "none"),
    ("device", "none"),
]


#: Where the data of each allocator can be when the GPU reads it in the
#: steady state: managed memory may migrate to the GPU, device memory is there.
RESIDENT_ON_GPU = {"managed", "device"}


THROUGHPUT_LINE = r"^Throughput: (?P<bw>\S+) GiB/s"


COPY_ENGINE_LINE = r"^Copy engine {direction}: \S+ GiB/s \(samples (?P<samples>[0-9.,]+)\)"


def parse_throughputs(text: str) -> list:
    """Every run's throughput, from this program's or the seed's output."""
    return [float(m) for m in re.findall(THROUGHPUT_LINE, text, re.MULTILINE)]


def steady_state(runs: list) -> float:
    """Median of runs 2..N: the first run pays for migration and page faults."""
    if len(runs) < 2:
        raise ValueError("the steady state needs at least two runs")
    return statistics.median(runs[1:])


# ------------------------------------------------------------ in the report --

#: What the report's figures mean.
NOTE = (
    "'steady' is the median of runs 2..N; the copy engine is measured by the same program in the same run "
    "(cudaMemcpy from pinned memory); the speed of light is the host link's per direction."
)
#: The report's table: these figures' medians per case.
TABLE_VARIABLES = ["first_run_bw", "steady_bw", "copy_engine_bw", "steady_of_copy_engine", "steady_of_link"]
