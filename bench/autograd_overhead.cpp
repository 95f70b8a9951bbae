// autograd_overhead.cpp: what the graph costs per node when the math is nearly free.
// Forward builds a chain of tiny ops, y = y * 1.0001 + 0.0 on a (S) tensor (two nodes per link),
// then backward runs it; both are timed and divided by the node count. The PyTorch peer is
// bench/torch_autograd_overhead.py; bench/run_bench.py runs the two side by side.
// Prints one JSON line: ns per node, wall clock and process CPU time, medians over the repeats.
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

    std::vector<double> fwd_wall, fwd_cpu, bwd_wall, bwd_cpu;
    for (int64_t r = 0; r <= repeats; ++r) {                  // r == 0 is the warm-up
        Tensor x = ones({size}).requires_grad_(true);         // (S) leaf
        double w0 = bench::now_seconds(), c0 = bench::cpu_seconds();
        Tensor y = x;
        for (int64_t i = 0; i < nodes / 2; ++i) y = y * 1.0001 + 0.0;   // (S), 2 nodes per link
        double w1 = bench::now_seconds(), c1 = bench::cpu_seconds();
        y.backward(ones_like(y));
        double w2 = bench::now_seconds(), c2 = bench::cpu_seconds();
        if (r == 0) continue;
        fwd_wall.push_back(w1 - w0);
        fwd_cpu.push_back(c1 - c0);
        bwd_wall.push_back(w2 - w1);
        bwd_cpu.push_back(c2 - c1);
    }                                                         // graph freed here, untimed
    double ns = 1e9 / static_cast<double>(nodes / 2 * 2);
    std::printf("{\"impl\": \"ampgrad\", \"nodes\": %lld, \"size\": %lld, \"threads\": %d, "
                "\"forward_ns_per_node\": %.1f, \"backward_ns_per_node\": %.1f, "
                "\"forward_cpu_ns_per_node\": %.1f, \"backward_cpu_ns_per_node\": %.1f}\n",
                static_cast<long long>(nodes / 2 * 2), static_cast<long long>(size), get_num_threads(),
                ns * bench::median(fwd_wall), ns * bench::median(bwd_wall), ns * bench::median(fwd_cpu),
                ns * bench::median(bwd_cpu));
    return 0;
}
