"""um_bandwidth: what its program prints and what it means (parsing and
derivations), free of ReFrame; checks/um_bandwidth.py runs it, reports/ draw it."""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass

from experiments.records import numbers, records, require

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


#: The seed's own output: a prose line per run ("Throughput: 63.49 GiB/s").
SEED_THROUGHPUT_LINE = r"^Throughput: (?P<bw>\S+) GiB/s"


def parse_seed_throughputs(text: str) -> list:
    """Every run's throughput in the seed's output (and this program's before
    its records), to compare with."""
    return [float(m) for m in re.findall(SEED_THROUGHPUT_LINE, text, re.MULTILINE)]


#: The copy engine's directions, by the op whose data flow they follow.
COPY_DIRECTION = {"read": "h2d", "write": "d2h"}


@dataclass(frozen=True)
class Output:
    """What the program measured, from its records (src/um_bandwidth: its header
    names them): the kernel's op, every run's throughput in GiB/s by repeat and
    run, the copy engine's samples per direction, what was verified, and the
    driver's refusal of the advice where it refused it."""

    op: str | None
    throughputs: list[tuple[int, int, float]]
    copy_engine: dict[str, tuple[float, ...]]
    verified: dict[str, str] | None
    advice_rejected: str | None

    def per_repeat(self, repeats: int, runs: int) -> list[list[float]]:
        """Each repeat's runs in order; an error naming what is missing."""
        found = {(r, k): v for r, k, v in self.throughputs}
        wanted = [(r, k) for r in range(1, repeats + 1) for k in range(1, runs + 1)]
        if sorted(found) != wanted:
            raise ValueError(
                f"{len(self.throughputs)} Throughput records for {repeats} repeats of {runs} runs "
                f"(missing {sorted(set(wanted) - set(found))[:5]})"
            )
        return [[found[(r, k)] for k in range(1, runs + 1)] for r in range(1, repeats + 1)]

    def copy_engine_samples(self, op: str) -> tuple[float, ...]:
        """The copy engine's samples in the direction of `op`'s data flow."""
        direction = COPY_DIRECTION[op]
        if not self.copy_engine.get(direction):
            raise ValueError(f"no CopyEngine record of direction {direction}")
        return self.copy_engine[direction]


def parse_output(text: str) -> Output:
    """The program's records (experiments/records.py's grammar), checked:
    each CopyEngine record's sample count is the number of its values."""
    kernels = records(text, "Kernel")
    engine = {}
    for r in records(text, "CopyEngine"):
        require(r, ["direction", "samples", "values"], "CopyEngine")
        values = numbers(r["values"])
        if len(values) != int(r["samples"]):
            raise ValueError(f"CopyEngine {r['direction']}: samples={r['samples']} but {len(values)} values")
        engine[r["direction"]] = values
    throughputs = [
        (int(r["repeat"]), int(r["run"]), float(r["gibs"]))
        for r in (require(x, ["repeat", "run", "gibs"], "Throughput") for x in records(text, "Throughput"))
    ]
    verified = records(text, "Verified")
    rejected = records(text, "AdviceRejected")
    return Output(
        op=kernels[-1].get("op") if kernels else None,
        throughputs=throughputs,
        copy_engine=engine,
        verified=verified[-1] if verified else None,
        advice_rejected=rejected[0].get("reason") if rejected else None,
    )


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
