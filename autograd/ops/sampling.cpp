// sampling.cpp: multinomial and sampling from logits (what GPT generation needs; topk is in sort.cpp).
// These run on the host: the input is copied to the CPU, rows are selected there, and the
// results are copied back to the input's device. Rows are short (a vocabulary) and sampling
// happens once per generated token, so the copy is not the cost that matters.
// Random draws come from the default Philox generator through rand(), so manual_seed(s)
// reproduces a sample on any device.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"

namespace ampgrad {

namespace {

// Checks one row of probabilities (finite, >= 0, positive sum) and returns its sum and the
// number of positive entries; ValueError names the row and the offending value.
std::pair<double, int64_t> check_prob_row(const double* p, int64_t n, int64_t row) {
    double total = 0.0;
    int64_t positive = 0;
    for (int64_t j = 0; j < n; ++j) {
        if (!std::isfinite(p[j]) || p[j] < 0.0)
            throw ValueError(fmt::format("multinomial: probabilities must be finite and >= 0, but row {} has {} at "
                                         "index {}", row, p[j], j));
        total += p[j];
        positive += p[j] > 0.0;
    }
    if (!(total > 0.0))
        throw ValueError(fmt::format("multinomial: row {} of the probabilities sums to {} (must be > 0)", row, total));
    return {total, positive};
}

// With replacement: inverse CDF, u * total looked up in the running sums.
void draw_with_replacement(const double* p, int64_t n, double total, const double* u, int64_t samples,
                           int64_t* out) {
    std::vector<double> cdf(static_cast<size_t>(n));
    std::partial_sum(p, p + n, cdf.begin());
    int64_t last = n - 1;
    while (last > 0 && p[last] == 0.0) --last;          // never pick a zero-probability tail
    for (int64_t s = 0; s < samples; ++s) {
        double target = u[s] * total;
        auto pos = std::upper_bound(cdf.begin(), cdf.end(), target) - cdf.begin();
        out[s] = std::min<int64_t>(pos, last);
    }
}

// Without replacement (Efraimidis-Spirakis): key_j = log(1 - u_j) / p_j; the `samples` largest
// keys are a draw without replacement, in the order sequential draws would give.
void draw_without_replacement(const double* p, int64_t n, const double* u, int64_t samples, int64_t* out) {
    std::vector<double> key(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j)
        key[j] = p[j] > 0.0 ? std::log1p(-u[j]) / p[j] : -std::numeric_limits<double>::infinity();
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + samples, order.end(),
                      [&](int64_t a, int64_t b) { return key[a] > key[b] || (key[a] == key[b] && a < b); });
    std::copy(order.begin(), order.begin() + samples, out);
}

}  // namespace

// probs (V) or (B,V), any non-negative weights -> (num_samples) or (B,num_samples) int64
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement) {
    ops::check_defined("multinomial", probs, "input");
    ops::check_floating("multinomial", probs);
    if (probs.dim() != 1 && probs.dim() != 2)
        throw ShapeError(fmt::format("multinomial: expected probabilities of shape (V) or (B,V) but got {}",
                                     probs.describe()));
    const int64_t n = probs.size(-1), rows = probs.dim() == 2 ? probs.size(0) : 1;
    if (n == 0) throw ShapeError(fmt::format("multinomial: no categories to sample from ({})", probs.describe()));
    if (num_samples <= 0)
        throw ValueError(fmt::format("multinomial: num_samples must be > 0 but got {}", num_samples));
    if (!replacement && num_samples > n)
        throw ValueError(fmt::format("multinomial: cannot draw {} samples without replacement from {} categories",
                                     num_samples, n));
    NoGradGuard no_grad;
    std::vector<double> p = probs.to_vector<double>();                      // (rows, n)
    const int64_t draws = replacement ? num_samples : n;
    std::vector<double> u = rand({rows, draws}, TensorOptions(kFloat64)).to_vector<double>();
    std::vector<int64_t> out(static_cast<size_t>(rows * num_samples));
    for (int64_t r = 0; r < rows; ++r) {
        const double* row = p.data() + r * n;
        auto [total, positive] = check_prob_row(row, n, r);
        if (!replacement && positive < num_samples)
            throw ValueError(fmt::format("multinomial: row {} has only {} non-zero probabilities, fewer than the {} "
                                         "samples asked for without replacement", r, positive, num_samples));
        if (replacement)
            draw_with_replacement(row, n, total, u.data() + r * draws, num_samples, out.data() + r * num_samples);
        else
            draw_without_replacement(row, n, u.data() + r * draws, num_samples, out.data() + r * num_samples);
    }
    Shape shape = probs.dim() == 2 ? Shape{rows, num_samples} : Shape{num_samples};
    return tensor(out, shape, TensorOptions(kInt64).device(probs.device()));
}

namespace nn::functional {

// logits (B,V) or (V) -> (B,1) or (1) int64: nanoGPT's generate step. temperature 0 is greedy.
Tensor sample_from_logits(const Tensor& logits, double temperature, std::optional<int64_t> top_k) {
    ops::check_defined("sample_from_logits", logits, "logits");
    ops::check_floating("sample_from_logits", logits);
    if (logits.dim() != 1 && logits.dim() != 2)
        throw ShapeError(fmt::format("sample_from_logits: expected logits of shape (V) or (B,V) but got {}",
                                     logits.describe()));
    if (!(temperature >= 0.0) || !std::isfinite(temperature))
        throw ValueError(fmt::format("sample_from_logits: temperature must be finite and >= 0 but got {}", temperature));
    if (top_k && *top_k <= 0)
        throw ValueError(fmt::format("sample_from_logits: top_k must be > 0 but got {}", *top_k));
    NoGradGuard no_grad;
    Tensor z = logits.detach().to(kFloat32);
    if (temperature == 0.0) return argmax(z, -1, true);
    z = z / temperature;
    if (top_k) {
        const int64_t k = std::min(*top_k, z.size(-1));
        Tensor kth = topk(z, k, -1).first.narrow(-1, k - 1, 1);             // (B,1): the k-th largest
        z = where(ge(z, kth), z, -std::numeric_limits<double>::infinity());
    }
    return multinomial(softmax(z, -1), 1, true);
}

}  // namespace nn::functional

}  // namespace ampgrad
