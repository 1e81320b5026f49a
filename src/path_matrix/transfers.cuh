// The transfer machinery (transfers.cu): host and device buffers, and
// transfers that run at once behind a latch, timed and verified.
#pragma once

#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

namespace path_matrix {

enum class Engine { ce, sm, bulk };
inline const char *engine_name(Engine e) { return e == Engine::ce ? "ce" : e == Engine::sm ? "sm" : "bulk"; }

// Pinned host memory on one NUMA node: allocated there (libnuma), touched
// there, then registered with CUDA and mapped into every GPU's address space.
class HostBuffer {
  public:
    HostBuffer(std::uint64_t bytes, int node);
    ~HostBuffer();
    HostBuffer(const HostBuffer &) = delete;
    HostBuffer &operator=(const HostBuffer &) = delete;
    void *get() const { return ptr_; }

  private:
    void *ptr_ = nullptr;
    std::uint64_t bytes_;
    int node_;
};

// Device memory on one GPU.
struct DeviceBuffer {
    DeviceBuffer(int gpu, std::uint64_t bytes);
    ~DeviceBuffer();
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;
    int gpu;
    void *ptr = nullptr;
};

// One transfer of a cell: what moves, where, by which engine, on which GPU's stream.
struct Transfer {
    int gpu;  // whose stream and SMs run it
    Engine engine;
    const void *src;
    void *dst;  // nullptr for a bulk read (summed, not stored)
};

// The SMs of a GPU.
int sm_count(int gpu);

// The grid of a GPU's SM copies and bulk reads: `blocks`, or four per SM where 0.
int copy_grid(int gpu, int blocks);

// Runs transfers of `bytes` each at once (latched), `samples` times after one
// untimed, each verified; returns each transfer's seconds ([sample][transfer]).
// blocks: the grid of SM copies and bulk reads (copy_grid).
std::vector<std::vector<double>> run_together(const std::vector<Transfer> &ts, std::uint64_t bytes, int blocks,
                                              int samples, std::uint64_t &salt);

}  // namespace path_matrix
