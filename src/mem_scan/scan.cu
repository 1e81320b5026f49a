// The points of a mode (scan.cuh).
#include "scan.cuh"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <memory>
#include <numeric>
#include <sstream>

#include <unistd.h>

#include "rates.hpp"

namespace mem_scan {
namespace {

unsigned log2u(std::uint64_t x) {
    unsigned s = 0;
    while ((std::uint64_t{1} << s) < x) ++s;
    return s;
}

// One launch (or its verification) of op with `thread_bytes` per thread.
void dispatch(Op op, int thread_bytes, const Gpu &g, const Buffer &b, const Pattern &p, std::uint64_t launch_bytes,
              unsigned salt, bool verify) {
    launch_scan(Where{g.grid, g.stream}, op, thread_bytes, b.contiguous, verify, b.layout, p, g.local, launch_bytes,
                salt, g.bad);
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
            launch_fill(Where{g.grid, g.stream}, chunk_of(buf, g), chunk / 4, g.index * (chunk / 4));
        }
        for (auto &g : gpus) CUDA_CHECK(cudaStreamSynchronize(g.stream));
    }

    // Sum of this process's chunks' words, modulo 2^32.
    unsigned checksum() {
        unsigned total = 0;
        for (auto &g : gpus) {
            CUDA_CHECK(cudaSetDevice(g.device));
            CUDA_CHECK(cudaMemsetAsync(g.sum, 0, sizeof *g.sum, g.stream));
            launch_sum(Where{g.grid, g.stream}, chunk_of(buf, g), chunk / 4, g.sum);
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
            launch_gate(g.stream, gate);
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

    // The rates fields of the node's GPUs (rates.hpp).
    static void add_rates(suite::Record &record, const Timed &t, std::uint64_t bytes, int reps, double &mean) {
        std::vector<double> whole;
        std::vector<std::vector<double>> blocks;
        for (const Rates &r : t.rates) {
            whole.push_back(r.whole);
            blocks.emplace_back(r.blocks, r.blocks + kBlocks);
        }
        mem_scan::add_rates(record, whole, blocks, t.end - t.start, bytes, reps, mean);
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
            launch_stream(Where{g.grid, g.stream}, op, buf.contiguous, buf.layout, g.index, g.local, per_peer);
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

// Each GPU's chunk: its share of --size, rounded down to --chunk-align and to
// the layout's mapping granularity and launch span, so that all divide it.
std::uint64_t chunk_size(const suite::Options &opts, const Config &c, int ngpus, std::uint64_t gpu_memory) {
    const std::uint64_t total = c.size.factor > 0 ? c.size.of(gpu_memory * ngpus) : c.size.bytes;
    // A share smaller than the alignment --chunk-align asks for (with the
    // layout's) is rounded to 2 MiB and the layout's only: so few
    // translations fit the GPU's TLBs whatever their page size.
    const std::uint64_t share = total / ngpus;
    auto aligned = [&](std::uint64_t base) {
        for (std::uint64_t bytes : {c.map_bytes, c.launch_span})
            if (bytes) base = std::lcm(base, bytes);
        return base;
    };
    std::uint64_t align = aligned(c.chunk_align);
    if (share < align) align = aligned(kChunkAlign);
    const std::uint64_t chunk = share / align * align;
    if (chunk < align)
        opts.usage_error("option '--size' %s leaves less than %" PRIu64 " bytes per GPU (--chunk-align, "
                         "--map-granularity and --launch-span)",
                         opts.str("size").c_str(), align);
    if (chunk > gpu_memory)
        opts.usage_error("option '--size' %s asks for %.2f GiB per GPU, more than a GPU's %.2f GiB",
                         opts.str("size").c_str(), chunk / suite::kGiB, gpu_memory / suite::kGiB);
    return chunk;
}

}  // namespace

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

}  // namespace mem_scan
