// Host memory bandwidth per NUMA node: the reference point for the Unified
// Memory reprex's NUMA-local baseline and for the DAXPY study's TouchOnCPU.
//
// For each node, a buffer is allocated on that node (numa_alloc_onnode) and
// read (a sum) or written by threads bound to the same node's CPUs, so the
// figure is the node's local bandwidth. Every run is verified: a read must
// return the sum the host knows, a write must leave the value it stored.
//
// Output, one record a run and one per node and operation (their median):
//   Run: node=0 op=read run=1 gibs=12.3456
//   Bandwidth: node=0 op=read gibs=12.3456 runs=5
#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <thread>

#include "suite.hpp"

#ifdef SUITE_HAVE_LIBNUMA
#include <numa.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;

struct Topology {
    bool numa = false;  // libnuma present and the kernel supports it
    std::vector<int> nodes;
};

Topology detect_topology() {
    Topology topo;
#ifdef SUITE_HAVE_LIBNUMA
    if (numa_available() >= 0) {
        topo.numa = true;
        for (int n = 0; n <= numa_max_node(); ++n)
            if (numa_bitmask_isbitset(numa_all_nodes_ptr, n)) topo.nodes.push_back(n);
        return topo;
    }
#endif
    topo.nodes.push_back(0);
    return topo;
}

unsigned cpus_of_node(const Topology &topo, int node) {
#ifdef SUITE_HAVE_LIBNUMA
    if (topo.numa) {
        bitmask *cpus = numa_allocate_cpumask();
        unsigned count = 0;
        if (numa_node_to_cpus(node, cpus) == 0) count = numa_bitmask_weight(cpus);
        numa_free_cpumask(cpus);
        return count;
    }
#endif
    (void)topo;
    (void)node;
    return std::max(1u, std::thread::hardware_concurrency());
}

std::uint64_t *alloc_on_node(const Topology &topo, int node, std::size_t bytes) {
    void *p = nullptr;
#ifdef SUITE_HAVE_LIBNUMA
    if (topo.numa) p = numa_alloc_onnode(bytes, node);
    else
#endif
        p = std::malloc(bytes);
    (void)topo;
    (void)node;
    if (!p) suite::die("cannot allocate %zu bytes on NUMA node %d", bytes, node);
    return static_cast<std::uint64_t *>(p);
}

void free_on_node(const Topology &topo, std::uint64_t *p, std::size_t bytes) {
#ifdef SUITE_HAVE_LIBNUMA
    if (topo.numa) {
        numa_free(p, bytes);
        return;
    }
#endif
    (void)topo;
    (void)bytes;
    std::free(p);
}

void bind_to_node(const Topology &topo, int node) {
#ifdef SUITE_HAVE_LIBNUMA
    if (topo.numa && numa_run_on_node(node) != 0) suite::die("cannot run on NUMA node %d", node);
#endif
    (void)topo;
    (void)node;
}

// Runs body(thread_index) on `threads` threads bound to `node` and returns the
// wall time from the moment all of them are ready until the last one is done.
template <typename Body>
double timed_parallel(const Topology &topo, int node, unsigned threads, Body body) {
    std::atomic<unsigned> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            bind_to_node(topo, node);
            ready.fetch_add(1);
            while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
            body(t);
        });
    }
    while (ready.load() < threads) std::this_thread::yield();
    const auto t0 = Clock::now();
    go.store(true, std::memory_order_release);
    for (auto &th : pool) th.join();
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Slice {
    std::size_t begin, end;
};

Slice slice_of(std::size_t n, unsigned threads, unsigned t) {
    const std::size_t chunk = (n + threads - 1) / threads;
    return {std::min(n, t * chunk), std::min(n, (t + 1) * chunk)};
}

// Four independent accumulators keep the loads in flight instead of waiting
// on one add chain; the sum is checked, so the loads cannot be optimised out.
std::uint64_t sum_slice(const std::uint64_t *a, Slice s) {
    std::uint64_t acc[4] = {0, 0, 0, 0};
    std::size_t i = s.begin;
    for (; i + 4 <= s.end; i += 4)
        for (int k = 0; k < 4; ++k) acc[k] += a[i + k];
    for (; i < s.end; ++i) acc[0] += a[i];
    return acc[0] + acc[1] + acc[2] + acc[3];
}

// The nodes --nodes names: "all", or a list of node numbers this host has.
std::vector<int> select_nodes(const Topology &topo, const suite::Options &opts) {
    if (opts.str("nodes") == "all") return topo.nodes;
    std::vector<int> chosen;
    for (const auto &item : opts.list("nodes")) {
        long long node = -1;
        if (!suite::parse_integer(item, node) || node < 0 || node > std::numeric_limits<int>::max())
            opts.usage_error("option '--nodes' takes 'all' or NUMA node numbers such as 0,1, got '%s'", item.c_str());
        if (std::find(topo.nodes.begin(), topo.nodes.end(), node) == topo.nodes.end())
            opts.usage_error("option '--nodes': NUMA node %lld does not exist on this host", node);
        // A node named twice would be measured twice under one name: its records would collide.
        if (std::find(chosen.begin(), chosen.end(), node) != chosen.end())
            opts.usage_error("option '--nodes': NUMA node %lld is named twice", node);
        chosen.push_back(static_cast<int>(node));
    }
    if (chosen.empty()) opts.usage_error("option '--nodes' needs 'all' or at least one node");
    return chosen;
}

// Measures one operation on one node; returns the per-run bandwidths.
std::vector<double> measure(const Topology &topo, int node, const std::string &op, std::uint64_t *a, std::size_t n,
                            unsigned threads, int runs) {
    std::vector<double> bw;
    const double bytes = static_cast<double>(n) * sizeof(std::uint64_t);
    for (int run = 1; run <= runs; ++run) {
        double seconds = 0.0;
        if (op == "read") {
            std::vector<std::uint64_t> partial(threads, 0);
            seconds = timed_parallel(topo, node, threads,
                                     [&](unsigned t) { partial[t] = sum_slice(a, slice_of(n, threads, t)); });
            std::uint64_t total = 0;
            for (auto p : partial) total += p;
            const std::uint64_t expected = suite::triangular_mod64(n);  // a[i] == i
            if (total != expected)
                suite::die("node %d read run %d: sum %llu, expected %llu", node, run,
                           static_cast<unsigned long long>(total), static_cast<unsigned long long>(expected));
        } else {
            const std::uint64_t value = 0x5eed0000u + run;
            seconds = timed_parallel(topo, node, threads, [&](unsigned t) {
                const Slice s = slice_of(n, threads, t);
                std::fill(a + s.begin, a + s.end, value);
            });
            for (std::size_t i = 0; i < n; ++i)
                if (a[i] != value) suite::die("node %d write run %d: element %zu was not written", node, run, i);
            for (std::size_t i = 0; i < n; ++i) a[i] = i;  // restore for later reads
        }
        bw.push_back(bytes / seconds / suite::kGiB);
        suite::Record("Run").add("node", node).add("op", op).add("run", run).addf("gibs", "%.4f", bw.back()).print();
        std::fflush(stdout);
    }
    return bw;
}

// What a run measures.
struct Plan {
    std::uint64_t size = 0;
    int runs = 0, threads = 0;  // threads 0: every CPU of the node
    std::vector<std::string> ops;
    std::vector<int> nodes;
};

// Every option, with its default and its help.
suite::Options declare_options() {
    suite::Options opts("host_bandwidth", "Host memory bandwidth per NUMA node, threads bound to the node's CPUs.");
    opts.add("nodes", "all", "NUMA nodes to measure: 'all' or a list such as 0,1");
    opts.add("size", "1G", "buffer size per node (K/M/G suffixes)");
    opts.add("runs", "5", "timed runs per node and operation, 1 to 50 (minutes of passes over the buffer at most)");
    opts.add("threads", "0", "threads per node (0: every CPU of the node)");
    opts.add("op", "read,write", "operations: read, write or both");
    return opts;
}

Plan parse_plan(const suite::Options &opts, const Topology &topo) {
    Plan p;
    p.size = opts.bytes("size", 4096);
    // As many as the check lets a site ask for: a million passes over a buffer run for hours.
    p.runs = opts.integer32("runs", 1, 50);
    // More threads than CPUs only time-share them; far more would fail to start.
    const int max_threads = 4 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    p.threads = opts.integer32("threads", 0, max_threads);
    p.ops = opts.choices("op", {"read", "write"});
    p.nodes = select_nodes(topo, opts);
    // Each node's buffer is freed before the next one's is taken.
    opts.require_host_memory("size", p.size, 0.9);
    return p;
}

// One node's buffer, filled by its own threads, then each op's runs and their median.
void measure_node(const Topology &topo, const Plan &p, int node) {
    const std::size_t n = p.size / sizeof(std::uint64_t);
    const unsigned threads = p.threads > 0 ? static_cast<unsigned>(p.threads) : cpus_of_node(topo, node);
    if (threads == 0) {
        std::printf("Node %d: no CPUs, skipped\n", node);
        return;
    }
    std::uint64_t *a = alloc_on_node(topo, node, n * sizeof(std::uint64_t));
    // First touch by the bound threads also faults the pages in before timing.
    timed_parallel(topo, node, threads, [&](unsigned t) {
        const Slice s = slice_of(n, threads, t);
        for (std::size_t i = s.begin; i < s.end; ++i) a[i] = i;
    });
    std::printf("Node %d: %u threads, %.3f GiB\n", node, threads, n * sizeof(std::uint64_t) / suite::kGiB);
    for (const auto &op : p.ops) {
        const std::vector<double> bw = measure(topo, node, op, a, n, threads, p.runs);
        suite::Record("Bandwidth")
            .add("node", node)
            .add("op", op)
            .addf("gibs", "%.4f", suite::median(bw))
            .add("runs", p.runs)
            .print();
    }
    free_on_node(topo, a, n * sizeof(std::uint64_t));
}

}  // namespace

int main(int argc, char **argv) {
    suite::Options opts = declare_options();
    opts.parse(argc, argv);
    const Topology topo = detect_topology();
    const Plan plan = parse_plan(opts, topo);
    std::printf("NUMA nodes: %zu (%s)\n", topo.nodes.size(),
                topo.numa ? "libnuma placement" : "no libnuma: plain allocation, no binding");
    for (int node : plan.nodes) measure_node(topo, plan, node);
    return EXIT_SUCCESS;
}
