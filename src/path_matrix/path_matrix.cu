// The node's path matrix: every path a byte can take between the node's
// memories, each measured on its own and judged against its own link.
//
//   host      every GPU x every NUMA node: pinned memory bound to that node
//             (libnuma), host-to-device, device-to-host and both at once, by
//             the copy engine (cudaMemcpyAsync) and by the SMs (a copy kernel
//             through the mapped host memory);
//   host-all  every GPU to and from its own NUMA node's memory at once: what
//             shared PCIe switches and root ports limit;
//   peer      every ordered pair of GPUs that reach each other: the GPU named
//             first reads the other's memory or writes into it, one direction
//             and both at once (the pair's other GPU doing the same to it), by
//             the copy engine, by the SMs, and reading by sm_90's bulk copies
//             into shared memory (cp.async.bulk, the TMA unit);
//   latency   a dependent pointer chase from each GPU through host memory on
//             each NUMA node and through each peer's memory.
//
// Transfers that run at once start together: every stream first waits on a
// latch kernel that the host releases once all of them are queued, as
// NVIDIA's nvbandwidth does. Every copy is verified: sources hold word i =
// i ^ salt with a new salt per sample, and a kernel counts the destination's
// wrong words; bulk reads sum a buffer whose word i holds i; a chase must end
// on the slot its permutation says.
//
// One line per sample: "Cell: path=peer engine=sm op=read dir=one gpu=1
// peer=0 numa=-1 sample=1 bytes=268435456 seconds=... gbs=..." (GB/s are
// 10^9 bytes per second, the unit links are sold in; latency cells give
// ns=... per step instead), then "Verified: cells=N".
#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "stream_kernels.cuh"
#include "suite.hpp"

#ifdef SUITE_HAVE_LIBNUMA
#include <numa.h>
#endif

namespace {

// ---------------------------------------------------------------- kernels --

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
// the caches, so every step crosses the link whatever the buffer's size.
__global__ void chase_kernel(const std::uint64_t *chain, long long steps, std::uint64_t *last) {
    std::uint64_t at = 0;
    for (long long s = 0; s < steps; ++s) {
        std::uint64_t next;
        asm volatile("ld.global.cv.u64 %0, [%1];" : "=l"(next) : "l"(chain + at) : "memory");
        at = next;
    }
    *last = at;
}

// ------------------------------------------------------------ host helpers --

enum class Engine { ce, sm, bulk };
const char *engine_name(Engine e) { return e == Engine::ce ? "ce" : e == Engine::sm ? "sm" : "bulk"; }

struct Config {
    std::vector<std::string> paths, engines;
    std::vector<int> gpus, numa_nodes;  // numa_nodes {-1}: no binding (no libnuma)
    std::uint64_t size = 0, chase_bytes = 0, chase_stride = 0;
    long long chase_steps = 0;
    int samples = 0;
    bool wants(const std::string &path) const { return std::count(paths.begin(), paths.end(), path) != 0; }
    bool wants(Engine e) const { return std::count(engines.begin(), engines.end(), engine_name(e)) != 0; }
};

// Pinned host memory on one NUMA node: allocated there (libnuma), touched
// there, then registered with CUDA and mapped into every GPU's address space.
class HostBuffer {
  public:
    HostBuffer(std::uint64_t bytes, int node) : bytes_(bytes), node_(node) {
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
    ~HostBuffer() {
#ifdef SUITE_HAVE_LIBNUMA
        if (node_ >= 0) {
            cudaHostUnregister(ptr_);
            numa_free(ptr_, bytes_);
            return;
        }
#endif
        cudaFreeHost(ptr_);
    }
    HostBuffer(const HostBuffer &) = delete;
    HostBuffer &operator=(const HostBuffer &) = delete;
    void *get() const { return ptr_; }

  private:
    void *ptr_ = nullptr;
    std::uint64_t bytes_;
    int node_;
};

struct DeviceBuffer {
    DeviceBuffer(int gpu, std::uint64_t bytes) : gpu(gpu) {
        CUDA_CHECK(cudaSetDevice(gpu));
        CUDA_CHECK(cudaMalloc(&ptr, bytes));
    }
    ~DeviceBuffer() {
        cudaSetDevice(gpu);
        cudaFree(ptr);
    }
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

int sm_count(int gpu) {
    int sms = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, gpu));
    return sms;
}

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
    fill_kernel<<<4 * sm_count(t.gpu), 256>>>(static_cast<std::uint64_t *>(const_cast<void *>(t.src)), words, salt);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
}

void launch(const Transfer &t, std::uint64_t bytes, cudaStream_t stream, unsigned long long *sum) {
    const int grid = 4 * sm_count(t.gpu);
    if (t.engine == Engine::ce) CUDA_CHECK(cudaMemcpyAsync(t.dst, t.src, bytes, cudaMemcpyDefault, stream));
    else if (t.engine == Engine::sm)
        copy_kernel<<<grid, 256, 0, stream>>>(static_cast<const uint4 *>(t.src), static_cast<uint4 *>(t.dst),
                                              bytes / 16);
    else suite::read_bulk_kernel<<<grid, 128, 0, stream>>>(static_cast<const uint4 *>(t.src), bytes / 16, sum);
    CUDA_CHECK_LAUNCH();
}

// Two SM copies on one GPU run as one kernel (copy_both_kernel), timed once for both.
bool one_kernel(const std::vector<Transfer> &ts) {
    return ts.size() == 2 && ts[0].engine == Engine::sm && ts[1].engine == Engine::sm && ts[0].gpu == ts[1].gpu;
}

void launch_both(const std::vector<Transfer> &ts, std::uint64_t bytes, cudaStream_t stream) {
    copy_both_kernel<<<4 * sm_count(ts[0].gpu), 256, 0, stream>>>(static_cast<const uint4 *>(ts[0].src),
                                                                  static_cast<uint4 *>(ts[0].dst),
                                                                  static_cast<const uint4 *>(ts[1].src),
                                                                  static_cast<uint4 *>(ts[1].dst), bytes / 16);
    CUDA_CHECK_LAUNCH();
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
    check_kernel<<<4 * sm_count(t.gpu), 256>>>(static_cast<const std::uint64_t *>(t.dst), words, salt, counter);
    CUDA_CHECK_LAUNCH();
    const unsigned long long wrong = read_counter(t.gpu, counter);
    if (wrong) suite::die("%s copy on GPU %d: %llu of %zu words wrong", engine_name(t.engine), t.gpu, wrong, words);
}

// Runs transfers of `bytes` each at once (latched), `samples` times after one
// untimed, each verified; returns each transfer's seconds ([sample][transfer]).
std::vector<std::vector<double>> run_together(const std::vector<Transfer> &ts, std::uint64_t bytes, int samples,
                                              std::uint64_t &salt) {
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
            latch_kernel<<<1, 1, 0, streams[k]>>>(release, 10'000'000'000LL, timed_out);
            CUDA_CHECK_LAUNCH();
            CUDA_CHECK(cudaEventRecord(starts[k], streams[k]));
            if (fused) launch_both(ts, bytes, streams[k]);
            else launch(ts[k], bytes, streams[k], counters[k]);
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

// A cell's name, as the check reads it back.
struct Cell {
    std::string path, op, dir;
    Engine engine;
    int gpu, peer, numa;  // -1: not part of the cell
};

int cells_printed = 0;

// One line per sample of one transfer of a cell.
void print_cell(const Cell &c, const std::vector<std::vector<double>> &seconds, std::size_t transfer,
                std::uint64_t bytes) {
    for (std::size_t s = 0; s < seconds.size(); ++s)
        suite::Record("Cell")
            .add("path", c.path)
            .add("engine", engine_name(c.engine))
            .add("op", c.op)
            .add("dir", c.dir)
            .add("gpu", c.gpu)
            .add("peer", c.peer)
            .add("numa", c.numa)
            .add("sample", s + 1)
            .add("bytes", bytes)
            .addf("seconds", "%.6g", seconds[s][transfer])
            .addf("gbs", "%.6g", static_cast<double>(bytes) / seconds[s][transfer] / 1e9)
            .print();
    std::fflush(stdout);
    ++cells_printed;
}

void host_cells(const Config &c, std::uint64_t &salt) {
    for (int gpu : c.gpus) {
        DeviceBuffer d1(gpu, c.size), d2(gpu, c.size);
        for (int node : c.numa_nodes) {
            HostBuffer h1(c.size, node), h2(c.size, node);
            for (Engine e : {Engine::ce, Engine::sm}) {
                if (!c.wants(e)) continue;
                const Transfer h2d{gpu, e, h1.get(), d1.ptr}, d2h{gpu, e, d2.ptr, h2.get()};
                print_cell({"host", "copy", "h2d", e, gpu, -1, node}, run_together({h2d}, c.size, c.samples, salt), 0,
                           c.size);
                print_cell({"host", "copy", "d2h", e, gpu, -1, node}, run_together({d2h}, c.size, c.samples, salt), 0,
                           c.size);
                const auto both = run_together({h2d, d2h}, c.size, c.samples, salt);
                print_cell({"host", "copy", "h2d-both", e, gpu, -1, node}, both, 0, c.size);
                print_cell({"host", "copy", "d2h-both", e, gpu, -1, node}, both, 1, c.size);
            }
        }
    }
}

// The NUMA node closest to a GPU (the first of --numa-nodes where CUDA does not say).
int gpu_numa_node(const Config &c, int gpu) {
    int node = -1;
#if CUDART_VERSION >= 12020
    if (cudaDeviceGetAttribute(&node, cudaDevAttrHostNumaId, gpu) != cudaSuccess) {
        cudaGetLastError();
        node = -1;
    }
#endif
    return std::count(c.numa_nodes.begin(), c.numa_nodes.end(), node) ? node : c.numa_nodes.front();
}

void host_all_cells(const Config &c, std::uint64_t &salt) {
    if (c.gpus.size() < 2) return;  // one GPU's cells are the host path's own
    std::vector<std::unique_ptr<DeviceBuffer>> dev;
    std::vector<std::unique_ptr<HostBuffer>> host;
    std::vector<Transfer> h2d, d2h;
    for (int gpu : c.gpus) {
        const int node = gpu_numa_node(c, gpu);
        for (int k = 0; k < 2; ++k) {
            dev.push_back(std::make_unique<DeviceBuffer>(gpu, c.size));
            host.push_back(std::make_unique<HostBuffer>(c.size, node));
        }
    }
    for (Engine e : {Engine::ce, Engine::sm}) {
        if (!c.wants(e)) continue;
        h2d.clear(), d2h.clear();
        for (std::size_t g = 0; g < c.gpus.size(); ++g) {
            h2d.push_back({c.gpus[g], e, host[2 * g]->get(), dev[2 * g]->ptr});
            d2h.push_back({c.gpus[g], e, dev[2 * g + 1]->ptr, host[2 * g + 1]->get()});
        }
        for (const auto &[dir, ts] : {std::pair{"h2d", h2d}, std::pair{"d2h", d2h}}) {
            const auto seconds = run_together(ts, c.size, c.samples, salt);
            for (std::size_t g = 0; g < ts.size(); ++g)
                print_cell({"host-all", "copy", dir, e, c.gpus[g], -1, gpu_numa_node(c, c.gpus[g])}, seconds, g,
                           c.size);
        }
    }
}

bool peers(int a, int b) {
    int can = 0;
    CUDA_CHECK(cudaDeviceCanAccessPeer(&can, a, b));
    if (!can) return false;
    CUDA_CHECK(cudaSetDevice(a));
    const cudaError_t err = cudaDeviceEnablePeerAccess(b, 0);
    if (err == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
    else CUDA_CHECK(err);
    return true;
}

bool has_bulk(int gpu) {
    int major = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, gpu));
    return major >= 9;
}

void peer_cells(const Config &c, std::uint64_t &salt) {
    for (int a : c.gpus)
        for (int b : c.gpus) {
            if (a >= b) continue;
            if (!peers(a, b) || !peers(b, a)) {
                suite::Record("Unreachable")
                    .add("gpu", a)
                    .add("peer", b)
                    .add("reason", "cudaDeviceCanAccessPeer is 0")
                    .print();
                continue;
            }
            DeviceBuffer a1(a, c.size), a2(a, c.size), b1(b, c.size), b2(b, c.size);
            for (Engine e : {Engine::ce, Engine::sm, Engine::bulk}) {
                if (!c.wants(e) || (e == Engine::bulk && !(has_bulk(a) && has_bulk(b)))) continue;
                // Reads: the GPU named first pulls the other's memory into its own.
                const Transfer a_reads{a, e, b1.ptr, e == Engine::bulk ? nullptr : a1.ptr};
                const Transfer b_reads{b, e, a2.ptr, e == Engine::bulk ? nullptr : b2.ptr};
                std::vector<std::pair<std::string, std::pair<Transfer, Transfer>>> ops = {{"read", {a_reads, b_reads}}};
                if (e != Engine::bulk)  // writes: the GPU named first pushes its memory into the other's
                    ops.push_back({"write", {Transfer{a, e, a1.ptr, b1.ptr}, Transfer{b, e, b2.ptr, a2.ptr}}});
                for (const auto &[op, pair] : ops) {
                    print_cell({"peer", op, "one", e, a, b, -1}, run_together({pair.first}, c.size, c.samples, salt), 0,
                               c.size);
                    print_cell({"peer", op, "one", e, b, a, -1}, run_together({pair.second}, c.size, c.samples, salt),
                               0, c.size);
                    const auto both = run_together({pair.first, pair.second}, c.size, c.samples, salt);
                    print_cell({"peer", op, "both", e, a, b, -1}, both, 0, c.size);
                    print_cell({"peer", op, "both", e, b, a, -1}, both, 1, c.size);
                }
            }
        }
}

// A random cycle through every slot of the buffer (Sattolo's algorithm): word
// slot*stride/8 holds the next slot's word index, so a chase visits them all.
std::vector<std::uint64_t> chase_chain(std::uint64_t bytes, std::uint64_t stride, std::uint64_t &expected_last,
                                       long long steps) {
    const std::uint64_t slots = bytes / stride, per = stride / 8;
    std::vector<std::uint64_t> order(slots);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(12345);
    for (std::uint64_t i = slots - 1; i > 0; --i) std::swap(order[i], order[rng() % i]);
    std::vector<std::uint64_t> chain(bytes / 8, 0);
    for (std::uint64_t i = 0; i < slots; ++i) chain[i * per] = order[i] * per;
    std::uint64_t at = 0;
    for (long long s = 0; s < steps; ++s) at = chain[at];
    expected_last = at;
    return chain;
}

void chase(const Config &c, int gpu, std::uint64_t *target, const Cell &cell, const std::vector<std::uint64_t> &chain,
           std::uint64_t expected) {
    CUDA_CHECK(cudaSetDevice(gpu));
    CUDA_CHECK(cudaMemcpy(target, chain.data(), c.chase_bytes, cudaMemcpyDefault));
    std::uint64_t *last = nullptr;
    CUDA_CHECK(cudaMalloc(&last, sizeof *last));
    suite::EventTimer timer;
    for (int sample = 0; sample <= c.samples; ++sample) {  // sample 0 warms the TLBs up, untimed
        timer.start();
        chase_kernel<<<1, 1>>>(target, c.chase_steps, last);
        CUDA_CHECK_LAUNCH();
        const double seconds = timer.stop();
        std::uint64_t got = 0;
        CUDA_CHECK(cudaMemcpy(&got, last, sizeof got, cudaMemcpyDeviceToHost));
        if (got != expected)
            suite::die("the chase from GPU %d ended on word %" PRIu64 ", expected %" PRIu64, gpu, got, expected);
        if (sample > 0)
            suite::Record("Cell")
                .add("path", "latency")
                .add("engine", "sm")
                .add("op", "chase")
                .add("dir", cell.dir)
                .add("gpu", gpu)
                .add("peer", cell.peer)
                .add("numa", cell.numa)
                .add("sample", sample)
                .add("steps", c.chase_steps)
                .add("stride", c.chase_stride)
                .addf("ns", "%.6g", seconds * 1e9 / static_cast<double>(c.chase_steps))
                .print();
    }
    std::fflush(stdout);
    ++cells_printed;
    CUDA_CHECK(cudaFree(last));
}

void latency_cells(const Config &c) {
    std::uint64_t expected = 0;
    const auto chain = chase_chain(c.chase_bytes, c.chase_stride, expected, c.chase_steps);
    for (int gpu : c.gpus) {
        for (int node : c.numa_nodes) {
            HostBuffer h(c.chase_bytes, node);
            chase(c, gpu, static_cast<std::uint64_t *>(h.get()),
                  {"latency", "chase", "host", Engine::sm, gpu, -1, node}, chain, expected);
        }
        for (int peer : c.gpus) {
            if (peer == gpu || !peers(gpu, peer)) continue;
            DeviceBuffer d(peer, c.chase_bytes);
            chase(c, gpu, static_cast<std::uint64_t *>(d.ptr), {"latency", "chase", "peer", Engine::sm, gpu, peer, -1},
                  chain, expected);
        }
    }
}

// "all" (0 .. count-1) or a list of distinct integers from 0 to count-1, for --<name>.
std::vector<int> index_list(const suite::Options &opts, const std::string &name, int count, const char *what) {
    std::vector<int> out;
    if (opts.str(name) == "all") {
        for (int i = 0; i < count; ++i) out.push_back(i);
        return out;
    }
    for (const auto &item : opts.list(name)) {
        long long v = 0;
        if (!suite::parse_integer(item, v) || v < 0 || v >= count)
            opts.usage_error("option '--%s' expects 'all' or %s from 0 to %d, got '%s'", name.c_str(), what, count - 1,
                             item.c_str());
        if (std::count(out.begin(), out.end(), static_cast<int>(v)))
            opts.usage_error("option '--%s' names %lld twice", name.c_str(), v);
        out.push_back(static_cast<int>(v));
    }
    if (out.empty()) opts.usage_error("option '--%s' needs at least one value", name.c_str());
    return out;
}

// How many NUMA node numbers the host has (0 without libnuma), and whether one has memory.
int numa_node_count() {
#ifdef SUITE_HAVE_LIBNUMA
    if (numa_available() >= 0) return numa_max_node() + 1;
#endif
    return 0;
}

bool numa_node_has_memory(int node) {
#ifdef SUITE_HAVE_LIBNUMA
    return numa_node_size64(node, nullptr) > 0;
#else
    return node < 0;
#endif
}

}  // namespace

int main(int argc, char **argv) {
    suite::Options opts("path_matrix", "Every path between the node's memories: GPU x NUMA node, all GPUs at once, "
                                       "every GPU pair, and latency; one 'Cell:' line per sample.");
    opts.add("paths", "host,host-all,peer,latency", "host, host-all, peer, latency (list)");
    opts.add("engines", "ce,sm,bulk", "ce (copy engine), sm (copy kernel), bulk (sm_90 bulk reads of a peer) (list)");
    opts.add("gpus", "all", "GPUs to measure: 'all' or a list of indices");
    opts.add("numa-nodes", "all", "NUMA nodes whose memory to measure: 'all' or a list (needs libnuma)");
    opts.add("size", "256M", "bytes per transfer (a multiple of 64K)");
    opts.add("samples", "5", "timed runs of each cell, after one untimed");
    opts.add("chase-bytes", "64M", "bytes the pointer chase runs through");
    opts.add("chase-stride", "256", "bytes between the chase's slots (a multiple of 8)");
    opts.add("chase-steps", "20000", "dependent loads per chase");
    opts.parse(argc, argv);

    Config c;
    c.paths = opts.choices("paths", {"host", "host-all", "peer", "latency"});
    c.engines = opts.choices("engines", {"ce", "sm", "bulk"});
    c.size = opts.bytes("size", 64 * 1024);
    if (c.size % (64 * 1024))
        opts.usage_error("option '--size' expects a multiple of 64K, got '%s'", opts.str("size").c_str());
    c.samples = opts.integer32("samples", 1, 10000);
    c.chase_stride = opts.bytes("chase-stride", 8, 1 << 20);
    if (c.chase_stride % 8)
        opts.usage_error("option '--chase-stride' expects a multiple of 8, got '%s'", opts.str("chase-stride").c_str());
    c.chase_bytes = opts.bytes("chase-bytes", 2 * c.chase_stride, 1ull << 34);
    if (c.chase_bytes % c.chase_stride)
        opts.usage_error("option '--chase-bytes' expects a multiple of --chase-stride, got '%s'",
                         opts.str("chase-bytes").c_str());
    // A step is one round trip (about 1.2 us over PCIe Gen5): 10^8 is two minutes.
    c.chase_steps = opts.integer("chase-steps", 1, 100000000);
    opts.require_host_memory("size", 2 * c.size, 0.5);  // two host buffers at once at the least
    // The GPUs' numbers are checked against the visible ones once CUDA runs; their form now.
    constexpr int kAnyGpu = 1 << 16;
    if (opts.str("gpus") != "all") index_list(opts, "gpus", kAnyGpu, "GPUs");
    const int nodes = numa_node_count();
    if (nodes == 0 && opts.str("numa-nodes") != "all")
        opts.usage_error("option '--numa-nodes': this build or host has no libnuma, so host memory cannot be bound");
    c.numa_nodes = nodes ? index_list(opts, "numa-nodes", nodes, "NUMA nodes") : std::vector<int>{-1};
    if (opts.str("numa-nodes") == "all")  // memory-less nodes (CPUs only) have nothing to measure
        c.numa_nodes.erase(std::remove_if(c.numa_nodes.begin(), c.numa_nodes.end(),
                                          [](int node) { return !numa_node_has_memory(node); }),
                           c.numa_nodes.end());
    for (int node : c.numa_nodes)
        if (!numa_node_has_memory(node)) opts.usage_error("option '--numa-nodes': NUMA node %d has no memory", node);

    const int count = suite::device_count();
    if (count == 0) suite::die("no CUDA device visible");
    c.gpus = index_list(opts, "gpus", opts.str("gpus") == "all" ? count : kAnyGpu, "GPUs");
    for (int gpu : c.gpus)
        if (gpu >= count) opts.usage_error("option '--gpus' names GPU %d, but %d are visible", gpu, count);
    // Two host buffers per GPU at most at once (host-all), each --size.
    opts.require_host_memory("size", 2 * c.size * std::max<std::size_t>(1, c.gpus.size()), 0.5);
    for (int gpu : c.gpus) {
        std::size_t free = 0, total = 0;
        CUDA_CHECK(cudaSetDevice(gpu));
        CUDA_CHECK(cudaMemGetInfo(&free, &total));
        if (4 * c.size + c.chase_bytes > free / 2)
            opts.usage_error("option '--size' %s: four buffers and the chase need more than half of GPU %d's "
                             "%.1f GiB free",
                             opts.str("size").c_str(), gpu, static_cast<double>(free) / suite::kGiB);
        cudaDeviceProp prop{};
        CUDA_CHECK(cudaGetDeviceProperties(&prop, gpu));
        std::printf("GPU %d: %s, %d SMs, NUMA node %d\n", gpu, prop.name, prop.multiProcessorCount,
                    gpu_numa_node(c, gpu));
    }
    std::printf("Host memory: %s\n",
                nodes ? "pinned, bound to each NUMA node (libnuma)" : "pinned, not bound (no libnuma)");

    std::uint64_t salt = 0x5eed;
    if (c.wants("host")) host_cells(c, salt);
    if (c.wants("host-all")) host_all_cells(c, salt);
    if (c.wants("peer")) peer_cells(c, salt);
    if (c.wants("latency")) latency_cells(c);
    suite::Record("Verified").add("cells", cells_printed).add("samples", c.samples).print();
    return EXIT_SUCCESS;
}
