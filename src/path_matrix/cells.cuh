// The cells of the matrix (cells.cu): each path measured on its own and
// printed as one 'Cell:' record per sample.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "transfers.cuh"

namespace path_matrix {

struct Config {
    std::vector<std::string> paths, engines;
    std::string chase_order, chase_load, chase_links, chase_sms;  // random|stride, cv|plain, index|address, one|all
    std::vector<int> gpus, numa_nodes;                            // numa_nodes {-1}: no binding (no libnuma)
    std::uint64_t size = 0, chase_bytes = 0, chase_stride = 0;
    long long chase_steps = 0;
    int samples = 0;
    int blocks = 0;  // of each SM copy and bulk read; 0: four per SM
    bool wants(const std::string &path) const { return std::count(paths.begin(), paths.end(), path) != 0; }
    bool wants(Engine e) const { return std::count(engines.begin(), engines.end(), engine_name(e)) != 0; }
};

// The NUMA node closest to a GPU (the first of --numa-nodes where CUDA does not say).
int gpu_numa_node(const Config &c, int gpu);

// The paths, each measured and printed: GPU x NUMA node, every GPU with its own
// node at once, every pair of peers, and the pointer chases; salt: the next copy's.
void host_cells(const Config &c, std::uint64_t &salt);
void host_all_cells(const Config &c, std::uint64_t &salt);
void peer_cells(const Config &c, std::uint64_t &salt);
void latency_cells(const Config &c);

// How many cells have been printed.
int cells_printed();

// The medians of the cells printed, as matrices of GB/s (src/common/matrix.hpp), after the records.
void print_matrices();

}  // namespace path_matrix
