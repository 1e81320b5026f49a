"""The record writer (src/common/record.hpp) against the printf formats the
programs printed their records with before it (mem_scan's rates fields through
src/mem_scan/rates.hpp, which the program uses): every record of every program,
with values at the edges of each format (negative, zero, 2^64 - 1, halves
that round, %g's switch to exponents), must come out byte for byte as the
old printf made it, since the checks' parsers and the outputs committed under
tests/data read that text. Built on the host with the C++ compiler
(tests/host_cpp.py)."""

import subprocess

import pytest
from host_cpp import build_driver

# Each case prints the writer's line, then the old printf's: the pairs must match.
DRIVER = r"""
#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "rates.hpp"
#include "record.hpp"

using suite::Record;

static void pair(const Record &r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pair(const Record &r, const char *fmt, ...) {
    r.print();
    va_list args;
    va_start(args, fmt);
    std::vprintf(fmt, args);
    va_end(args);
}

// mem_scan's rates as it wrote them before the writer (Run::rates_text).
static std::string rates_text(const std::vector<double> &wholes, const std::vector<std::vector<double>> &per_block,
                              double start, double end, std::uint64_t bytes, int reps, double &mean) {
    double sum = 0, lo = wholes[0], blocks[5]{};
    std::string list, block_list;
    char text[32];
    for (std::size_t g = 0; g < wholes.size(); ++g) {
        sum += wholes[g];
        lo = std::min(lo, wholes[g]);
        std::snprintf(text, sizeof text, "%s%.2f", list.empty() ? "" : ",", wholes[g]);
        list += text;
        for (int b = 0; b < 5; ++b) blocks[b] += per_block[g][b] / wholes.size();
    }
    for (const double b : blocks) {
        std::snprintf(text, sizeof text, "%s%.2f", block_list.empty() ? "" : ",", b);
        block_list += text;
    }
    mean = sum / wholes.size();
    const double window = end - start;
    const double aggregate = static_cast<double>(bytes) * reps * wholes.size() / window / 1e9;
    char tail[160];
    std::snprintf(tail, sizeof tail, " min_gbs=%.2f mean_gbs=%.2f aggregate_gbs=%.2f window_s=%.6f", lo, mean,
                  aggregate, window);
    return "per_gpu_gbs=" + list + tail + " block_mean_gbs=" + block_list;
}

int main() {
    // Lists were built in 32-character buffers, which no measured value fills.
    const double reals[] = {0.0, 1.0, 2.675, 0.00049999, 12.34565, 1e-7, 123456789.0, 1.5e15, -3.25};
    const std::uint64_t sizes[] = {0, 1, 4096, 268435456, 17179869184ull, UINT64_MAX};
    const int ints[] = {-1, 0, 7, 2147483647};

    pair(Record("CUDA").add("runtime", 13050).add("driver", 13000), "CUDA: runtime=%d driver=%d\n", 13050, 13000);
    for (const double x : reals) {
        for (const int i : ints) {
            pair(Record("Run").add("node", i).add("op", std::string("read")).add("run", i).addf("gibs", "%.4f", x),
                 "Run: node=%d op=%s run=%d gibs=%.4f\n", i, "read", i, x);
            pair(Record("Bandwidth").add("node", i).add("op", "write").addf("gibs", "%.4f", x).add("runs", i),
                 "Bandwidth: node=%d op=%s gibs=%.4f runs=%d\n", i, "write", x, i);
        }
        for (const std::uint64_t n : sizes) {
            const std::vector<double> blocks = {x, 2.5, 0.00005, x * 3};
            std::string list;
            for (const double us : blocks) {
                char text[32];
                std::snprintf(text, sizeof text, "%s%.4f", list.empty() ? "" : ",", us);
                list += text;
            }
            const std::size_t samples = 100;
            const long batch = 100000;
            pair(Record("Latency")
                     .add("method", "pinned")
                     .add("direction", "h2d")
                     .add("size", static_cast<std::size_t>(n))
                     .addf("median_us", "%.4f", x)
                     .addf("min_us", "%.4f", x / 3)
                     .add("samples", samples)
                     .add("batch", batch)
                     .list("block_medians_us", "%.4f", blocks),
                 "Latency: method=%s direction=%s size=%zu median_us=%.4f min_us=%.4f samples=%zu batch=%ld "
                 "block_medians_us=%s\n",
                 "pinned", "h2d", static_cast<std::size_t>(n), x, x / 3, samples, batch, list.c_str());
            const int inner = 16, outer = 8, rows = 100, sample = 2;
            pair(Record("DAXPY")
                     .add("alloc", "managed")
                     .add("prefetch", "off")
                     .add("size", n)
                     .add("rows", rows)
                     .add("cols", n / sizeof(double))
                     .add("inner", inner)
                     .add("outer", outer)
                     .add("sample", sample)
                     .addf("kernel_us", "%.3f", x)
                     .addf("per_kernel_us", "%.3f", x / (static_cast<double>(inner) * outer))
                     .addf("gpu_kernel_us", "%.3f", x * 2)
                     .addf("touch_us", "%.3f", x)
                     .addf("alloc_us", "%.3f", x)
                     .addf("init_us", "%.3f", x)
                     .addf("warmup_us", "%.3f", x)
                     .addf("total_us", "%.3f", x),
                 "DAXPY: alloc=%s prefetch=%s size=%" PRIu64 " rows=%d cols=%" PRIu64
                 " inner=%d outer=%d sample=%d kernel_us=%.3f per_kernel_us=%.3f gpu_kernel_us=%.3f "
                 "touch_us=%.3f alloc_us=%.3f init_us=%.3f warmup_us=%.3f total_us=%.3f\n",
                 "managed", "off", n, rows, n / sizeof(double), inner, outer, sample, x,
                 x / (static_cast<double>(inner) * outer), x * 2, x, x, x, x, x);
            pair(Record("PingPong")
                     .add("variant", std::string("nvbit"))
                     .add("size", n)
                     .add("iters", 10000)
                     .add("block", 256)
                     .add("src_device", 0)
                     .add("dst_device", 1)
                     .add("sample", 3)
                     .addf("time_s", "%.6g", x)
                     .addf("bandwidth_gibs", "%.6g", x * 7),
                 "PingPong: variant=%s size=%" PRIu64 " iters=%d block=%d src_device=%d dst_device=%d "
                 "sample=%d time_s=%.6g bandwidth_gibs=%.6g\n",
                 "nvbit", n, 10000, 256, 0, 1, 3, x, x * 7);
            const std::size_t s = 4;
            pair(Record("Cell")
                     .add("path", std::string("host-all"))
                     .add("engine", "ce")
                     .add("op", std::string("copy"))
                     .add("dir", std::string("h2d-both"))
                     .add("gpu", 3)
                     .add("peer", -1)
                     .add("numa", 1)
                     .add("sample", s + 1)
                     .add("bytes", n)
                     .addf("seconds", "%.6g", x)
                     .addf("gbs", "%.6g", static_cast<double>(n) / x / 1e9),
                 "Cell: path=%s engine=%s op=%s dir=%s gpu=%d peer=%d numa=%d sample=%zu bytes=%" PRIu64
                 " seconds=%.6g gbs=%.6g\n",
                 "host-all", "ce", "copy", "h2d-both", 3, -1, 1, s + 1, n, x, static_cast<double>(n) / x / 1e9);
            const long long steps = 20000;
            pair(Record("Cell")
                     .add("path", "latency")
                     .add("engine", "sm")
                     .add("op", "chase")
                     .add("dir", std::string("peer"))
                     .add("gpu", 0)
                     .add("peer", 1)
                     .add("numa", -1)
                     .add("sample", 5)
                     .add("steps", steps)
                     .add("stride", n)
                     .addf("ns", "%.6g", x * 1e9 / static_cast<double>(steps)),
                 "Cell: path=latency engine=sm op=chase dir=%s gpu=%d peer=%d numa=%d sample=%d "
                 "steps=%lld stride=%" PRIu64 " ns=%.6g\n",
                 "peer", 0, 1, -1, 5, steps, n, x * 1e9 / static_cast<double>(steps));
            pair(Record("Layout")
                     .add("mode", "single")
                     .add("chunk_bytes", n)
                     .add("map_bytes", n / 2)
                     .add("launch_span", n / 4),
                 "Layout: mode=%s chunk_bytes=%" PRIu64 " map_bytes=%" PRIu64 " launch_span=%" PRIu64 "\n",
                 "single", n, n / 2, n / 4);
            const std::vector<double> wholes = {x, 2.675, 900.125};
            const std::vector<std::vector<double>> per_block = {
                {x, 1, 2, 3, 4}, {0.005, 0.015, 2.675, 1e6, x}, {900, 901, 902, 903, 904}};
            for (const int gpus : {2, 3}) {
                const std::vector<double> w(wholes.begin(), wholes.begin() + gpus);
                const std::vector<std::vector<double>> pb(per_block.begin(), per_block.begin() + gpus);
                double old_mean = 0, new_mean = 0;
                const std::string text = rates_text(w, pb, 0.0, 0.0123456, n, 20, old_mean);
                Record scan("Scan");
                scan.add("mode", "chunked").add("op", "read").add("segment", n).add("width", 16);
                scan.add("thread_bytes", 16).add("gpus", gpus).add("launch_bytes", n).add("reps", 20);
                mem_scan::add_rates(scan, w, pb, 0.0123456, n, 20, new_mean);
                pair(scan, "Scan: mode=%s op=%s segment=%" PRIu64 " width=%d thread_bytes=%d gpus=%d launch_bytes=%"
                     PRIu64 " reps=%d %s\n", "chunked", "read", n, 16, 16, gpus, n, 20, text.c_str());
                Record link("Link");
                link.add("mode", "multiprocess").add("op", "write").add("gpus", gpus).add("launch_bytes", n);
                link.add("reps", 20);
                mem_scan::add_rates(link, w, pb, 0.0123456, n, 20, new_mean);
                link.addf("scan_limit_gbs", "%.2f", new_mean * gpus / (gpus - 1));
                pair(link, "Link: mode=%s op=%s gpus=%d launch_bytes=%" PRIu64 " reps=%d %s scan_limit_gbs=%.2f\n",
                     "multiprocess", "write", gpus, n, 20, text.c_str(), old_mean * gpus / (gpus - 1));
            }
        }
    }
    for (const long long v : {0LL, -5LL, 40000LL, 9223372036854775807LL}) {
        pair(Record("Verified")
                 .add("variant", "baseline")
                 .add("samples", 2)
                 .addf("src", "a+%lld", v)
                 .addf("dst", "a+%lld (a = initial src) after %d iterations", v - 2, 10000),
             "Verified: variant=%s samples=%d src=a+%lld dst=a+%lld (a = initial src) after %d iterations\n",
             "baseline", 2, v, v - 2, 10000);
        const unsigned long long adds = static_cast<unsigned long long>(v) * 3;
        pair(Record("Atomics verified").add("mode", "single").add("adds", adds),
             "Atomics verified: mode=%s adds=%llu\n", "single", adds);
    }
    pair(Record("Skipped").add("method", "gdrcopy").add("reason", std::string("/dev/gdrdrv is absent (x=1)")),
         "Skipped: method=gdrcopy reason=%s\n", "/dev/gdrdrv is absent (x=1)");
    pair(Record("Unreachable").add("gpu", 0).add("peer", 1).add("reason", "cudaDeviceCanAccessPeer is 0"),
         "Unreachable: gpu=%d peer=%d reason=cudaDeviceCanAccessPeer is 0\n", 0, 1);
    pair(Record("Verified").add("cells", 120).add("samples", 5), "Verified: cells=%d samples=%d\n", 120, 5);
    pair(Record("Mode done").add("mode", "chunked").add("points", 39), "Mode done: mode=%s points=%d\n", "chunked", 39);
    pair(Record("Empty").list("values", "%.2f", {}), "Empty: values=\n");
    const Record run = Record("Run").add("node", 0).add("op", "read").add("run", 1).addf("gibs", "%.4f", 12.34565);
    std::printf("%s\n", run.str().c_str());
}
"""


@pytest.fixture(scope="module")
def lines(tmp_path_factory):
    flags = ("-Wall", "-Wextra", "-Werror")
    driver = build_driver(tmp_path_factory.mktemp("records"), DRIVER, ("common", "mem_scan"), flags)
    return subprocess.run([str(driver)], capture_output=True, text=True, check=True).stdout.splitlines()


def test_every_record_is_printed_as_its_old_printf_printed_it(lines):
    *pairs, last = lines
    assert len(pairs) % 2 == 0 and len(pairs) > 500
    for written, printed in zip(pairs[::2], pairs[1::2]):
        assert written == printed


def test_the_writer_keeps_each_fields_format(lines):
    assert "CUDA: runtime=13050 driver=13000" in lines
    assert "Run: node=7 op=read run=7 gibs=2.6750" in lines  # %.4f
    assert "Unreachable: gpu=0 peer=1 reason=cudaDeviceCanAccessPeer is 0" in lines
    assert "Atomics verified: mode=single adds=9223372036854775805" in lines  # %llu, wrapped
    assert (
        "Layout: mode=single chunk_bytes=18446744073709551615 map_bytes=9223372036854775807 "
        "launch_span=4611686018427387903" in lines
    )
    assert any(line.startswith("PingPong: ") and "time_s=1e-07 " in line for line in lines)  # %.6g
    assert lines[-1] == "Run: node=0 op=read run=1 gibs=12.3456"  # str(): the line without its newline
