// The matrices a program's output ends with, as NVIDIA's nvbandwidth ends its
// own: for each kind of transfer, the median of each cell's samples, rows by
// columns, in GB/s with two decimals, for a person to read and paste:
//
//   host h2d, by the copy engine: median GB/s, NUMA node (row) x GPU (column)
//                GPU 0      GPU 1
//   node 0       55.12      54.98
//   node 1       52.01          -
//
// A cell not measured is '-'. No line is a record ("Tag: key=value"): the
// checks' parsers (experiments/records.py) read past them. Host-only.
#pragma once

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace suite {

class Matrices {
  public:
    // One cell's samples (GB/s) of the matrix `title`, whose rows and columns are named `rows` and `columns`
    // ("NUMA node", "GPU"), at (row, column); a title's first cell names its axes.
    void add(const std::string &title, const std::string &rows, const std::string &columns, int row, int column,
             const std::vector<double> &gbs) {
        if (gbs.empty()) return;
        auto found =
            std::find_if(matrices_.begin(), matrices_.end(), [&](const Matrix &m) { return m.title == title; });
        if (found == matrices_.end()) {
            matrices_.push_back(Matrix{title, rows, columns, {}});
            found = matrices_.end() - 1;
        }
        found->cells[{row, column}] = median(gbs);
    }

    bool empty() const { return matrices_.empty(); }

    // Every matrix, in the order their first cells came, each after a blank line.
    void print(std::FILE *out = stdout) const {
        for (const Matrix &m : matrices_) print_one(m, out);
        std::fflush(out);
    }

    static double median(std::vector<double> values) {
        std::sort(values.begin(), values.end());
        const std::size_t n = values.size();
        return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
    }

  private:
    struct Matrix {
        std::string title, rows, columns;
        std::map<std::pair<int, int>, double> cells;
    };

    static std::string short_name(const std::string &axis) {
        return axis == "NUMA node" ? "node" : axis;  // "node 0" under "NUMA node (row)"
    }

    static void print_one(const Matrix &m, std::FILE *out) {
        std::vector<int> rows, columns;
        for (const auto &cell : m.cells) {
            rows.push_back(cell.first.first);
            columns.push_back(cell.first.second);
        }
        for (auto *axis : {&rows, &columns}) {
            std::sort(axis->begin(), axis->end());
            axis->erase(std::unique(axis->begin(), axis->end()), axis->end());
        }
        std::fprintf(out, "\n%s: median GB/s, %s (row) x %s (column)\n", m.title.c_str(), m.rows.c_str(),
                     m.columns.c_str());
        std::fprintf(out, "%-10s", "");
        for (int c : columns) std::fprintf(out, " %10s", (short_name(m.columns) + " " + std::to_string(c)).c_str());
        std::fputc('\n', out);
        for (int r : rows) {
            std::fprintf(out, "%-10s", (short_name(m.rows) + " " + std::to_string(r)).c_str());
            for (int c : columns) {
                const auto cell = m.cells.find({r, c});
                if (cell == m.cells.end()) std::fprintf(out, " %10s", "-");
                else std::fprintf(out, " %10.2f", cell->second);
            }
            std::fputc('\n', out);
        }
    }

    std::vector<Matrix> matrices_;
};

}  // namespace suite
