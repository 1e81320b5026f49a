// Shared by every program of the suite: error handling, command-line options
// and (in CUDA translation units) CUDA error checking and event timing.
//
// Programs print human-readable lines that the ReFrame checks parse; errors go
// to stderr and end the program with a non-zero exit code, so a check can never
// mistake a failed run for a slow one.
#pragma once

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <map>
#include <string>
#include <vector>

#ifdef __CUDACC__
#include <cuda_runtime.h>
#endif
#ifdef SUITE_HAVE_LIBNUMA
#include <numa.h>
#endif

#include "record.hpp"

namespace suite {

[[noreturn]] __attribute__((format(printf, 1, 2))) inline void die(const char *fmt, ...) {
    std::va_list args;
    va_start(args, fmt);
    std::fputs("error: ", stderr);
    std::vfprintf(stderr, fmt, args);
    std::fputc('\n', stderr);
    va_end(args);
    std::exit(EXIT_FAILURE);
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// 0 + 1 + ... + (n - 1) modulo 2^64: what summing words that hold their own
// index gives. n (n - 1) / 2 in 64 bits wraps before it halves once n passes
// 2^32 (a buffer over 32 GiB of 8-byte words), so halve the even factor first.
constexpr std::uint64_t triangular_mod64(std::uint64_t n) {
    return n == 0 ? 0 : (n % 2 == 0 ? (n / 2) * (n - 1) : n * ((n - 1) / 2));
}

// "4096", "4096B", "64K", "1.5M", "32GiB", "1T": decimal digits with an
// optional fraction, then an optional binary multiple (K, M, G, T, upper or
// lower case, optionally "i") and an optional "B". The whole text must be
// read and the result must be a whole number of bytes below 2^64: NaN,
// infinities, exponents, signs and trailing junk are all rejected.
inline bool parse_bytes(const std::string &text, std::uint64_t &bytes) {
    std::size_t i = 0;
    const std::size_t n = text.size();
    std::uint64_t whole = 0;
    const std::size_t first_digit = i;
    for (; i < n && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
        const unsigned digit = static_cast<unsigned>(text[i] - '0');
        if (whole > (UINT64_MAX - digit) / 10) return false;
        whole = whole * 10 + digit;
    }
    if (i == first_digit) return false;
    std::string fraction;
    if (i < n && text[i] == '.') {
        for (++i; i < n && std::isdigit(static_cast<unsigned char>(text[i])); ++i) fraction += text[i];
        if (fraction.empty()) return false;
    }
    int shift = 0;
    if (i < n) {
        switch (std::toupper(static_cast<unsigned char>(text[i]))) {
        case 'K': shift = 10; break;
        case 'M': shift = 20; break;
        case 'G': shift = 30; break;
        case 'T': shift = 40; break;
        default: break;
        }
        if (shift) {
            ++i;
            // "Ki" only as the start of "KiB".
            if (i < n && text[i] == 'i' && !(i + 1 < n && (text[i + 1] == 'B' || text[i + 1] == 'b'))) return false;
            if (i < n && text[i] == 'i') ++i;
        }
    }
    if (i < n && (text[i] == 'B' || text[i] == 'b')) ++i;
    if (i != n) return false;
    if (whole > (UINT64_MAX >> shift)) return false;
    std::uint64_t value = whole << shift;
    if (!fraction.empty()) {
        // The fraction times the multiple must be whole bytes: 1.5K is 1536, 0.1K is not a size.
        const long double part = std::strtold(("0." + fraction).c_str(), nullptr) * std::ldexp(1.0L, shift);
        if (part != std::floor(part) || static_cast<long double>(UINT64_MAX - value) < part) return false;
        value += static_cast<std::uint64_t>(part);
    }
    bytes = value;
    return true;
}

// The whole text as a decimal integer, without overflow.
inline bool parse_integer(const std::string &text, long long &value) {
    if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return false;
    char *end = nullptr;
    errno = 0;
    value = std::strtoll(text.c_str(), &end, 10);
    return errno == 0 && *end == '\0';
}

// The whole text as a finite real number (no NaN, no infinity, no overflow).
inline bool parse_real(const std::string &text, double &value) {
    if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return false;
    char *end = nullptr;
    errno = 0;
    value = std::strtod(text.c_str(), &end);
    return errno == 0 && *end == '\0' && std::isfinite(value);
}

// 4096 as "4K", 1 << 30 as "1G": how sizes are written on the command line.
inline std::string format_bytes(std::uint64_t bytes) {
    static const char *units[] = {"", "K", "M", "G", "T", "P", "E"};
    int u = 0;
    while (bytes >= 1024 && bytes % 1024 == 0 && u < 6) {
        bytes /= 1024;
        ++u;
    }
    return std::to_string(bytes) + units[u];
}

// The median of the samples (the mean of the middle two for an even count).
inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// Bytes of host memory the kernel can still give without swapping
// (MemAvailable, not MemTotal); 0 where /proc/meminfo cannot be read.
inline std::uint64_t host_available_bytes() {
    FILE *f = std::fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kib = 0;
    while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
    std::fclose(f);
    return static_cast<std::uint64_t>(kib) * 1024;
}

// A deliberately small option parser: "--name value", "--name=value" and
// boolean "--flag"; unknown options and missing values are errors, and
// "--help" prints every option with its default.
class Options {
  public:
    Options(std::string program, std::string summary) : program_(std::move(program)), summary_(std::move(summary)) {}

    void add(const std::string &name, const std::string &default_value, const std::string &help) {
        specs_[name] = Spec{default_value, help, false};
        order_.push_back(name);
    }

    void add_flag(const std::string &name, const std::string &help) {
        specs_[name] = Spec{"", help, true};
        order_.push_back(name);
    }

    void parse(int argc, char **argv) {
        for (int i = 1; i < argc; ++i) {
            std::string arg = argv[i];
            if (arg == "--help" || arg == "-h") {
                usage(stdout);
                std::exit(EXIT_SUCCESS);
            }
            if (arg.rfind("--", 0) != 0) usage_error("unexpected argument '%s'", arg.c_str());
            std::string name = arg.substr(2), value;
            bool has_value = false;
            const auto eq = name.find('=');
            if (eq != std::string::npos) {
                value = name.substr(eq + 1);
                name = name.substr(0, eq);
                has_value = true;
            }
            auto spec = specs_.find(name);
            if (spec == specs_.end()) usage_error("unknown option '--%s'", name.c_str());
            if (spec->second.is_flag) {
                if (has_value) usage_error("option '--%s' takes no value", name.c_str());
                values_[name] = "1";
                continue;
            }
            if (!has_value) {
                if (i + 1 >= argc) usage_error("option '--%s' needs a value", name.c_str());
                value = argv[++i];
            }
            values_[name] = value;
        }
    }

    std::string str(const std::string &name) const {
        auto it = values_.find(name);
        return it != values_.end() ? it->second : spec(name).default_value;
    }

    bool flag(const std::string &name) const { return values_.count(name) != 0 && spec(name).is_flag; }

    // Each getter reads the whole value and checks its range, naming the
    // option and the value in the error (exit status 2), so that a typo can
    // never run as a default, a zero or a NaN.

    // An integer from lo to hi.
    long long integer(const std::string &name, long long lo, long long hi) const {
        const std::string text = str(name);
        long long value = 0;
        if (!parse_integer(text, value) || value < lo || value > hi)
            usage_error("option '--%s' expects an integer from %lld to %lld, got '%s'", name.c_str(), lo, hi,
                        text.c_str());
        return value;
    }

    // The same for an int, whose bounds then fit it.
    int integer32(const std::string &name, int lo, int hi) const { return static_cast<int>(integer(name, lo, hi)); }

    // A finite real number from lo to hi.
    double real(const std::string &name, double lo, double hi) const {
        const std::string text = str(name);
        double value = 0.0;
        if (!parse_real(text, value) || value < lo || value > hi)
            usage_error("option '--%s' expects a number from %g to %g, got '%s'", name.c_str(), lo, hi, text.c_str());
        return value;
    }

    // A size in bytes (see parse_bytes) from lo to hi.
    std::uint64_t bytes(const std::string &name, std::uint64_t lo = 1, std::uint64_t hi = UINT64_MAX) const {
        return bytes_item(name, str(name), lo, hi);
    }

    // Comma-separated values, e.g. "--op read,write". An empty value is an
    // empty list; an empty item ("a,,b", "a,") is an error.
    std::vector<std::string> list(const std::string &name) const {
        std::vector<std::string> items;
        const std::string text = str(name);
        if (text.empty()) return items;
        std::string item;
        for (char c : text + ",") {
            if (c != ',') {
                item += c;
                continue;
            }
            if (item.empty()) usage_error("option '--%s' has an empty item in '%s'", name.c_str(), text.c_str());
            items.push_back(item);
            item.clear();
        }
        return items;
    }

    // A list of sizes, each from lo to hi.
    std::vector<std::uint64_t> bytes_list(const std::string &name, std::uint64_t lo = 1,
                                          std::uint64_t hi = UINT64_MAX) const {
        std::vector<std::uint64_t> sizes;
        for (const auto &item : list(name)) sizes.push_back(bytes_item(name, item, lo, hi));
        return sizes;
    }

    // One of the allowed words.
    std::string choice(const std::string &name, std::initializer_list<const char *> allowed) const {
        return checked_word(name, str(name), allowed);
    }

    // A list of allowed words; at least one.
    std::vector<std::string> choices(const std::string &name, std::initializer_list<const char *> allowed) const {
        std::vector<std::string> words = list(name);
        if (words.empty()) usage_error("option '--%s' needs at least one value", name.c_str());
        for (const auto &w : words) checked_word(name, w, allowed);
        return words;
    }

    // "2x" (a multiple of some whole, such as the GPU's memory, known only
    // once CUDA runs) or a size in bytes.
    struct Amount {
        double factor = 0.0;  // > 0 for a multiple
        std::uint64_t bytes = 0;
        std::uint64_t of(std::uint64_t whole) const {
            return factor > 0 ? static_cast<std::uint64_t>(factor * static_cast<double>(whole)) : bytes;
        }
    };

    // A multiple in (0, max_factor] or a size of at least min_bytes.
    Amount amount(const std::string &name, double max_factor, std::uint64_t min_bytes) const {
        const std::string text = str(name);
        Amount a;
        if (!text.empty() && text.back() == 'x') {
            if (!parse_real(text.substr(0, text.size() - 1), a.factor) || a.factor <= 0 || a.factor > max_factor)
                usage_error("option '--%s' expects a multiple above 0 and up to %gx, got '%s'", name.c_str(),
                            max_factor, text.c_str());
            return a;
        }
        a.bytes = bytes_item(name, text, min_bytes, UINT64_MAX);
        return a;
    }

    // Host memory for --<name>: at most `share` of what the host has available.
    void require_host_memory(const std::string &name, std::uint64_t bytes, double share) const {
        const std::uint64_t available = host_available_bytes();
        if (available && static_cast<double>(bytes) > share * static_cast<double>(available))
            usage_error("option '--%s' %s asks for %.2f GiB of host memory, more than %.0f%% of the %.2f GiB available",
                        name.c_str(), str(name).c_str(), static_cast<double>(bytes) / kGiB, share * 100,
                        static_cast<double>(available) / kGiB);
    }

    [[noreturn]] __attribute__((format(printf, 2, 3))) void usage_error(const char *fmt, ...) const {
        std::va_list args;
        va_start(args, fmt);
        std::fprintf(stderr, "%s: ", program_.c_str());
        std::vfprintf(stderr, fmt, args);
        std::fputs(" (see --help)\n", stderr);
        va_end(args);
        std::exit(2);
    }

  private:
    struct Spec {
        std::string default_value, help;
        bool is_flag = false;
    };

    std::uint64_t bytes_item(const std::string &name, const std::string &text, std::uint64_t lo,
                             std::uint64_t hi) const {
        std::uint64_t value = 0;
        if (!parse_bytes(text, value))
            usage_error("option '--%s' expects a size such as 4096, 64K or 1G, got '%s'", name.c_str(), text.c_str());
        if (value < lo && hi == UINT64_MAX)
            usage_error("option '--%s' expects a size of at least %s, got '%s'", name.c_str(), format_bytes(lo).c_str(),
                        text.c_str());
        if (value < lo || value > hi)
            usage_error("option '--%s' expects a size from %s to %s, got '%s'", name.c_str(), format_bytes(lo).c_str(),
                        format_bytes(hi).c_str(), text.c_str());
        return value;
    }

    const std::string &checked_word(const std::string &name, const std::string &word,
                                    std::initializer_list<const char *> allowed) const {
        std::string names;
        for (const char *a : allowed) {
            if (word == a) return word;
            names += (names.empty() ? "" : ", ") + std::string(a);
        }
        usage_error("option '--%s' takes %s, got '%s'", name.c_str(), names.c_str(), word.c_str());
    }

    const Spec &spec(const std::string &name) const {
        auto it = specs_.find(name);
        if (it == specs_.end()) die("internal: option '--%s' was never declared", name.c_str());
        return it->second;
    }

    void usage(std::FILE *out) const {
        std::fprintf(out, "usage: %s [options]\n%s\n\noptions:\n", program_.c_str(), summary_.c_str());
        for (const auto &name : order_) {
            const Spec &s = specs_.at(name);
            if (s.is_flag) std::fprintf(out, "  --%-22s %s\n", name.c_str(), s.help.c_str());
            else
                std::fprintf(out, "  --%-22s %s (default: %s)\n", (name + " V").c_str(), s.help.c_str(),
                             s.default_value.c_str());
        }
    }

    std::string program_, summary_;
    std::map<std::string, Spec> specs_;
    std::map<std::string, std::string> values_;
    std::vector<std::string> order_;
};

#ifdef __CUDACC__

// Prints the CUDA error string first (that is what a check's sanity pattern and
// a person look for), then where it happened, and exits non-zero.
inline void cuda_check(cudaError_t err, const char *call, const char *file, int line) {
    if (err == cudaSuccess) return;
    std::fprintf(stderr, "CUDA error: %s (%s) in %s at %s:%d\n", cudaGetErrorString(err), cudaGetErrorName(err), call,
                 file, line);
    std::exit(EXIT_FAILURE);
}

#define CUDA_CHECK(call) ::suite::cuda_check((call), #call, __FILE__, __LINE__)
// After a kernel launch: launch errors now, execution errors at the next sync.
#define CUDA_CHECK_LAUNCH() ::suite::cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

// The CUDA runtime this process loaded (not the toolkit it was built with:
// a build against 13.0 loads whichever libcudart.so.13 the loader finds) and
// the newest CUDA the driver supports, once per process, e.g.
// "CUDA: runtime=13050 driver=13000": what a check holds its environment to.
inline void print_cuda_versions() {
    static bool printed = false;
    if (printed) return;
    printed = true;
    int runtime = 0, driver = 0;
    CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    CUDA_CHECK(cudaDriverGetVersion(&driver));
    Record("CUDA").add("runtime", runtime).add("driver", driver).print();
}

// The process on NUMA node `node` of option --numa-node (-1: where it is),
// bound before CUDA starts so that CUDA's own host memory is on the node too.
// Built without libnuma, a node named is said to be ignored.
inline void run_on_numa_node(const Options &opts, int node) {
#ifdef SUITE_HAVE_LIBNUMA
    if (node >= 0 && numa_available() >= 0 && numa_run_on_node(node) != 0)
        opts.usage_error("option '--numa-node': cannot run on NUMA node %d", node);
#else
    (void)opts;
    if (node >= 0) std::puts("NUMA placement unavailable (built without libnuma): --numa-node ignored");
#endif
}

// The CUDA devices this process sees; none at all (cudaErrorNoDevice) is 0.
// Every GPU program asks it first, so each prints its CUDA versions here.
// Where CUDA cannot count them (no driver, a driver too old): a CUDA error
// that names the call, or, where option(s) `names` name GPUs to check against
// the count, an error that names them and why (exit status 1: the input may
// be good, it cannot be checked).
inline int device_count(const std::string &names = "") {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err == cudaErrorNoDevice) {
        cudaGetLastError();
        return 0;
    }
    if (err != cudaSuccess && !names.empty())
        die("%s: the GPUs it names cannot be checked: CUDA cannot count this node's GPUs: %s (%s)", names.c_str(),
            cudaGetErrorString(err), cudaGetErrorName(err));
    // Named as the call it is: the macro would name the variable.
    ::suite::cuda_check(err, "cudaGetDeviceCount(&count)", __FILE__, __LINE__);
    print_cuda_versions();
    return count;
}

// The device that option --<name> names, checked against the visible ones
// (an argument error, exit status 2, like every other bad option).
inline int visible_device(const Options &opts, const std::string &name) {
    const int device = opts.integer32(name, 0, std::numeric_limits<int>::max());
    const int count = device_count("option '--" + name + "'");
    if (device >= count)
        opts.usage_error("option '--%s' names device %d, but %d %s visible", name.c_str(), device, count,
                         count == 1 ? "is" : "are");
    return device;
}

// The device that option --<name> names (visible_device), made current; its
// properties.
inline cudaDeviceProp use_visible_device(const Options &opts, const std::string &name, int &device) {
    device = visible_device(opts, name);
    CUDA_CHECK(cudaSetDevice(device));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    return prop;
}

// Times work on one stream with a pair of CUDA events.
class EventTimer {
  public:
    explicit EventTimer(cudaStream_t stream = nullptr) : stream_(stream) {
        CUDA_CHECK(cudaEventCreate(&start_));
        CUDA_CHECK(cudaEventCreate(&stop_));
    }
    ~EventTimer() {
        cudaEventDestroy(start_);
        cudaEventDestroy(stop_);
    }
    EventTimer(const EventTimer &) = delete;
    EventTimer &operator=(const EventTimer &) = delete;

    void start() { CUDA_CHECK(cudaEventRecord(start_, stream_)); }

    // Waits for the work since start() and returns its duration in seconds.
    double stop() {
        CUDA_CHECK(cudaEventRecord(stop_, stream_));
        CUDA_CHECK(cudaEventSynchronize(stop_));
        float ms = 0.0f;
        CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
        return ms / 1e3;
    }

  private:
    cudaStream_t stream_;
    cudaEvent_t start_{}, stop_{};
};

#endif  // __CUDACC__

}  // namespace suite
