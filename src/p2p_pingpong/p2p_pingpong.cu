// The P2P ping-pong bandwidth test of the NVBit seed ("Bandwidth Test for
// NVBit Instrumentation"): a persistent kernel that, for ITERS iterations,
// alternately sets dst[idx] = src[idx] + 2 and src[idx] = dst[idx] + 2
// through volatile pointers, src on one GPU and dst on its peer, one thread
// per int element.
//
// Variants: baseline (the seed's kernel) and manual (the seed's manually
// instrumented kernel: an empty __noinline__ device function called before
// and after each access, as NVBit's empty-call tool would). The third, nvbit,
// is the baseline kernel under an NVBit tool: this program runs itself again
// with LD_PRELOAD naming the tool (--nvbit-tool), so that one job measures
// the baseline and the instrumented run side by side.
//
// Each variant runs its kernel once ahead (JIT, instrumentation and warm-up
// stay out of the measurement, as in the seed), then once timed with CUDA
// events, and prints the seed's table row: time in seconds and "Bandwidth
// (GB/s)" = size * ITERS / time / 2^30. That is the seed's formula: its
// 64 MB x 10000 iterations in 1.99599 s are 313.128 only in units of 2^30
// bytes (and 64 MB is 64 MiB), so the unit is GiB/s under the seed's label.
// The final values are verified against their closed form.
#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <string>
#include <vector>

#include "spawn.hpp"
#include "suite.hpp"

namespace {

// ---------------------------------------------------------------- kernels --

// The seed's kernel, the iteration count a parameter instead of a macro.
__global__ void pingpong_baseline(int volatile *src, int volatile *dst, int iters) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    for (int i = 0; i < iters; i++) {
        if (i % 2 == 0) {
            dst[idx] = src[idx] + 2;
        } else {
            src[idx] = dst[idx] + 2;
        }
    }
}

// The seed's empty instrumentation function, NVBit's signature. The seed
// turned compiler optimisations off to keep its calls; here the calls stay
// in an optimised build because the body is an empty asm volatile statement
// that takes every argument: a call with side effects cannot be removed, the
// arguments cannot be dropped, and __noinline__ keeps it a real CALL (the
// SASS of this kernel shows CALL.REL.NOINC instrument_mem, four per
// iteration). The arguments are the access's predicate, an opcode id, its
// address, a launch id and a channel pointer, as NVBit's tool would pass.
__device__ __noinline__ void instrument_mem(int pred, int opcode_id, std::uint64_t addr, std::uint64_t grid_launch_id,
                                            std::uint64_t pchannel_dev) {
    asm volatile("" ::"r"(pred), "r"(opcode_id), "l"(addr), "l"(grid_launch_id), "l"(pchannel_dev) : "memory");
}

__global__ void pingpong_manual(int volatile *src, int volatile *dst, int iters, std::uint64_t launch_id,
                                std::uint64_t channel) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    const auto at = [](int volatile *p) { return reinterpret_cast<std::uint64_t>(p); };
    for (int i = 0; i < iters; i++) {
        if (i % 2 == 0) {
            instrument_mem(1, 0, at(src + idx), launch_id, channel);
            dst[idx] = src[idx] + 2;
            instrument_mem(1, 1, at(dst + idx), launch_id, channel);
        } else {
            instrument_mem(1, 2, at(dst + idx), launch_id, channel);
            src[idx] = dst[idx] + 2;
            instrument_mem(1, 3, at(src + idx), launch_id, channel);
        }
    }
}

__global__ void init_kernel(int *src, int *dst, int n) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) {
        src[idx] = idx & 0xffff;
        dst[idx] = -1;
    }
}

// ------------------------------------------------------------ host helpers --

// What the arrays hold after `iters` iterations from src = a, dst = b:
// iteration k writes a + 2 (k + 1), to dst when k is even, to src when odd.
// The last odd k is 2 floor(iters/2) - 1, the last even k 2 ceil(iters/2) - 2.
struct Final {
    long long src, dst;
};

Final closed_form(long long a, long long b, long long iters) {
    const long long odd = iters / 2, even = (iters + 1) / 2;  // writes to src, to dst
    return {odd ? a + 4 * odd : a, even ? a + 4 * even - 2 : b};
}

struct Config {
    std::vector<std::string> variants;
    std::uint64_t size = 0;
    int iters = 0, block = 0, src_device = 0, dst_device = 1, samples = 1;
    std::string label, nvbit_tool;
};

const char *table_name(const std::string &variant) {
    if (variant == "baseline") return "Baseline";
    if (variant == "manual") return "Manual Instrumented Version";
    return "NVBit Instrumented Version";
}

// Runs one variant's kernel: once ahead, then `samples` times timed, each
// from fresh arrays and verified; prints one line per sample.
void run_variant(const Config &c, const std::string &variant, int *src, int *dst, const std::string &label) {
    const int n = static_cast<int>(c.size / sizeof(int));
    const int grid = n / c.block;  // one thread per element
    auto init = [&] {
        init_kernel<<<grid, c.block>>>(src, dst, n);
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(cudaDeviceSynchronize());
    };
    auto pingpong = [&] {
        if (variant == "manual") pingpong_manual<<<grid, c.block>>>(src, dst, c.iters, 1, 0);
        else pingpong_baseline<<<grid, c.block>>>(src, dst, c.iters);
        CUDA_CHECK_LAUNCH();
    };
    init();
    pingpong();  // ahead: JIT, instrumentation, first touches
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<int> hs(n), hd(n);
    for (int sample = 1; sample <= c.samples; ++sample) {
        init();
        suite::EventTimer timer;
        timer.start();
        pingpong();
        const double seconds = timer.stop();

        CUDA_CHECK(cudaMemcpy(hs.data(), src, c.size, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(hd.data(), dst, c.size, cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; ++i) {
            const Final f = closed_form(i & 0xffff, -1, c.iters);
            if (hs[i] != f.src || hd[i] != f.dst)
                suite::die("%s sample %d: element %d holds src=%d dst=%d, expected %lld and %lld", label.c_str(),
                           sample, i, hs[i], hd[i], f.src, f.dst);
        }
        const double bandwidth = static_cast<double>(c.size) * c.iters / seconds / suite::kGiB;
        if (sample == 1) std::printf("| %-27s | %-8.6g | %-16.6g |\n", table_name(label), seconds, bandwidth);
        suite::Record("PingPong")
            .add("variant", label)
            .add("size", c.size)
            .add("iters", c.iters)
            .add("block", c.block)
            .add("src_device", c.src_device)
            .add("dst_device", c.dst_device)
            .add("sample", sample)
            .addf("time_s", "%.6g", seconds)
            .addf("bandwidth_gibs", "%.6g", bandwidth)
            .print();
        std::fflush(stdout);
    }
    suite::Record("Verified")
        .add("variant", label)
        .add("samples", c.samples)
        .addf("src", "a+%lld", closed_form(0, -1, c.iters).src)
        .addf("dst", "a+%lld (a = initial src) after %d iterations", closed_form(0, -1, c.iters).dst, c.iters)
        .print();
    std::fflush(stdout);
}

// The nvbit variant: this program again, baseline kernel, the tool preloaded.
void run_under_nvbit(int argc, char **argv, const Config &c) {
    if (c.nvbit_tool.empty()) suite::die("the nvbit variant needs --nvbit-tool (the NVBit tool's .so)");
    std::vector<std::string> args(argv, argv + argc);
    for (const char *s : {"--variants", "baseline", "--label", "nvbit", "--nvbit-tool", ""}) args.push_back(s);
    std::vector<std::string> env = suite::environment_without("LD_PRELOAD=");
    env.push_back("LD_PRELOAD=" + c.nvbit_tool);
    const pid_t pid = suite::spawn_self(args, env, "the NVBit run");
    int status = 0;
    if (waitpid(pid, &status, 0) < 0) suite::die("waitpid: %s", std::strerror(errno));
    if (!suite::exited_ok(status)) suite::die("the run under NVBit (%s) failed", c.nvbit_tool.c_str());
}

// Every option, with its default and its help.
suite::Options declare_options() {
    suite::Options opts("p2p_pingpong", "The NVBit seed's P2P ping-pong: a persistent kernel moves an array between "
                                        "two GPUs ITERS times; one 'PingPong:' line per variant. A device that is not "
                                        "visible (any, with fewer than two GPUs) is an argument error (the suite's "
                                        "check never runs it there).");
    opts.add("variants", "baseline",
             "baseline, manual (empty __noinline__ calls around each access), nvbit (the "
             "baseline under --nvbit-tool) (list; run in this order)");
    opts.add("size", "64M", "bytes of each array (the seed's 64 MB = 64 MiB of int)");
    opts.add("iters", "10000", "ping-pong iterations (the seed's ITERS)");
    opts.add("block", "256", "threads per block; one thread per element");
    opts.add("src-device", "0", "GPU holding src and running the kernel");
    opts.add("dst-device", "1", "GPU holding dst");
    opts.add("nvbit-tool", "", "the NVBit tool (.so) the nvbit variant preloads");
    opts.add("label", "", "name printed for the variant (the nvbit run's own)");
    opts.add("samples", "1", "timed runs of each variant, each on fresh arrays");
    return opts;
}

// Every option, checked before CUDA starts.
Config parse_config(const suite::Options &opts) {
    Config c;
    c.variants = opts.choices("variants", {"baseline", "manual", "nvbit"});
    c.iters = opts.integer32("iters", 1, 100000000);
    c.block = opts.integer32("block", 32, 1024);
    // One int per thread, an int index per element: below 8 GiB.
    c.size = opts.bytes("size", sizeof(int) * c.block, 0x7fffffffull * sizeof(int));
    if (c.size % (sizeof(int) * c.block))
        opts.usage_error("option '--size' expects a multiple of 4 * --block (%zu) bytes, got '%s'",
                         sizeof(int) * c.block, opts.str("size").c_str());
    c.src_device = opts.integer32("src-device", 0, std::numeric_limits<int>::max());
    c.dst_device = opts.integer32("dst-device", 0, std::numeric_limits<int>::max());
    if (c.src_device == c.dst_device)
        opts.usage_error("options '--src-device' and '--dst-device' must name two different GPUs, both are %d",
                         c.src_device);
    c.nvbit_tool = opts.str("nvbit-tool");
    c.label = opts.str("label");
    c.samples = opts.integer32("samples", 1, 1000000);
    if (std::find(c.variants.begin(), c.variants.end(), "nvbit") != c.variants.end() && c.nvbit_tool.empty())
        opts.usage_error("option '--variants nvbit' needs --nvbit-tool (the NVBit tool's .so)");
    // Each iteration moves the array once each way: at most 64 TiB in all,
    // minutes over NVLink (a day would pass any batch limit unnoticed).
    const double moved = 2.0 * static_cast<double>(c.size) * c.iters * c.samples;
    if (moved > 64.0 * (1ull << 40))
        opts.usage_error("options '--size' x '--iters' x '--samples' move %.0f TiB, more than the 64 TiB a run may",
                         moved / (1ull << 40));
    return c;
}

// The two GPUs, which must be visible and reach each other; named unless
// this is the nvbit variant's run (--label).
void check_devices(const suite::Options &opts, const Config &c) {
    const int count = suite::device_count("options '--src-device' and '--dst-device'");
    if (c.src_device >= count || c.dst_device >= count)
        opts.usage_error("options '--src-device' %d and '--dst-device' %d: %d GPU%s visible (the ping-pong needs two)",
                         c.src_device, c.dst_device, count, count == 1 ? " is" : "s are");
    int can = 0;
    CUDA_CHECK(cudaDeviceCanAccessPeer(&can, c.src_device, c.dst_device));
    if (!can)
        suite::die("GPU %d cannot access GPU %d's memory (cudaDeviceCanAccessPeer = 0): no peer-to-peer path",
                   c.src_device, c.dst_device);

    cudaDeviceProp ps{}, pd{};
    CUDA_CHECK(cudaGetDeviceProperties(&ps, c.src_device));
    CUDA_CHECK(cudaGetDeviceProperties(&pd, c.dst_device));
    if (c.label.empty())
        std::printf("src on GPU %d (%s), dst on GPU %d (%s), kernel on GPU %d; %" PRIu64 " bytes, %d iterations; "
                    "Bandwidth (GB/s) = size * iters / time / 2^30, the seed's formula\n",
                    c.src_device, ps.name, c.dst_device, pd.name, c.src_device, c.size, c.iters);
}

// src on --src-device, dst on its peer; each variant in turn, then both freed.
void run_variants(int argc, char **argv, const Config &c) {
    int *src = nullptr, *dst = nullptr;
    CUDA_CHECK(cudaSetDevice(c.dst_device));
    CUDA_CHECK(cudaMalloc(&dst, c.size));
    CUDA_CHECK(cudaSetDevice(c.src_device));
    CUDA_CHECK(cudaMalloc(&src, c.size));
    const cudaError_t err = cudaDeviceEnablePeerAccess(c.dst_device, 0);
    if (err == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
    else CUDA_CHECK(err);

    for (const auto &v : c.variants) {
        if (v == "nvbit") {
            run_under_nvbit(argc, argv, c);
            continue;
        }
        run_variant(c, v, src, dst, c.label.empty() ? v : c.label);
    }
    CUDA_CHECK(cudaFree(src));
    CUDA_CHECK(cudaSetDevice(c.dst_device));
    CUDA_CHECK(cudaFree(dst));
}

}  // namespace

int main(int argc, char **argv) {
    suite::Options opts = declare_options();
    opts.parse(argc, argv);
    const Config c = parse_config(opts);
    check_devices(opts, c);
    run_variants(argc, argv, c);
    return EXIT_SUCCESS;
}
