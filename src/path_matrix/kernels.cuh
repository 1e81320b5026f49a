// The path matrix's device code (kernels.cu) as the host launches it: each
// launcher runs its kernel in the shape the measurements were taken with and
// checks the launch.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace path_matrix {

// The latch on `stream` (one thread): holds it until *release is set, or
// `limit` clock ticks pass (then *timed_out is set).
void launch_latch(cudaStream_t stream, const int *release, long long limit, int *timed_out);

// On the current device's default stream, `grid` blocks of 256 threads:
// words i of data set to i ^ salt, or the words that do not hold it counted in *bad.
void launch_fill(int grid, std::uint64_t *data, std::size_t n, std::uint64_t salt);
void launch_check(int grid, const std::uint64_t *data, std::size_t n, std::uint64_t salt, unsigned long long *bad);

// The SMs' copy of n 16-byte words on `stream` (grid blocks of 256 threads);
// both directions at once in one kernel; sm_90's bulk read of n words into
// shared memory, summed into *sum (grid blocks of 128 threads).
void launch_copy(int grid, cudaStream_t stream, const void *src, void *dst, std::size_t n);
void launch_copy_both(int grid, cudaStream_t stream, const void *src0, void *dst0, const void *src1, void *dst1,
                      std::size_t n);
void launch_read_bulk(int grid, cudaStream_t stream, const void *src, std::size_t n, unsigned long long *sum);

// The pointer chase of `steps` dependent loads, one thread (block `chaser`
// of `grid` one-thread blocks) on the default stream; the slot it ends on in
// last[0], the SM that ran it in last[1].
void launch_chase(const std::uint64_t *chain, long long steps, std::uint64_t *last, bool plain, bool address, int grid,
                  unsigned chaser);

}  // namespace path_matrix
