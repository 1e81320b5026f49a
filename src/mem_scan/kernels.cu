// The scan's kernels and their launchers (kernels.cuh).
#include "kernels.cuh"

#include "access.cuh"
#include "suite.hpp"

namespace mem_scan {
namespace {

constexpr int kUnroll = 4;  // independent loads in flight per thread

// Element i of a launch (one thread's 4, 8 or 16 bytes): its address, and
// the index of its first word in the whole buffer.
template <bool kContiguous, typename T>
__device__ __forceinline__ T *element(const Layout &l, const Pattern &p, std::uint64_t i, std::uint64_t &word) {
    const std::uint64_t r = mix64(p.seed ^ ((i >> p.lane_shift) * 0x9e3779b97f4a7c15ull));
    const unsigned c = __umulhi(static_cast<unsigned>(r), l.nchunks);
    const std::uint64_t off = p.window + (__umul64hi(r, p.segs_per_window) << p.seg_shift) +
                              (i & ((std::uint64_t{1} << p.lane_shift) - 1)) * sizeof(T);
    word = (c * l.chunk_bytes + off) / 4;
    char *base = kContiguous ? l.chunk[0] + c * l.chunk_bytes : l.chunk[c];
    return reinterpret_cast<T *>(base + off);
}

// 1, 2 or 4 consecutive words as one value, from a word function.
template <typename F>
__device__ __forceinline__ void make(unsigned &v, std::uint64_t w, F f) {
    v = f(w);
}
template <typename F>
__device__ __forceinline__ void make(uint2 &v, std::uint64_t w, F f) {
    v = make_uint2(f(w), f(w + 1));
}
template <typename F>
__device__ __forceinline__ void make(uint4 &v, std::uint64_t w, F f) {
    v = make_uint4(f(w), f(w + 1), f(w + 2), f(w + 3));
}
__device__ __forceinline__ bool same(unsigned a, unsigned b) { return a == b; }
__device__ __forceinline__ bool same(uint2 a, uint2 b) { return a.x == b.x && a.y == b.y; }
__device__ __forceinline__ bool same(uint4 a, uint4 b) { return a.x == b.x && a.y == b.y && a.z == b.z && a.w == b.w; }

// The measured kernel, grid-stride over the launch's n elements with kUnroll
// elements in flight per thread: read gathers into `local`, write scatters
// value0 ^ salt, atomic adds 1 to each word (T is then unsigned).
template <Op kOp, bool kContiguous, typename T>
__global__ void scan_kernel(Layout l, Pattern p, T *__restrict__ local, std::uint64_t n, unsigned salt) {
    const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    for (std::uint64_t e = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
         e += kUnroll * stride) {
        T v[kUnroll];
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) {
            const std::uint64_t i = e + k * stride;
            if (i >= n) break;
            std::uint64_t w;
            T *at = element<kContiguous, T>(l, p, i, w);
            if (kOp == Op::read) {
                v[k] = suite::load_nc(at);
            } else if (kOp == Op::write) {
                make(v[k], w, [salt](std::uint64_t x) { return value0(x) ^ salt; });
                suite::store(at, v[k]);
            } else {
                atomicAdd(reinterpret_cast<unsigned *>(at), 1u);
            }
        }
        if (kOp == Op::read) {
#pragma unroll
            for (int k = 0; k < kUnroll; ++k)
                if (e + k * stride < n) suite::store(local + e + k * stride, v[k]);
        }
    }
}

// The link's yardstick for the scan: every GPU streams through all of its
// peers' chunks at once (its blocks split among the peers, so that a mesh of
// direct links is used whole, not one link at a time), 16-byte words in
// order: the links carry the scan's remote traffic without its randomness.
// Reads land in `local`, peer after peer; writes store each word's own fill
// value, so the buffer keeps its known contents.
template <Op kOp, bool kContiguous>
__global__ void stream_kernel(Layout l, unsigned self, uint4 *__restrict__ local, std::uint64_t per_peer) {
    const unsigned peers = l.nchunks - 1, q = blockIdx.x % peers;  // launched with gridDim.x >= peers
    const unsigned c = (self + 1 + q) % l.nchunks;
    const std::uint64_t blocks = (gridDim.x - q + peers - 1) / peers;  // this peer's share of the grid
    const std::uint64_t stride = blocks * blockDim.x;
    uint4 *peer = reinterpret_cast<uint4 *>(kContiguous ? l.chunk[0] + c * l.chunk_bytes : l.chunk[c]);
    uint4 *out = local + q * per_peer;
    for (std::uint64_t e = (blockIdx.x / peers) * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; e < per_peer;
         e += kUnroll * stride) {
        uint4 v[kUnroll];
        const std::uint64_t left = per_peer - e;  // words of this peer from e on (e < per_peer)
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) {
            if (k * stride >= left) break;
            const std::uint64_t i = e + k * stride;
            if (kOp == Op::read) {
                v[k] = suite::load16_nc(peer + i);
            } else {
                make(v[k], (c * l.chunk_bytes) / 4 + 4 * i, [](std::uint64_t x) { return value0(x); });
                suite::store16(peer + i, v[k]);
            }
        }
        if (kOp == Op::read) {
#pragma unroll
            for (int k = 0; k < kUnroll; ++k)
                if (e + k * stride < per_peer) suite::store16(out + e + k * stride, v[k]);
        }
    }
}

// Verification of one launch, regenerating its segments: after a read the
// local buffer must hold value0 of every word gathered; after a write every
// word written must hold value0 ^ salt. Mismatches are counted in *bad.
template <Op kOp, bool kContiguous, typename T>
__global__ void verify_kernel(Layout l, Pattern p, const T *local, std::uint64_t n, unsigned salt,
                              unsigned long long *bad) {
    const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    unsigned long long wrong = 0;
    for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        std::uint64_t w;
        const T *at = element<kContiguous, T>(l, p, i, w);
        T expected;
        make(expected, w, [salt](std::uint64_t x) { return value0(x) ^ salt; });
        wrong += !same(kOp == Op::read ? local[i] : *at, expected);
    }
    if (wrong) atomicAdd(bad, wrong);
}

// Chunk words [0, n) are words first.. of the whole buffer.
__global__ void fill_kernel(unsigned *chunk, std::uint64_t n, std::uint64_t first) {
    const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        chunk[i] = value0(first + i);
}

// Sum of a chunk's words modulo 2^32: atomics must raise it by their count.
__global__ void sum_kernel(const unsigned *chunk, std::uint64_t n, unsigned *sum) {
    const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    unsigned acc = 0;
    for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        acc += chunk[i];
    for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
    if ((threadIdx.x & 31) == 0) atomicAdd(sum, acc);
}

__global__ void wait_at_gate(volatile int *gate) {
    unsigned long long start = 0, now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (gate[0] == 0) {
        __nanosleep(256);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > kGateTimeoutNs) {
            gate[1] = 1;
            return;
        }
    }
}

template <Op kOp, bool kContiguous, typename T>
void launch(const Where &at, const Layout &l, const Pattern &p, void *local, std::uint64_t n, unsigned salt,
            bool verify, unsigned long long *bad) {
    if (verify)
        verify_kernel<kOp, kContiguous, T>
            <<<at.grid, kBlock, 0, at.stream>>>(l, p, static_cast<const T *>(local), n, salt, bad);
    else scan_kernel<kOp, kContiguous, T><<<at.grid, kBlock, 0, at.stream>>>(l, p, static_cast<T *>(local), n, salt);
    CUDA_CHECK_LAUNCH();
}

template <Op kOp, typename T>
void launch(const Where &at, bool contiguous, const Layout &l, const Pattern &p, void *local, std::uint64_t n,
            unsigned salt, bool verify, unsigned long long *bad) {
    if (contiguous) launch<kOp, true, T>(at, l, p, local, n, salt, verify, bad);
    else launch<kOp, false, T>(at, l, p, local, n, salt, verify, bad);
}

template <Op kOp>
void launch_stream(const Where &at, bool contiguous, const Layout &l, unsigned self, void *local,
                   std::uint64_t per_peer) {
    auto *out = static_cast<uint4 *>(local);
    if (contiguous) stream_kernel<kOp, true><<<at.grid, kBlock, 0, at.stream>>>(l, self, out, per_peer);
    else stream_kernel<kOp, false><<<at.grid, kBlock, 0, at.stream>>>(l, self, out, per_peer);
    CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_scan(const Where &at, Op op, int thread_bytes, bool contiguous, bool verify, const Layout &l,
                 const Pattern &p, void *local, std::uint64_t launch_bytes, unsigned salt, unsigned long long *bad) {
    const std::uint64_t n = launch_bytes / thread_bytes;
    const bool c = contiguous, v = verify;
    if (op == Op::atomic) return launch<Op::atomic, unsigned>(at, c, l, p, local, n, salt, v, bad);
    const bool read = op == Op::read;
    switch (thread_bytes) {
    case 4:
        return read ? launch<Op::read, unsigned>(at, c, l, p, local, n, 0, v, bad)
                    : launch<Op::write, unsigned>(at, c, l, p, local, n, salt, v, bad);
    case 8:
        return read ? launch<Op::read, uint2>(at, c, l, p, local, n, 0, v, bad)
                    : launch<Op::write, uint2>(at, c, l, p, local, n, salt, v, bad);
    default:
        return read ? launch<Op::read, uint4>(at, c, l, p, local, n, 0, v, bad)
                    : launch<Op::write, uint4>(at, c, l, p, local, n, salt, v, bad);
    }
}

void launch_stream(const Where &at, Op op, bool contiguous, const Layout &l, unsigned self, void *local,
                   std::uint64_t per_peer) {
    if (op == Op::read) launch_stream<Op::read>(at, contiguous, l, self, local, per_peer);
    else launch_stream<Op::write>(at, contiguous, l, self, local, per_peer);
}

void launch_fill(const Where &at, unsigned *chunk, std::uint64_t n, std::uint64_t first) {
    fill_kernel<<<at.grid, kBlock, 0, at.stream>>>(chunk, n, first);
    CUDA_CHECK_LAUNCH();
}

void launch_sum(const Where &at, const unsigned *chunk, std::uint64_t n, unsigned *sum) {
    sum_kernel<<<at.grid, kBlock, 0, at.stream>>>(chunk, n, sum);
    CUDA_CHECK_LAUNCH();
}

void launch_gate(cudaStream_t stream, int *gate) {
    wait_at_gate<<<1, 1, 0, stream>>>(gate);
    CUDA_CHECK_LAUNCH();
}

}  // namespace mem_scan
