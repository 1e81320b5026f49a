// Shared by every program of the suite: error handling, command-line options
// and (in CUDA translation units) CUDA error checking and event timing.
//
// Programs print human-readable lines that the ReFrame checks parse; errors go
// to stderr and end the program with a non-zero exit code, so a check can never
// mistake a failed run for a slow one.
#pragma once

#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#ifdef __CUDACC__
#include <cuda_runtime.h>
#endif

namespace suite {

[[noreturn]] inline void die(const char *fmt, ...) {
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

// "4096", "64K", "1M", "32G", "1T" (binary multiples, an optional trailing
// "B" or "iB" is accepted). Returns false on anything else.
inline bool parse_bytes(const std::string &text, std::uint64_t &bytes) {
    if (text.empty()) return false;
    char *end = nullptr;
    errno = 0;
    const double value = std::strtod(text.c_str(), &end);
    if (errno != 0 || end == text.c_str() || value < 0) return false;
    std::string unit(end);
    if (unit.size() > 1 && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
    if (unit.size() > 1 && unit.back() == 'i') unit.pop_back();
    double scale = 1.0;
    if (unit.empty()) scale = 1.0;
    else if (unit == "K" || unit == "k") scale = 1024.0;
    else if (unit == "M" || unit == "m") scale = 1024.0 * 1024.0;
    else if (unit == "G" || unit == "g") scale = kGiB;
    else if (unit == "T" || unit == "t") scale = kGiB * 1024.0;
    else return false;
    bytes = static_cast<std::uint64_t>(value * scale);
    return true;
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
    Options(std::string program, std::string summary)
        : program_(std::move(program)), summary_(std::move(summary)) {}

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

    long long integer(const std::string &name) const {
        const std::string text = str(name);
        char *end = nullptr;
        errno = 0;
        const long long value = std::strtoll(text.c_str(), &end, 10);
        if (errno != 0 || text.empty() || *end != '\0')
            usage_error("option '--%s' expects an integer, got '%s'", name.c_str(), text.c_str());
        return value;
    }

    std::uint64_t bytes(const std::string &name) const {
        std::uint64_t value = 0;
        if (!parse_bytes(str(name), value))
            usage_error("option '--%s' expects a size such as 4096, 64K, 1G, got '%s'", name.c_str(),
                        str(name).c_str());
        return value;
    }

    // Comma-separated values, e.g. "--op read,write".
    std::vector<std::string> list(const std::string &name) const {
        std::vector<std::string> items;
        std::string text = str(name), item;
        for (char c : text + ",") {
            if (c == ',') {
                if (!item.empty()) items.push_back(item);
                item.clear();
            } else {
                item += c;
            }
        }
        return items;
    }

    [[noreturn]] void usage_error(const char *fmt, ...) const {
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

    const Spec &spec(const std::string &name) const {
        auto it = specs_.find(name);
        if (it == specs_.end()) die("internal: option '--%s' was never declared", name.c_str());
        return it->second;
    }

    void usage(std::FILE *out) const {
        std::fprintf(out, "usage: %s [options]\n%s\n\noptions:\n", program_.c_str(), summary_.c_str());
        for (const auto &name : order_) {
            const Spec &s = specs_.at(name);
            if (s.is_flag)
                std::fprintf(out, "  --%-22s %s\n", name.c_str(), s.help.c_str());
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
    std::fprintf(stderr, "CUDA error: %s (%s) in %s at %s:%d\n", cudaGetErrorString(err), cudaGetErrorName(err),
                 call, file, line);
    std::exit(EXIT_FAILURE);
}

#define CUDA_CHECK(call) ::suite::cuda_check((call), #call, __FILE__, __LINE__)
// After a kernel launch: launch errors now, execution errors at the next sync.
#define CUDA_CHECK_LAUNCH() ::suite::cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

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
