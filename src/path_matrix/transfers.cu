// Buffers and transfers (transfers.cuh).
#include "transfers.cuh"

#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "kernels.cuh"
#include "suite.hpp"

#ifdef SUITE_HAVE_LIBNUMA
#include <numa.h>
#endif

namespace path_matrix {

HostBuffer::HostBuffer(std::uint64_t bytes, int node) : bytes_(bytes), node_(node) {
#ifdef SUITE_HAVE_LIBNUMA
    if (node >= 0) {
        ptr_ = numa_alloc_onnode(bytes, node);
        if (!ptr_) suite::die("numa_alloc_onnode: no %" PRIu64 " bytes on NUMA node %d", bytes, node);
        std::memset(ptr_, 0, bytes);  // the pages are placed by this first touch
        CUDA_CHECK(cudaHostRegister(ptr_, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped));
        return;
    }
#endif
    CUDA_CHECK(cudaHostAlloc(&ptr_, bytes, cudaHostAllocPortable | cudaHostAllocMapped));
}

HostBuffer::~HostBuffer() {
#ifdef SUITE_HAVE_LIBNUMA
    if (node_ >= 0) {
        cudaHostUnregister(ptr_);
        numa_free(ptr_, bytes_);
        return;
    }
#endif
    cudaFreeHost(ptr_);
}

DeviceBuffer::DeviceBuffer(int gpu, std::uint64_t bytes) : gpu(gpu) {
    CUDA_CHECK(cudaSetDevice(gpu));
    CUDA_CHECK(cudaMalloc(&ptr, bytes));
}
DeviceBuffer::~DeviceBuffer() {
    cudaSetDevice(gpu);
    cudaFree(ptr);
}

int sm_count(int gpu) {
    int sms = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, gpu));
    return sms;
}

int copy_grid(int gpu, int blocks) { return blocks > 0 ? blocks : 4 * sm_count(gpu); }

namespace {

// A counter in the memory of the GPU whose kernel adds to it.
unsigned long long *device_counter(int gpu) {
    unsigned long long *counter = nullptr;
    CUDA_CHECK(cudaSetDevice(gpu));
    CUDA_CHECK(cudaMalloc(&counter, sizeof *counter));
    return counter;
}

unsigned long long read_counter(int gpu, const unsigned long long *counter) {
    unsigned long long value = 0;
    CUDA_CHECK(cudaSetDevice(gpu));
    CUDA_CHECK(cudaMemcpy(&value, counter, sizeof value, cudaMemcpyDeviceToHost));
    return value;
}

void fill(const Transfer &t, std::size_t words, std::uint64_t salt) {
    CUDA_CHECK(cudaSetDevice(t.gpu));
    launch_fill(4 * sm_count(t.gpu), static_cast<std::uint64_t *>(const_cast<void *>(t.src)), words, salt);
    CUDA_CHECK(cudaDeviceSynchronize());
}

void launch(const Transfer &t, std::uint64_t bytes, int blocks, cudaStream_t stream, unsigned long long *sum) {
    const int grid = copy_grid(t.gpu, blocks);
    if (t.engine == Engine::ce) CUDA_CHECK(cudaMemcpyAsync(t.dst, t.src, bytes, cudaMemcpyDefault, stream));
    else if (t.engine == Engine::sm) launch_copy(grid, stream, t.src, t.dst, bytes / 16);
    else launch_read_bulk(grid, stream, t.src, bytes / 16, sum);
}

// Two SM copies on one GPU run as one kernel (copy_both_kernel), timed once for both.
bool one_kernel(const std::vector<Transfer> &ts) {
    return ts.size() == 2 && ts[0].engine == Engine::sm && ts[1].engine == Engine::sm && ts[0].gpu == ts[1].gpu;
}

void launch_both(const std::vector<Transfer> &ts, std::uint64_t bytes, int blocks, cudaStream_t stream) {
    launch_copy_both(copy_grid(ts[0].gpu, blocks), stream, ts[0].src, ts[0].dst, ts[1].src, ts[1].dst, bytes / 16);
}

// Whether a transfer delivered: the copy's destination holds i ^ salt, the
// bulk read summed 0 .. words-1; dies naming the transfer where not.
void verify(const Transfer &t, std::size_t words, std::uint64_t salt, unsigned long long *counter) {
    if (t.engine == Engine::bulk) {
        const unsigned long long sum = read_counter(t.gpu, counter);
        if (sum != suite::triangular_mod64(words))
            suite::die("bulk read on GPU %d summed %llu, expected %" PRIu64, t.gpu, sum,
                       suite::triangular_mod64(words));
        return;
    }
    CUDA_CHECK(cudaSetDevice(t.gpu));
    CUDA_CHECK(cudaMemset(counter, 0, sizeof *counter));
    launch_check(4 * sm_count(t.gpu), static_cast<const std::uint64_t *>(t.dst), words, salt, counter);
    const unsigned long long wrong = read_counter(t.gpu, counter);
    if (wrong) suite::die("%s copy on GPU %d: %llu of %zu words wrong", engine_name(t.engine), t.gpu, wrong, words);
}

}  // namespace

std::vector<std::vector<double>> run_together(const std::vector<Transfer> &ts, std::uint64_t bytes, int blocks,
                                              int samples, std::uint64_t &salt) {
    const std::size_t n = ts.size(), words = bytes / 8;
    const bool fused = one_kernel(ts);
    const std::size_t launches = fused ? 1 : n;
    std::vector<cudaStream_t> streams(n);
    std::vector<cudaEvent_t> starts(n), stops(n);
    std::vector<unsigned long long *> counters(n);
    int *release = nullptr, *timed_out = nullptr;
    CUDA_CHECK(cudaHostAlloc(&release, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
    CUDA_CHECK(cudaHostAlloc(&timed_out, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
    for (std::size_t k = 0; k < n; ++k) {
        counters[k] = device_counter(ts[k].gpu);
        CUDA_CHECK(cudaStreamCreateWithFlags(&streams[k], cudaStreamNonBlocking));
        CUDA_CHECK(cudaEventCreate(&starts[k]));
        CUDA_CHECK(cudaEventCreate(&stops[k]));
    }
    std::vector<std::vector<double>> seconds;
    for (int sample = 0; sample <= samples; ++sample) {
        ++salt;
        for (std::size_t k = 0; k < n; ++k) {  // sources hold i ^ salt, bulk ones i
            fill(ts[k], words, ts[k].engine == Engine::bulk ? 0 : salt);
            CUDA_CHECK(cudaMemset(counters[k], 0, sizeof(unsigned long long)));
        }
        *release = 0, *timed_out = 0;
        for (std::size_t k = 0; k < launches; ++k) {
            CUDA_CHECK(cudaSetDevice(ts[k].gpu));
            launch_latch(streams[k], release, 10'000'000'000LL, timed_out);
            CUDA_CHECK(cudaEventRecord(starts[k], streams[k]));
            if (fused) launch_both(ts, bytes, blocks, streams[k]);
            else launch(ts[k], bytes, blocks, streams[k], counters[k]);
            CUDA_CHECK(cudaEventRecord(stops[k], streams[k]));
        }
        *reinterpret_cast<volatile int *>(release) = 1;
        std::vector<double> times(n);
        for (std::size_t k = 0; k < n; ++k) {
            const std::size_t l =
                std::min(k, launches - 1);  // a fused pair's both transfers took its one kernel's time
            CUDA_CHECK(cudaEventSynchronize(stops[l]));
            float ms = 0;
            CUDA_CHECK(cudaEventElapsedTime(&ms, starts[l], stops[l]));
            times[k] = ms / 1e3;
        }
        if (*timed_out) suite::die("a latch gave up waiting for the host: the transfers did not start together");
        for (std::size_t k = 0; k < n; ++k) verify(ts[k], words, salt, counters[k]);
        if (sample > 0) seconds.push_back(times);
    }
    for (std::size_t k = 0; k < n; ++k) {
        CUDA_CHECK(cudaSetDevice(ts[k].gpu));
        CUDA_CHECK(cudaStreamDestroy(streams[k]));
        CUDA_CHECK(cudaEventDestroy(starts[k]));
        CUDA_CHECK(cudaEventDestroy(stops[k]));
        CUDA_CHECK(cudaFree(counters[k]));
    }
    CUDA_CHECK(cudaFreeHost(release));
    CUDA_CHECK(cudaFreeHost(timed_out));
    return seconds;
}

}  // namespace path_matrix
