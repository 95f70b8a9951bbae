// engine_overhead.cpp: what the backward engine costs per node and per hook. A chain of N tiny
// ops, y = y * 1.0001 on a (S) tensor, is run backward three ways: plain, with a tensor hook on
// every intermediate, and with a node post-hook on every node. The math per node is one tiny
// multiply, so the plain time is mostly engine; the differences are the per-hook costs.
// PyTorch peer: bench/engine_overhead.py (which also runs this binary side by side).
// Times are CPU time of the calling thread (robust on a shared, loaded machine; the engine runs
// on that thread). Hooked chains are shorter (--hook-nodes): PyTorch crashes when a 100k-node
// chain with a Python hook on every node is freed. Prints one JSON line (ns, medians).
#include <ampgrad/ampgrad.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <ctime>

#include "bench/bench_util.hpp"

using namespace ampgrad;

namespace {

enum class Hooks { kNone, kTensor, kNode };

double thread_seconds() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Forward builds the chain (with hooks if asked); returns the backward time in seconds.
double time_backward(int64_t nodes, int64_t size, Hooks hooks) {
    Tensor x = ones({size}).requires_grad_(true);               // (S) leaf
    Tensor y = x;
    for (int64_t i = 0; i < nodes; ++i) {
        y = y * 1.0001;                                          // (S)
        if (hooks == Hooks::kTensor) y.register_hook([](const Tensor&) { return Tensor(); });
        if (hooks == Hooks::kNode)
            y.grad_fn()->register_hook([](const tensor_list&, const tensor_list&) { return tensor_list{}; });
    }
    Tensor seed = ones_like(y);
    double t0 = thread_seconds();
    y.backward(seed);
    return thread_seconds() - t0;                            // the graph is freed after, untimed
}

double time_forward(int64_t nodes, int64_t size) {
    Tensor x = ones({size}).requires_grad_(true);
    double t0 = thread_seconds();
    Tensor y = x;
    for (int64_t i = 0; i < nodes; ++i) y = y * 1.0001;
    return thread_seconds() - t0;
}

}  // namespace

int main(int argc, char** argv) {
    int64_t nodes = 100000, hook_nodes = 10000, size = 4, repeats = 7;
    CLI::App app{"engine overhead per node and per hook"};
    app.add_option("--nodes", nodes, "nodes in the chain");
    app.add_option("--hook-nodes", hook_nodes, "nodes in the chains with a hook on every node");
    app.add_option("--size", size, "elements of the tensor flowing through the chain");
    app.add_option("--repeats", repeats, "timed repeats (after one warm-up); medians are reported");
    CLI11_PARSE(app, argc, argv);

    // Each measurement repeats on its own, after its own warm-up run (r == 0), so the allocator
    // state left by a different chain length does not leak into it.
    auto repeat = [&](auto&& run) {
        std::vector<double> times;
        for (int64_t r = 0; r <= repeats; ++r) {
            double t = run();
            if (r > 0) times.push_back(t);
        }
        return times;
    };
    std::vector<double> fwd = repeat([&] { return time_forward(nodes, size); });
    std::vector<double> plain = repeat([&] { return time_backward(nodes, size, Hooks::kNone); });
    std::vector<double> short_plain = repeat([&] { return time_backward(hook_nodes, size, Hooks::kNone); });
    std::vector<double> tensor_hooks = repeat([&] { return time_backward(hook_nodes, size, Hooks::kTensor); });
    std::vector<double> node_hooks = repeat([&] { return time_backward(hook_nodes, size, Hooks::kNode); });
    double n = static_cast<double>(nodes), hn = static_cast<double>(hook_nodes);
    double hook_base = bench::median(short_plain);
    std::printf("{\"impl\": \"ampgrad\", \"nodes\": %lld, \"hook_nodes\": %lld, \"size\": %lld, \"threads\": %d, "
                "\"forward_ns_per_node\": %.1f, \"backward_ns_per_node\": %.1f, "
                "\"tensor_hook_ns\": %.1f, \"node_hook_ns\": %.1f}\n",
                static_cast<long long>(nodes), static_cast<long long>(hook_nodes), static_cast<long long>(size),
                get_num_threads(), 1e9 * bench::median(fwd) / n, 1e9 * bench::median(plain) / n,
                1e9 * (bench::median(tensor_hooks) - hook_base) / hn, 1e9 * (bench::median(node_hooks) - hook_base) / hn);
    return 0;
}
