#!/usr/bin/env python3
"""The suite's programs as a node with one H100 (or GPU_MEMPATHS_FAKE_GPUS of
them, path_matrix alone) would run them, minus the GPU.

Installed under each program's name by src/CMakeLists.txt here (the fake
build of tests/test_fake_gpu.py); it prints what the real program prints,
in the same format, for the options the checks pass, with values drawn
around one H100's figures with a small run-to-run noise.

    GPU_MEMPATHS_FAKE_SEED      seeds the noise (a node's "session")
    GPU_MEMPATHS_FAKE_SLOWDOWN  'program=factor,...': rates times factor, times over it;
                                'node:program=factor' on that node alone ($SLURMD_NODENAME or
                                $GPU_MEMPATHS_FAKE_NODE: a test's several nodes on one host)
    GPU_MEMPATHS_FAKE_SLOWDOWN_WHILE  a file: the slowdown lasts while it exists (a passing load)
"""

import os
import random
import statistics
import sys
import time


def options(argv: list) -> dict:
    found, i = {}, 0
    while i < len(argv):
        name = argv[i].removeprefix("--")
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            found[name] = argv[i + 1]
            i += 2
        else:
            found[name] = True
            i += 1
    return found


def node_name() -> str:
    """The node the program runs on, where the test says it runs on one of
    several: Slurm's name for it (several slurmd share one host in CI), or
    the fake jsrun's; '' elsewhere (one node, whatever the host is called)."""
    return os.environ.get("SLURMD_NODENAME") or os.environ.get("GPU_MEMPATHS_FAKE_NODE", "")


def factor(program: str) -> float:
    passing = os.environ.get("GPU_MEMPATHS_FAKE_SLOWDOWN_WHILE")
    if passing and not os.path.exists(passing):
        return 1.0
    node = node_name()
    for item in filter(None, os.environ.get("GPU_MEMPATHS_FAKE_SLOWDOWN", "").split(",")):
        name, _, value = item.partition("=")
        where, _, name = name.rpartition(":")  # 'node3:host_bandwidth': on Slurm's node3 alone
        if name == program and where in ("", node):
            return float(value)
    return 1.0


def noisy(rng: random.Random, value: float, spread: float = 0.005) -> float:
    return value * rng.lognormvariate(0.0, spread)


def um_bandwidth(rng, opts, slow):
    read = opts.get("op", "read") == "read"
    alloc, advise = opts.get("alloc", "managed"), opts.get("advise", "none")
    runs, repeats = int(opts.get("runs", 5)), int(opts.get("repeats", 1))
    steady = {"device": 2000.0, "managed": 2000.0 if advise in ("none", "read-mostly") else 47.5}.get(alloc, 47.5)
    first = {"device": 1990.0, "managed": 5.0 if advise != "preferred-location-cpu" else 1.0}.get(alloc, 47.3)
    if opts.get("touch-on-host") and alloc == "managed" and advise in ("none", "read-mostly"):
        steady = 6.0
    print("Running on device 0 with grid dim 160 and block dim 128")
    count = int(opts.get("copy-engine-samples", 5))
    for direction in ("h2d", "d2h"):
        samples = [noisy(rng, 51.2 * slow) for _ in range(count)]
        values = ",".join(f"{s:f}" for s in samples)
        print(f"CopyEngine: direction={direction} gibs={statistics.median(samples):g} samples={count} values={values}")
    print(f"Kernel: op={'read' if read else 'write'}")
    for repeat in range(1, repeats + 1):
        print(f"Repeat: {repeat} of {repeats}")
        for run in range(1, runs + 1):
            print(f"Throughput: repeat={repeat} run={run} gibs={noisy(rng, (first if run == 1 else steady) * slow):g}")
    print(f"Verified: kernel=read runs={runs * repeats}" if read else f"Verified: kernel=write repeats={repeats}")


def host_bandwidth(rng, opts, slow):
    nodes, runs = opts.get("nodes", "0").split(","), int(opts.get("runs", 5))
    for node in nodes:
        for op, level in (("read", 68.0), ("write", 41.0)):
            values = [noisy(rng, level * slow, 0.01) for _ in range(runs)]
            for run, value in enumerate(values, start=1):
                print(f"Run: node={node} op={op} run={run} gibs={value:.4f}")
            print(f"Bandwidth: node={node} op={op} gibs={statistics.median(values):.4f} runs={runs}")


def daxpy(rng, opts, slow):
    counts = {}
    pairs = [tuple(map(int, p.split("x"))) for p in opts["pairs"].split(",")]
    alloc, prefetch, size = opts["alloc"], opts["prefetch"], int(opts["size"])
    for inner, outer in pairs:
        counts[(inner, outer)] = counts.get((inner, outer), 0) + 1
        kernel = noisy(rng, (size / 800) * 10.0 * inner * outer / slow, 0.02)
        total = kernel * 3
        print(
            f"DAXPY: alloc={alloc} prefetch={prefetch} size={size} rows=100 cols={size // 8} inner={inner} "
            f"outer={outer} sample={counts[(inner, outer)]} kernel_us={kernel:.3f} "
            f"per_kernel_us={kernel / (inner * outer):.3f} gpu_kernel_us={kernel * 0.9:.3f} "
            f"touch_us={kernel:.3f} alloc_us=10.000 init_us=10.000 warmup_us=10.000 total_us={total:.3f}"
        )
    print(f"Verified: {len(pairs)} points (y as the kernels and touches must leave it)")


def copy_latency(rng, opts, slow):
    methods = [m for m in opts["methods"].split(",") if m != "gdrcopy"]
    if "gdrcopy" in opts["methods"].split(","):
        print("Skipped: method=gdrcopy reason=built without GDRCopy")
    blocks, top = int(opts.get("blocks", 5)), opts.get("max-size", "16M")
    top = int(top[:-1]) * {"K": 1 << 10, "M": 1 << 20}[top[-1]] if top[-1] in "KM" else int(top)
    sizes, cases = [1 << i for i in range(top.bit_length())], 0
    for direction in opts["directions"].split(","):
        for method in methods:
            for size in sizes:
                base = {"pageable": 5.5, "pinned": 7.0, "async": 7.0, "zerocopy": 11.0}[method] + size / 50e3
                medians = [noisy(rng, base / slow, 0.01) for _ in range(blocks)]
                print(
                    f"Latency: method={method} direction={direction} size={size} "
                    f"median_us={statistics.median(medians):.4f} min_us={min(medians):.4f} samples=100 batch=1 "
                    f"block_medians_us=" + ",".join(f"{m:.4f}" for m in medians)
                )
                cases += 1
    print(f"Data verified: {cases} cases (each method, direction and size)")


#: One H100 on PCIe Gen5 x16, decimal GB/s (../shared yardsticks: nvbandwidth's figures on it).
_H100_HOST = {("ce", "h2d"): 53.5, ("ce", "d2h"): 54.0, ("sm", "h2d"): 50.9, ("sm", "d2h"): 51.4}
#: A peer link of NVLink4 x18, decimal GB/s, by engine (a pair of H100s: ../shared yardsticks).
_H100_PEER = {"ce": 390.0, "sm": 371.0, "bulk": 372.0}


def gpu_count() -> int:
    return int(os.environ.get("GPU_MEMPATHS_FAKE_GPUS", "1"))


def _samples(rng, level: float, samples: int, line) -> None:
    for k in range(1, samples + 1):
        print(line(k, noisy(rng, level)))


def _copy_line(path, engine, op, direction, gpu, peer, numa, size):
    def line(k, gbs):
        return (
            f"Cell: path={path} engine={engine} op={op} dir={direction} gpu={gpu} peer={peer} numa={numa} "
            f"sample={k} bytes={size} seconds={size / gbs / 1e9:.6g} gbs={gbs:.6g}"
        )

    return line


def path_matrix(rng, opts, slow):
    """The node's GPUs (GPU_MEMPATHS_FAKE_GPUS) and the NUMA nodes the check
    names: host cells, all GPUs at once, every ordered pair, latency;
    'path_matrix.<cell>=factor' in the slowdown slows one cell,
    'path_matrix.gpu<g>=factor' every host-link cell of GPU g."""
    samples, size, gpus = int(opts.get("samples", 5)), 256 << 20, range(gpu_count())
    nodes = [int(n) for n in str(opts.get("numa-nodes", "-1")).split(",")]
    paths = str(opts.get("paths", "host,latency")).split(",")
    engines = str(opts.get("engines", "ce,sm")).split(",")
    print("CUDA: runtime=13000 driver=13000")
    for g in gpus:
        print(f"GPU {g}: NVIDIA H100 80GB HBM3, 132 SMs, NUMA node 0")
    cells = 0
    for g, node in ((g, node) for g in gpus for node in nodes):
        where, link = (f"numa{node}" if node >= 0 else "unbound"), slow * factor(f"path_matrix.gpu{g}")
        for engine in [e for e in ("ce", "sm") if e in engines] if "host" in paths else ():
            for direction in ("h2d", "d2h", "h2d-both", "d2h-both"):
                base, both = direction.split("-")[0], direction.endswith("-both")
                cell = f"gpu{g}_{base}_{where}{'_both' if both else ''}_{engine}"
                level = _H100_HOST[(engine, base)] * (0.95 if both else 1.0) * link * factor(f"path_matrix.{cell}")
                _samples(rng, level, samples, _copy_line("host", engine, "copy", direction, g, -1, node, size))
                cells += 1
        if "latency" in paths:
            ns = 1205.0 / link / factor(f"path_matrix.gpu{g}_latency_{where}")
            _samples(rng, ns, samples, lambda k, v, g=g, node=node: _chase_line("host", g, -1, node, k, v))
            cells += 1
    for g in gpus if "host-all" in paths and len(gpus) > 1 else ():
        link = slow * factor(f"path_matrix.gpu{g}")
        for engine in [e for e in ("ce", "sm") if e in engines]:
            for base in ("h2d", "d2h"):
                level = _H100_HOST[(engine, base)] * 0.98 * link
                _samples(rng, level, samples, _copy_line("host-all", engine, "copy", base, g, -1, -1, size))
                cells += 1
    for a, b in ((a, b) for a in gpus for b in gpus if a != b):
        for engine in [e for e in ("ce", "sm", "bulk") if e in engines] if "peer" in paths else ():
            for op in ("read", "write") if engine != "bulk" else ("read",):
                for direction in ("one", "both"):
                    level = _H100_PEER[engine] * (0.9 if direction == "both" else 1.0) * slow
                    _samples(rng, level, samples, _copy_line("peer", engine, op, direction, a, b, -1, size))
                    cells += 1
        if "latency" in paths:
            _samples(rng, 855.0 / slow, samples, lambda k, v, a=a, b=b: _chase_line("peer", a, b, -1, k, v))
            cells += 1
    print(f"Verified: cells={cells} samples={samples}")


def _chase_line(direction: str, gpu: int, peer: int, numa: int, k: int, ns: float) -> str:
    return (
        f"Cell: path=latency engine=sm op=chase dir={direction} gpu={gpu} peer={peer} numa={numa} sample={k} "
        f"steps=20000 stride=256 ns={ns:.6g}"
    )


def skipped(rng, opts, slow):
    print("Skipped: needs at least 2 GPUs, 1 visible")


PROGRAMS = {
    "um_bandwidth": um_bandwidth,
    "host_bandwidth": host_bandwidth,
    "daxpy": daxpy,
    "copy_latency": copy_latency,
    "mem_scan": skipped,
    "p2p_pingpong": skipped,
    "path_matrix": path_matrix,
}


def main() -> int:
    program = os.path.basename(sys.argv[0])
    opts = options(sys.argv[1:])
    node = node_name()
    seed = f"{os.environ.get('GPU_MEMPATHS_FAKE_SEED', '0')} {node} {program} {' '.join(sys.argv[1:])}"
    PROGRAMS[program](random.Random(seed), opts, factor(program))
    # A program that takes this long (a night stopped while it runs: tests/test_fake_gpu_faults.py).
    time.sleep(float(os.environ.get("GPU_MEMPATHS_FAKE_TAKES_S", "0")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
