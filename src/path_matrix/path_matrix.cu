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
// ns=... per step instead), then "Verified: cells=N", then the medians as
// matrices of GB/s, NUMA node x GPU and GPU x GPU, as nvbandwidth ends.
//
// Here: the options and main; cells.cu measures each path, transfers.cu
// runs transfers together and verifies them, kernels.cu holds the device code.
#include <algorithm>
#include <string>
#include <vector>

#include "cells.cuh"
#include "suite.hpp"

#ifdef SUITE_HAVE_LIBNUMA
#include <numa.h>
#endif

namespace path_matrix {
namespace {

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

// The most dependent loads one chase may take: a step is one round trip
// (about 1.2 us over PCIe Gen5), so 10^8 is two minutes.
constexpr long long kMaxChaseSteps = 100000000;

// The GPUs' numbers are checked against the visible ones once CUDA runs; their form before.
constexpr int kAnyGpu = 1 << 16;

// Every option, with its default and its help.
suite::Options declare_options() {
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
    opts.add("chase-order", "random",
             "random (a random cycle through the slots: each step a new DRAM row) or "
             "stride (slot after slot, as nvbandwidth's chase)");
    opts.add("chase-load", "cv",
             "cv (ld.global.cv: every step crosses the link) or plain (a plain load, as "
             "nvbandwidth's chase)");
    opts.add("chase-links", "index",
             "what each slot holds: index (the next slot's word index) or address (its "
             "address, as nvbandwidth's chase)");
    opts.add("chase-sms", "one",
             "one (the first block's SM chases) or all (each SM in turn, averaged, as "
             "nvbandwidth's chase)");
    opts.add("blocks", "auto",
             "blocks of each SM copy and bulk read: 'auto' (four per SM) or a number, to see "
             "what the issuing SMs limit");
    return opts;
}

// Every option but --gpus, checked before CUDA starts.
Config parse_config(const suite::Options &opts) {
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
    c.chase_steps = opts.integer("chase-steps", 1, kMaxChaseSteps);
    c.chase_order = opts.choice("chase-order", {"random", "stride"});
    c.chase_load = opts.choice("chase-load", {"cv", "plain"});
    c.chase_links = opts.choice("chase-links", {"index", "address"});
    c.chase_sms = opts.choice("chase-sms", {"one", "all"});
    c.blocks = opts.str("blocks") == "auto" ? 0 : opts.integer32("blocks", 1, 1 << 20);
    opts.require_host_memory("size", 2 * c.size, 0.5);  // two host buffers at once at the least
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
    return c;
}

// The GPUs --gpus names, among the visible ones.
void choose_gpus(const suite::Options &opts, Config &c) {
    const int count = suite::device_count("option '--gpus'");
    if (count == 0) suite::die("no CUDA device visible");
    c.gpus = index_list(opts, "gpus", opts.str("gpus") == "all" ? count : kAnyGpu, "GPUs");
    for (int gpu : c.gpus)
        if (gpu >= count) opts.usage_error("option '--gpus' names GPU %d, but %d are visible", gpu, count);
    // Two host buffers per GPU at most at once (host-all), each --size.
    opts.require_host_memory("size", 2 * c.size * std::max<std::size_t>(1, c.gpus.size()), 0.5);
}

// Refuses a --size the GPUs cannot hold; then each GPU and the host memory, as measured.
void describe_node(const suite::Options &opts, const Config &c) {
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
        // Each SM chases in turn: the steps' bound (two minutes a chase) holds for all of them together.
        if (c.wants("latency") && c.chase_sms == "all" && c.chase_steps * prop.multiProcessorCount > kMaxChaseSteps)
            opts.usage_error("option '--chase-steps' %lld with --chase-sms all: GPU %d's %d SMs chase %lld steps, "
                             "over %lld",
                             c.chase_steps, gpu, prop.multiProcessorCount, c.chase_steps * prop.multiProcessorCount,
                             kMaxChaseSteps);
        std::printf("GPU %d: %s, %d SMs, NUMA node %d\n", gpu, prop.name, prop.multiProcessorCount,
                    gpu_numa_node(c, gpu));
    }
    std::printf("Host memory: %s\n",
                numa_node_count() ? "pinned, bound to each NUMA node (libnuma)" : "pinned, not bound (no libnuma)");
}

}  // namespace
}  // namespace path_matrix

int main(int argc, char **argv) {
    using namespace path_matrix;
    suite::Options opts = declare_options();
    opts.parse(argc, argv);
    Config c = parse_config(opts);
    choose_gpus(opts, c);
    describe_node(opts, c);

    std::uint64_t salt = 0x5eed;
    if (c.wants("host")) host_cells(c, salt);
    if (c.wants("host-all")) host_all_cells(c, salt);
    if (c.wants("peer")) peer_cells(c, salt);
    if (c.wants("latency")) latency_cells(c);
    suite::Record("Verified").add("cells", cells_printed()).add("samples", c.samples).print();
    print_matrices();  // what a person pastes, after the records
    return EXIT_SUCCESS;
}
