// nf4_linear.cpp: what QLoRA's NF4 base costs on the CPU: F::nf4_linear (dequantise to bf16, then the
// GEMM; again in the backward) against linear() with a dense bf16 weight, forward and forward +
// backward (dx only: the weights are frozen), at a Llama-like projection (R,K) x (N,K). Also the
// weight's bytes. Times are wall time, the best of --repeats after a warm-up (docs/benchmarks.md).
// No PyTorch peer (bitsandbytes' CPU path is a different program). Prints one JSON line.
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
    CLI::App app{"nf4_linear vs dense linear in bf16: CPU time per call"};
    int repeats = 10;
    int64_t rows = 256, in_features = 1024, out_features = 1024;
    app.add_option("--repeats", repeats, "timed repeats after one warm-up");
    app.add_option("--rows", rows, "R: rows of x (batch x tokens)");
    app.add_option("--in", in_features, "K");
    app.add_option("--out", out_features, "N");
    CLI11_PARSE(app, argc, argv);
    manual_seed(0);
    Tensor w = (randn({out_features, in_features}) * 0.02).to(kBFloat16);              // (N,K)
    const NF4Tensor w4 = quantize_nf4(w);
    Tensor x = randn({rows, in_features}).to(kBFloat16).requires_grad_(true);          // (R,K)
    double dense_fwd = best_ms(repeats, [&] { NoGradGuard g; linear(x, w); });
    double nf4_fwd = best_ms(repeats, [&] { NoGradGuard g; F::nf4_linear(x, w4); });
    double dense_fwd_bwd = best_ms(repeats, [&] { linear(x, w).sum().backward(); });
    double nf4_fwd_bwd = best_ms(repeats, [&] { F::nf4_linear(x, w4).sum().backward(); });
    double dequant = best_ms(repeats, [&] { dequantize_nf4(w4, kBFloat16); });
    std::printf("{\"shape\": \"(%lld,%lld)x(%lld,%lld)\", \"dense_fwd_ms\": %.3f, \"nf4_fwd_ms\": %.3f, "
                "\"dense_fwd_bwd_ms\": %.3f, \"nf4_fwd_bwd_ms\": %.3f, \"dequantize_bf16_ms\": %.3f, "
                "\"dense_weight_bytes\": %lld, \"nf4_weight_bytes\": %lld}\n",
                static_cast<long long>(rows), static_cast<long long>(in_features), static_cast<long long>(out_features),
                static_cast<long long>(in_features), dense_fwd, nf4_fwd, dense_fwd_bwd, nf4_fwd_bwd, dequant,
                static_cast<long long>(w.numel() * 2), static_cast<long long>(w4.nbytes()));
    return 0;
}
