// sort_ops.cpp: what issue 25's row ops cost on the CPU: sort (forward + backward through the
// indices), topk over a GPT-2 vocabulary, cumsum (forward + backward) and flip, at model shapes.
// PyTorch peer and side-by-side runner: bench/sort_ops.py. Times are wall time, the best of
// --repeats after a warm-up: on a shared, loaded machine the least disturbed run (a median still
// catches scheduler quanta there; process CPU time would count both sides' OpenMP spin-waits).
// Prints one JSON line of milliseconds.
#include <ampgrad/ampgrad.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <functional>

#include "bench/bench_util.hpp"

using namespace ampgrad;

namespace {

double best_ms(int repeats, const std::function<void()>& run) {
    run();                                                                   // warm-up
    std::vector<double> times;
    for (int r = 0; r < repeats; ++r) {
        double t0 = bench::now_seconds();
        run();
        times.push_back(1e3 * (bench::now_seconds() - t0));
    }
    return *std::min_element(times.begin(), times.end());
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"sort, topk, cumsum and flip: CPU time per call"};
    int repeats = 20;
    app.add_option("--repeats", repeats, "timed repeats after one warm-up");
    CLI11_PARSE(app, argc, argv);
    manual_seed(0);
    Tensor rows = randn({32, 4096}).requires_grad_(true);                    // (32,4096)
    Tensor logits = randn({8, 50257});                                       // (B,V)
    Tensor seq = randn({64, 2048}).requires_grad_(true);                     // (64,2048)
    double sort_ms = best_ms(repeats, [&] { sort(rows, -1).first.sum().backward(); });
    double topk_ms = best_ms(repeats, [&] { topk(logits, 50); });
    double cumsum_ms = best_ms(repeats, [&] { cumsum(seq, -1).sum().backward(); });
    double flip_ms = best_ms(repeats, [&] { flip(seq.detach(), {-1}); });
    std::printf("{\"sort_fwd_bwd_32x4096\": %.3f, \"topk50_8x50257\": %.3f, \"cumsum_fwd_bwd_64x2048\": %.3f, "
                "\"flip_64x2048\": %.3f}\n", sort_ms, topk_ms, cumsum_ms, flip_ms);
    return 0;
}
