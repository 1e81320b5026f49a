// A WholeMemory-style random-access scan across all GPUs of a node (our own
// program, after the WholeMemory benchmark on DGX-A100).
//
// One buffer is spread over the node's N GPUs, each holding 1/N of it (a
// "chunk"), filled with known values: 32-bit word w of the whole buffer holds
// value0(w). Every GPU at the same time runs a kernel that picks random,
// naturally aligned segments of the whole buffer (4 B to 16 KiB) and
//   read:   copies them into a buffer in its own memory,
//   write:  stores value0(w) ^ salt into them (salt: one per point),
//   atomic: atomicAdd(word, 1) on every 4-byte word of them,
// with 4, 8 or 16 bytes per thread (4 for atomics). Three ways to reach the
// chunks, the seed's three modes:
//   single:       one process, ONE contiguous virtual range mapped across the
//                 GPUs with the CUDA VMM API (cuMemCreate/cuMemMap);
//   chunked:      one process, a table of the N chunks' pointers (cudaMalloc);
//   multiprocess: one process per GPU, chunks shared through CUDA IPC, the
//                 handles exchanged through files in a directory.
// Every GPU waits at a start gate until all have finished a warm-up launch,
// so the timed launches start together. Every point prints one "Scan:" line
// with each GPU's rate (decimal GB/s, the bytes of all segments it touched
// over its own kernel time) and the node's aggregate: all GPUs' bytes over
// the common window, from the gate's opening to the last GPU's end. Reads are verified against value0, writes read
// back, atomics by the change of the buffer's checksum. Before the points of a read or a write, one "Link:" line gives
// the yardstick they are measured against in the same run: every GPU streaming through its peers' chunks at once.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <cuda.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "access.cuh"
#include "spawn.hpp"
#include "suite.hpp"

namespace {

constexpr int kMaxGpus = 16;
constexpr int kBlock = 256;
constexpr int kUnroll = 4;  // independent loads in flight per thread
constexpr std::uint64_t kChunkAlign = std::uint64_t{2} << 20;

// The driver API's virtual memory calls, found at run time through the CUDA
// runtime (which loads libcuda itself) rather than linked: the program then
// starts, checks its options and prints --help where no driver is
// installed, as every other program of the suite does.
struct DriverApi {
    decltype(&cuGetErrorString) getErrorString = nullptr;
    decltype(&cuGetErrorName) getErrorName = nullptr;
    decltype(&cuMemGetAllocationGranularity) memGetAllocationGranularity = nullptr;
    decltype(&cuMemAddressReserve) memAddressReserve = nullptr;
    decltype(&cuMemCreate) memCreate = nullptr;
    decltype(&cuMemMap) memMap = nullptr;
    decltype(&cuMemSetAccess) memSetAccess = nullptr;
    decltype(&cuMemUnmap) memUnmap = nullptr;
    decltype(&cuMemRelease) memRelease = nullptr;
    decltype(&cuMemAddressFree) memAddressFree = nullptr;
};

// The entry point of `symbol` as this program's cuda.h declares it (CUDA_VERSION's ABI).
template <typename Fn>
void find_entry(Fn &fn, const char *symbol) {
    void *entry = nullptr;
#if CUDART_VERSION >= 12050
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    CUDA_CHECK(cudaGetDriverEntryPointByVersion(symbol, &entry, CUDA_VERSION, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess) entry = nullptr;
#else
    CUDA_CHECK(cudaGetDriverEntryPoint(symbol, &entry, cudaEnableDefault));
#endif
    if (!entry) suite::die("the CUDA driver has no %s (CUDA %d's)", symbol, CUDA_VERSION);
    fn = reinterpret_cast<Fn>(entry);
}

const DriverApi &driver() {
    static const DriverApi api = [] {
        DriverApi d;
        find_entry(d.getErrorString, "cuGetErrorString");
        find_entry(d.getErrorName, "cuGetErrorName");
        find_entry(d.memGetAllocationGranularity, "cuMemGetAllocationGranularity");
        find_entry(d.memAddressReserve, "cuMemAddressReserve");
        find_entry(d.memCreate, "cuMemCreate");
        find_entry(d.memMap, "cuMemMap");
        find_entry(d.memSetAccess, "cuMemSetAccess");
        find_entry(d.memUnmap, "cuMemUnmap");
        find_entry(d.memRelease, "cuMemRelease");
        find_entry(d.memAddressFree, "cuMemAddressFree");
        return d;
    }();
    return api;
}

// The driver API's errors, reported like CUDA_CHECK's.
void cu_check(CUresult err, const char *call, const char *file, int line) {
    if (err == CUDA_SUCCESS) return;
    const char *text = "unknown", *name = "unknown";
    driver().getErrorString(err, &text);
    driver().getErrorName(err, &name);
    std::fprintf(stderr, "CUDA error: %s (%s) in %s at %s:%d\n", text, name, call, file, line);
    std::exit(EXIT_FAILURE);
}
#define CU_CHECK(call) cu_check((call), #call, __FILE__, __LINE__)

// ---------------------------------------------------------------- kernels --

__host__ __device__ inline std::uint64_t mix64(std::uint64_t x) {  // splitmix64's finaliser
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// What word w of the whole buffer holds after the fill.
__host__ __device__ inline unsigned value0(std::uint64_t w) {
    return static_cast<unsigned>(w ^ (w >> 29)) * 0x9e3779b1u + 0x7f4a7c15u;
}

// Where the chunks are: contiguous (chunk c at base + c * chunk_bytes, base in
// chunk[0]) or one pointer per chunk.
struct Layout {
    char *chunk[kMaxGpus];
    std::uint64_t chunk_bytes;
    unsigned nchunks;
};

// One launch's random segments: segment s of the launch lies in chunk
// c(s) at offset o(s), both drawn from one 64-bit hash of (seed, s) by
// multiply-high (the chunk from its low half, the offset mostly from its high
// half), so every chunk and every aligned segment of its window is equally
// likely. The window is the whole chunk, or with --launch-span a span of it
// at an offset drawn per launch, the same in every chunk: fewer distinct
// pages per launch, for telling address translation from the links.
struct Pattern {
    std::uint64_t seed, segs_per_window;
    std::uint64_t window;  // the window's byte offset in every chunk
    unsigned seg_shift;    // log2(segment bytes)
    unsigned lane_shift;   // log2(threads per segment)
};

// Element i of a launch (one thread's 4, 8 or 16 bytes): its address, and
// the index of its first word in the whole buffer.
template <bool kContiguous, typename T>
__device__ __forceinline__ T *element(const Layout &l, const Pattern &p, std::uint64_t i, std::uint64_t &word) {
    const std::uint64_t r = mix64(p.seed ^ ((i >> p.lane_shift) * 0x9e3779b97f4a7c15ull));
    const unsigned c = __umulhi(static_cast<unsigned>(r), l.nchunks);
    const std::uint64_t off = p.window + (__umul64hi(r, p.segs_per_window) << p.seg_shift) +
                              (i & ((std::uint64_t{1} << p.lane_shift) - 1)) * sizeof(T);
    word = (c * l.chunk_bytes + off) / 4;
    char *base = kContiguous ? l.chunk[0] + c * l.chunk_bytes : l.chunk[c];
    return reinterpret_cast<T *>(base + off);
}

// 1, 2 or 4 consecutive words as one value, from a word function.
template <typename F>
__device__ __forceinline__ void make(unsigned &v, std::uint64_t w, F f) {
    v = f(w);
}
template <typename F>
__device__ __forceinline__ void make(uint2 &v, std::uint64_t w, F f) {
    v = make_uint2(f(w), f(w + 1));
}
template <typename F>
__device__ __forceinline__ void make(uint4 &v, std::uint64_t w, F f) {
    v = make_uint4(f(w), f(w + 1), f(w + 2), f(w + 3));
}
__device__ __forceinline__ bool same(unsigned a, unsigned b) { return a == b; }
__device__ __forceinline__ bool same(uint2 a, uint2 b) { return a.x == b.x && a.y == b.y; }
__device__ __forceinline__ bool same(uint4 a, uint4 b) { return a.x == b.x && a.y == b.y && a.z == b.z && a.w == b.w; }

enum class Op { read, write, atomic };

// The measured kernel, grid-stride over the launch's n elements with kUnroll
// elements in flight per thread: read gathers into `local`, write scatters
// value0 ^ salt, atomic adds 1 to each word (T is then unsigned).
template <Op kOp, bool kContiguous, typename T>
__global__ void scan_kernel(Layout l, Pattern p, T *__restrict__ local, std::uint64_t n, unsigned salt) {
    const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    for (std::uint64_t e = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
         e += kUnroll * stride) {
        T v[kUnroll];
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) {
            const std::uint64_t i = e + k * stride;
            if (i >= n) break;
            std::uint64_t w;
            T *at = element<kContiguous, T>(l, p, i, w);
            if (kOp == Op::read) {
                v[k] = suite::load_nc(at);
            } else if (kOp == Op::write) {
                make(v[k], w, [salt](std::uint64_t x) { return value0(x) ^ salt; });
                suite::store(at, v[k]);
            } else {
                atomicAdd(reinterpret_cast<unsigned *>(at), 1u);
            }
        }
        if (kOp == Op::read) {
#pragma unroll
            for (int k = 0; k < kUnroll; ++k)
                if (e + k * stride < n) suite::store(local + e + k * stride, v[k]);
        }
    }
}

// The link's yardstick for the scan: every GPU streams through all of its
// peers' chunks at once (its blocks split among the peers, so that a mesh of
// direct links is used whole, not one link at a time), 16-byte words in
// order: the links carry the scan's remote traffic without its randomness.
// Reads land in `local`, peer after peer; writes store each word's own fill
// value, so the buffer keeps its known contents.
template <Op kOp, bool kContiguous>
__global__ void stream_kernel(Layout l, unsigned self, uint4 *__restrict__ local, std::uint64_t per_peer) {
    const unsigned peers = l.nchunks - 1, q = blockIdx.x % peers;  // launched with gridDim.x >= peers
    const unsigned c = (self + 1 + q) % l.nchunks;
    const std::uint64_t blocks = (gridDim.x - q + peers - 1) / peers;  // this peer's share of the grid
    const std::uint64_t stride = blocks * blockDim.x;
    uint4 *peer = reinterpret_cast<uint4 *>(kContiguous ? l.chunk[0] + c * l.chunk_bytes : l.chunk[c]);
    uint4 *out = local + q * per_peer;
    for (std::uint64_t e = (blockIdx.x / peers) * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; e < per_peer;
         e += kUnroll * stride) {
        uint4 v[kUnroll];
        const std::uint64_t left = per_peer - e;  // words of this peer from e on (e < per_peer)
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) {
            if (k * stride >= left) break;
            const std::uint64_t i = e + k * stride;
            if (kOp == Op::read) {
                v[k] = suite::load16_nc(peer + i);
            } else {
                make(v[k], (c * l.chunk_bytes) / 4 + 4 * i, [](std::uint64_t x) { return value0(x); });
                suite::store16(peer + i, v[k]);
            }
        }
        if (kOp == Op::read) {
#pragma unroll
            for (int k = 0; k < kUnroll; ++k)
                if (e + k * stride < per_peer) suite::store16(out + e + k * stride, v[k]);
        }
    }
}

// Verification of one launch, regenerating its segments: after a read the
// local buffer must hold value0 of every word gathered; after a write every
// word written must hold value0 ^ salt. Mismatches are counted in *bad.
template <Op kOp, bool kContiguous, typename T>
__global__ void verify_kernel(Layout l, Pattern p, const T *local, std::uint64_t n, unsigned salt,
                              unsigned long long *bad) {
    const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    unsigned long long wrong = 0;
    for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        std::uint64_t w;
        const T *at = element<kContiguous, T>(l, p, i, w);
        T expected;
        make(expected, w, [salt](std::uint64_t x) { return value0(x) ^ salt; });
        wrong += !same(kOp == Op::read ? local[i] : *at, expected);
    }
    if (wrong) atomicAdd(bad, wrong);
}

// Chunk words [0, n) are words first.. of the whole buffer.
__global__ void fill_kernel(unsigned *chunk, std::uint64_t n, std::uint64_t first) {
    const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        chunk[i] = value0(first + i);
}

// Sum of a chunk's words modulo 2^32: atomics must raise it by their count.
__global__ void sum_kernel(const unsigned *chunk, std::uint64_t n, unsigned *sum) {
    const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    unsigned acc = 0;
    for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        acc += chunk[i];
    for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
    if ((threadIdx.x & 31) == 0) atomicAdd(sum, acc);
}

// Holds a GPU's stream until the host opens the gate (a word of mapped host
// memory), so that every GPU starts its timed launches at the same moment,
// as NVIDIA's nvbandwidth does with its spin kernel. One thread polls; it
// gives up after kGateTimeoutNs and says so in the gate's second word, so a
// host that died cannot leave the GPU spinning for ever.
constexpr unsigned long long kGateTimeoutNs = 60ull * 1000 * 1000 * 1000;

__global__ void wait_at_gate(volatile int *gate) {
    unsigned long long start = 0, now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (gate[0] == 0) {
        __nanosleep(256);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > kGateTimeoutNs) {
            gate[1] = 1;
            return;
        }
    }
}

// ---------------------------------------------------------- configuration --

enum class Mode { single, chunked, multiprocess };

// Timed launches of a point are split into this many consecutive blocks,
// each timed on its own: the samples of the point's rates.
constexpr int kBlocks = 5;

const char *mode_name(Mode m) { return m == Mode::single ? "single" : m == Mode::chunked ? "chunked" : "multiprocess"; }
const char *op_name(Op o) { return o == Op::read ? "read" : o == Op::write ? "write" : "atomic"; }

struct Config {
    std::vector<Mode> modes;
    std::vector<Op> ops;
    std::vector<std::uint64_t> segments;
    std::vector<int> widths;
    suite::Options::Amount size;     // bytes, or a fraction of the GPUs' memory
    std::uint64_t launch_bytes = 0;  // 0: by segment size
    std::uint64_t map_bytes = 0;     // single: bytes per physical allocation (0: one per GPU)
    std::uint64_t launch_span = 0;   // bytes of every chunk one launch touches (0: all of it)
    int reps = 20, gpus = 0, rank = 0, nranks = 1;
    bool spawn = false;
    std::string run_id, exchange_dir;
};

bool power_of_two(std::uint64_t x) { return x && !(x & (x - 1)); }
unsigned log2u(std::uint64_t x) {
    unsigned s = 0;
    while ((std::uint64_t{1} << s) < x) ++s;
    return s;
}

// The first of these environment variables that is set, with its name; "" if none is.
std::pair<std::string, std::string> env_first(std::initializer_list<const char *> names) {
    for (const char *name : names)
        if (const char *v = std::getenv(name)) return {name, v};
    return {"", ""};
}

// A rank or rank count from its option or, failing that, the launcher's
// environment variable; what does not parse is an error naming where it came from.
int rank_value(const suite::Options &opts, const std::string &option, std::initializer_list<const char *> vars,
               int fallback, int lo) {
    std::string from = "option '--" + option + "'", text = opts.str(option);
    if (text.empty()) {
        const auto [var, value] = env_first(vars);
        if (var.empty()) return fallback;
        from = "environment variable " + var;
        text = value;
    }
    long long v = 0;
    if (!suite::parse_integer(text, v) || v < lo || v > kMaxGpus * 64)
        opts.usage_error("%s expects an integer from %d, got '%s'", from.c_str(), lo, text.c_str());
    return static_cast<int>(v);
}

Config parse_config(const suite::Options &opts) {
    Config c;
    for (const auto &m : opts.choices("modes", {"single", "chunked", "multiprocess"}))
        c.modes.push_back(m == "single" ? Mode::single : m == "chunked" ? Mode::chunked : Mode::multiprocess);
    for (const auto &o : opts.choices("ops", {"read", "write", "atomic"}))
        c.ops.push_back(o == "read" ? Op::read : o == "write" ? Op::write : Op::atomic);
    for (const std::uint64_t bytes : opts.bytes_list("segments", 4, 16384)) {
        if (!power_of_two(bytes))
            opts.usage_error("option '--segments' takes powers of two from 4 to 16K, got %" PRIu64, bytes);
        c.segments.push_back(bytes);
    }
    if (c.segments.empty()) opts.usage_error("option '--segments' needs at least one value");
    for (const auto &w : opts.choices("widths", {"4", "8", "16"})) c.widths.push_back(w == "4" ? 4 : w == "8" ? 8 : 16);
    // A fraction of the GPUs' memory below 1 (the GPUs need some for themselves), or bytes.
    c.size = opts.amount("size", 1.0, kChunkAlign);
    if (c.size.factor >= 1.0)
        opts.usage_error("option '--size' expects a fraction of the GPUs' memory below 1x, got '%s'",
                         opts.str("size").c_str());
    if (opts.str("launch-bytes") != "auto") {
        c.launch_bytes = opts.bytes("launch-bytes", 16384, 64ull << 30);
        if (c.launch_bytes % 16384)
            opts.usage_error("option '--launch-bytes' expects a multiple of 16K, got '%s'",
                             opts.str("launch-bytes").c_str());
    }
    // The page-reach experiments: both multiples of the 2 MiB VMM granularity;
    // whether they divide the chunk is known once the GPUs' memory is.
    for (const char *name : {"map-granularity", "launch-span"}) {
        if (opts.str(name) == "chunk") continue;
        const std::uint64_t bytes = opts.bytes(name, kChunkAlign);
        if (bytes % kChunkAlign)
            opts.usage_error("option '--%s' expects 'chunk' or a multiple of 2M, got '%s'", name,
                             opts.str(name).c_str());
        if (std::string(name) == "map-granularity") c.map_bytes = bytes;
        else c.launch_span = bytes;
    }
    if (c.map_bytes && std::count(c.modes.begin(), c.modes.end(), Mode::single) == 0)
        opts.usage_error("option '--map-granularity' maps the single mode's VMM range; --modes has no single");
    c.reps = opts.integer32("reps", kBlocks, 1000000);  // at least one launch per timed block
    c.gpus = opts.integer32("gpus", 0, kMaxGpus);
    if (c.gpus == 1) opts.usage_error("option '--gpus' expects 0 (all visible) or 2 to %d GPUs, got 1", kMaxGpus);
    c.spawn = opts.flag("spawn");

    // Rank and size: options first, then what srun, Open MPI, PMIx and jsrun set.
    const auto rank_vars = {"SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "JSM_NAMESPACE_RANK"};
    const auto size_vars = {"SLURM_STEP_NUM_TASKS", "OMPI_COMM_WORLD_SIZE", "JSM_NAMESPACE_SIZE"};
    const bool size_known = !opts.str("nranks").empty() || !env_first(size_vars).first.empty();
    c.rank = rank_value(opts, "rank", rank_vars, 0, 0);
    c.nranks = rank_value(opts, "nranks", size_vars, 1, 1);
    if (c.rank > 0 && !size_known) opts.usage_error("rank %d known but not the number of ranks: pass --nranks", c.rank);
    if (c.rank >= c.nranks) opts.usage_error("option '--rank': rank %d of %d is out of range", c.rank, c.nranks);
    if (c.nranks > 1 && (c.modes.size() != 1 || c.modes[0] != Mode::multiprocess))
        opts.usage_error("launched as %d ranks: only --modes multiprocess runs one process per GPU", c.nranks);
    if (c.nranks > kMaxGpus) opts.usage_error("option '--nranks': at most %d ranks, got %d", kMaxGpus, c.nranks);
    if (c.spawn && c.nranks > 1)
        opts.usage_error("option '--spawn' is for a single launch, not for %d ranks", c.nranks);

    // Every rank must name the same exchange files: the job (and step) id.
    c.run_id = opts.str("run-id");
    if (c.run_id.empty()) {
        const std::string slurm = env_first({"SLURM_JOB_ID"}).second;
        if (!slurm.empty()) c.run_id = "slurm" + slurm + "." + env_first({"SLURM_STEP_ID"}).second;
        else c.run_id = env_first({"PMIX_NAMESPACE", "OMPI_MCA_orte_ess_jobid", "LSB_JOBID"}).second;
    }
    if (c.nranks > 1 && c.run_id.empty())
        opts.usage_error("%d ranks but no job id in the environment to name the exchange files: pass --run-id",
                         c.nranks);
    for (char &ch : c.run_id)
        if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '-') ch = '_';
    c.exchange_dir = opts.str("exchange-dir");
    return c;
}

// ------------------------------------------------------------ exchange --

// Ranks of the multiprocess mode meet through files: a rank publishes
// "<run>.r<rank>.<tag>" (written, then renamed into place) and reads the
// others' as they appear. A barrier is a tag that every rank publishes.
class Exchange {
  public:
    Exchange(std::string dir, std::string run, int rank, int nranks)
        : dir_(std::move(dir)), run_(std::move(run)), rank_(rank), nranks_(nranks) {
        if (mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)
            suite::die("cannot create the exchange directory %s: %s", dir_.c_str(), std::strerror(errno));
    }
    int rank() const { return rank_; }
    int nranks() const { return nranks_; }

    void publish(const std::string &tag, const std::string &data) {
        const std::string path = file(rank_, tag), tmp = path + ".tmp";
        FILE *f = std::fopen(tmp.c_str(), "wb");
        if (!f || std::fwrite(data.data(), 1, data.size(), f) != data.size() || std::fclose(f) != 0)
            suite::die("cannot write %s: %s", tmp.c_str(), std::strerror(errno));
        if (std::rename(tmp.c_str(), path.c_str()) != 0)
            suite::die("cannot rename %s: %s", tmp.c_str(), std::strerror(errno));
        mine_.push_back(path);
    }

    // Waits (at most kTimeout seconds) for rank r's tag and returns its data.
    std::string read(int r, const std::string &tag) const {
        const std::string path = file(r, tag);
        const auto begin = std::chrono::steady_clock::now();
        for (;;) {
            if (FILE *f = std::fopen(path.c_str(), "rb")) {
                std::string data;
                char buf[4096];
                for (std::size_t got; (got = std::fread(buf, 1, sizeof buf, f)) > 0;) data.append(buf, got);
                std::fclose(f);
                return data;
            }
            if (std::chrono::steady_clock::now() - begin > std::chrono::seconds(kTimeout))
                suite::die("rank %d: rank %d did not reach '%s' within %d s (did it fail? see its stderr)", rank_, r,
                           tag.c_str(), kTimeout);
            usleep(20);
        }
    }

    void barrier(const std::string &tag) {
        publish(tag, "");
        for (int r = 0; r < nranks_; ++r) read(r, tag);
    }

    // After a last barrier every rank has read what it needed: remove ours.
    void clean() {
        for (std::size_t i = 0; i + 1 < mine_.size(); ++i) std::remove(mine_[i].c_str());
    }

  private:
    static constexpr int kTimeout = 300;
    std::string file(int r, const std::string &tag) const {
        return dir_ + "/" + run_ + ".r" + std::to_string(r) + "." + tag;
    }
    std::string dir_, run_;
    int rank_, nranks_;
    std::vector<std::string> mine_;
};

// -------------------------------------------------------------- the node --

// One GPU this process drives, with what it needs for every point.
struct Gpu {
    int index = 0, device = 0;  // index: its chunk; device: its CUDA device
    cudaStream_t stream{};
    cudaEvent_t marks[kBlocks + 1]{};  // before the first timed launch and after each block
    cudaEvent_t warm{};                // after the warm-up launch
    void *local = nullptr;             // read: where segments land
    unsigned long long *bad = nullptr;
    unsigned *sum = nullptr;
    int grid = 0;
};

// The buffer: its layout and what each mode must release.
struct Buffer {
    Layout layout{};
    bool contiguous = false;
    CUdeviceptr base = 0;                               // single
    std::vector<CUmemGenericAllocationHandle> handles;  // single
    std::vector<void *> owned;                          // chunked, multiprocess: our chunks
    std::vector<void *> imported;                       // multiprocess: the other ranks' chunks
};

void setup_gpu(Gpu &g, std::uint64_t local_bytes) {
    CUDA_CHECK(cudaSetDevice(g.device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
    for (auto &mark : g.marks) CUDA_CHECK(cudaEventCreate(&mark));
    CUDA_CHECK(cudaEventCreateWithFlags(&g.warm, cudaEventDisableTiming));
    CUDA_CHECK(cudaMalloc(&g.local, local_bytes));
    CUDA_CHECK(cudaMalloc(&g.bad, sizeof *g.bad));
    CUDA_CHECK(cudaMalloc(&g.sum, sizeof *g.sum));
    int sms = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, g.device));
    g.grid = sms * (2048 / kBlock);
}

void release_gpu(Gpu &g) {
    CUDA_CHECK(cudaSetDevice(g.device));
    CUDA_CHECK(cudaFree(g.local));
    CUDA_CHECK(cudaFree(g.bad));
    CUDA_CHECK(cudaFree(g.sum));
    for (auto &mark : g.marks) CUDA_CHECK(cudaEventDestroy(mark));
    CUDA_CHECK(cudaEventDestroy(g.warm));
    CUDA_CHECK(cudaStreamDestroy(g.stream));
}

// Peer access between every pair of this process's devices, or a clear error.
void enable_peer_access(const std::vector<int> &devices) {
    for (int a : devices)
        for (int b : devices) {
            if (a == b) continue;
            int can = 0;
            CUDA_CHECK(cudaDeviceCanAccessPeer(&can, a, b));
            if (!can)
                suite::die("GPU %d cannot access GPU %d's memory (cudaDeviceCanAccessPeer = 0): no NVLink or PCIe "
                           "peer-to-peer path between them",
                           a, b);
            CUDA_CHECK(cudaSetDevice(a));
            const cudaError_t err = cudaDeviceEnablePeerAccess(b, 0);
            if (err == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
            else CUDA_CHECK(err);
        }
}

// single: N physical chunks mapped into one reserved range, readable and
// writable from every GPU (never multicast: plain cuMemCreate per device).
void allocate_contiguous(Buffer &b, const std::vector<Gpu> &gpus, std::uint64_t chunk, std::uint64_t piece) {
    const std::size_t n = gpus.size();
    CUmemAllocationProp probe{};
    probe.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    probe.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    probe.location.id = gpus[0].device;
    std::size_t granularity = 0;
    CU_CHECK(driver().memGetAllocationGranularity(&granularity, &probe, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    if (chunk % granularity)
        suite::die("a %" PRIu64 "-byte chunk is not a multiple of the VMM granularity, %zu bytes", chunk, granularity);
    if (piece % granularity)
        suite::die("--map-granularity %" PRIu64 " is not a multiple of the VMM granularity, %zu bytes", piece,
                   granularity);
    CU_CHECK(driver().memAddressReserve(&b.base, n * chunk, 0, 0, 0));
    std::vector<CUmemAccessDesc> access(n);
    for (std::size_t i = 0; i < n; ++i) {
        CUmemAllocationProp prop{};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = gpus[i].device;
        for (std::uint64_t at = 0; at < chunk; at += piece) {  // one allocation, or chunk / piece of them
            CUmemGenericAllocationHandle h;
            CU_CHECK(driver().memCreate(&h, piece, &prop, 0));
            CU_CHECK(driver().memMap(b.base + i * chunk + at, piece, 0, h, 0));
            b.handles.push_back(h);
        }
        access[i].location = prop.location;
        access[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
    CU_CHECK(driver().memSetAccess(b.base, n * chunk, access.data(), n));
    b.contiguous = true;
    b.layout.chunk[0] = reinterpret_cast<char *>(b.base);
}

// chunked: one cudaMalloc per GPU, the kernels index their table.
void allocate_table(Buffer &b, const std::vector<Gpu> &gpus, std::uint64_t chunk) {
    for (std::size_t i = 0; i < gpus.size(); ++i) {
        CUDA_CHECK(cudaSetDevice(gpus[i].device));
        void *p = nullptr;
        CUDA_CHECK(cudaMalloc(&p, chunk));
        b.owned.push_back(p);
        b.layout.chunk[i] = static_cast<char *>(p);
    }
}

// multiprocess: our chunk from cudaMalloc, the others' through CUDA IPC.
struct Published {
    cudaIpcMemHandle_t handle;
    char bus_id[32];
};

void allocate_shared(Buffer &b, const Gpu &g, std::uint64_t chunk, Exchange &ex) {
    CUDA_CHECK(cudaSetDevice(g.device));
    void *p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, chunk));
    b.owned.push_back(p);
    b.layout.chunk[ex.rank()] = static_cast<char *>(p);
    Published mine{};
    CUDA_CHECK(cudaIpcGetMemHandle(&mine.handle, p));
    CUDA_CHECK(cudaDeviceGetPCIBusId(mine.bus_id, sizeof mine.bus_id, g.device));
    ex.publish("handle", std::string(reinterpret_cast<const char *>(&mine), sizeof mine));
    for (int r = 0; r < ex.nranks(); ++r) {
        if (r == ex.rank()) continue;
        const std::string data = ex.read(r, "handle");
        if (data.size() != sizeof(Published)) suite::die("rank %d's handle file is damaged", r);
        Published theirs;
        std::memcpy(&theirs, data.data(), sizeof theirs);
        int peer = -1, can = 1;
        if (cudaDeviceGetByPCIBusId(&peer, theirs.bus_id) == cudaSuccess) {
            CUDA_CHECK(cudaDeviceCanAccessPeer(&can, g.device, peer));
            if (peer == g.device)
                suite::die("ranks %d and %d both run on GPU %s: one rank per GPU", ex.rank(), r, mine.bus_id);
        } else {
            cudaGetLastError();  // the peer's GPU is not visible here: let IPC say whether it can be reached
        }
        if (!can)
            suite::die("rank %d's GPU (%s) cannot access rank %d's GPU (%s) (cudaDeviceCanAccessPeer = 0)", ex.rank(),
                       mine.bus_id, r, theirs.bus_id);
        void *q = nullptr;
        CUDA_CHECK(cudaIpcOpenMemHandle(&q, theirs.handle, cudaIpcMemLazyEnablePeerAccess));
        b.imported.push_back(q);
        b.layout.chunk[r] = static_cast<char *>(q);
    }
}

void release_buffer(Buffer &b, const std::vector<Gpu> &gpus, std::uint64_t chunk) {
    for (void *q : b.imported) CUDA_CHECK(cudaIpcCloseMemHandle(q));
    if (b.contiguous) {
        CU_CHECK(driver().memUnmap(b.base, b.layout.nchunks * chunk));
        for (auto h : b.handles) CU_CHECK(driver().memRelease(h));
        CU_CHECK(driver().memAddressFree(b.base, b.layout.nchunks * chunk));
    }
    for (std::size_t i = 0; i < b.owned.size(); ++i) {
        CUDA_CHECK(cudaSetDevice(gpus[i].device));
        CUDA_CHECK(cudaFree(b.owned[i]));
    }
}

unsigned *chunk_of(const Buffer &b, const Gpu &g) {
    return reinterpret_cast<unsigned *>(b.contiguous ? b.layout.chunk[0] + g.index * b.layout.chunk_bytes
                                                     : b.layout.chunk[g.index]);
}

// ---------------------------------------------------------------- points --

template <Op kOp, bool kContiguous, typename T>
void launch(const Gpu &g, const Buffer &b, const Pattern &p, std::uint64_t n, unsigned salt, bool verify) {
    if (verify)
        verify_kernel<kOp, kContiguous, T>
            <<<g.grid, kBlock, 0, g.stream>>>(b.layout, p, static_cast<const T *>(g.local), n, salt, g.bad);
    else
        scan_kernel<kOp, kContiguous, T>
            <<<g.grid, kBlock, 0, g.stream>>>(b.layout, p, static_cast<T *>(g.local), n, salt);
    CUDA_CHECK_LAUNCH();
}

template <Op kOp, typename T>
void launch(const Gpu &g, const Buffer &b, const Pattern &p, std::uint64_t n, unsigned salt, bool verify) {
    if (b.contiguous) launch<kOp, true, T>(g, b, p, n, salt, verify);
    else launch<kOp, false, T>(g, b, p, n, salt, verify);
}

// One launch of the link yardstick, for either layout of the chunks.
template <Op kOp>
void launch_stream(const Gpu &g, const Buffer &b, std::uint64_t per_peer) {
    auto *out = static_cast<uint4 *>(g.local);
    if (b.contiguous) stream_kernel<kOp, true><<<g.grid, kBlock, 0, g.stream>>>(b.layout, g.index, out, per_peer);
    else stream_kernel<kOp, false><<<g.grid, kBlock, 0, g.stream>>>(b.layout, g.index, out, per_peer);
    CUDA_CHECK_LAUNCH();
}

// One launch (or its verification) of op with `thread_bytes` per thread.
void dispatch(Op op, int thread_bytes, const Gpu &g, const Buffer &b, const Pattern &p, std::uint64_t launch_bytes,
              unsigned salt, bool verify) {
    const std::uint64_t n = launch_bytes / thread_bytes;
    if (op == Op::atomic) return launch<Op::atomic, unsigned>(g, b, p, n, salt, verify);
    const bool read = op == Op::read;
    switch (thread_bytes) {
    case 4:
        return read ? launch<Op::read, unsigned>(g, b, p, n, 0, verify)
                    : launch<Op::write, unsigned>(g, b, p, n, salt, verify);
    case 8:
        return read ? launch<Op::read, uint2>(g, b, p, n, 0, verify)
                    : launch<Op::write, uint2>(g, b, p, n, salt, verify);
    default:
        return read ? launch<Op::read, uint4>(g, b, p, n, 0, verify)
                    : launch<Op::write, uint4>(g, b, p, n, salt, verify);
    }
}

// Bytes each GPU moves per launch: small segments are slow, so they get less,
// which keeps every point at tens of milliseconds.
std::uint64_t launch_bytes_for(const Config &c, std::uint64_t segment) {
    if (c.launch_bytes) return c.launch_bytes;
    return std::min<std::uint64_t>(std::uint64_t{1} << 30,
                                   std::max<std::uint64_t>(std::uint64_t{64} << 20, segment << 23));
}

// A launch's pattern; its window (span bytes of every chunk, 0 for the whole
// chunk) at a span-aligned offset drawn from the launch's seed.
Pattern pattern_for(std::uint64_t seed, std::uint64_t chunk, std::uint64_t span, std::uint64_t segment,
                    int thread_bytes) {
    const std::uint64_t window = span ? span : chunk;
    const std::uint64_t offset = span ? mix64(seed ^ 0x77696e646f77ull) % (chunk / span) * span : 0;
    return Pattern{seed, window / segment, offset, log2u(segment), log2u(segment / thread_bytes)};
}

struct Run {
    const Config &c;
    Mode mode;
    std::vector<Gpu> &gpus;  // this process's
    Buffer &buf;
    std::uint64_t chunk;
    int ngpus;                  // the node's, all ranks together
    Exchange *ex;               // multiprocess only
    int *gate;                  // the start gate: mapped host memory, [0] open, [1] a GPU gave up waiting
    std::uint64_t local_bytes;  // each GPU's local buffer
    int point = 0, printed = 0;
    unsigned long long adds = 0;  // atomics by this process's GPUs

    bool leader() const { return !ex || ex->rank() == 0; }

    void fill() {
        for (auto &g : gpus) {
            CUDA_CHECK(cudaSetDevice(g.device));
            fill_kernel<<<g.grid, kBlock, 0, g.stream>>>(chunk_of(buf, g), chunk / 4, g.index * (chunk / 4));
            CUDA_CHECK_LAUNCH();
        }
        for (auto &g : gpus) CUDA_CHECK(cudaStreamSynchronize(g.stream));
    }

    // Sum of this process's chunks' words, modulo 2^32.
    unsigned checksum() {
        unsigned total = 0;
        for (auto &g : gpus) {
            CUDA_CHECK(cudaSetDevice(g.device));
            CUDA_CHECK(cudaMemsetAsync(g.sum, 0, sizeof *g.sum, g.stream));
            sum_kernel<<<g.grid, kBlock, 0, g.stream>>>(chunk_of(buf, g), chunk / 4, g.sum);
            CUDA_CHECK_LAUNCH();
            unsigned s = 0;
            CUDA_CHECK(cudaMemcpyAsync(&s, g.sum, sizeof s, cudaMemcpyDeviceToHost, g.stream));
            CUDA_CHECK(cudaStreamSynchronize(g.stream));
            total += s;
        }
        return total;
    }

    // One GPU's GB/s over all timed launches of a point, and over each block of them.
    struct Rates {
        double whole = 0;
        double blocks[kBlocks]{};
    };

    // What a process timed: its GPUs' rates, and the common window on the
    // host's monotonic clock from opening the gate to the last GPU's end.
    struct Timed {
        std::vector<Rates> rates;
        double start = 0, end = 0;
    };

    static double now_s() {
        return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    }

    // Every GPU at once: launch(g, 0) as a warm-up, then the gate, then
    // launch(g, 1..reps) timed in kBlocks consecutive blocks. The gate opens
    // once every GPU (every rank's, in the multiprocess mode) has finished its
    // warm-up, so the timed launches start together; each GPU's rates are
    // timed by its own events, the node's aggregate over the common window.
    template <typename Launch>
    Timed time_launches(std::uint64_t bytes, const std::string &tag, Launch launch) {
        gate[0] = gate[1] = 0;
        for (auto &g : gpus) {
            CUDA_CHECK(cudaSetDevice(g.device));
            launch(g, 0);
            CUDA_CHECK(cudaEventRecord(g.warm, g.stream));
            wait_at_gate<<<1, 1, 0, g.stream>>>(gate);
            CUDA_CHECK_LAUNCH();
            CUDA_CHECK(cudaEventRecord(g.marks[0], g.stream));
            for (int b = 1, rep = 1; b <= kBlocks; ++b) {
                for (const int end = c.reps * b / kBlocks; rep <= end; ++rep) launch(g, rep);
                CUDA_CHECK(cudaEventRecord(g.marks[b], g.stream));
            }
        }
        for (auto &g : gpus) CUDA_CHECK(cudaEventSynchronize(g.warm));
        if (ex) ex->barrier("gate" + tag);  // every rank's GPUs wait at their gates
        Timed t;
        t.start = now_s();
        reinterpret_cast<volatile int *>(gate)[0] = 1;
        for (auto &g : gpus) CUDA_CHECK(cudaEventSynchronize(g.marks[kBlocks]));
        t.end = now_s();
        if (gate[1])
            suite::die("a GPU waited at the start gate of %s for %llu s: the host never opened it", tag.c_str(),
                       kGateTimeoutNs / 1000000000ull);
        for (auto &g : gpus) {
            Rates r;
            for (int b = 1; b <= kBlocks; ++b) {
                float ms = 0;
                CUDA_CHECK(cudaEventElapsedTime(&ms, g.marks[b - 1], g.marks[b]));
                const int launches = c.reps * b / kBlocks - c.reps * (b - 1) / kBlocks;
                r.blocks[b - 1] = static_cast<double>(bytes) * launches / (ms / 1e3) / 1e9;
            }
            float ms = 0;
            CUDA_CHECK(cudaEventElapsedTime(&ms, g.marks[0], g.marks[kBlocks]));
            r.whole = static_cast<double>(bytes) * c.reps / (ms / 1e3) / 1e9;
            t.rates.push_back(r);
        }
        return t;
    }

    // Every rank's rates and window, at the leader; false on the other ranks, which print nothing.
    bool gather(Timed &t, const std::string &tag) {
        if (!ex) return true;
        char window[64];
        std::snprintf(window, sizeof window, "%.9f %.9f ", t.start, t.end);
        std::string mine = window;
        for (const Rates &r : t.rates) {
            mine += std::to_string(r.whole);
            for (const double b : r.blocks) mine += " " + std::to_string(b);
            mine += " ";
        }
        ex->publish(tag, mine);
        if (!leader()) return false;
        t.rates.clear();
        for (int rank = 0; rank < ex->nranks(); ++rank) {
            Rates r;
            double start = 0, end = 0;
            std::istringstream in(ex->read(rank, tag));
            in >> start >> end >> r.whole;
            for (double &b : r.blocks) in >> b;
            if (!in) suite::die("rank %d published unreadable rates for %s", rank, tag.c_str());
            t.start = rank == 0 ? start : std::min(t.start, start);
            t.end = rank == 0 ? end : std::max(t.end, end);
            t.rates.push_back(r);
        }
        return true;
    }

    // "per_gpu_gbs=a,b,... min_gbs=.. mean_gbs=.. aggregate_gbs=.. window_s=.. block_mean_gbs=b1,..,b5"
    // of the node's GPUs: each GPU's rate over all timed launches, their
    // minimum and mean, the node's bytes over the common window, that
    // window, and the mean over the GPUs of each block's rate.
    static void add_rates(suite::Record &record, const Timed &t, std::uint64_t bytes, int reps, double &mean) {
        const std::vector<Rates> &rates = t.rates;
        double sum = 0, lo = rates[0].whole;
        std::vector<double> wholes, blocks(kBlocks, 0.0);
        for (const Rates &r : rates) {
            sum += r.whole;
            lo = std::min(lo, r.whole);
            wholes.push_back(r.whole);
            for (int b = 0; b < kBlocks; ++b) blocks[b] += r.blocks[b] / rates.size();
        }
        mean = sum / rates.size();
        const double window = t.end - t.start;
        const double aggregate = static_cast<double>(bytes) * reps * rates.size() / window / 1e9;
        record.list("per_gpu_gbs", "%.2f", wholes)
            .addf("min_gbs", "%.2f", lo)
            .addf("mean_gbs", "%.2f", mean)
            .addf("aggregate_gbs", "%.2f", aggregate)
            .addf("window_s", "%.6f", window)
            .list("block_mean_gbs", "%.2f", blocks);
    }

    // The link yardstick of a read or a write: each GPU's rate to its peers
    // when all stream at once, and the scan's limit that follows from it,
    // N/(N-1) times that, as 1/N of a GPU's segments never leave it.
    void run_link(Op op) {
        const std::uint64_t per_peer = std::min(local_bytes, chunk) / (ngpus - 1) / sizeof(uint4);
        const std::uint64_t bytes = per_peer * sizeof(uint4) * (ngpus - 1);
        const std::string tag = std::string("link") + op_name(op);
        if (ex) ex->barrier(tag);  // every chunk is filled and every rank is here
        Timed timed = time_launches(bytes, tag, [&](const Gpu &g, int) {
            if (op == Op::read) launch_stream<Op::read>(g, buf, per_peer);
            else launch_stream<Op::write>(g, buf, per_peer);
        });
        if (!gather(timed, tag + "r")) return;
        double mean = 0;
        suite::Record link("Link");
        link.add("mode", mode_name(mode)).add("op", op_name(op)).add("gpus", ngpus).add("launch_bytes", bytes);
        link.add("reps", c.reps);
        add_rates(link, timed, bytes, c.reps, mean);
        link.addf("scan_limit_gbs", "%.2f", mean * ngpus / (ngpus - 1)).print();
        std::fflush(stdout);
    }

    // One point: every GPU at once, then the last launch verified on each GPU.
    void run_point(Op op, std::uint64_t segment, int width) {
        const int thread_bytes = op == Op::atomic ? 4 : static_cast<int>(std::min<std::uint64_t>(width, segment));
        const std::uint64_t bytes = launch_bytes_for(c, segment);
        const unsigned salt = static_cast<unsigned>(mix64(0x5ca1ab1eull + point)) | 1u;
        auto seed = [&](const Gpu &g, int rep) { return mix64((std::uint64_t(point) << 24) ^ (g.index << 12) ^ rep); };
        auto pattern = [&](const Gpu &g, int rep) {
            return pattern_for(seed(g, rep), chunk, c.launch_span, segment, thread_bytes);
        };
        ++point;
        if (ex) ex->barrier("p" + std::to_string(point));
        Timed timed = time_launches(bytes, "p" + std::to_string(point), [&](const Gpu &g, int rep) {
            dispatch(op, thread_bytes, g, buf, pattern(g, rep), bytes, salt, false);
        });
        if (op == Op::atomic) adds += gpus.size() * (c.reps + 1ull) * (bytes / 4);
        if (op != Op::atomic) {
            for (auto &g : gpus) {
                CUDA_CHECK(cudaSetDevice(g.device));
                CUDA_CHECK(cudaMemsetAsync(g.bad, 0, sizeof *g.bad, g.stream));
                dispatch(op, thread_bytes, g, buf, pattern(g, c.reps), bytes, salt, true);
                unsigned long long bad = 0;
                CUDA_CHECK(cudaMemcpyAsync(&bad, g.bad, sizeof bad, cudaMemcpyDeviceToHost, g.stream));
                CUDA_CHECK(cudaStreamSynchronize(g.stream));
                if (bad)
                    suite::die("%s %s segment=%" PRIu64 " width=%d: %llu of %" PRIu64 " elements on GPU %d do not "
                               "hold what they must",
                               mode_name(mode), op_name(op), segment, width, bad, bytes / thread_bytes, g.index);
            }
        }
        if (!gather(timed, "r" + std::to_string(point))) return;
        double mean = 0;
        suite::Record scan("Scan");
        scan.add("mode", mode_name(mode)).add("op", op_name(op)).add("segment", segment);
        scan.add("width", op == Op::atomic ? 4 : width).add("thread_bytes", thread_bytes).add("gpus", ngpus);
        scan.add("launch_bytes", bytes).add("reps", c.reps);
        add_rates(scan, timed, bytes, c.reps, mean);
        scan.print();
        std::fflush(stdout);
        ++printed;
    }

    void run_op(Op op) {
        // Ranks may still verify the last op's writes in our chunk: fill after all are done.
        if (ex) ex->barrier("fill" + std::to_string(point));
        fill();
        if (op != Op::atomic) run_link(op);
        unsigned before = 0;
        if (op == Op::atomic) {
            before = checksum();
            adds = 0;
        }
        for (std::uint64_t segment : c.segments) {
            if (op == Op::atomic) run_point(op, segment, 4);
            else
                for (int width : c.widths) run_point(op, segment, width);
        }
        if (op != Op::atomic) return;
        // Every add landed once: the chunks' sum grew by the adds of all GPUs.
        const std::string tag = std::to_string(point);
        if (ex) ex->barrier("atomics" + tag);  // every rank's atomics are done
        unsigned grew = checksum() - before;   // this process's chunks
        unsigned long long all_adds = adds;
        if (ex) {
            ex->publish("a" + tag, std::to_string(grew) + " " + std::to_string(adds));
            if (!leader()) return;
            grew = 0;
            all_adds = 0;
            for (int r = 0; r < ex->nranks(); ++r) {
                unsigned g = 0;
                unsigned long long a = 0;
                std::sscanf(ex->read(r, "a" + tag).c_str(), "%u %llu", &g, &a);
                grew += g;
                all_adds += a;
            }
        }
        if (grew != static_cast<unsigned>(all_adds))
            suite::die("%s atomic: the buffer's checksum grew by %u, expected %llu modulo 2^32", mode_name(mode), grew,
                       all_adds);
        suite::Record("Atomics verified").add("mode", mode_name(mode)).add("adds", all_adds).print();
    }
};

// Each GPU's chunk: its share of --size, rounded down to 2 MiB and to the
// layout's mapping granularity and launch span, so that both divide it.
std::uint64_t chunk_size(const suite::Options &opts, const Config &c, int ngpus, std::uint64_t gpu_memory) {
    const std::uint64_t total = c.size.factor > 0 ? c.size.of(gpu_memory * ngpus) : c.size.bytes;
    std::uint64_t align = kChunkAlign;
    for (std::uint64_t bytes : {c.map_bytes, c.launch_span})
        if (bytes) align = std::lcm(align, bytes);
    const std::uint64_t chunk = total / ngpus / align * align;
    if (chunk < align)
        opts.usage_error("option '--size' %s leaves less than %" PRIu64 " bytes per GPU (2 MiB, --map-granularity "
                         "and --launch-span)",
                         opts.str("size").c_str(), align);
    if (chunk > gpu_memory)
        opts.usage_error("option '--size' %s asks for %.2f GiB per GPU, more than a GPU's %.2f GiB",
                         opts.str("size").c_str(), chunk / suite::kGiB, gpu_memory / suite::kGiB);
    return chunk;
}

// One mode from allocation to release; returns the points it printed.
int run_mode(const Config &c, const suite::Options &opts, Mode mode) {
    int count = 0;
    CUDA_CHECK(cudaGetDeviceCount(&count));
    const bool multi = mode == Mode::multiprocess;
    const int ngpus = multi ? c.nranks : (c.gpus > 0 ? c.gpus : count);
    if (!multi && ngpus > count) opts.usage_error("--gpus %d: only %d GPUs visible", ngpus, count);
    if (ngpus > kMaxGpus) opts.usage_error("at most %d GPUs", kMaxGpus);

    std::vector<Gpu> gpus;
    if (multi) gpus.push_back(Gpu{c.rank, c.rank % count});
    else
        for (int i = 0; i < ngpus; ++i) gpus.push_back(Gpu{i, i});

    std::uint64_t gpu_memory = UINT64_MAX;
    for (const auto &g : gpus) {
        cudaDeviceProp prop{};
        CUDA_CHECK(cudaGetDeviceProperties(&prop, g.device));
        gpu_memory = std::min<std::uint64_t>(gpu_memory, prop.totalGlobalMem);
    }
    const std::uint64_t chunk = chunk_size(opts, c, ngpus, gpu_memory);
    std::uint64_t local = 0;
    for (auto s : c.segments) local = std::max(local, launch_bytes_for(c, s));
    for (auto &g : gpus) {
        CUDA_CHECK(cudaSetDevice(g.device));
        std::size_t free_b = 0, total_b = 0;
        CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
        if (chunk + local + (std::uint64_t{256} << 20) > free_b)
            suite::die("GPU %d: a %.2f GB chunk and a %.2f GB local buffer do not fit in its %.2f GB free", g.device,
                       chunk / 1e9, local / 1e9, free_b / 1e9);
        setup_gpu(g, local);
    }

    std::unique_ptr<Exchange> ex;
    Buffer buf;
    buf.layout.chunk_bytes = chunk;
    buf.layout.nchunks = ngpus;
    if (multi) {
        const char *tmp = std::getenv("TMPDIR");
        const std::string dir = c.exchange_dir.empty()
                                    ? std::string(tmp ? tmp : "/tmp") + "/mem_scan.xchg." + std::to_string(getuid())
                                    : c.exchange_dir;
        ex.reset(new Exchange(dir, c.run_id.empty() ? "local" : c.run_id, c.rank, c.nranks));
        allocate_shared(buf, gpus[0], chunk, *ex);
    } else {
        std::vector<int> devices;
        for (const auto &g : gpus) devices.push_back(g.device);
        enable_peer_access(devices);
        if (mode == Mode::single) allocate_contiguous(buf, gpus, chunk, c.map_bytes ? c.map_bytes : chunk);
        else allocate_table(buf, gpus, chunk);
    }
    if (!ex || c.rank == 0) {
        cudaDeviceProp prop{};
        CUDA_CHECK(cudaGetDeviceProperties(&prop, gpus[0].device));
        std::printf("Mode %s: %d x %s, buffer %.2f GB (%.2f GB per GPU), %s; %d timed launches per point; GB/s: "
                    "bytes of all segments a GPU touched, its own chunk's included, over its kernel time (1e9 B/s), "
                    "aggregate: all GPUs' bytes over the common window, from the start gate to the last GPU's end\n",
                    mode_name(mode), ngpus, prop.name, chunk * static_cast<double>(ngpus) / 1e9, chunk / 1e9,
                    mode == Mode::single ? "one contiguous VMM range"
                    : multi              ? "one process per GPU, CUDA IPC chunk table"
                                         : "cudaMalloc chunk table",
                    c.reps);
        // The buffer's reach as the page-reach experiments vary it (bytes; each GPU's chunk by default).
        suite::Record("Layout")
            .add("mode", mode_name(mode))
            .add("chunk_bytes", chunk)
            .add("map_bytes", mode == Mode::single && c.map_bytes ? c.map_bytes : chunk)
            .add("launch_span", c.launch_span ? c.launch_span : chunk)
            .print();
        std::fflush(stdout);
    }

    int *gate = nullptr;  // every GPU of this process reads it (portable, mapped)
    CUDA_CHECK(
        cudaHostAlloc(reinterpret_cast<void **>(&gate), 2 * sizeof(int), cudaHostAllocPortable | cudaHostAllocMapped));
    Run run{c, mode, gpus, buf, chunk, ngpus, ex.get(), gate, local};
    for (Op op : c.ops) run.run_op(op);
    CUDA_CHECK(cudaFreeHost(gate));

    if (ex) ex->barrier("done");  // no rank uses another's chunk any more
    release_buffer(buf, gpus, chunk);
    if (ex) {
        ex->barrier("released");
        ex->clean();
    }
    for (auto &g : gpus) release_gpu(g);
    if (run.leader()) suite::Record("Mode done").add("mode", mode_name(mode)).add("points", run.printed).print();
    std::fflush(stdout);
    return run.printed;
}

// --spawn: this program again as N ranks of the multiprocess mode, one per
// GPU (what a launcher does elsewhere); the first failure stops the others.
int spawn_ranks(int argc, char **argv, int nranks) {
    // The ranks run the multiprocess mode alone: not --spawn, nor the single mode's mapping.
    std::vector<std::string> args;
    for (int i = 0; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--map-granularity") ++i;
        else if (arg != "--spawn" && arg.rfind("--map-granularity=", 0) != 0) args.push_back(arg);
    }
    const std::string run = "spawn" + std::to_string(getpid());
    std::vector<pid_t> pids;
    std::fflush(stdout);
    for (int r = 0; r < nranks; ++r) {
        std::vector<std::string> a = args;
        for (const char *s : {"--modes", "multiprocess", "--rank"}) a.push_back(s);
        a.push_back(std::to_string(r));
        a.push_back("--nranks");
        a.push_back(std::to_string(nranks));
        a.push_back("--run-id");
        a.push_back(run);
        const std::string what = "rank " + std::to_string(r);
        pids.push_back(suite::spawn_self(a, suite::environment_without(), what.c_str()));
    }
    int failed = 0;
    for (std::size_t left = pids.size(); left > 0; --left) {
        int status = 0;
        const pid_t pid = wait(&status);
        if (pid < 0) suite::die("wait: %s", std::strerror(errno));
        if (!suite::exited_ok(status) && !failed) {
            failed = 1;
            std::fprintf(stderr, "error: a multiprocess rank (pid %d) failed; stopping the others\n", pid);
            for (pid_t p : pids)
                if (p != pid) kill(p, SIGTERM);
        }
    }
    return failed;
}

}  // namespace

int main(int argc, char **argv) {
    suite::Options opts("mem_scan", "WholeMemory-style random-access scan: every GPU reads, writes or atomically adds "
                                    "random segments of a buffer spread over all GPUs; one 'Scan:' line per point. "
                                    "With fewer than two GPUs visible it prints 'Skipped: ...' and exits 0 (the "
                                    "suite's check never runs it there).");
    opts.add("modes", "single,chunked",
             "single (one VMM range), chunked (pointer table), multiprocess (one process "
             "per GPU, CUDA IPC; needs a launcher or --spawn) (list)");
    opts.add("ops", "read,write,atomic", "read, write, atomic (list)");
    opts.add("segments", "4,8,16,32,64,128,256,512,1K,2K,4K,8K,16K", "segment sizes, powers of two 4..16K (list)");
    opts.add("widths", "4,8,16", "bytes per thread for reads and writes (list; atomics use 4)");
    opts.add("size", "0.5x", "whole buffer: bytes (K/M/G) or a fraction of the GPUs' memory, e.g. 0.5x");
    opts.add("launch-bytes", "auto", "bytes each GPU moves per launch (auto: 64M to 1G by segment size)");
    opts.add("reps", "20", "timed launches per point (after one warm-up launch)");
    opts.add("map-granularity", "chunk",
             "single mode: each GPU's chunk made of physical allocations of this many "
             "bytes, each mapped on its own (a multiple of 2M; the chunk is rounded "
             "down to a multiple of it; 'chunk': one per GPU)");
    opts.add("launch-span", "chunk",
             "bytes of every chunk one launch's segments fall in, at an offset drawn per "
             "launch (a multiple of 2M; the chunk is rounded down to a multiple of it; "
             "'chunk': all of it)");
    opts.add("gpus", "0", "GPUs of the single-process modes (0: all visible)");
    opts.add_flag("spawn", "run the multiprocess mode as one child process per GPU (for launchers that start one)");
    opts.add("rank", "",
             "multiprocess rank (default: SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMIX_RANK, JSM_NAMESPACE_RANK)");
    opts.add("nranks", "", "multiprocess ranks (default: SLURM_NTASKS, OMPI_COMM_WORLD_SIZE, JSM_NAMESPACE_SIZE)");
    opts.add("run-id", "", "names the exchange files; the same for every rank (default: the job's id)");
    opts.add("exchange-dir", "",
             "directory for the ranks' exchange files, node-local (default: $TMPDIR or /tmp, "
             "/mem_scan.xchg.<uid>)");
    opts.parse(argc, argv);
    const Config c = parse_config(opts);

    const int count = suite::device_count();
    const int ngpus = c.nranks > 1 ? c.nranks : (c.gpus > 0 ? c.gpus : count);
    if (ngpus < 2) {
        std::printf("Skipped: mem_scan needs at least 2 GPUs, %d visible\n", ngpus);
        return EXIT_SUCCESS;
    }
    for (Mode mode : c.modes) {
        if (mode != Mode::multiprocess) {
            run_mode(c, opts, mode);
        } else if (c.nranks > 1) {
            run_mode(c, opts, mode);
        } else if (c.spawn) {
            if (spawn_ranks(argc, argv, c.gpus > 0 ? c.gpus : count)) return EXIT_FAILURE;
        } else {
            opts.usage_error("--modes multiprocess needs one process per GPU: launch %d ranks (srun -n, jsrun, "
                             "mpirun) or pass --spawn",
                             count);
        }
    }
    return EXIT_SUCCESS;
}
