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
//
// Here: the options and main; scan.cu runs a mode, node.cu allocates the
// buffer, kernels.cu holds the device code, exchange.cpp the ranks' files
// and driver.cu the driver API's VMM calls.
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "scan.cuh"
#include "spawn.hpp"
#include "suite.hpp"

namespace mem_scan {
namespace {

bool power_of_two(std::uint64_t x) { return x && !(x & (x - 1)); }

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
    c.chunk_align = opts.bytes("chunk-align", kChunkAlign);
    if (c.chunk_align % kChunkAlign)
        opts.usage_error("option '--chunk-align' expects a multiple of 2M, got '%s'", opts.str("chunk-align").c_str());
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

// Every option, with its default and its help.
suite::Options declare_options() {
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
    opts.add("chunk-align", "1G",
             "each GPU's chunk rounded down to a multiple of this many bytes (a multiple of 2M; a smaller "
             "share to 2M): on four H200s chunks of 70 GiB + 2, 64 or 256 MiB made 4-B to 128-B accesses "
             "ten times slower than 70 GiB or 70 GiB + 512 MiB");
    opts.add("gpus", "0", "GPUs of the single-process modes (0: all visible)");
    opts.add_flag("spawn", "run the multiprocess mode as one child process per GPU (for launchers that start one)");
    opts.add("rank", "",
             "multiprocess rank (default: SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMIX_RANK, JSM_NAMESPACE_RANK)");
    opts.add("nranks", "", "multiprocess ranks (default: SLURM_NTASKS, OMPI_COMM_WORLD_SIZE, JSM_NAMESPACE_SIZE)");
    opts.add("run-id", "", "names the exchange files; the same for every rank (default: the job's id)");
    opts.add("exchange-dir", "",
             "directory for the ranks' exchange files, node-local (default: $TMPDIR or /tmp, "
             "/mem_scan.xchg.<uid>)");
    return opts;
}

// Each mode of --modes in turn: the multiprocess mode as this rank of a
// launch, as ranks this process spawns (--spawn), or refused.
int run_modes(const Config &c, const suite::Options &opts, int argc, char **argv, int count) {
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

}  // namespace
}  // namespace mem_scan

int main(int argc, char **argv) {
    using namespace mem_scan;
    suite::Options opts = declare_options();
    opts.parse(argc, argv);
    const Config c = parse_config(opts);

    const int count = suite::device_count(c.gpus > 0 ? "option '--gpus'" : "");
    if (c.nranks <= 1 && c.gpus > count)
        opts.usage_error("option '--gpus' asks for %d GPUs, but %d %s visible", c.gpus, count,
                         count == 1 ? "is" : "are");
    const int ngpus = c.nranks > 1 ? c.nranks : (c.gpus > 0 ? c.gpus : count);
    if (ngpus < 2) {
        std::printf("Skipped: mem_scan needs at least 2 GPUs, %d visible\n", ngpus);
        return EXIT_SUCCESS;
    }
    return run_modes(c, opts, argc, argv, count);
}
