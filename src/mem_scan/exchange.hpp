// The multiprocess mode's meeting point: files in a directory (exchange.cpp).
#pragma once

#include <string>
#include <vector>

namespace mem_scan {

// Ranks of the multiprocess mode meet through files: a rank publishes
// "<run>.r<rank>.<tag>" (written, then renamed into place) and reads the
// others' as they appear. A barrier is a tag that every rank publishes.
class Exchange {
  public:
    Exchange(std::string dir, std::string run, int rank, int nranks);
    int rank() const { return rank_; }
    int nranks() const { return nranks_; }

    void publish(const std::string &tag, const std::string &data);

    // Waits (at most kTimeout seconds) for rank r's tag and returns its data.
    std::string read(int r, const std::string &tag) const;

    void barrier(const std::string &tag);

    // After a last barrier every rank has read what it needed: remove ours.
    void clean();

  private:
    static constexpr int kTimeout = 300;
    std::string file(int r, const std::string &tag) const {
        return dir_ + "/" + run_ + ".r" + std::to_string(r) + "." + tag;
    }
    std::string dir_, run_;
    int rank_, nranks_;
    std::vector<std::string> mine_;
};

}  // namespace mem_scan
