// The path matrix's kernels and their launchers (kernels.cuh).
#include "kernels.cuh"

#include "stream_kernels.cuh"
#include "suite.hpp"

namespace path_matrix {
namespace {

// Holds its stream until the host sets *release, so that transfers queued on
// several streams start together; gives up after `limit` clock ticks (a host
// that died) and says so in *timed_out rather than hang the GPU.
__global__ void latch_kernel(const volatile int *release, long long limit, int *timed_out) {
    const long long start = clock64();
    while (!*release)
        if (clock64() - start > limit) {
            *timed_out = 1;
            return;
        }
}

__global__ void fill_kernel(std::uint64_t *data, std::size_t n, std::uint64_t salt) {
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        data[i] = i ^ salt;
}

// Counts words that do not hold i ^ salt: the proof that a copy arrived whole.
__global__ void check_kernel(const std::uint64_t *data, std::size_t n, std::uint64_t salt, unsigned long long *bad) {
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    unsigned long long wrong = 0;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        wrong += data[i] != (i ^ salt);
    if (wrong) atomicAdd(bad, wrong);
}

// The SMs' copy, thread `i` of `stride`: 16-byte words (suite::load16_nc and
// store16, one access each whatever the compiler), four loads in flight per
// thread before any store, so that a link's latency is covered with a grid
// of one wave.
__device__ __forceinline__ void copy_words(const uint4 *__restrict__ src, uint4 *__restrict__ dst, std::size_t n,
                                           std::size_t i, std::size_t stride) {
    for (; i + 3 * stride < n; i += 4 * stride) {
        uint4 v[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) v[k] = suite::load16_nc(src + i + k * stride);
#pragma unroll
        for (int k = 0; k < 4; ++k) suite::store16(dst + i + k * stride, v[k]);
    }
    for (; i < n; i += stride) suite::store16(dst + i, suite::load16_nc(src + i));
}

__global__ void copy_kernel(const uint4 *__restrict__ src, uint4 *__restrict__ dst, std::size_t n) {
    copy_words(src, dst, n, static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x,
               static_cast<std::size_t>(gridDim.x) * blockDim.x);
}

// Both directions by the SMs of one GPU in one kernel: even warps copy the
// first pair, odd warps the second, as nvbandwidth's bidirectional SM copy
// does, so that every SM keeps traffic going both ways at once (two copy
// kernels on two streams share the SMs less evenly).
__global__ void copy_both_kernel(const uint4 *__restrict__ src0, uint4 *__restrict__ dst0,
                                 const uint4 *__restrict__ src1, uint4 *__restrict__ dst1, std::size_t n) {
    const std::size_t thread = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const std::size_t warp = thread / 32, lane = thread % 32;
    const std::size_t per_direction = static_cast<std::size_t>(gridDim.x) * blockDim.x / 2;
    if (warp % 2) copy_words(src1, dst1, n, warp / 2 * 32 + lane, per_direction);
    else copy_words(src0, dst0, n, warp / 2 * 32 + lane, per_direction);
}

// One thread follows the chain: each load's address is the previous load's
// value, so the time per step is the path's round trip. ld.global.cv skips
// the caches, so every step crosses the link whatever the buffer's size; a
// plain load is nvbandwidth's. Links hold the next slot's word index (added
// to the chain's base each step) or its address (nvbandwidth's p = p->next).
// Of a grid of one-thread blocks (one per SM) only block `chaser` chases, so
// that each SM's distance to the link can be measured in turn.
template <bool plain, bool address>
__global__ void chase_kernel(const std::uint64_t *chain, long long steps, std::uint64_t *last, unsigned chaser) {
    if (blockIdx.x != chaser) return;
    std::uint64_t at = address ? reinterpret_cast<std::uint64_t>(chain) : 0;
    for (long long s = 0; s < steps; ++s) {
        const std::uint64_t *from = address ? reinterpret_cast<const std::uint64_t *>(at) : chain + at;
        std::uint64_t next;
        if (plain) asm volatile("ld.global.u64 %0, [%1];" : "=l"(next) : "l"(from) : "memory");
        else asm volatile("ld.global.cv.u64 %0, [%1];" : "=l"(next) : "l"(from) : "memory");
        at = next;
    }
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    last[0] = at, last[1] = sm;
}

}  // namespace

void launch_latch(cudaStream_t stream, const int *release, long long limit, int *timed_out) {
    latch_kernel<<<1, 1, 0, stream>>>(release, limit, timed_out);
    CUDA_CHECK_LAUNCH();
}

void launch_fill(int grid, std::uint64_t *data, std::size_t n, std::uint64_t salt) {
    fill_kernel<<<grid, 256>>>(data, n, salt);
    CUDA_CHECK_LAUNCH();
}

void launch_check(int grid, const std::uint64_t *data, std::size_t n, std::uint64_t salt, unsigned long long *bad) {
    check_kernel<<<grid, 256>>>(data, n, salt, bad);
    CUDA_CHECK_LAUNCH();
}

void launch_copy(int grid, cudaStream_t stream, const void *src, void *dst, std::size_t n) {
    copy_kernel<<<grid, 256, 0, stream>>>(static_cast<const uint4 *>(src), static_cast<uint4 *>(dst), n);
    CUDA_CHECK_LAUNCH();
}

void launch_copy_both(int grid, cudaStream_t stream, const void *src0, void *dst0, const void *src1, void *dst1,
                      std::size_t n) {
    copy_both_kernel<<<grid, 256, 0, stream>>>(static_cast<const uint4 *>(src0), static_cast<uint4 *>(dst0),
                                               static_cast<const uint4 *>(src1), static_cast<uint4 *>(dst1), n);
    CUDA_CHECK_LAUNCH();
}

void launch_read_bulk(int grid, cudaStream_t stream, const void *src, std::size_t n, unsigned long long *sum) {
    suite::read_bulk_kernel<<<grid, 128, 0, stream>>>(static_cast<const uint4 *>(src), n, sum);
    CUDA_CHECK_LAUNCH();
}

void launch_chase(const std::uint64_t *chain, long long steps, std::uint64_t *last, bool plain, bool address, int grid,
                  unsigned chaser) {
    if (plain && address) chase_kernel<true, true><<<grid, 1>>>(chain, steps, last, chaser);
    else if (plain) chase_kernel<true, false><<<grid, 1>>>(chain, steps, last, chaser);
    else if (address) chase_kernel<false, true><<<grid, 1>>>(chain, steps, last, chaser);
    else chase_kernel<false, false><<<grid, 1>>>(chain, steps, last, chaser);
    CUDA_CHECK_LAUNCH();
}

}  // namespace path_matrix
