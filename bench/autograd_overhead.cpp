// autograd_overhead.cpp: what the graph costs per node when the math is nearly free.
// Forward builds a chain of tiny ops, y = y * 1.0001 + 0.0 on a (S) tensor (two nodes per link),
// then backward runs it; both are timed and divided by the node count. The PyTorch peer is
// bench/torch_autograd_overhead.py; bench/run_bench.py runs the two side by side.
// Prints one JSON line (times in ns per node, medians over the repeats).
#include <ampgrad/ampgrad.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "bench/bench_util.hpp"

using namespace ampgrad;

int main(int argc, char** argv) {
    int64_t nodes = 100000, size = 4, repeats = 7;
    CLI::App app{"autograd overhead: forward + backward of a chain of tiny ops"};
    app.add_option("--nodes", nodes, "graph nodes in the chain (two per link: mul, add)");
    app.add_option("--size", size, "elements of the tensor flowing through the chain");
    app.add_option("--repeats", repeats, "timed repeats (after one warm-up); medians are reported");
    CLI11_PARSE(app, argc, argv);

    std::vector<double> forward_s, backward_s;
    for (int64_t r = 0; r <= repeats; ++r) {                  // r == 0 is the warm-up
        Tensor x = ones({size}).requires_grad_(true);         // (S) leaf
        double t0 = bench::now_seconds();
        Tensor y = x;
        for (int64_t i = 0; i < nodes / 2; ++i) y = y * 1.0001 + 0.0;   // (S), 2 nodes per link
        double t1 = bench::now_seconds();
        y.backward(ones_like(y));
        double t2 = bench::now_seconds();
        if (r == 0) continue;
        forward_s.push_back(t1 - t0);
        backward_s.push_back(t2 - t1);
    }                                                         // graph freed here, untimed
    double n = static_cast<double>(nodes / 2 * 2);
    std::printf("{\"impl\": \"ampgrad\", \"nodes\": %lld, \"size\": %lld, \"threads\": %d, "
                "\"forward_ns_per_node\": %.1f, \"backward_ns_per_node\": %.1f}\n",
                static_cast<long long>(n), static_cast<long long>(size), get_num_threads(),
                1e9 * bench::median(forward_s) / n, 1e9 * bench::median(backward_s) / n);
    return 0;
}
