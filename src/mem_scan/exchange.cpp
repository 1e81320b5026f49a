// The ranks' exchange files (exchange.hpp).
#include "exchange.hpp"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include <sys/stat.h>
#include <unistd.h>

#include "suite.hpp"

namespace mem_scan {

Exchange::Exchange(std::string dir, std::string run, int rank, int nranks)
    : dir_(std::move(dir)), run_(std::move(run)), rank_(rank), nranks_(nranks) {
    if (mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)
        suite::die("cannot create the exchange directory %s: %s", dir_.c_str(), std::strerror(errno));
}

void Exchange::publish(const std::string &tag, const std::string &data) {
    const std::string path = file(rank_, tag), tmp = path + ".tmp";
    FILE *f = std::fopen(tmp.c_str(), "wb");
    if (!f || std::fwrite(data.data(), 1, data.size(), f) != data.size() || std::fclose(f) != 0)
        suite::die("cannot write %s: %s", tmp.c_str(), std::strerror(errno));
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
        suite::die("cannot rename %s: %s", tmp.c_str(), std::strerror(errno));
    mine_.push_back(path);
}

std::string Exchange::read(int r, const std::string &tag) const {
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

void Exchange::barrier(const std::string &tag) {
    publish(tag, "");
    for (int r = 0; r < nranks_; ++r) read(r, tag);
}

void Exchange::clean() {
    for (std::size_t i = 0; i + 1 < mine_.size(); ++i) std::remove(mine_[i].c_str());
}

}  // namespace mem_scan
