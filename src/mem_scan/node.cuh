// The GPUs this process drives and the buffer spread over them, for each
// mode: one VMM range (single), a table of cudaMalloc chunks (chunked), or
// this rank's chunk and the others' through CUDA IPC (multiprocess).
#pragma once

#include <cstdint>
#include <vector>

#include <cuda.h>
#include <cuda_runtime.h>

#include "exchange.hpp"
#include "kernels.cuh"

namespace mem_scan {

// Timed launches of a point are split into this many consecutive blocks,
// each timed on its own: the samples of the point's rates.
constexpr int kBlocks = 5;

// One GPU this process drives, with what it needs for every point.
struct Gpu {
    int index = 0, device = 0;  // index: its chunk; device: its CUDA device
    cudaStream_t stream{};
    cudaEvent_t marks[kBlocks + 1]{};  // before the first timed launch and after each block
    cudaEvent_t warm{};                // after the warm-up launch
    void *local = nullptr;             // read: where segments land
    unsigned long long *bad = nullptr;
    unsigned *sum = nullptr;
    int grid = 0;
};

// The buffer: its layout and what each mode must release.
struct Buffer {
    Layout layout{};
    bool contiguous = false;
    CUdeviceptr base = 0;                               // single
    std::vector<CUmemGenericAllocationHandle> handles;  // single
    std::vector<void *> owned;                          // chunked, multiprocess: our chunks
    std::vector<void *> imported;                       // multiprocess: the other ranks' chunks
};

void setup_gpu(Gpu &g, std::uint64_t local_bytes);
void release_gpu(Gpu &g);
void enable_peer_access(const std::vector<int> &devices);
void allocate_contiguous(Buffer &b, const std::vector<Gpu> &gpus, std::uint64_t chunk, std::uint64_t piece);
void allocate_table(Buffer &b, const std::vector<Gpu> &gpus, std::uint64_t chunk);
void allocate_shared(Buffer &b, const Gpu &g, std::uint64_t chunk, Exchange &ex);
void release_buffer(Buffer &b, const std::vector<Gpu> &gpus, std::uint64_t chunk);
unsigned *chunk_of(const Buffer &b, const Gpu &g);

}  // namespace mem_scan
