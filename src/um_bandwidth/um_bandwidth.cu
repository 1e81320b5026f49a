// The "CUDA Unified Memory Bandwidth Debugging" reprex, with its compile-time
// switches turned into runtime options: one binary covers the whole sweep.
//
// A kernel of `grid` x `block` threads reads (or writes) a buffer of `size`
// bytes that lives in managed memory, NUMA-local host memory, pinned host
// memory or device memory. Its records (src/common/record.hpp; parsed by
// experiments/um_bandwidth.py, which the check uses):
//
//   Kernel: op=read                         what the runs do
//   CopyEngine: direction=h2d gibs=51.2 samples=5 values=51.1,...
//   Throughput: repeat=1 run=1 gibs=6.42    each run (the seed's "Throughput: X GiB/s")
//   Verified: kernel=read runs=5            every run verified: a read returns a checksum
//                                           the host knows, a write is checked by the host
//   AdviceRejected: reason=...              the driver refused the advice (exit 3: a skip)
//
// The copy engine's bandwidth over the same link is measured once in the same
// process, as the yardstick for the results, its sample count in its record.
// --repeats R runs the seed's whole experiment R times, each on a fresh
// allocation ("Repeat: r of R" before its runs), so that the first run, which
// pays for migration, has as many samples as the steady state.
#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <sys/sysinfo.h>
#include <unistd.h>

#include "stream_kernels.cuh"
#include "suite.hpp"

#ifdef SUITE_HAVE_LIBNUMA
#include <numa.h>
#endif

namespace {

enum class Alloc { managed, numa, pinned, device };

struct Config {
    Alloc alloc = Alloc::managed;
    bool accessed_by = false, read_mostly = false, preferred_cpu = false;
    bool touch_on_host = false, read = true, allow_oversubscription = false, wide_loads = false, bulk = false;
    suite::Options::Amount amount;  // --size as given: bytes or a multiple of the GPU's memory
    std::uint64_t size = 0;         // in bytes, once the GPU's memory is known
    int runs = 5, repeats = 1, device = 0, numa_node = 0, grid = 0 /* 0: the SM count */, block = 128;
    int copy_engine_samples = 5;  // copies timed each way, after one warm-up
};

// ---------------------------------------------------------------- kernels --

using suite::kBulkChunk;
using suite::read_bulk_kernel;
using suite::read_kernel;

// Stores word i = i ^ salt (as two 64-bit halves), so that a stale or
// misplaced word is caught by the host.
__global__ void write_kernel(uint4 *__restrict__ data, std::size_t n, unsigned long long salt) {
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        const unsigned long long lo = (2 * i) ^ salt, hi = (2 * i + 1) ^ salt;
        suite::store16(data + i, make_uint4(static_cast<unsigned>(lo), static_cast<unsigned>(lo >> 32),
                                            static_cast<unsigned>(hi), static_cast<unsigned>(hi >> 32)));
    }
}

__global__ void fill_kernel(std::uint64_t *data, std::size_t n) {
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        data[i] = i;
}

// ------------------------------------------------------------ host helpers --

const char *alloc_name(Alloc a) {
    switch (a) {
    case Alloc::managed: return "managed";
    case Alloc::numa: return "numa";
    case Alloc::pinned: return "pinned";
    default: return "device";
    }
}

// Runs body(begin, end) over [0, n) on all host CPUs.
template <typename Body>
void parallel_for(std::size_t n, Body body) {
    const unsigned threads = std::max(1u, std::min(32u, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    const std::size_t chunk = (n + threads - 1) / threads;
    for (unsigned t = 0; t < threads; ++t) {
        const std::size_t begin = std::min(n, t * chunk), end = std::min(n, begin + chunk);
        pool.emplace_back([=] { body(begin, end); });
    }
    for (auto &th : pool) th.join();
}

Config parse_config(const suite::Options &opts) {
    Config c;
    const std::string alloc = opts.choice("alloc", {"managed", "numa", "pinned", "device"});
    c.alloc = alloc == "managed"  ? Alloc::managed
              : alloc == "numa"   ? Alloc::numa
              : alloc == "pinned" ? Alloc::pinned
                                  : Alloc::device;
    for (const auto &a : opts.choices("advise", {"none", "accessed-by", "read-mostly", "preferred-location-cpu"})) {
        c.accessed_by |= a == "accessed-by";
        c.read_mostly |= a == "read-mostly";
        c.preferred_cpu |= a == "preferred-location-cpu";
    }
    if ((c.accessed_by || c.read_mostly || c.preferred_cpu) && c.alloc != Alloc::managed)
        opts.usage_error("option '--advise' applies to --alloc managed only, got --alloc %s", alloc.c_str());
    c.read = opts.choice("op", {"read", "write"}) == "read";
    c.touch_on_host = opts.flag("touch-on-host");
    if (c.touch_on_host && c.alloc == Alloc::device)
        opts.usage_error("option '--touch-on-host' needs host-accessible memory, not --alloc device");
    c.allow_oversubscription = opts.flag("allow-oversubscription");
    const std::string load = opts.choice("load", {"plain", "l2-256", "bulk"});
    c.wide_loads = load == "l2-256";
    c.bulk = load == "bulk";
    c.runs = opts.integer32("runs", 1, 1000000);
    c.device = opts.integer32("device", 0, std::numeric_limits<int>::max());  // checked against the GPUs later
    c.repeats = opts.integer32("repeats", 1, 1000000);
    c.copy_engine_samples = opts.integer32("copy-engine-samples", 1, 100);
    c.numa_node = opts.integer32("numa-node", 0, 1 << 16);
    c.block = opts.integer32("block", 32, 1024);
    if (c.block % 32) opts.usage_error("option '--block' expects a multiple of 32, got %d", c.block);
    if (opts.str("grid") != "auto") c.grid = opts.integer32("grid", 1, std::numeric_limits<int>::max());
    // A multiple of the GPU's memory up to 64x, or at least one bulk chunk.
    c.amount = opts.amount("size", 64.0, kBulkChunk);
    // A size in bytes is checked against the host now; a multiple of the GPU's memory in check_capacity.
    if (c.amount.factor == 0 && c.alloc != Alloc::device) opts.require_host_memory("size", c.amount.bytes, 0.9);
    return c;
}

// Refuses sizes the GPU or the host cannot hold, naming --size: asking for
// more managed memory than the GPU has free can hang the GPU, so
// oversubscription must be asked for explicitly, and then the host must have
// room for all of it.
void check_capacity(const suite::Options &opts, const Config &c) {
    std::size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    const double gib = suite::kGiB;
    if (c.alloc == Alloc::device && c.size > free_b)
        opts.usage_error("option '--size' %s asks for %.2f GiB of device memory, %.2f GiB free",
                         opts.str("size").c_str(), c.size / gib, free_b / gib);
    if (c.alloc == Alloc::managed && c.size > free_b && !c.allow_oversubscription)
        opts.usage_error("option '--size' %s asks for %.2f GiB of managed memory, more than the %.2f GiB free on "
                         "the GPU: pass --allow-oversubscription where the system supports it",
                         opts.str("size").c_str(), c.size / gib, free_b / gib);
    if (c.amount.factor > 0 && c.alloc != Alloc::device) opts.require_host_memory("size", c.size, 0.9);
}

// ------------------------------------------------------------- allocation --

struct Buffer {
    Alloc alloc;
    void *ptr = nullptr;
    std::size_t bytes = 0;
    bool registered = false;
};

bool pageable_access(int device) {
    int value = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrPageableMemoryAccess, device));
    return value != 0;
}

Buffer allocate(const Config &c) {
    Buffer b{c.alloc, nullptr, c.size, false};
    switch (c.alloc) {
    case Alloc::managed:
        CUDA_CHECK(cudaMallocManaged(&b.ptr, b.bytes));
        std::puts("Managed memory enabled");
        break;
    case Alloc::pinned:
        CUDA_CHECK(cudaMallocHost(&b.ptr, b.bytes));
        std::puts("Pinned memory enabled");
        break;
    case Alloc::device:
        CUDA_CHECK(cudaMalloc(&b.ptr, b.bytes));
        std::puts("Device memory enabled");
        break;
    case Alloc::numa:
#ifdef SUITE_HAVE_LIBNUMA
        if (numa_available() < 0) suite::die("libnuma reports no NUMA support on this host");
        b.ptr = numa_alloc_onnode(b.bytes, c.numa_node);
        if (!b.ptr) suite::die("numa_alloc_onnode(%zu, %d) failed", b.bytes, c.numa_node);
        std::puts("System memory enabled");
        if (!pageable_access(c.device)) {
            // Without ATS or HMM the GPU cannot reach pageable memory: pin and
            // map it, which is what the NUMA baseline needs on such a node.
            CUDA_CHECK(cudaHostRegister(b.ptr, b.bytes, cudaHostRegisterDefault));
            b.registered = true;
            std::printf("System memory registered with cudaHostRegister (no ATS/HMM on device %d)\n", c.device);
        }
#else
        suite::die("--alloc numa needs libnuma, which this build does not have");
#endif
        break;
    }
    return b;
}

void release(Buffer &b) {
    switch (b.alloc) {
    case Alloc::managed:
    case Alloc::device: CUDA_CHECK(cudaFree(b.ptr)); break;
    case Alloc::pinned: CUDA_CHECK(cudaFreeHost(b.ptr)); break;
    case Alloc::numa:
#ifdef SUITE_HAVE_LIBNUMA
        if (b.registered) CUDA_CHECK(cudaHostUnregister(b.ptr));
        numa_free(b.ptr, b.bytes);
#endif
        break;
    }
}

// CUDA 13 takes a cudaMemLocation where CUDA 12 and older take a device id.
void advise(void *ptr, std::size_t bytes, cudaMemoryAdvise advice, bool on_host, int device) {
#if CUDART_VERSION >= 13000
    cudaMemLocation where{};
    where.type = on_host ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    where.id = on_host ? 0 : device;
    const cudaError_t err = cudaMemAdvise(ptr, bytes, advice, where);
#else
    const cudaError_t err = cudaMemAdvise(ptr, bytes, advice, on_host ? cudaCpuDeviceId : device);
#endif
    if (err != cudaSuccess) {
        // A check turns this record into a skip: the driver rejects the advice.
        suite::Record("AdviceRejected").add("reason", cudaGetErrorString(err)).print();
        std::exit(3);
    }
}

void apply_advice(const Config &c, const Buffer &b) {
    if (c.accessed_by) {
        advise(b.ptr, b.bytes, cudaMemAdviseSetAccessedBy, false, c.device);
        std::puts("cudaMemAdviseSetAccessedBy enabled");
    }
    if (c.read_mostly) {
        advise(b.ptr, b.bytes, cudaMemAdviseSetReadMostly, false, c.device);
        std::puts("cudaMemAdviseSetReadMostly enabled");
    }
    if (c.preferred_cpu) {
        advise(b.ptr, b.bytes, cudaMemAdviseSetPreferredLocation, true, c.device);
        std::puts("cudaMemAdviseSetPreferredLocation CPU enabled");
    }
}

// word i == i, so that a read's checksum is n (n - 1) / 2 modulo 2^64
// (suite::triangular_mod64).
void fill(const Config &c, const Buffer &b) {
    auto *words = static_cast<std::uint64_t *>(b.ptr);
    const std::size_t n = b.bytes / sizeof(std::uint64_t);
    if (c.alloc == Alloc::device) {
        fill_kernel<<<1024, 256>>>(words, n);
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(cudaDeviceSynchronize());
        return;
    }
    parallel_for(n, [=](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i) words[i] = i;
    });
}

// Writes one word per page from the host, which is what evicts managed pages
// from the GPU; the value is unchanged so the checksum stays valid.
void touch_on_host(const Buffer &b) {
    auto *words = static_cast<volatile std::uint64_t *>(b.ptr);
    const std::size_t n = b.bytes / sizeof(std::uint64_t);
    const std::size_t step = static_cast<std::size_t>(sysconf(_SC_PAGESIZE)) / sizeof(std::uint64_t);
    parallel_for((n + step - 1) / step, [=](std::size_t begin, std::size_t end) {
        for (std::size_t p = begin; p < end; ++p) words[p * step] = words[p * step];
    });
}

// Checks the words the last write run stored, through the host.
void verify_written(const Config &c, const Buffer &b, unsigned long long salt) {
    const std::size_t n = b.bytes / sizeof(std::uint64_t);
    std::vector<std::uint64_t> staging;
    const std::uint64_t *words = static_cast<const std::uint64_t *>(b.ptr);
    const std::size_t chunk = c.alloc == Alloc::device ? (std::size_t{256} << 20) / sizeof(std::uint64_t) : n;
    if (c.alloc == Alloc::device) staging.resize(chunk);
    for (std::size_t base = 0; base < n; base += chunk) {
        const std::size_t count = std::min(chunk, n - base);
        const std::uint64_t *src = words + base;
        if (c.alloc == Alloc::device) {
            CUDA_CHECK(cudaMemcpy(staging.data(), src, count * sizeof(std::uint64_t), cudaMemcpyDeviceToHost));
            src = staging.data();
        }
        std::atomic<std::size_t> bad{SIZE_MAX};
        parallel_for(count, [&](std::size_t begin, std::size_t end) {
            for (std::size_t i = begin; i < end; ++i)
                if (src[i] != ((base + i) ^ salt)) {
                    bad = base + i;
                    return;
                }
        });
        if (bad != SIZE_MAX) suite::die("write verification failed at word %zu", bad.load());
    }
}

// The copy engine's rate over the same link, from pinned memory, both ways.
void measure_copy_engine(const Config &c) {
    const std::size_t bytes = std::min<std::size_t>(c.size, std::size_t{1} << 30);
    void *host = nullptr, *dev = nullptr;
    CUDA_CHECK(cudaMallocHost(&host, bytes));
    CUDA_CHECK(cudaMalloc(&dev, bytes));
    std::memset(host, 1, bytes);
    suite::EventTimer timer;
    for (const bool h2d : {true, false}) {
        std::vector<double> bw;
        for (int rep = 0; rep <= c.copy_engine_samples; ++rep) {  // the first is a warm-up
            timer.start();
            CUDA_CHECK(h2d ? cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice)
                           : cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
            const double seconds = timer.stop();
            if (rep > 0) bw.push_back(bytes / seconds / suite::kGiB);
        }
        std::string values;
        for (const double b : bw) values += (values.empty() ? "" : ",") + std::to_string(b);
        suite::Record("CopyEngine")
            .add("direction", h2d ? "h2d" : "d2h")
            .addf("gibs", "%g", suite::median(bw))
            .add("samples", bw.size())
            .add("values", values)
            .print();
    }
    CUDA_CHECK(cudaFree(dev));
    CUDA_CHECK(cudaFreeHost(host));
}

// Every option, with its default and its help.
suite::Options declare_options() {
    suite::Options opts("um_bandwidth",
                        "The Unified Memory bandwidth reprex: a kernel reads or writes host, managed or "
                        "device memory; one 'Throughput:' record per run.");
    opts.add("alloc", "managed", "managed, numa (numa_alloc_onnode), pinned (cudaMallocHost) or device (cudaMalloc)");
    opts.add("advise", "none", "managed memory advice: accessed-by, read-mostly, preferred-location-cpu (list)");
    opts.add_flag("touch-on-host", "touch the data on the host between kernel runs (evicts it from the GPU)");
    opts.add("op", "read", "read (host-to-device) or write (device-to-host)");
    opts.add("size", "32G", "data size (K/M/G suffixes) or a multiple of the GPU's memory, e.g. 2x");
    opts.add("runs", "5", "kernel runs to measure");
    opts.add("repeats", "1", "times the whole experiment runs, each on a fresh allocation");
    opts.add("device", "0", "CUDA device to run on");
    opts.add("numa-node", "0", "NUMA node for --alloc numa and for the process");
    opts.add("grid", "160", "grid dimension, or 'auto' for the device's SM count");
    opts.add("block", "128", "block dimension");
    opts.add("load", "plain",
             "read kernel loads: plain (the seed's), l2-256 (256-byte L2 fetches, sm_80+) or bulk (sm_90 bulk copies)");
    opts.add_flag("allow-oversubscription", "allow more managed memory than the GPU has free");
    opts.add_flag("skip-copy-engine", "do not measure the copy engine's bandwidth");
    opts.add("copy-engine-samples", "5",
             "copies the copy engine's rate is the median of, each way (after one warm-up)");
    return opts;
}

// The process on --numa-node (before CUDA starts), then the device, refused
// where it lacks what --load needs; --size, now known in bytes, checked
// against the GPU and the host: the configuration complete.
Config open_device(const suite::Options &opts, Config c) {
    suite::run_on_numa_node(opts, c.numa_node);
    const cudaDeviceProp prop = suite::use_visible_device(opts, "device", c.device);
    if (c.grid == 0) c.grid = prop.multiProcessorCount;
    if (c.wide_loads && prop.major < 8)
        opts.usage_error("option '--load l2-256' needs compute capability 8.0 or later, device %d is %d.%d", c.device,
                         prop.major, prop.minor);
    if (c.bulk && prop.major < 9)
        opts.usage_error("option '--load bulk' needs compute capability 9.0 or later, device %d is %d.%d", c.device,
                         prop.major, prop.minor);
    // Whole bulk chunks (8 KiB), so that every read kernel sees every word.
    c.size = c.amount.of(prop.totalGlobalMem) / kBulkChunk * kBulkChunk;
    if (c.size == 0) opts.usage_error("option '--size' %s is less than 8K", opts.str("size").c_str());
    check_capacity(opts, c);

    std::printf("Running on device %d with grid dim %d and block dim %d\n", c.device, c.grid, c.block);
    std::printf("Device: %s, %.2f GiB; data size %.3f GiB (%" PRIu64 " bytes), %s memory\n", prop.name,
                prop.totalGlobalMem / suite::kGiB, c.size / suite::kGiB, c.size, alloc_name(c.alloc));
    return c;
}

// One timed kernel run over the whole buffer (reads sum into *sum, writes store i ^ salt); its seconds.
double run_kernel(const Config &c, const Buffer &buf, unsigned long long *sum, unsigned long long salt,
                  suite::EventTimer &timer) {
    const std::size_t n16 = c.size / sizeof(uint4);
    timer.start();
    const auto *in = static_cast<const uint4 *>(buf.ptr);
    if (c.read && c.bulk) read_bulk_kernel<<<c.grid, c.block>>>(in, n16, sum);
    else if (c.read && c.wide_loads) read_kernel<true><<<c.grid, c.block>>>(in, n16, sum);
    else if (c.read) read_kernel<false><<<c.grid, c.block>>>(in, n16, sum);
    else write_kernel<<<c.grid, c.block>>>(static_cast<uint4 *>(buf.ptr), n16, salt);
    CUDA_CHECK_LAUNCH();
    return timer.stop();
}

// The seed's experiment --repeats times, each on a fresh allocation: one
// 'Throughput:' line per run, every run verified.
void run_repeats(const Config &c) {
    unsigned long long *sum = nullptr;
    CUDA_CHECK(cudaMalloc(&sum, sizeof *sum));
    const std::size_t n64 = c.size / sizeof(std::uint64_t);
    const unsigned long long expected = suite::triangular_mod64(n64);
    if (c.touch_on_host) std::puts("Touching data on host between runs");
    suite::Record("Kernel").add("op", c.read ? "read" : "write").print();
    if (c.read && c.wide_loads) std::puts("Read loads fetch 256-byte L2 blocks");
    if (c.read && c.bulk) std::printf("Reads are bulk copies of %d bytes into shared memory\n", kBulkChunk);
    std::fflush(stdout);

    suite::EventTimer timer;
    for (int repeat = 1; repeat <= c.repeats; ++repeat) {
        std::printf("Repeat: %d of %d\n", repeat, c.repeats);
        Buffer buf = allocate(c);
        apply_advice(c, buf);
        fill(c, buf);
        unsigned long long salt = 0;
        for (int run = 1; run <= c.runs; ++run) {
            if (c.touch_on_host && run > 1) touch_on_host(buf);
            CUDA_CHECK(cudaMemset(sum, 0, sizeof *sum));
            salt = 0x9e3779b97f4a7c15ull * (static_cast<unsigned long long>(repeat) * c.runs + run);
            const double seconds = run_kernel(c, buf, sum, salt, timer);
            if (c.read) {
                unsigned long long got = 0;
                CUDA_CHECK(cudaMemcpy(&got, sum, sizeof got, cudaMemcpyDeviceToHost));
                if (got != expected)
                    suite::die("repeat %d run %d: checksum %llu, expected %llu", repeat, run, got, expected);
            }
            suite::Record("Throughput")
                .add("repeat", repeat)
                .add("run", run)
                .addf("gibs", "%g", c.size / seconds / suite::kGiB)
                .print();
            std::fflush(stdout);
        }
        if (!c.read) verify_written(c, buf, salt);
        release(buf);
    }
    if (c.read) suite::Record("Verified").add("kernel", "read").add("runs", c.runs * c.repeats).print();
    else suite::Record("Verified").add("kernel", "write").add("repeats", c.repeats).print();
    CUDA_CHECK(cudaFree(sum));
}

}  // namespace

int main(int argc, char **argv) {
    suite::Options opts = declare_options();
    opts.parse(argc, argv);
    const Config c = open_device(opts, parse_config(opts));
    if (!opts.flag("skip-copy-engine")) measure_copy_engine(c);
    run_repeats(c);
    return EXIT_SUCCESS;
}
