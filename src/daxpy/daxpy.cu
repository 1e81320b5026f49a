// The DAXPY benchmark of Gayatri, Gott and Deslippe, "Comparing Managed Memory
// and ATS with and without Prefetching on NVIDIA Volta GPUs" (PMBS 2019), with
// its compile-time switches turned into runtime options.
//
// y(i,j) += a * x(i,j) over N rows and M columns of doubles, launched as N
// thread blocks of one warp each (listing 2); "data size" is what one thread
// block touches, M * sizeof(double). Each point of the sweep is the paper's
// whole experiment (listings 3 to 7): allocate x and y, initialise them, two
// warm-up kernels and a TouchOnCPU(y), then `outer` times: [prefetch y to the
// GPU], `inner` consecutive kernels, [prefetch y back to the CPU], TouchOnCPU(y).
//
// Allocators: system (malloc, reached by the GPU through ATS or HMM), managed
// (cudaMallocManaged) and explicit (cudaMalloc plus a cudaMemcpy of y each way
// in every outer iteration, the manual management the paper's conclusion
// compares against). Every point prints one "DAXPY:" record and is verified: y
// must hold exactly what its kernels and touches make of it.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "suite.hpp"

namespace {

enum class Alloc { system, managed, explicit_copy };

struct Config {
    Alloc alloc = Alloc::managed;
    bool prefetch = false;
    int rows = 100, device = 0, numa_node = -1;
    std::vector<std::uint64_t> sizes;         // bytes per thread block
    std::vector<std::pair<int, int>> points;  // (inner, outer)
};

constexpr double kA = 0.5;      // the authors' a
constexpr double kTouch = 0.5;  // TouchOnCPU: y -= 0.5 (listing 6)
constexpr int kThreads = 32;    // one warp per thread block (listing 4)

// ---------------------------------------------------------------- kernels --

// Listing 2: the N rows are spread over the thread blocks, each row's M
// columns over the block's threads. x and y are not __restrict__, as in the
// paper, so the compiler keeps one load pair in flight per iteration.
__global__ void daxpy_kernel(int n, int m, double a, const double *x, double *y) {
    for (int i = blockIdx.x; i < n; i += gridDim.x)
        for (int j = threadIdx.x; j < m; j += blockDim.x) {
            const std::size_t k = static_cast<std::size_t>(i) * m + j;
            y[k] += a * x[k];
        }
}

// ------------------------------------------------------------ host helpers --

using Clock = std::chrono::steady_clock;

double micros(Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double, std::micro>(to - from).count();
}

const char *alloc_name(Alloc a) {
    switch (a) {
    case Alloc::system: return "system";
    case Alloc::managed: return "managed";
    default: return "explicit";
    }
}

// The largest inner or outer count: beyond it a sweep would run for days.
constexpr long long kMaxCount = 1000000;

// One positive count of --<name> within an item such as "4" or "1-16".
int count_in(const suite::Options &opts, const std::string &name, const std::string &item, const std::string &text) {
    long long v = 0;
    if (!suite::parse_integer(text, v) || v < 1 || v > kMaxCount)
        opts.usage_error("option '--%s' takes integers from 1 to %lld and ranges such as 1,2,4 or 1-16, got '%s'",
                         name.c_str(), kMaxCount, item.c_str());
    return static_cast<int>(v);
}

// "1,2,4", "1-16" or a mix: positive integers, ranges inclusive and ascending.
std::vector<int> parse_ints(const suite::Options &opts, const std::string &name) {
    std::vector<int> values;
    for (const auto &item : opts.list(name)) {
        const auto dash = item.find('-', 1);
        if (dash == std::string::npos) {
            values.push_back(count_in(opts, name, item, item));
            continue;
        }
        const int lo = count_in(opts, name, item, item.substr(0, dash));
        const int hi = count_in(opts, name, item, item.substr(dash + 1));
        if (hi < lo) opts.usage_error("option '--%s': range '%s' runs backwards", name.c_str(), item.c_str());
        for (int v = lo; v <= hi; ++v) values.push_back(v);
    }
    if (values.empty()) opts.usage_error("option '--%s' needs at least one value", name.c_str());
    return values;
}

// The points of the sweep: every inner x outer pair, or the pairs "IxO" that
// --pairs names (the check asks for the figures' lines only).
std::vector<std::pair<int, int>> parse_points(const suite::Options &opts) {
    std::vector<std::pair<int, int>> points;
    for (const auto &item : opts.list("pairs")) {
        const auto x = item.find('x');
        if (x == std::string::npos)
            opts.usage_error("option '--pairs' takes INNERxOUTER items such as 4x8, got '%s'", item.c_str());
        points.emplace_back(count_in(opts, "pairs", item, item.substr(0, x)),
                            count_in(opts, "pairs", item, item.substr(x + 1)));
    }
    if (!points.empty()) return points;
    for (int inner : parse_ints(opts, "inner"))
        for (int outer : parse_ints(opts, "outer")) points.emplace_back(inner, outer);
    return points;
}

std::uint64_t largest_size(const Config &c) { return *std::max_element(c.sizes.begin(), c.sizes.end()); }

// Bytes of x and y at the largest size, every row (long double: it may pass 2^64).
long double footprint(const Config &c) { return 2.0L * c.rows * largest_size(c); }

Config parse_config(const suite::Options &opts) {
    Config c;
    const std::string alloc = opts.choice("alloc", {"system", "managed", "explicit"});
    c.alloc = alloc == "system" ? Alloc::system : alloc == "managed" ? Alloc::managed : Alloc::explicit_copy;
    c.prefetch = opts.choice("prefetch", {"on", "off"}) == "on";
    if (c.prefetch && c.alloc == Alloc::explicit_copy)
        opts.usage_error("option '--prefetch on' is for system and managed memory: explicit copies move y themselves");
    c.rows = opts.integer32("rows", 1, 1 << 24);
    c.device = opts.integer32("device", 0, std::numeric_limits<int>::max());  // checked against the GPUs later
    c.numa_node = opts.integer32("numa-node", -1, 1 << 16);
    // Bytes per thread block: whole doubles, a column count an int can index.
    for (const std::uint64_t bytes : opts.bytes_list("size", sizeof(double), 0x7fffffffull * sizeof(double))) {
        if (bytes % sizeof(double))
            opts.usage_error("option '--size' takes multiples of 8 bytes such as 800 or 64K, got %" PRIu64, bytes);
        c.sizes.push_back(bytes);
    }
    if (c.sizes.empty()) opts.usage_error("option '--size' needs at least one value");
    c.points = parse_points(opts);
    // x and y of the largest size are in host memory for system and managed
    // memory, and y's host copy for explicit copies: at most 80% of what the host has.
    if (footprint(c) > static_cast<long double>(UINT64_MAX))
        opts.usage_error("option '--size' %s times --rows %d overflows 64 bits", opts.str("size").c_str(), c.rows);
    opts.require_host_memory("size", static_cast<std::uint64_t>(footprint(c)), 0.8);
    return c;
}

// Refuses, before any point runs, a size the GPU cannot hold: more managed
// memory than the GPU has free would oversubscribe it.
void check_capacity(const suite::Options &opts, const Config &c) {
    const double both = static_cast<double>(footprint(c));
    std::size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    const double gib = suite::kGiB;
    if (c.alloc != Alloc::system && both > 0.9 * static_cast<double>(free_b))
        opts.usage_error("option '--size': x and y of %d rows x %" PRIu64 " bytes take %.2f GiB of %s memory, more "
                         "than 90%% of the %.2f GiB free on the GPU",
                         c.rows, largest_size(c), both / gib, alloc_name(c.alloc), free_b / gib);
}

// ---------------------------------------------------------------- arrays --

struct Arrays {
    double *x = nullptr, *y = nullptr;      // where the host works
    double *d_x = nullptr, *d_y = nullptr;  // where the kernels work (the same for system and managed)
    std::size_t bytes = 0;                  // of one array
};

Arrays allocate(const Config &c, std::size_t bytes) {
    Arrays a;
    a.bytes = bytes;
    switch (c.alloc) {
    case Alloc::system:  // listing 3, ATS: plain malloc
        a.x = static_cast<double *>(std::malloc(bytes));
        a.y = static_cast<double *>(std::malloc(bytes));
        if (!a.x || !a.y) suite::die("malloc of %zu bytes failed", bytes);
        a.d_x = a.x;
        a.d_y = a.y;
        break;
    case Alloc::managed:  // listing 3, managed memory
        CUDA_CHECK(cudaMallocManaged(&a.x, bytes));
        CUDA_CHECK(cudaMallocManaged(&a.y, bytes));
        a.d_x = a.x;
        a.d_y = a.y;
        break;
    case Alloc::explicit_copy:  // pageable host arrays and their device copies
        a.x = static_cast<double *>(std::malloc(bytes));
        a.y = static_cast<double *>(std::malloc(bytes));
        if (!a.x || !a.y) suite::die("malloc of %zu bytes failed", bytes);
        CUDA_CHECK(cudaMalloc(&a.d_x, bytes));
        CUDA_CHECK(cudaMalloc(&a.d_y, bytes));
        break;
    }
    return a;
}

void release(const Config &c, Arrays &a) {
    if (c.alloc == Alloc::managed) {
        CUDA_CHECK(cudaFree(a.x));
        CUDA_CHECK(cudaFree(a.y));
        return;
    }
    std::free(a.x);
    std::free(a.y);
    if (c.alloc == Alloc::explicit_copy) {
        CUDA_CHECK(cudaFree(a.d_x));
        CUDA_CHECK(cudaFree(a.d_y));
    }
}

// x(i,j) cycles through 1..4 so that a misplaced element shows; a * x and
// every partial sum are exact in double precision.
inline double x_value(std::size_t k) { return 1.0 + static_cast<double>(k % 4); }

// On the host, as the paper does; y starts at 0 (and, first touched here, on the CPU).
void initialise(const Arrays &a, std::size_t n) {
    for (std::size_t k = 0; k < n; ++k) a.x[k] = x_value(k);
    for (std::size_t k = 0; k < n; ++k) a.y[k] = 0.0;
}

// Listing 6: every element of y, on the host, one thread.
void touch_on_cpu(double *y, std::size_t rows, std::size_t cols) {
    for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < cols; ++j) y[i * cols + j] -= kTouch;
}

// CUDA 13 takes a cudaMemLocation and flags where CUDA 12 takes a device id.
void prefetch(const double *ptr, std::size_t bytes, bool to_gpu, int device) {
#if CUDART_VERSION >= 13000
    cudaMemLocation where{};
    where.type = to_gpu ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
    where.id = to_gpu ? device : 0;
    CUDA_CHECK(cudaMemPrefetchAsync(ptr, bytes, where, 0, 0));
#else
    CUDA_CHECK(cudaMemPrefetchAsync(ptr, bytes, to_gpu ? device : cudaCpuDeviceId, 0));
#endif
}

void launch(const Arrays &a, int rows, int cols) {
    daxpy_kernel<<<rows, kThreads>>>(rows, cols, kA, a.d_x, a.d_y);  // listing 4: <<<N, 32>>>
    CUDA_CHECK_LAUNCH();
}

// y after two warm-up kernels, one touch, then per outer iteration `inner`
// kernels and one touch; the first mismatch ends the program.
void verify(const Arrays &a, std::size_t n, int inner, int outer, std::uint64_t size) {
    const double kernels = 2.0 + static_cast<double>(inner) * outer, touches = 1.0 + outer;
    for (std::size_t k = 0; k < n; ++k) {
        const double expected = kernels * kA * x_value(k) - touches * kTouch;
        if (a.y[k] != expected)
            suite::die("verification failed at size=%" PRIu64 " inner=%d outer=%d: y[%zu] = %.17g, expected %.17g",
                       size, inner, outer, k, a.y[k], expected);
    }
}

struct Timings {
    double alloc_us = 0, init_us = 0, warmup_us = 0, kernel_us = 0, gpu_kernel_us = 0, touch_us = 0, total_us = 0;
};

// One point: the paper's whole experiment, timed as its figures are. The
// kernel phase (figures 1-5) runs from [the prefetch or copy of y to the GPU]
// to the end of the last kernel; the touch phase (figure 6) from [the
// prefetch or copy back] to the end of TouchOnCPU; the total (figures 7 and 8)
// from the allocation to the end of the last touch.
Timings run_point(const Config &c, std::uint64_t size, int inner, int outer) {
    const int cols = static_cast<int>(size / sizeof(double));
    const std::size_t n = static_cast<std::size_t>(c.rows) * cols, bytes = n * sizeof(double);
    Timings t;
    suite::EventTimer gpu;

    const auto t0 = Clock::now();
    Arrays a = allocate(c, bytes);
    const auto t1 = Clock::now();
    initialise(a, n);
    if (c.alloc == Alloc::explicit_copy) {
        CUDA_CHECK(cudaMemcpy(a.d_x, a.x, bytes, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(a.d_y, a.y, bytes, cudaMemcpyHostToDevice));
    }
    const auto t2 = Clock::now();
    // Listing 4: two kernels to settle first-time effects, y back on the CPU.
    launch(a, c.rows, cols);
    launch(a, c.rows, cols);
    CUDA_CHECK(cudaDeviceSynchronize());
    if (c.alloc == Alloc::explicit_copy) CUDA_CHECK(cudaMemcpy(a.y, a.d_y, bytes, cudaMemcpyDeviceToHost));
    touch_on_cpu(a.y, c.rows, cols);
    const auto t3 = Clock::now();

    // Listings 5 and 7.
    for (int o = 0; o < outer; ++o) {
        const auto k0 = Clock::now();
        if (c.prefetch) prefetch(a.d_y, bytes, true, c.device);
        if (c.alloc == Alloc::explicit_copy) CUDA_CHECK(cudaMemcpy(a.d_y, a.y, bytes, cudaMemcpyHostToDevice));
        gpu.start();
        for (int i = 0; i < inner; ++i) launch(a, c.rows, cols);
        t.gpu_kernel_us += gpu.stop() * 1e6;
        CUDA_CHECK(cudaDeviceSynchronize());
        const auto k1 = Clock::now();
        if (c.prefetch) {
            prefetch(a.d_y, bytes, false, c.device);
            CUDA_CHECK(cudaDeviceSynchronize());
        }
        if (c.alloc == Alloc::explicit_copy) CUDA_CHECK(cudaMemcpy(a.y, a.d_y, bytes, cudaMemcpyDeviceToHost));
        touch_on_cpu(a.y, c.rows, cols);
        const auto k2 = Clock::now();
        t.kernel_us += micros(k0, k1);
        t.touch_us += micros(k1, k2);
    }
    const auto t4 = Clock::now();

    t.alloc_us = micros(t0, t1);
    t.init_us = micros(t1, t2);
    t.warmup_us = micros(t2, t3);
    t.total_us = micros(t0, t4);
    verify(a, n, inner, outer, size);
    release(c, a);
    return t;
}

// Every option, with its default and its help.
suite::Options declare_options() {
    suite::Options opts("daxpy", "The DAXPY inner/outer-loop study (Gayatri, Gott, Deslippe): system, managed or "
                                 "explicitly copied memory, with or without prefetch; one 'DAXPY' line per point.");
    opts.add("alloc", "managed",
             "system (malloc, needs ATS or HMM), managed (cudaMallocManaged) or explicit "
             "(cudaMalloc + cudaMemcpy of y each outer iteration)");
    opts.add("prefetch", "off", "on: cudaMemPrefetchAsync y to the GPU before the kernels and back before the touch");
    opts.add("size", "800,8000,80000,800000", "data sizes per thread block, M * sizeof(double) (list; K/M suffixes)");
    opts.add("rows", "100", "N: rows of x and y, one thread block each");
    opts.add("inner", "1-16", "consecutive kernels per outer iteration (list, ranges such as 1-16)");
    opts.add("outer", "1,2,4,8,16", "outer iterations: host-device round trips of y (list)");
    opts.add("pairs", "",
             "INNERxOUTER points to run instead of every inner x outer pair (list, e.g. 4x1,4x2); "
             "a point named again is measured again (its next sample)");
    opts.add("device", "0", "CUDA device to run on");
    opts.add("numa-node", "-1", "NUMA node to run the process on (-1: leave it where it is)");
    return opts;
}

// The process on --numa-node (before CUDA starts), then the device, refused
// where it lacks what --alloc and --prefetch need; then what it offers and
// what the sweep will run.
void open_device(const suite::Options &opts, Config &c) {
    suite::run_on_numa_node(opts, c.numa_node);
    const cudaDeviceProp prop = suite::use_visible_device(opts, "device", c.device);
    int pageable = 0, host_tables = 0, concurrent = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, c.device));
    CUDA_CHECK(cudaDeviceGetAttribute(&host_tables, cudaDevAttrPageableMemoryAccessUsesHostPageTables, c.device));
    CUDA_CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, c.device));
    if (c.alloc == Alloc::system && !pageable)
        suite::die("--alloc system needs a GPU that can access pageable host memory (ATS or HMM); device %d (%s) "
                   "reports cudaDevAttrPageableMemoryAccess = 0",
                   c.device, prop.name);
    if (c.prefetch && !concurrent)
        suite::die("--prefetch on needs cudaDevAttrConcurrentManagedAccess, which device %d (%s) lacks", c.device,
                   prop.name);
    check_capacity(opts, c);

    std::printf("Device %d: %s, %.2f GiB; pageable memory access: %s\n", c.device, prop.name,
                prop.totalGlobalMem / suite::kGiB,
                pageable ? (host_tables ? "yes, through the host's page tables (ATS)" : "yes (HMM)") : "no");
    std::printf("Allocator: %s, prefetch %s; %d rows, %d threads per block, a = %g; %zu sizes x %zu points\n",
                alloc_name(c.alloc), c.prefetch ? "on" : "off", c.rows, kThreads, kA, c.sizes.size(), c.points.size());
}

// The context and the kernel's module are loaded before the first point,
// so that no point's total pays for them.
void warm_up() {
    CUDA_CHECK(cudaFree(nullptr));
    daxpy_kernel<<<1, kThreads>>>(0, 0, kA, nullptr, nullptr);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
    std::fflush(stdout);
}

// Every size x point: one 'DAXPY:' record each, every point verified.
void sweep(const Config &c) {
    int verified = 0;
    // A point named more than once in --pairs is measured again: its lines
    // are the samples 1, 2, ... of that point.
    std::map<std::pair<int, int>, int> samples;
    for (const std::uint64_t size : c.sizes) {
        samples.clear();
        for (const auto &[inner, outer] : c.points) {
            const Timings t = run_point(c, size, inner, outer);
            const int sample = ++samples[{inner, outer}];
            suite::Record("DAXPY")
                .add("alloc", alloc_name(c.alloc))
                .add("prefetch", c.prefetch ? "on" : "off")
                .add("size", size)
                .add("rows", c.rows)
                .add("cols", size / sizeof(double))
                .add("inner", inner)
                .add("outer", outer)
                .add("sample", sample)
                .addf("kernel_us", "%.3f", t.kernel_us)
                .addf("per_kernel_us", "%.3f", t.kernel_us / (static_cast<double>(inner) * outer))
                .addf("gpu_kernel_us", "%.3f", t.gpu_kernel_us)
                .addf("touch_us", "%.3f", t.touch_us)
                .addf("alloc_us", "%.3f", t.alloc_us)
                .addf("init_us", "%.3f", t.init_us)
                .addf("warmup_us", "%.3f", t.warmup_us)
                .addf("total_us", "%.3f", t.total_us)
                .print();
            std::fflush(stdout);
            ++verified;
        }
    }
    std::printf("Verified: %d points (y as the kernels and touches must leave it)\n", verified);
}

}  // namespace

int main(int argc, char **argv) {
    suite::Options opts = declare_options();
    opts.parse(argc, argv);
    Config c = parse_config(opts);
    open_device(opts, c);
    warm_up();
    sweep(c);
    return EXIT_SUCCESS;
}
