// The rates fields of a 'Scan:' or 'Link:' record (host-only, so that
// tests/test_record_writer.py holds them to their old text):
//
//   per_gpu_gbs=a,b,... min_gbs=.. mean_gbs=.. aggregate_gbs=.. window_s=.. block_mean_gbs=b1,..,b5
//
// of the node's GPUs: each GPU's rate over all timed launches, their
// minimum and mean, the node's bytes over the common window, that window,
// and the mean over the GPUs of each block's rate.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "record.hpp"

namespace mem_scan {

// whole[g]: GPU g's GB/s over all launches; blocks[g][b]: over block b of them.
inline void add_rates(suite::Record &record, const std::vector<double> &whole,
                      const std::vector<std::vector<double>> &blocks, double window, std::uint64_t bytes, int reps,
                      double &mean) {
    double sum = 0, lo = whole[0];
    std::vector<double> block_means(blocks[0].size(), 0.0);
    for (std::size_t g = 0; g < whole.size(); ++g) {
        sum += whole[g];
        lo = std::min(lo, whole[g]);
        for (std::size_t b = 0; b < block_means.size(); ++b) block_means[b] += blocks[g][b] / whole.size();
    }
    mean = sum / whole.size();
    const double aggregate = static_cast<double>(bytes) * reps * whole.size() / window / 1e9;
    record.list("per_gpu_gbs", "%.2f", whole)
        .addf("min_gbs", "%.2f", lo)
        .addf("mean_gbs", "%.2f", mean)
        .addf("aggregate_gbs", "%.2f", aggregate)
        .addf("window_s", "%.6f", window)
        .list("block_mean_gbs", "%.2f", block_means);
}

}  // namespace mem_scan
