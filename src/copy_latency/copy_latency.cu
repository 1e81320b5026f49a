// Small-copy latency between host and device: what one copy costs, from 1 B
// to 16 MiB, by each way the CPU and the GPU can move it.
//
//   pageable  cudaMemcpy to or from malloc'd memory (staged by the driver);
//             h2d is timed until the copy has completed on the GPU
//   pinned    cudaMemcpy to or from pinned memory (cudaHostAlloc)
//   async     cudaMemcpyAsync on a stream, then cudaStreamSynchronize (pinned)
//   zerocopy  a kernel that reads (h2d) or writes (d2h) mapped pinned host
//             memory directly, launched and synchronised
//   gdrcopy   GDRCopy's gdr_copy_to_mapping / gdr_copy_from_mapping through a
//             CPU mapping of GPU memory (libgdrapi; needs the gdrdrv module):
//             only in builds configured with GPU_MEMPATHS_WITH_GDRCOPY=ON
//
// Every (method, direction, size) case is warmed up, then timed as many
// samples; a sample times a batch of back-to-back copies long enough for the
// clock (copies of a few bytes through GDRCopy take less than 0.1 us) and
// counts as batch time / batch. Each case prints one line:
//
//   Latency: method=pinned direction=h2d size=4096 median_us=2.1234 min_us=2.0011 samples=100 batch=1
//            block_medians_us=2.1201,2.1250,2.1198,2.1302,2.1234
//
// (one line). The block medians split the samples, in the order they were
// taken, into --blocks consecutive blocks: repeated measurements of the same
// case within the run, which a comparison between runs can test.
//
// The data of each case is checked once before it is timed: the source is
// filled with a pattern of that case, the destination cleared, one copy made,
// and what arrived compared with what was sent. A mismatch ends the program
// with an error, so every Latency line stands for verified data.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include "access.cuh"
#include "suite.hpp"

#ifdef SUITE_HAVE_LIBNUMA
#include <numa.h>
#endif

#ifdef SUITE_HAVE_GDRCOPY
#include <cuda.h>
#include <gdrapi.h>
#endif

namespace {

enum class Method { pageable, pinned, async, zerocopy, gdrcopy };
enum class Dir { h2d, d2h };

const char *method_name(Method m) {
    switch (m) {
    case Method::pageable: return "pageable";
    case Method::pinned: return "pinned";
    case Method::async: return "async";
    case Method::zerocopy: return "zerocopy";
    default: return "gdrcopy";
    }
}

const char *dir_name(Dir d) { return d == Dir::h2d ? "h2d" : "d2h"; }

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// ---------------------------------------------------------------- kernel --

// The zero-copy leg: copies n bytes, 16 at a time where it can, between
// mapped host memory and device memory. Both bases are at least 256-byte
// aligned (cudaMalloc, cudaHostAlloc), so the 16-byte words are aligned;
// each is one access whatever the compiler (access.cuh).
__global__ void copy_kernel(const unsigned char *__restrict__ src, unsigned char *__restrict__ dst, std::size_t n) {
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const std::size_t n16 = n / 16;
    const uint4 *s16 = reinterpret_cast<const uint4 *>(src);
    uint4 *d16 = reinterpret_cast<uint4 *>(dst);
    for (std::size_t i = tid; i < n16; i += stride) suite::store16(d16 + i, suite::load16_nc(s16 + i));
    for (std::size_t i = n16 * 16 + tid; i < n; i += stride) dst[i] = src[i];
}

// ---------------------------------------------------------------- GDRCopy --

#ifdef SUITE_HAVE_GDRCOPY
// A CPU mapping of GPU memory, made as GDRCopy's copylat test makes it:
// device memory aligned to the GPU page, synchronous memory operations on it
// (so that cudaMemcpy and the mapping see each other's data in order),
// pinned, mapped, and addressed through the offset that gdr_get_info gives.
struct GdrMapping {
    gdr_t g = nullptr;
    gdr_mh_t mh{};
    void *raw = nullptr;           // cudaMalloc'd, GPU_PAGE_SIZE larger than needed
    unsigned char *dev = nullptr;  // raw aligned up to the GPU page
    void *map = nullptr;           // gdr_map's pointer (start of the mapping)
    unsigned char *bar = nullptr;  // dev as the CPU sees it through the mapping
    std::size_t size = 0;
};

#define GDR_CHECK(call)                                                                               \
    do {                                                                                              \
        const int rc_ = (call);                                                                       \
        if (rc_ != 0) suite::die("GDRCopy: %s returned %d at %s:%d", #call, rc_, __FILE__, __LINE__); \
    } while (0)

void gdr_setup(GdrMapping &m, std::size_t bytes) {
    m.size = (bytes + GPU_PAGE_SIZE - 1) & GPU_PAGE_MASK;
    CUDA_CHECK(cudaMalloc(&m.raw, m.size + GPU_PAGE_SIZE));
    const auto base = reinterpret_cast<std::uintptr_t>(m.raw);
    m.dev = reinterpret_cast<unsigned char *>((base + GPU_PAGE_SIZE - 1) & GPU_PAGE_MASK);
    unsigned int flag = 1;
    const CUresult cu =
        cuPointerSetAttribute(&flag, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, reinterpret_cast<CUdeviceptr>(m.dev));
    if (cu != CUDA_SUCCESS) suite::die("GDRCopy: cuPointerSetAttribute(SYNC_MEMOPS) failed with %d", cu);
    m.g = gdr_open();
    if (!m.g) suite::die("GDRCopy: gdr_open failed although /dev/gdrdrv exists");
    GDR_CHECK(gdr_pin_buffer(m.g, reinterpret_cast<unsigned long>(m.dev), m.size, 0, 0, &m.mh));
    GDR_CHECK(gdr_map(m.g, m.mh, &m.map, m.size));
    gdr_info_t info;
    GDR_CHECK(gdr_get_info(m.g, m.mh, &info));
    const std::ptrdiff_t offset = static_cast<std::ptrdiff_t>(info.va - reinterpret_cast<std::uintptr_t>(m.dev));
    m.bar = static_cast<unsigned char *>(m.map) + offset;
    std::printf("GDRCopy: %zu bytes pinned and mapped, page offset %td, wc_mapping %u\n", m.size, offset,
                static_cast<unsigned>(info.wc_mapping));
}

void gdr_teardown(GdrMapping &m) {
    GDR_CHECK(gdr_unmap(m.g, m.mh, m.map, m.size));
    GDR_CHECK(gdr_unpin_buffer(m.g, m.mh));
    GDR_CHECK(gdr_close(m.g));
    CUDA_CHECK(cudaFree(m.raw));
}
#endif

// ---------------------------------------------------------------- buffers --

struct Buffers {
    std::size_t bytes = 0;
    unsigned char *pageable = nullptr;    // aligned_alloc, touched on this NUMA node
    unsigned char *pinned = nullptr;      // cudaHostAlloc(Mapped): pinned, async and zerocopy
    unsigned char *pinned_dev = nullptr;  // the GPU's address of `pinned`
    unsigned char *device = nullptr;      // cudaMalloc
    unsigned char *staging = nullptr;     // cudaMallocHost: verification only
    cudaStream_t stream = nullptr;
    int grid_cap = 1, block = 256;
    bool gdr = false;
#ifdef SUITE_HAVE_GDRCOPY
    GdrMapping mapping;
#endif
};

void allocate(Buffers &b, std::size_t bytes) {
    b.bytes = bytes;
    const std::size_t rounded = (bytes + 4095) / 4096 * 4096;
    b.pageable = static_cast<unsigned char *>(std::aligned_alloc(4096, rounded));
    if (!b.pageable) suite::die("cannot allocate %zu bytes of pageable memory", rounded);
    std::memset(b.pageable, 0, rounded);
    CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void **>(&b.pinned), bytes, cudaHostAllocMapped));
    CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void **>(&b.pinned_dev), b.pinned, 0));
    CUDA_CHECK(cudaMalloc(reinterpret_cast<void **>(&b.device), bytes));
    CUDA_CHECK(cudaMallocHost(reinterpret_cast<void **>(&b.staging), bytes));
    CUDA_CHECK(cudaStreamCreate(&b.stream));
}

void release(Buffers &b) {
#ifdef SUITE_HAVE_GDRCOPY
    if (b.gdr) gdr_teardown(b.mapping);
#endif
    CUDA_CHECK(cudaStreamDestroy(b.stream));
    CUDA_CHECK(cudaFreeHost(b.staging));
    CUDA_CHECK(cudaFree(b.device));
    CUDA_CHECK(cudaFreeHost(b.pinned));
    std::free(b.pageable);
}

// The host memory a method copies from (h2d) or to (d2h).
unsigned char *host_side(const Buffers &b, Method m) { return m == Method::pageable ? b.pageable : b.pinned; }

// The device memory a method copies to (h2d) or from (d2h).
unsigned char *device_side(const Buffers &b, Method m) {
#ifdef SUITE_HAVE_GDRCOPY
    if (m == Method::gdrcopy) return b.mapping.dev;
#endif
    (void)m;
    return b.device;
}

// ---------------------------------------------------------------- one copy --

void copy_once(const Buffers &b, Method m, Dir d, std::size_t n) {
    const bool h2d = d == Dir::h2d;
    unsigned char *host = host_side(b, m), *dev = device_side(b, m);
    switch (m) {
    case Method::pageable:
    case Method::pinned:
        CUDA_CHECK(h2d ? cudaMemcpy(dev, host, n, cudaMemcpyHostToDevice)
                       : cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost));
        // From pageable memory cudaMemcpy returns once the data is in the
        // driver's staging buffer, before the DMA to the GPU has finished
        // (CUDA's "API synchronization behavior"): wait for the copy itself,
        // so that the sample ends when the data has arrived.
        if (m == Method::pageable && h2d) CUDA_CHECK(cudaDeviceSynchronize());
        break;
    case Method::async:
        CUDA_CHECK(h2d ? cudaMemcpyAsync(dev, host, n, cudaMemcpyHostToDevice, b.stream)
                       : cudaMemcpyAsync(host, dev, n, cudaMemcpyDeviceToHost, b.stream));
        CUDA_CHECK(cudaStreamSynchronize(b.stream));
        break;
    case Method::zerocopy: {
        const std::size_t words = std::max<std::size_t>(1, (n + 15) / 16);
        const int grid = static_cast<int>(std::min<std::size_t>((words + b.block - 1) / b.block, b.grid_cap));
        if (h2d) copy_kernel<<<grid, b.block, 0, b.stream>>>(b.pinned_dev, dev, n);
        else copy_kernel<<<grid, b.block, 0, b.stream>>>(dev, b.pinned_dev, n);
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(cudaStreamSynchronize(b.stream));
        break;
    }
    case Method::gdrcopy:
#ifdef SUITE_HAVE_GDRCOPY
        // As in GDRCopy's copylat: the time of the CPU's stores (h2d), which
        // gdr_copy_to_mapping fences, or of its loads through the BAR (d2h).
        GDR_CHECK(h2d ? gdr_copy_to_mapping(b.mapping.mh, b.mapping.bar, host, n)
                      : gdr_copy_from_mapping(b.mapping.mh, host, b.mapping.bar, n));
#else
        suite::die("internal: gdrcopy leg in a build without GDRCopy");
#endif
        break;
    }
}

// ---------------------------------------------------------- verification --

// Byte i of the pattern of case `salt`; never 0, the value destinations are
// cleared to, so a byte that was not copied cannot pass.
inline unsigned char pattern(std::size_t i, unsigned salt) {
    return static_cast<unsigned char>(1 + (i * 131 + salt * 7919) % 255);
}

void fill(unsigned char *p, std::size_t n, unsigned salt) {
    for (std::size_t i = 0; i < n; ++i) p[i] = pattern(i, salt);
}

void compare(const unsigned char *p, std::size_t n, unsigned salt, Method m, Dir d) {
    for (std::size_t i = 0; i < n; ++i)
        if (p[i] != pattern(i, salt))
            suite::die("%s %s of %zu bytes: byte %zu is %u, %u was sent", method_name(m), dir_name(d), n, i,
                       static_cast<unsigned>(p[i]), static_cast<unsigned>(pattern(i, salt)));
}

// One copy of fresh data, and what arrived compared with what was sent.
void verify(const Buffers &b, Method m, Dir d, std::size_t n, unsigned salt) {
    unsigned char *host = host_side(b, m), *dev = device_side(b, m);
    if (d == Dir::h2d) {
        fill(host, n, salt);
        CUDA_CHECK(cudaMemset(dev, 0, n));
        CUDA_CHECK(cudaDeviceSynchronize());
        copy_once(b, m, d, n);
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(b.staging, dev, n, cudaMemcpyDeviceToHost));
        compare(b.staging, n, salt, m, d);
    } else {
        fill(b.staging, n, salt);
        CUDA_CHECK(cudaMemcpy(dev, b.staging, n, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaDeviceSynchronize());
        std::memset(host, 0, n);
        copy_once(b, m, d, n);
        compare(host, n, salt, m, d);
    }
}

// ---------------------------------------------------------------- timing --

struct Timing {
    int warmup = 10, reps = 100, min_reps = 10, blocks = 5;
    double min_sample_s = 5e-6, case_budget_s = 0.5;
};

struct Result {
    double median_us = 0, min_us = 0;
    std::vector<double> block_medians_us;
    std::size_t samples = 0;
    long batch = 1;
};

// The median of each of `blocks` consecutive, nearly equal blocks of `us`.
std::vector<double> block_medians(const std::vector<double> &us, int blocks) {
    std::vector<double> medians;
    for (int k = 0; k < blocks; ++k) {
        const std::size_t begin = us.size() * k / blocks, end = us.size() * (k + 1) / blocks;
        medians.push_back(suite::median(std::vector<double>(us.begin() + begin, us.begin() + end)));
    }
    return medians;
}

Result measure(const Buffers &b, Method m, Dir d, std::size_t n, const Timing &t) {
    auto t0 = Clock::now();
    for (int i = 0; i < t.warmup; ++i) copy_once(b, m, d, n);
    const double per_copy = t.warmup > 0 ? seconds_since(t0) / t.warmup : 0.0;
    Result r;
    if (per_copy > 0 && per_copy < t.min_sample_s)
        r.batch = std::min<long>(100000, static_cast<long>(t.min_sample_s / per_copy) + 1);
    std::vector<double> us;
    const auto start = Clock::now();
    while (us.size() < static_cast<std::size_t>(t.reps) &&
           (us.size() < static_cast<std::size_t>(t.min_reps) || seconds_since(start) < t.case_budget_s)) {
        t0 = Clock::now();
        for (long i = 0; i < r.batch; ++i) copy_once(b, m, d, n);
        us.push_back(seconds_since(t0) * 1e6 / static_cast<double>(r.batch));
    }
    r.block_medians_us = block_medians(us, t.blocks);
    r.samples = us.size();
    r.min_us = *std::min_element(us.begin(), us.end());
    r.median_us = suite::median(us);
    return r;
}

// --------------------------------------------------------------- options --

// Copies up to 16 GiB: the pageable, pinned and staging buffers are each as
// large as the largest copy.
constexpr std::uint64_t kMaxCopy = 16ull << 30;

std::vector<std::size_t> parse_sizes(const suite::Options &opts) {
    std::vector<std::size_t> sizes;
    for (const std::uint64_t v : opts.bytes_list("sizes", 1, kMaxCopy)) sizes.push_back(v);
    if (sizes.empty()) {
        const std::uint64_t lo = opts.bytes("min-size", 1, kMaxCopy), hi = opts.bytes("max-size", 1, kMaxCopy);
        if (hi < lo)
            opts.usage_error("option '--max-size' %s is below '--min-size' %s", opts.str("max-size").c_str(),
                             opts.str("min-size").c_str());
        for (std::uint64_t s = lo; s <= hi; s *= 2) sizes.push_back(s);
    }
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    // Pageable, pinned and staging host buffers of the largest size.
    opts.require_host_memory(opts.str("sizes").empty() ? "max-size" : "sizes", 3 * sizes.back(), 0.8);
    return sizes;
}

std::vector<Method> parse_methods(const suite::Options &opts) {
    std::vector<Method> methods;
    for (const auto &name : opts.choices("methods", {"pageable", "pinned", "async", "zerocopy", "gdrcopy"})) {
        if (name == "pageable") methods.push_back(Method::pageable);
        else if (name == "pinned") methods.push_back(Method::pinned);
        else if (name == "async") methods.push_back(Method::async);
        else if (name == "zerocopy") methods.push_back(Method::zerocopy);
        else methods.push_back(Method::gdrcopy);
    }
    return methods;
}

std::vector<Dir> parse_dirs(const suite::Options &opts) {
    std::vector<Dir> dirs;
    for (const auto &name : opts.choices("directions", {"h2d", "d2h"}))
        dirs.push_back(name == "h2d" ? Dir::h2d : Dir::d2h);
    return dirs;
}

Timing parse_timing(const suite::Options &opts) {
    Timing t;
    t.reps = opts.integer32("reps", 1, 10000000);
    t.min_reps = std::min(opts.integer32("min-reps", 1, 10000000), t.reps);
    t.warmup = opts.integer32("warmup", 0, 10000000);
    t.min_sample_s = opts.real("sample-us", 0.0, 1e6) * 1e-6;
    // Per case (method x direction x size, up to 35 sizes): a minute each is already an hour.
    t.case_budget_s = opts.real("case-seconds", 0.0, 60.0);
    // Each block needs samples: --min-reps is the fewest a case takes (capped by --reps above).
    t.blocks = opts.integer32("blocks", 1, t.min_reps);
    return t;
}

// Why the GDRCopy leg cannot run here, or an empty string when it can.
std::string gdrcopy_unavailable() {
#ifdef SUITE_HAVE_GDRCOPY
    if (access("/dev/gdrdrv", F_OK) != 0) return "/dev/gdrdrv is absent (the gdrdrv kernel module is not loaded)";
    return "";
#else
    return "built without GDRCopy (configure with -DGPU_MEMPATHS_WITH_GDRCOPY=ON)";
#endif
}

// What a run sweeps: every direction x method x size, each case timed so.
struct Plan {
    std::vector<std::size_t> sizes;
    std::vector<Method> methods;
    std::vector<Dir> dirs;
    Timing timing;
    int numa_node = -1;
};

// Every option, with its default and its help.
suite::Options declare_options() {
    suite::Options opts("copy_latency", "Host-device copy latency of cudaMemcpy (pageable, pinned), cudaMemcpyAsync, "
                                        "a zero-copy kernel and GDRCopy: one 'Latency:' line per method, direction "
                                        "and size.");
    opts.add("methods", "pageable,pinned,async,zerocopy,gdrcopy", "methods to time (list)");
    opts.add("directions", "h2d,d2h", "directions to time (list)");
    opts.add("sizes", "", "copy sizes (list, K/M suffixes); empty: powers of two from --min-size to --max-size");
    opts.add("min-size", "1", "smallest copy size");
    opts.add("max-size", "16M", "largest copy size");
    opts.add("reps", "100", "timed samples per case, at most");
    opts.add("min-reps", "10", "timed samples per case, at least (the time budget does not cut below this)");
    opts.add("warmup", "10", "untimed copies before each case");
    opts.add("blocks", "5", "consecutive blocks of samples whose medians are printed (at most --min-reps)");
    opts.add("sample-us", "5", "shortest sample in microseconds: shorter copies are timed in batches");
    opts.add("case-seconds", "0.5", "time budget per case once --min-reps samples are taken");
    opts.add("device", "0", "CUDA device");
    opts.add("numa-node", "-1", "NUMA node to run on and allocate host memory from (-1: leave as is)");
    opts.add("block", "256", "threads per block of the zero-copy kernel");
    return opts;
}

// Every option, checked before CUDA starts.
Plan parse_plan(const suite::Options &opts, Buffers &b) {
    Plan p;
    p.sizes = parse_sizes(opts);
    p.methods = parse_methods(opts);
    p.dirs = parse_dirs(opts);
    p.timing = parse_timing(opts);
    p.numa_node = opts.integer32("numa-node", -1, 1 << 16);
    b.block = opts.integer32("block", 32, 1024);
    if (b.block % 32) opts.usage_error("option '--block' expects a multiple of 32, got %d", b.block);
    return p;
}

// The process and its host memory on --numa-node, where one is named.
void bind_to_node(const suite::Options &opts, int numa_node) {
    if (numa_node < 0) return;
#ifdef SUITE_HAVE_LIBNUMA
    if (numa_available() < 0) suite::die("libnuma reports no NUMA support on this host");
    if (numa_run_on_node(numa_node) != 0)
        opts.usage_error("option '--numa-node': cannot run on NUMA node %d", numa_node);
    numa_set_preferred(numa_node);
    std::printf("Host NUMA node: %d\n", numa_node);
#else
    (void)opts;
    std::printf("Host NUMA node: not set (--numa-node %d: this build has no libnuma)\n", numa_node);
#endif
}

// The device, which must map host memory for the zero-copy leg.
void open_device(const suite::Options &opts, Buffers &b) {
    const int device = suite::visible_device(opts, "device");
    CUDA_CHECK(cudaSetDevice(device));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    std::printf("Device %d: %s, PCI %04x:%02x:%02x.0, compute capability %d.%d\n", device, prop.name, prop.pciDomainID,
                prop.pciBusID, prop.pciDeviceID, prop.major, prop.minor);
    if (!prop.canMapHostMemory) suite::die("device %d cannot map host memory: no zero-copy leg", device);
    b.grid_cap = prop.multiProcessorCount * 16;
}

// The buffers of the largest size and, where GDRCopy is timed, its mapping;
// methods that cannot run here are named with the reason, not dropped silently.
void prepare(Buffers &b, Plan &p) {
    std::vector<Method> &methods = p.methods;
    const std::string gdr_reason = gdrcopy_unavailable();
    if (std::find(methods.begin(), methods.end(), Method::gdrcopy) != methods.end() && !gdr_reason.empty()) {
        suite::Record("Skipped").add("method", "gdrcopy").add("reason", gdr_reason).print();
        methods.erase(std::remove(methods.begin(), methods.end(), Method::gdrcopy), methods.end());
    }
    if (methods.empty()) suite::die("no method left to time");

    allocate(b, p.sizes.back());
#ifdef SUITE_HAVE_GDRCOPY
    if (std::find(methods.begin(), methods.end(), Method::gdrcopy) != methods.end()) {
        gdr_setup(b.mapping, p.sizes.back());
        b.gdr = true;
        std::puts("Note: gdrcopy h2d times the CPU's stores, as GDRCopy's copylat does: they may not have reached "
                  "GPU memory when the call returns");
    }
#endif
}

// The sweep ahead, before its first case.
void describe(const Plan &p) {
    const auto &sizes = p.sizes;
    const auto &timing = p.timing;
    std::printf("Sizes: %zu, %zu B to %zu B; methods:", sizes.size(), sizes.front(), sizes.back());
    for (Method m : p.methods) std::printf(" %s", method_name(m));
    std::printf("; directions:");
    for (Dir d : p.dirs) std::printf(" %s", dir_name(d));
    std::printf("\nSamples per case: %d to %d (%.2f s budget), warm-up %d, samples of at least %.1f us\n",
                timing.min_reps, timing.reps, timing.case_budget_s, timing.warmup, timing.min_sample_s * 1e6);
    std::fflush(stdout);
}

// Every case verified, then timed: one 'Latency:' record each.
void sweep(const Buffers &b, const Plan &p) {
    const auto start = Clock::now();
    unsigned salt = 0, verified = 0;
    for (Dir d : p.dirs)
        for (Method m : p.methods)
            for (std::size_t n : p.sizes) {
                verify(b, m, d, n, ++salt);
                ++verified;
                const Result r = measure(b, m, d, n, p.timing);
                suite::Record("Latency")
                    .add("method", method_name(m))
                    .add("direction", dir_name(d))
                    .add("size", n)
                    .addf("median_us", "%.4f", r.median_us)
                    .addf("min_us", "%.4f", r.min_us)
                    .add("samples", r.samples)
                    .add("batch", r.batch)
                    .list("block_medians_us", "%.4f", r.block_medians_us)
                    .print();
                std::fflush(stdout);
            }
    std::printf("Data verified: %u cases (each method, direction and size)\n", verified);
    std::printf("Sweep time: %.2f s\n", seconds_since(start));
}

}  // namespace

int main(int argc, char **argv) {
    suite::Options opts = declare_options();
    opts.parse(argc, argv);
    Buffers b;
    Plan plan = parse_plan(opts, b);
    bind_to_node(opts, plan.numa_node);
    // CUDA starts once the process is on its node, so its own host memory is there too.
    open_device(opts, b);
    prepare(b, plan);
    describe(plan);
    sweep(b, plan);
    release(b);
    return EXIT_SUCCESS;
}
