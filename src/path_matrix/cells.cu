// The cells (cells.cuh).
#include "cells.cuh"

#include <cinttypes>
#include <memory>
#include <numeric>
#include <random>

#include "kernels.cuh"
#include "matrix.hpp"
#include "suite.hpp"

namespace path_matrix {
namespace {

// A cell's name, as the check reads it back.
struct Cell {
    std::string path, op, dir;
    Engine engine;
    int gpu, peer, numa;  // -1: not part of the cell
};

int printed = 0;           // cells
suite::Matrices matrices;  // their medians, printed at the end (print_matrices)

// The matrix a cell belongs to, in words: "host h2d, by the copy engine", "peer read, both ways at once, by the SMs".
std::string matrix_title(const Cell &c) {
    const std::string engine = c.engine == Engine::ce   ? "the copy engine"
                               : c.engine == Engine::sm ? "the SMs"
                                                        : "bulk copies";
    const std::string what = c.op == "copy" ? c.dir : c.op + (c.dir == "both" ? ", both ways at once" : ", one way");
    return c.path + " " + what + ", by " + engine;
}

// One line per sample of one transfer of a cell; the SMs' cells name their grid.
void print_cell(const Config &config, const Cell &c, const std::vector<std::vector<double>> &seconds,
                std::size_t transfer, std::uint64_t bytes) {
    std::vector<double> gbs;
    for (const auto &sample : seconds) gbs.push_back(static_cast<double>(bytes) / sample[transfer] / 1e9);
    if (c.path == "peer") matrices.add(matrix_title(c), "GPU", "GPU", c.gpu, c.peer, gbs);
    else matrices.add(matrix_title(c), "NUMA node", "GPU", c.numa, c.gpu, gbs);
    for (std::size_t s = 0; s < seconds.size(); ++s) {
        suite::Record record("Cell");
        record.add("path", c.path)
            .add("engine", engine_name(c.engine))
            .add("op", c.op)
            .add("dir", c.dir)
            .add("gpu", c.gpu)
            .add("peer", c.peer)
            .add("numa", c.numa)
            .add("sample", s + 1)
            .add("bytes", bytes);
        if (c.engine != Engine::ce) record.add("blocks", copy_grid(c.gpu, config.blocks));
        record.addf("seconds", "%.6g", seconds[s][transfer])
            .addf("gbs", "%.6g", static_cast<double>(bytes) / seconds[s][transfer] / 1e9)
            .print();
    }
    std::fflush(stdout);
    ++printed;
}

// Whether GPU a reaches b's memory; if so, with peer access enabled.
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

// A cycle through every slot of the buffer: word slot*stride/8 holds the next
// slot's word index, so a chase visits them all. Random (Sattolo's
// algorithm), each step lands on another DRAM row; in order ("stride", as
// nvbandwidth's), most steps land on the row the last one opened.
std::vector<std::uint64_t> chase_chain(std::uint64_t bytes, std::uint64_t stride, bool random,
                                       std::uint64_t &expected_last, long long steps) {
    const std::uint64_t slots = bytes / stride, per = stride / 8;
    std::vector<std::uint64_t> order(slots);
    std::iota(order.begin(), order.end(), 1);
    order.back() = 0;  // slot i -> i + 1, the last back to the first
    if (random) {
        std::mt19937_64 rng(12345);
        std::iota(order.begin(), order.end(), 0);
        for (std::uint64_t i = slots - 1; i > 0; --i) std::swap(order[i], order[rng() % i]);
    }
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
    const bool address = c.chase_links == "address";
    if (address) {  // each link the address of its word in `target`
        const auto base = reinterpret_cast<std::uint64_t>(target);
        std::vector<std::uint64_t> linked(chain.size());
        for (std::size_t i = 0; i < chain.size(); ++i) linked[i] = base + chain[i] * sizeof(std::uint64_t);
        CUDA_CHECK(cudaMemcpy(target, linked.data(), c.chase_bytes, cudaMemcpyDefault));
        expected = base + expected * sizeof(std::uint64_t);
    } else {
        CUDA_CHECK(cudaMemcpy(target, chain.data(), c.chase_bytes, cudaMemcpyDefault));
    }
    std::uint64_t *last = nullptr;
    CUDA_CHECK(cudaMalloc(&last, 2 * sizeof *last));
    const int grid = c.chase_sms == "all" ? sm_count(gpu) : 1;
    suite::EventTimer timer;
    for (int sample = 0; sample <= c.samples; ++sample) {  // sample 0 warms the TLBs up, untimed
        std::vector<double> ns;                            // per step, from each chasing SM
        std::vector<std::uint64_t> sms;
        for (int chaser = 0; chaser < grid; ++chaser) {
            timer.start();
            launch_chase(target, c.chase_steps, last, c.chase_load == "plain", address, grid, chaser);
            ns.push_back(timer.stop() * 1e9 / static_cast<double>(c.chase_steps));
            std::uint64_t got[2] = {};
            CUDA_CHECK(cudaMemcpy(got, last, sizeof got, cudaMemcpyDeviceToHost));
            if (got[0] != expected)
                suite::die("the chase from GPU %d ended on word %" PRIu64 ", expected %" PRIu64, gpu, got[0], expected);
            if (!std::count(sms.begin(), sms.end(), got[1])) sms.push_back(got[1]);
        }
        if (sample == 0) continue;
        suite::Record record("Cell");
        record.add("path", "latency")
            .add("engine", "sm")
            .add("op", "chase")
            .add("dir", cell.dir)
            .add("gpu", gpu)
            .add("peer", cell.peer)
            .add("numa", cell.numa)
            .add("sample", sample)
            .add("steps", c.chase_steps)
            .add("stride", c.chase_stride)
            .add("order", c.chase_order)
            .add("load", c.chase_load)
            .add("links", c.chase_links)
            .add("sms", sms.size());
        if (grid > 1)  // each SM's own distance to the link
            record.addf("sm_min_ns", "%.6g", *std::min_element(ns.begin(), ns.end()))
                .addf("sm_max_ns", "%.6g", *std::max_element(ns.begin(), ns.end()));
        record.addf("ns", "%.6g", std::accumulate(ns.begin(), ns.end(), 0.0) / static_cast<double>(ns.size())).print();
    }
    std::fflush(stdout);
    ++printed;
    CUDA_CHECK(cudaFree(last));
}

}  // namespace

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

void host_cells(const Config &c, std::uint64_t &salt) {
    for (int gpu : c.gpus) {
        DeviceBuffer d1(gpu, c.size), d2(gpu, c.size);
        for (int node : c.numa_nodes) {
            HostBuffer h1(c.size, node), h2(c.size, node);
            for (Engine e : {Engine::ce, Engine::sm}) {
                if (!c.wants(e)) continue;
                const Transfer h2d{gpu, e, h1.get(), d1.ptr}, d2h{gpu, e, d2.ptr, h2.get()};
                print_cell(c, {"host", "copy", "h2d", e, gpu, -1, node},
                           run_together({h2d}, c.size, c.blocks, c.samples, salt), 0, c.size);
                print_cell(c, {"host", "copy", "d2h", e, gpu, -1, node},
                           run_together({d2h}, c.size, c.blocks, c.samples, salt), 0, c.size);
                const auto both = run_together({h2d, d2h}, c.size, c.blocks, c.samples, salt);
                print_cell(c, {"host", "copy", "h2d-both", e, gpu, -1, node}, both, 0, c.size);
                print_cell(c, {"host", "copy", "d2h-both", e, gpu, -1, node}, both, 1, c.size);
            }
        }
    }
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
            const auto seconds = run_together(ts, c.size, c.blocks, c.samples, salt);
            for (std::size_t g = 0; g < ts.size(); ++g)
                print_cell(c, {"host-all", "copy", dir, e, c.gpus[g], -1, gpu_numa_node(c, c.gpus[g])}, seconds, g,
                           c.size);
        }
    }
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
                    print_cell(c, {"peer", op, "one", e, a, b, -1},
                               run_together({pair.first}, c.size, c.blocks, c.samples, salt), 0, c.size);
                    print_cell(c, {"peer", op, "one", e, b, a, -1},
                               run_together({pair.second}, c.size, c.blocks, c.samples, salt), 0, c.size);
                    const auto both = run_together({pair.first, pair.second}, c.size, c.blocks, c.samples, salt);
                    print_cell(c, {"peer", op, "both", e, a, b, -1}, both, 0, c.size);
                    print_cell(c, {"peer", op, "both", e, b, a, -1}, both, 1, c.size);
                }
            }
        }
}

void latency_cells(const Config &c) {
    std::uint64_t expected = 0;
    const auto chain = chase_chain(c.chase_bytes, c.chase_stride, c.chase_order == "random", expected, c.chase_steps);
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

int cells_printed() { return printed; }

void print_matrices() { matrices.print(); }

}  // namespace path_matrix
