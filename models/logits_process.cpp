// logits_process.cpp: repetition penalty, suppressed tokens, temperature, top-k and top-p on host rows
// (models/logits_process.hpp). Each follows transformers' LogitsProcessor of the same purpose
// (src/transformers/generation/logits_process.py); tests/models/logits_process_test.cpp checks
// them against that code's outputs (tools/fixtures/generation.py).
#include "models/logits_process.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::models {

namespace {

constexpr float kRemoved = -std::numeric_limits<float>::infinity();

// scores (B,V) floating -> host rows in f32; ShapeError naming `op` otherwise.
std::vector<float> host_rows(const char* op, const Tensor& scores) {
    if (!scores.defined() || scores.dim() != 2 || !is_floating(scores.dtype()))
        throw ShapeError(fmt::format("{}: expected floating scores (B,V), but got {}", op,
                                     scores.defined() ? scores.describe() : std::string("undefined")));
    return scores.to(kFloat32).to_vector<float>();
}

Tensor to_scores(const std::vector<float>& rows, const Tensor& like) {
    return tensor(rows, like.sizes(), TensorOptions(kFloat32).device(like.device()));
}

// softmax of one row in double (removed entries -inf give 0)
std::vector<double> row_softmax(const float* row, int64_t V) {
    const float mx = *std::max_element(row, row + V);
    std::vector<double> p(static_cast<size_t>(V));
    double total = 0.0;
    for (int64_t j = 0; j < V; ++j) total += p[j] = std::exp(static_cast<double>(row[j]) - mx);
    for (double& x : p) x /= total;
    return p;
}

}  // namespace

Tensor apply_repetition_penalty(const Tensor& scores, const Tensor& ids, const Tensor& valid, double penalty) {
    std::vector<float> s = host_rows("apply_repetition_penalty", scores);
    if (!(penalty > 0.0) || !std::isfinite(penalty))
        throw ValueError(fmt::format("apply_repetition_penalty: penalty must be a finite number > 0, but is {}",
                                     penalty));
    const int64_t B = scores.size(0), V = scores.size(1);
    if (!ids.defined() || ids.dim() != 2 || ids.size(0) != B || is_floating(ids.dtype()) ||
        (valid.defined() && valid.sizes() != ids.sizes()))
        throw ShapeError(fmt::format("apply_repetition_penalty: ids must be ({},L) integers (and valid the same "
                                     "shape), but ids are {}", B, ids.defined() ? ids.describe() : "undefined"));
    const int64_t L = ids.size(1);
    std::vector<int64_t> id = ids.to(kInt64).to_vector<int64_t>();
    std::vector<int32_t> real = valid.defined() ? valid.to(kInt32).to_vector<int32_t>()
                                                : std::vector<int32_t>(id.size(), 1);
    std::vector<uint8_t> seen(static_cast<size_t>(V));
    for (int64_t b = 0; b < B; ++b) {
        std::fill(seen.begin(), seen.end(), 0);
        for (int64_t t = 0; t < L; ++t) {
            const int64_t tok = id[static_cast<size_t>(b * L + t)];
            if (!real[static_cast<size_t>(b * L + t)]) continue;
            if (tok < 0 || tok >= V)
                throw IndexError(fmt::format("apply_repetition_penalty: token id {} is out of range for {} scores",
                                             tok, V));
            seen[static_cast<size_t>(tok)] = 1;            // each token penalised once, however often seen
        }
        float* row = s.data() + b * V;
        for (int64_t j = 0; j < V; ++j)
            if (seen[static_cast<size_t>(j)])
                row[j] = row[j] < 0 ? static_cast<float>(row[j] * penalty) : static_cast<float>(row[j] / penalty);
    }
    return to_scores(s, scores);
}

Tensor apply_suppress_tokens(const Tensor& scores, const std::vector<int64_t>& suppress_tokens) {
    std::vector<float> s = host_rows("apply_suppress_tokens", scores);
    const int64_t B = scores.size(0), V = scores.size(1);
    for (int64_t id : suppress_tokens) {
        if (id < 0 || id >= V)
            throw IndexError(fmt::format("apply_suppress_tokens: token id {} is outside the vocabulary [0, {})", id, V));
        for (int64_t b = 0; b < B; ++b) s[static_cast<size_t>(b * V + id)] = kRemoved;
    }
    return to_scores(s, scores);
}

Tensor apply_temperature(const Tensor& scores, double temperature) {
    std::vector<float> s = host_rows("apply_temperature", scores);
    if (!(temperature > 0.0) || !std::isfinite(temperature))
        throw ValueError(fmt::format("apply_temperature: temperature must be a finite number > 0, but is {}",
                                     temperature));
    for (float& x : s) x = static_cast<float>(x / temperature);
    return to_scores(s, scores);
}

Tensor apply_top_k(const Tensor& scores, int64_t top_k) {
    std::vector<float> s = host_rows("apply_top_k", scores);
    if (top_k < 1) throw ValueError(fmt::format("apply_top_k: top_k must be >= 1, but is {}", top_k));
    const int64_t B = scores.size(0), V = scores.size(1), k = std::min(top_k, V);
    std::vector<float> sorted(static_cast<size_t>(V));
    for (int64_t b = 0; b < B; ++b) {
        float* row = s.data() + b * V;
        std::copy(row, row + V, sorted.begin());
        std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<float>());
        const float kth = sorted[static_cast<size_t>(k - 1)];     // the k-th largest
        for (int64_t j = 0; j < V; ++j)
            if (row[j] < kth) row[j] = kRemoved;
    }
    return to_scores(s, scores);
}

// transformers' rule: sort ascending, remove the tokens whose cumulative probability is <= 1 - top_p,
// never the most likely one.
Tensor apply_top_p(const Tensor& scores, double top_p) {
    std::vector<float> s = host_rows("apply_top_p", scores);
    if (!(top_p >= 0.0 && top_p <= 1.0))
        throw ValueError(fmt::format("apply_top_p: top_p must be in [0, 1], but is {}", top_p));
    const int64_t B = scores.size(0), V = scores.size(1);
    std::vector<int64_t> order(static_cast<size_t>(V));
    for (int64_t b = 0; b < B; ++b) {
        float* row = s.data() + b * V;
        std::vector<double> p = row_softmax(row, V);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return row[x] < row[y]; });
        double cumulative = 0.0;
        for (int64_t i = 0; i + 1 < V; ++i) {                       // the last (most likely) always stays
            cumulative += p[static_cast<size_t>(order[i])];
            if (cumulative > 1.0 - top_p) break;
            row[order[i]] = kRemoved;
        }
    }
    return to_scores(s, scores);
}

}  // namespace ampgrad::models
