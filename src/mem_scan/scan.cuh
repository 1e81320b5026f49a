// One mode of the scan from allocation to release (scan.cu): the link
// yardstick and the points of each op, every GPU at once behind a start gate.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels.cuh"
#include "node.cuh"
#include "suite.hpp"

namespace mem_scan {

constexpr std::uint64_t kChunkAlign = std::uint64_t{2} << 20;

enum class Mode { single, chunked, multiprocess };

inline const char *mode_name(Mode m) {
    return m == Mode::single ? "single" : m == Mode::chunked ? "chunked" : "multiprocess";
}
inline const char *op_name(Op o) { return o == Op::read ? "read" : o == Op::write ? "write" : "atomic"; }

struct Config {
    std::vector<Mode> modes;
    std::vector<Op> ops;
    std::vector<std::uint64_t> segments;
    std::vector<int> widths;
    suite::Options::Amount size;     // bytes, or a fraction of the GPUs' memory
    std::uint64_t launch_bytes = 0;  // 0: by segment size
    std::uint64_t map_bytes = 0;     // single: bytes per physical allocation (0: one per GPU)
    std::uint64_t launch_span = 0;   // bytes of every chunk one launch touches (0: all of it)
    std::uint64_t chunk_align = 0;   // each GPU's chunk a multiple of this many bytes (a multiple of kChunkAlign)
    int reps = 20, gpus = 0, rank = 0, nranks = 1;
    bool spawn = false;
    std::string run_id, exchange_dir;
};

// One mode from allocation to release; returns the points it printed.
int run_mode(const Config &c, const suite::Options &opts, Mode mode);

}  // namespace mem_scan
