// rows.hpp: helpers for the row-wise nn kernels (softmax, layer_norm, cross_entropy), which all
// treat a contiguous (N,C) tensor as N independent rows of C values and split rows over threads:
// row loading, row reductions that vectorise, and an exp for the arguments those kernels need.
// Not here: anything strided (see loops.hpp) or any autograd.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/loops.hpp"

namespace ampgrad::cpu {

// Rows per thread chunk so that a chunk holds about kGrainSize elements.
inline int64_t row_grain(int64_t C) { return std::max<int64_t>(1, kGrainSize / std::max<int64_t>(C, 1)); }

// One row of T read as compute_t<T>: f32/f64 rows are used in place; f16/bf16 rows are widened
// once into a per-thread buffer, so the several passes over a row convert each value only once.
template <typename T>
class WideRow {
public:
    using Acc = compute_t<T>;
    explicit WideRow(int64_t C) {
        if constexpr (!std::is_same_v<T, Acc>) buf_.resize(static_cast<size_t>(C));
    }
    const Acc* load(const T* row) {
        if constexpr (std::is_same_v<T, Acc>) {
            return row;
        } else {
            for (size_t c = 0; c < buf_.size(); ++c) buf_[c] = static_cast<Acc>(row[c]);
            return buf_.data();
        }
    }

private:
    std::vector<Acc> buf_;
};

// ---- row reductions ----
// Without -ffast-math the compiler may not reorder one running sum, so a plain loop adds one
// element at a time. Eight independent partial results vectorise; they are combined in a fixed
// order, so results depend only on n (never on threads), and the error is smaller, not larger.
inline constexpr int64_t kLanes = 8;

template <typename Acc>
Acc row_sum(const Acc* v, int64_t n) {
    Acc lanes[kLanes] = {};
    const int64_t body = n - n % kLanes;
    for (int64_t c = 0; c < body; c += kLanes)
        for (int64_t l = 0; l < kLanes; ++l) lanes[l] += v[c + l];
    Acc total = 0;
    for (int64_t l = 0; l < kLanes; ++l) total += lanes[l];
    for (int64_t c = body; c < n; ++c) total += v[c];
    return total;
}

// sum of a[c] * b[c]
template <typename Acc>
Acc row_dot(const Acc* a, const Acc* b, int64_t n) {
    Acc lanes[kLanes] = {};
    const int64_t body = n - n % kLanes;
    for (int64_t c = 0; c < body; c += kLanes)
        for (int64_t l = 0; l < kLanes; ++l) lanes[l] += a[c + l] * b[c + l];
    Acc total = 0;
    for (int64_t l = 0; l < kLanes; ++l) total += lanes[l];
    for (int64_t c = body; c < n; ++c) total += a[c] * b[c];
    return total;
}

// max over the row (-inf for an empty row); NaNs are skipped here and propagate through exp later
template <typename Acc>
Acc row_max(const Acc* v, int64_t n) {
    Acc lanes[kLanes];
    std::fill(lanes, lanes + kLanes, -std::numeric_limits<Acc>::infinity());
    const int64_t body = n - n % kLanes;
    for (int64_t c = 0; c < body; c += kLanes)
        for (int64_t l = 0; l < kLanes; ++l) lanes[l] = v[c + l] > lanes[l] ? v[c + l] : lanes[l];
    Acc mx = -std::numeric_limits<Acc>::infinity();
    for (int64_t l = 0; l < kLanes; ++l) mx = std::max(mx, lanes[l]);
    for (int64_t c = body; c < n; ++c) mx = v[c] > mx ? v[c] : mx;
    return mx;
}

// ---- exp for x <= 0 ----
// The row kernels only take exp of non-positive numbers (x - rowmax, x - logsumexp, a log
// probability). std::exp is a libm call, which keeps a loop scalar; this is Cephes' expf as
// straight-line code that AVX2 builds vectorise when GCC may if-convert its selects, which takes
// -fno-trapping-math (meson.build builds the row kernels that call it so: ampgrad_cpu_rows):
//   x = n ln2 + r, |r| <= ln2/2;  exp(r) by a degree-7 polynomial;  2^n from exponent bits.
// Max relative error 8.4e-8 (under 1 ulp) on [-87.3, 0]. Between -87.34 and -103.97 expf's result
// is subnormal (below 1.2e-38): 2^n is applied in two steps, 2^(n+64) then 2^-64, so the one
// rounding lands in the subnormal range as libm's does (PyTorch keeps these too: a softmax weight
// of 1e-42 times an inf in v is inf, not 0 * inf = NaN). Below -103.97 it returns 0; NaN stays NaN;
// x > 0 is treated as 0.
inline float exp_nonpositive(float x) {
#ifdef __AVX2__
    constexpr float kLowest = -103.972084045410156f;               // log(2^-150): below, expf rounds to 0
    float xc = x >= kLowest ? x : kLowest;                         // also maps NaN to kLowest
    xc = xc <= 0.0f ? xc : 0.0f;
    float t = xc * 1.44269504088896341f + 12582912.0f;             // 1.5*2^23: rounds x/ln2 to an int
    float n = t - 12582912.0f;
    float r = (xc - n * 0.693359375f) + n * 2.12194440e-4f;        // x - n ln2, ln2 in two parts
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    const bool subnormal = n < -126.0f;                            // 2^n is no normal float
    const int32_t exponent = std::bit_cast<int32_t>(t) - 0x4B400000 + 127 + (subnormal ? 64 : 0);
    const float two_n = std::bit_cast<float>(exponent << 23);      // 2^n, or 2^(n+64)
    const float result = (p * two_n) * (subnormal ? 0x1p-64f : 1.0f);
    return x >= kLowest ? result : (x != x ? x : 0.0f);
#else
    return std::exp(x);
#endif
}
inline double exp_nonpositive(double x) { return std::exp(x); }

}  // namespace ampgrad::cpu
