// index_ops.cpp: forward time of the indexing ops on the CPU (issue 25): index_select of rows (an
// embedding-style lookup), gather along the last dim, scatter_add and index_add of rows into a
// table (the backward of the first two). f32, median wall time of --repeats runs after a warm-up.
// Prints one JSON line; bench/torch_index_ops.py runs the PyTorch peer with the same shapes and
// prints both side by side:
//     OMP_NUM_THREADS=2 python3 bench/torch_index_ops.py --ampgrad build/bench/bench_index_ops
#include <CLI/CLI.hpp>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <ampgrad/ampgrad.h>
#include "bench/bench_util.hpp"

using namespace ampgrad;

namespace {

// median seconds of `repeats` calls after one warm-up
double time_op(const std::function<Tensor()>& op, int repeats) {
    op();
    std::vector<double> times;
    for (int r = 0; r < repeats; ++r) {
        double t0 = bench::now_seconds();
        Tensor y = op();
        times.push_back(bench::now_seconds() - t0);
    }
    return bench::median(times);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"forward time of gather, index_select, scatter_add and index_add (f32, CPU)"};
    int64_t rows = 8192, cols = 768, picks = 4096;
    int repeats = 20;
    app.add_option("--rows", rows, "table rows V");
    app.add_option("--cols", cols, "table columns C");
    app.add_option("--picks", picks, "indices N");
    app.add_option("--repeats", repeats, "timed runs (median)");
    CLI11_PARSE(app, argc, argv);

    manual_seed(0);
    Tensor table = randn({rows, cols});                                        // (V,C)
    Tensor row_index = randint(0, rows, {picks});                              // (N)
    Tensor updates = randn({picks, cols});                                     // (N,C)
    Tensor col_index = randint(0, cols, {rows, 64});                           // (V,64)
    Tensor row_index_2d = row_index.view({picks, 1}).expand({picks, cols}).contiguous();   // (N,C)
    std::vector<std::pair<std::string, std::function<Tensor()>>> ops = {
        {"index_select", [&] { return index_select(table, 0, row_index); }},
        {"gather", [&] { return gather(table, 1, col_index); }},
        {"scatter_add", [&] { return scatter_add(table, 0, row_index_2d, updates); }},
        {"index_add", [&] { return index_add(table, 0, row_index, updates); }},
    };
    std::printf("{\"impl\": \"ampgrad\", \"threads\": %d, \"rows\": %lld, \"cols\": %lld, \"picks\": %lld",
                get_num_threads(), static_cast<long long>(rows), static_cast<long long>(cols),
                static_cast<long long>(picks));
    for (auto& [name, op] : ops) std::printf(", \"%s_ms\": %.4f", name.c_str(), 1e3 * time_op(op, repeats));
    std::printf("}\n");
}
