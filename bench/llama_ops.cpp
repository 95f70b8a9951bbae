// llama_ops.cpp: the Llama's own ops, forward + backward, each fused and as the composition of
// primitives a model writer would otherwise write (docs/benchmarks.md, "Llama ops"):
//   RMSNorm  F::rms_norm             vs  x * rsqrt(mean(x^2, -1) + eps) * w         x (B,T,H)
//   RoPE     F::apply_rotary_emb     vs  x * cos + cat(-x2, x1) * sin                q (B,NH,T,HS)
//   GQA      SDPA enable_gqa, NH/NKV = 4  vs  SDPA with NKV = NH (multi-head)        causal
// The PyTorch peer (bench/torch_llama_ops.py) times torch's F.rms_norm, transformers'
// rotate_half composition (PyTorch has no fused RoPE) and F.scaled_dot_product_attention.
// Prints one JSON line of median microseconds per forward + backward.
#include <ampgrad/ampgrad.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>

#include "bench/bench_util.hpp"

using namespace ampgrad;

namespace {

struct Options {
    int64_t batch = 8, seq = 256, hidden = 512, heads = 8, kv_heads = 2, head_dim = 64, iters = 20, repeats = 5;
};

// Median over repeats of the mean time of one forward + backward (microseconds).
double time_us(const std::function<Tensor()>& forward, const std::vector<Tensor>& inputs, const Options& o) {
    auto once = [&] {
        for (Tensor t : inputs) t.set_grad(Tensor());
        forward().sum().backward();
    };
    for (int i = 0; i < 3; ++i) once();
    std::vector<double> runs;
    for (int64_t r = 0; r < o.repeats; ++r) {
        const double t0 = bench::now_seconds();
        for (int64_t i = 0; i < o.iters; ++i) once();
        runs.push_back(1e6 * (bench::now_seconds() - t0) / static_cast<double>(o.iters));
    }
    return bench::median(runs);
}

Tensor rms_norm_composed(const Tensor& x, const Tensor& w, double eps) {
    return x * ((x * x).mean({-1}, /*keepdim=*/true) + eps).rsqrt() * w;          // (B,T,H)
}

Tensor rotate_half_composed(const Tensor& x, const Tensor& cos, const Tensor& sin) {
    const int64_t half = x.size(-1) / 2;
    Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
    return x * cos + cat({x2.neg(), x1}, -1) * sin;                               // (B,NH,T,HS)
}

int run(const Options& o) {
    manual_seed(0);
    const double eps = 1e-5;
    Tensor x = randn({o.batch, o.seq, o.hidden}).requires_grad_();
    Tensor w = (ones({o.hidden}) + 0.1 * randn({o.hidden})).requires_grad_();
    Tensor q = randn({o.batch, o.heads, o.seq, o.head_dim}).requires_grad_();
    nn::RotaryEmbedding rope(o.head_dim, 500000.0);
    auto [cos, sin] = rope.forward(arange(o.seq, TensorOptions(kInt64)));          // (T,HS)
    Tensor k_gqa = randn({o.batch, o.kv_heads, o.seq, o.head_dim}).requires_grad_();
    Tensor v_gqa = randn({o.batch, o.kv_heads, o.seq, o.head_dim}).requires_grad_();
    Tensor k_mha = randn({o.batch, o.heads, o.seq, o.head_dim}).requires_grad_();
    Tensor v_mha = randn({o.batch, o.heads, o.seq, o.head_dim}).requires_grad_();

    const double rms_fused = time_us([&] { return F::rms_norm(x, {o.hidden}, w, eps); }, {x, w}, o);
    const double rms_composed = time_us([&] { return rms_norm_composed(x, w, eps); }, {x, w}, o);
    const double rope_fused = time_us([&] { return F::apply_rotary_emb(q, cos, sin); }, {q}, o);
    const double rope_composed = time_us([&] { return rotate_half_composed(q, cos, sin); }, {q}, o);
    const double gqa = time_us([&] {
        return F::scaled_dot_product_attention(q, k_gqa, v_gqa, {}, 0.0, true, std::nullopt, true);
    }, {q, k_gqa, v_gqa}, o);
    const double mha = time_us([&] { return F::scaled_dot_product_attention(q, k_mha, v_mha, true); },
                               {q, k_mha, v_mha}, o);
    std::printf("{\"impl\": \"ampgrad\", \"threads\": %d, \"rms_norm_fused_us\": %.1f, \"rms_norm_composed_us\": %.1f, "
                "\"rotary_fused_us\": %.1f, \"rotary_composed_us\": %.1f, \"sdpa_gqa_us\": %.1f, "
                "\"sdpa_mha_us\": %.1f}\n", get_num_threads(), rms_fused, rms_composed, rope_fused, rope_composed, gqa,
                mha);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"the Llama's ops, fused vs composed, forward + backward"};
    app.add_option("--batch", o.batch, "B");
    app.add_option("--seq", o.seq, "T");
    app.add_option("--hidden", o.hidden, "H (RMSNorm's width)");
    app.add_option("--heads", o.heads, "NH (query heads)");
    app.add_option("--kv-heads", o.kv_heads, "NKV (GQA's key/value heads)");
    app.add_option("--head-dim", o.head_dim, "HS");
    app.add_option("--iters", o.iters, "forward + backward per timed repeat");
    app.add_option("--repeats", o.repeats, "timed repeats; the median is reported");
    CLI11_PARSE(app, argc, argv);
    try {
        return run(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_llama_ops: %s\n", e.what());
        return 1;
    }
}
