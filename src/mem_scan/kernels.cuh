// The scan's device code (kernels.cu) as the host sees it: what each word of
// the buffer holds, where a launch's random segments fall, and one launcher
// per kernel, each launch checked. The kernels' launch shapes are theirs:
// `grid` blocks of kBlock threads on a GPU's stream, the gate one thread.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace mem_scan {

constexpr int kMaxGpus = 16;
constexpr int kBlock = 256;

__host__ __device__ inline std::uint64_t mix64(std::uint64_t x) {  // splitmix64's finaliser
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// What word w of the whole buffer holds after the fill.
__host__ __device__ inline unsigned value0(std::uint64_t w) {
    return static_cast<unsigned>(w ^ (w >> 29)) * 0x9e3779b1u + 0x7f4a7c15u;
}

// Where the chunks are: contiguous (chunk c at base + c * chunk_bytes, base in
// chunk[0]) or one pointer per chunk.
struct Layout {
    char *chunk[kMaxGpus];
    std::uint64_t chunk_bytes;
    unsigned nchunks;
};

// One launch's random segments: segment s of the launch lies in chunk
// c(s) at offset o(s), both drawn from one 64-bit hash of (seed, s) by
// multiply-high (the chunk from its low half, the offset mostly from its high
// half), so every chunk and every aligned segment of its window is equally
// likely. The window is the whole chunk, or with --launch-span a span of it
// at an offset drawn per launch, the same in every chunk: fewer distinct
// pages per launch, for telling address translation from the links.
struct Pattern {
    std::uint64_t seed, segs_per_window;
    std::uint64_t window;  // the window's byte offset in every chunk
    unsigned seg_shift;    // log2(segment bytes)
    unsigned lane_shift;   // log2(threads per segment)
};

enum class Op { read, write, atomic };

// Holds a GPU's stream until the host opens the gate (a word of mapped host
// memory), so that every GPU starts its timed launches at the same moment,
// as NVIDIA's nvbandwidth does with its spin kernel. One thread polls; it
// gives up after kGateTimeoutNs and says so in the gate's second word, so a
// host that died cannot leave the GPU spinning for ever.
constexpr unsigned long long kGateTimeoutNs = 60ull * 1000 * 1000 * 1000;

// Where a launch runs: `grid` blocks of kBlock threads on one GPU's stream.
struct Where {
    int grid;
    cudaStream_t stream;
};

// One launch of the scan of `op` with `thread_bytes` per thread over
// launch_bytes / thread_bytes elements, or with `verify` its verification
// (mismatches counted in *bad); reads gather into `local`.
void launch_scan(const Where &at, Op op, int thread_bytes, bool contiguous, bool verify, const Layout &l,
                 const Pattern &p, void *local, std::uint64_t launch_bytes, unsigned salt, unsigned long long *bad);

// One launch of the link yardstick (reads or writes of every peer's chunk),
// for either layout of the chunks; reads land in `local`.
void launch_stream(const Where &at, Op op, bool contiguous, const Layout &l, unsigned self, void *local,
                   std::uint64_t per_peer);

// Chunk words [0, n) set to what words first.. of the whole buffer hold.
void launch_fill(const Where &at, unsigned *chunk, std::uint64_t n, std::uint64_t first);

// Adds the sum of a chunk's n words, modulo 2^32, to *sum.
void launch_sum(const Where &at, const unsigned *chunk, std::uint64_t n, unsigned *sum);

// The start gate on `stream`: gate[0] (mapped host memory) opens it, gate[1] says a GPU gave up waiting.
void launch_gate(cudaStream_t stream, int *gate);

}  // namespace mem_scan
