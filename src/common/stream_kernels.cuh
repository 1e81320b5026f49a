// Read kernels that stream a buffer through the SMs and sum it, shared by
// the programs that measure a path by reading across it (the reprex's host
// and managed memory, the path matrix's peers): plain 16-byte loads,
// optionally with L2's 256-byte fetch, and sm_90's bulk copies into shared
// memory. Each sums the buffer's 64-bit words, so a buffer whose word i holds
// i proves every byte arrived (suite::triangular_mod64).
#pragma once

#include <cstddef>

#include "access.cuh"

namespace suite {

// One 16-byte load. With `wide` the load asks L2 to fetch the whole 256-byte
// block around it (PTX's L2::256B, sm_80 and later): over PCIe that turns the
// SM's 128-byte reads of host memory into 256-byte ones, less header per byte.
template <bool wide>
__device__ __forceinline__ uint4 read16(const uint4 *p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (wide) {
        uint4 v;
        asm volatile("ld.global.nc.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "l"(p));
        return v;
    }
#endif
    return load16_nc(p);
}

__device__ __forceinline__ unsigned long long sum16(uint4 v) {
    return ((static_cast<unsigned long long>(v.y) << 32) | v.x) + ((static_cast<unsigned long long>(v.w) << 32) | v.z);
}

// Grid-stride over 16-byte words. The seed's small grid (160 x 128 threads)
// has to keep enough bytes in flight to cover the link's latency, so each
// thread issues four independent loads per iteration before using any.
template <bool wide>
__global__ void read_kernel(const uint4 *__restrict__ data, std::size_t n, unsigned long long *sum) {
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    unsigned long long acc = 0;
    for (; i + 3 * stride < n; i += 4 * stride) {
        uint4 v[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) v[k] = read16<wide>(data + i + k * stride);
#pragma unroll
        for (int k = 0; k < 4; ++k) acc += sum16(v[k]);
    }
    for (; i < n; i += stride) acc += sum16(read16<wide>(data + i));
    // One atomic per warp keeps the reduction off the measured path.
    for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
    if ((threadIdx.x & 31) == 0) atomicAdd(sum, acc);
}

// Bulk copies into shared memory (sm_90's cp.async.bulk, one thread issuing
// kBulkChunk bytes at a time, kBulkStages in flight per block), then summed
// from there: the copy engine inside each SM asks the link for whole chunks
// instead of the 16-byte loads of every thread.
constexpr int kBulkChunk = 8192;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ unsigned smem_addr(const void *p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
#endif

__global__ void read_bulk_kernel(const uint4 *__restrict__ data, std::size_t n, unsigned long long *sum) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int kBulkStages = 4;
    __shared__ __align__(128) uint4 buf[kBulkStages][kBulkChunk / 16];
    __shared__ __align__(8) unsigned long long bar[kBulkStages];
    const std::size_t words = kBulkChunk / 16, chunks = n / words;
    if (threadIdx.x == 0)
        for (int s = 0; s < kBulkStages; ++s)
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bar[s])));
    __syncthreads();
    auto issue = [&](int s, std::size_t chunk) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(&bar[s])), "r"(kBulkChunk)
                     : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                         smem_addr(buf[s])),
                     "l"(data + chunk * words), "r"(kBulkChunk), "r"(smem_addr(&bar[s]))
                     : "memory");
    };
    if (threadIdx.x == 0)
        for (int s = 0; s < kBulkStages; ++s)
            if (blockIdx.x + s * static_cast<std::size_t>(gridDim.x) < chunks) issue(s, blockIdx.x + s * gridDim.x);
    unsigned long long acc = 0;
    std::size_t k = 0;
    for (std::size_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x, ++k) {
        const int s = k % kBulkStages;
        const unsigned parity = (k / kBulkStages) & 1;
        unsigned done = 0;
        while (!done)
            asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                         : "=r"(done)
                         : "r"(smem_addr(&bar[s])), "r"(parity)
                         : "memory");
        for (std::size_t w = threadIdx.x; w < words; w += blockDim.x) acc += sum16(buf[s][w]);
        __syncthreads();  // everyone is done with this stage before it is refilled
        const std::size_t next = chunk + kBulkStages * static_cast<std::size_t>(gridDim.x);
        if (threadIdx.x == 0 && next < chunks) {
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            issue(s, next);
        }
    }
    for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
    if ((threadIdx.x & 31) == 0) atomicAdd(sum, acc);
#else
    (void)data, (void)n, (void)sum;
    __trap();  // the host never launches it below sm_90
#endif
}

}  // namespace suite
