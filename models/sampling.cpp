// sampling.cpp: see sampling.hpp. One uniform per row from the default Philox generator.
#include "models/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "core/philox.hpp"

namespace ampgrad::models {

Tensor sample_from_logits(const Tensor& logits, double temperature, std::optional<int64_t> top_k) {
    if (logits.dim() != 2)
        throw ShapeError(fmt::format("sample_from_logits: expected logits (B,V), but got {}", logits.describe()));
    if (!(temperature >= 0.0) || !std::isfinite(temperature))
        throw ValueError(fmt::format("sample_from_logits: temperature must be finite and >= 0, but is {}", temperature));
    if (top_k && *top_k <= 0) throw ValueError(fmt::format("sample_from_logits: top_k must be > 0, but is {}", *top_k));
    NoGradGuard no_grad;
    const int64_t B = logits.size(0), V = logits.size(1);
    std::vector<float> z = logits.to(kFloat32).contiguous().to_vector<float>();   // (B,V)
    std::vector<int64_t> out(B);
    const GeneratorState g = get_rng_state();
    const uint64_t offset = generator_reserve(static_cast<uint64_t>(B));
    for (int64_t b = 0; b < B; ++b) {
        const float* row = z.data() + b * V;
        std::vector<int64_t> order(V);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) { return row[i] > row[j]; });
        const int64_t k = temperature == 0.0 ? 1 : std::min<int64_t>(top_k.value_or(V), V);
        std::vector<double> p(k);
        for (int64_t i = 0; i < k; ++i) p[i] = std::exp((row[order[i]] - row[order[0]]) / std::max(temperature, 1e-30));
        const double total = std::accumulate(p.begin(), p.end(), 0.0);
        const uint64_t counter = offset + static_cast<uint64_t>(b);
        auto r = Philox4x32::generate(g.seed, 0, counter / 4);
        const double u = Philox4x32::to_unit_double(r[counter % 4], r[(counter + 1) % 4]) * total;
        int64_t pick = 0;
        for (double acc = p[0]; pick + 1 < k && acc <= u; acc += p[++pick]) {}
        out[b] = order[pick];
    }
    return tensor(out, {B, 1});
}

}  // namespace ampgrad::models
