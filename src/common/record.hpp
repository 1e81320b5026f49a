// The one writer of the programs' records, the lines the checks parse
// (experiments/records.py):
//
//   Tag: key=value key=value ...
//
// Each value keeps the printf format its field has always been printed with
// ("%.4f", "%.6g", a decimal integer), so that a record reads the same to the
// parsers and to the outputs committed under tests/data:
//
//   suite::Record("Run").add("node", node).add("op", op).add("run", run).addf("gibs", "%.4f", gibs).print();
//
// prints "Run: node=0 op=read run=1 gibs=12.3456" and a newline. Host-only:
// the kernels never print.
#pragma once

#include <cstdarg>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

namespace suite {

class Record {
  public:
    explicit Record(const std::string &tag) : line_(tag + ":") {}

    // Text as it is (%s): a name, a word, a free-text reason (the last field).
    Record &add(const char *key, const std::string &value) {
        key_(key) += value;
        return *this;
    }

    // An integer in decimal: what %d, %u, %ld, %zu, %lld, %llu and PRIu64 all print.
    template <typename T, typename = std::enable_if_t<std::is_integral<T>::value && !std::is_same<T, bool>::value>>
    Record &add(const char *key, T value) {
        key_(key) += std::to_string(value);
        return *this;
    }

    // A value through its own printf format, e.g. addf("gbs", "%.6g", gbs);
    // real numbers always come this way, so that each keeps its precision.
    __attribute__((format(printf, 3, 4))) Record &addf(const char *key, const char *fmt, ...) {
        std::va_list args;
        va_start(args, fmt);
        append(key_(key), fmt, args);
        va_end(args);
        return *this;
    }

    // A comma-separated list, each item in `fmt`: list("gbs", "%.2f", {1, 2.5}) is "gbs=1.00,2.50".
    Record &list(const char *key, const char *fmt, const std::vector<double> &values) {
        std::string &line = key_(key);
        for (std::size_t i = 0; i < values.size(); ++i) {
            if (i) line += ',';
            format_into(line, fmt, values[i]);
        }
        return *this;
    }

    // The record's line, without its newline.
    const std::string &str() const { return line_; }

    // The line and a newline on `out`; flushing stays the caller's choice.
    void print(std::FILE *out = stdout) const {
        std::fputs(line_.c_str(), out);
        std::fputc('\n', out);
    }

  private:
    std::string &key_(const char *key) {
        line_ += ' ';
        line_ += key;
        line_ += '=';
        return line_;
    }

    static void format_into(std::string &out, const char *fmt, ...) {
        std::va_list args;
        va_start(args, fmt);
        append(out, fmt, args);
        va_end(args);
    }

    static void append(std::string &out, const char *fmt, std::va_list args) {
        std::va_list again;
        va_copy(again, args);
        const int n = std::vsnprintf(nullptr, 0, fmt, args);
        if (n > 0) {
            const std::size_t at = out.size();
            out.resize(at + static_cast<std::size_t>(n) + 1);
            std::vsnprintf(&out[at], static_cast<std::size_t>(n) + 1, fmt, again);
            out.resize(at + static_cast<std::size_t>(n));
        }
        va_end(again);
    }

    std::string line_;
};

}  // namespace suite
