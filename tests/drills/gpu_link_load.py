#!/usr/bin/env python3
"""A drill's planted fault: a second process that streams copies through one
GPU's host link, both ways at once, by the copy engines, until it is stopped
(or `--seconds` pass). Another tenant's transfers on one GPU of a shared
node, or a GPU whose link is slow: its paths should lag their siblings' and
move against the accepted runs, its siblings' should not.

    python3 tests/drills/gpu_link_load.py --gpu 1 [--size-mib 512] [--seconds 600]

Only the CUDA runtime library (libcudart.so of the node's CUDA, through
ctypes): nothing to build, nothing of the suite's own.
"""

import argparse
import ctypes
import ctypes.util
import glob
import sys
import time

H2D, D2H = 1, 2


def cudart() -> ctypes.CDLL:
    names = [ctypes.util.find_library("cudart")] + sorted(glob.glob("/usr/local/cuda*/lib64/libcudart.so*"))
    for name in filter(None, names):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    sys.exit("gpu_link_load: no libcudart found (the node's CUDA)")


def check(lib: ctypes.CDLL, status: int, what: str) -> None:
    if status:
        lib.cudaGetErrorString.restype = ctypes.c_char_p
        sys.exit(f"gpu_link_load: {what}: {lib.cudaGetErrorString(status).decode()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", type=int, required=True, help="the GPU whose host link is loaded")
    parser.add_argument("--size-mib", type=int, default=512, help="bytes of each copy, MiB (default 512)")
    parser.add_argument("--seconds", type=float, default=600.0, help="stop after this long (default 600)")
    args = parser.parse_args()
    lib, size = cudart(), args.size_mib << 20
    check(lib, lib.cudaSetDevice(args.gpu), f"GPU {args.gpu}")
    host, dev = [ctypes.c_void_p() for _ in range(2)], [ctypes.c_void_p() for _ in range(2)]
    streams = [ctypes.c_void_p() for _ in range(2)]
    for i in range(2):
        check(lib, lib.cudaMallocHost(ctypes.byref(host[i]), ctypes.c_size_t(size)), "pinned host memory")
        check(lib, lib.cudaMalloc(ctypes.byref(dev[i]), ctypes.c_size_t(size)), "device memory")
        check(lib, lib.cudaStreamCreate(ctypes.byref(streams[i])), "a stream")
    print(f"gpu_link_load: GPU {args.gpu}: copying {args.size_mib} MiB both ways, for {args.seconds:g} s", flush=True)
    end, moved, start = time.monotonic() + args.seconds, 0, time.monotonic()
    while time.monotonic() < end:
        check(lib, lib.cudaMemcpyAsync(dev[0], host[0], ctypes.c_size_t(size), H2D, streams[0]), "a copy to the GPU")
        check(lib, lib.cudaMemcpyAsync(host[1], dev[1], ctypes.c_size_t(size), D2H, streams[1]), "a copy from it")
        check(lib, lib.cudaDeviceSynchronize(), "the copies")
        moved += 2 * size
    rate = moved / (time.monotonic() - start) / 1e9
    print(f"gpu_link_load: {rate:.1f} GB/s through GPU {args.gpu}'s link", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
