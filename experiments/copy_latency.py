"""copy_latency: what its program prints and what it means (parsing and
derivations), free of ReFrame; checks/copy_latency.py runs it, reports/ draw it."""

from __future__ import annotations

import re

from experiments.records import numbers, records, require

#: Methods that every node with a GPU has; GDRCopy's is added where the
#: partition declares (or detection finds) gdrdrv.
BASE_METHODS = ["pageable", "pinned", "async", "zerocopy"]

NAME = "copy_latency"


GDRCOPY_METHOD = "gdrcopy"


DIRECTIONS = ["h2d", "d2h"]


#: The sizes whose latencies are headline figures: a word, a page, 64 KiB, 1 MiB.
HEADLINE_SIZES = [8, 4096, 65536, 1048576]


_VERIFIED = re.compile(r"^Data verified: (?P<cases>\d+) cases", re.MULTILINE)


def _latency_records(text: str) -> list:
    names = ["method", "direction", "size", "median_us", "min_us"]
    return [require(r, names, "Latency") for r in records(text, "Latency")]


def parse_latencies(text: str, statistic: str = "median") -> dict:
    """{(method, direction): {size: microseconds}} from the program's output;
    `statistic` is 'median' or 'min'."""
    curves: dict = {}
    for r in _latency_records(text):
        curves.setdefault((r["method"], r["direction"]), {})[int(r["size"])] = float(r[f"{statistic}_us"])
    return curves


def parse_block_medians(text: str) -> dict:
    """{(method, direction, size): [block medians in microseconds]} from the program's output."""
    return {
        (r["method"], r["direction"], int(r["size"])): list(numbers(r["block_medians_us"]))
        for r in _latency_records(text)
        if r.get("block_medians_us")
    }


def parse_skipped(text: str) -> dict:
    """{method: reason} for the legs the program could not run."""
    return {r["method"]: r.get("reason", "").strip() for r in records(text, "Skipped") if "method" in r}


def parse_verified(text: str) -> int:
    """How many cases the program verified (0 when it did not finish)."""
    m = _VERIFIED.search(text)
    return int(m["cases"]) if m else 0


def crossover(a: dict, b: dict) -> int | None:
    """The smallest size from which `b` is faster than `a` at that size and
    at every larger one, where `a` leads at the smallest common size; None
    when `a` does not lead at the start or `b` does not lead at the end.

    Curves are {size: latency}; only sizes both have are compared, so a
    crossover is always a measured size (the first of b's lasting lead).
    """
    sizes = sorted(set(a) & set(b))
    if len(sizes) < 2 or not a[sizes[0]] < b[sizes[0]] or not b[sizes[-1]] < a[sizes[-1]]:
        return None
    first = sizes[-1]
    for size in reversed(sizes):
        if not b[size] < a[size]:
            break
        first = size
    return first


def crossovers(curves: dict) -> dict:
    """{'crossover_<dir>_<b>_over_<a>': size} for every direction and ordered
    pair of methods whose curves cross (see :func:`crossover`)."""
    found = {}
    for direction in DIRECTIONS:
        methods = sorted(m for (m, d) in curves if d == direction)
        for a in methods:
            for b in methods:
                if a == b:
                    continue
                size = crossover(curves[(a, direction)], curves[(b, direction)])
                if size is not None:
                    found[f"crossover_{direction}_{b}_over_{a}"] = size
    return found


def perf_name(method: str, direction: str, size: int) -> str:
    return f"lat_us_{method}_{direction}_{size}"


_PERF_NAME = re.compile(r"^lat_us_(?P<method>\w+)_(?P<direction>h2d|d2h)_(?P<size>\d+)$")


def copy_size(figure: str) -> int | None:
    """'lat_us_pinned_h2d_4096' -> 4096: the bytes a latency figure copies; None for another figure."""
    match = _PERF_NAME.match(figure)
    return int(match["size"]) if match else None


def curve_figures(lines: list[str], figures: dict) -> dict:
    """The figures of a kept curve (its lines), beside the run's logged `figures`."""
    # Every size's median, and the crossovers of the whole curves.
    curves = parse_latencies("\n".join(lines))
    found = {perf_name(m, d, size): (us, "us") for (m, d), curve in curves.items() for size, us in curve.items()}
    found.update({name: (size, "B") for name, size in crossovers(curves).items()})
    return found


#: What reads each test's kept curve back as figures (reports/curves.py).
CURVE_FIGURES = {"copy_latency": curve_figures}


# ------------------------------------------------------------ in the report --

NOTE = (
    "median of timed copies per size; the dashed line is size divided by the host link's speed of light per direction."
)
#: Sizes of the report's table; the figure has every size.
TABLE_SIZES = [1, 64, 1024, 4096, 16384, 65536, 2**20, 2**24]
TABLE_CAPTION = (
    "Median latency (µs) at a few sizes; 'overtakes': the method is faster than the one named from that size "
    "on (experiments.copy_latency.crossovers on the medians)."
)
