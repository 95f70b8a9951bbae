// histogram.cpp: TensorBoard's default buckets and the histogram of a span of values
// (io/tensorboard/histogram.hpp).
#include "io/tensorboard/histogram.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>

namespace ampgrad::tensorboard {

const std::vector<double>& default_bucket_limits() {
    static const std::vector<double> limits = [] {
        std::vector<double> positive;
        for (double v = 1e-12; v < 1e20; v *= 1.1) positive.push_back(v);
        positive.push_back(DBL_MAX);
        std::vector<double> all;
        all.reserve(2 * positive.size() + 1);
        for (auto it = positive.rbegin(); it != positive.rend(); ++it) all.push_back(-*it);
        all.push_back(0.0);
        all.insert(all.end(), positive.begin(), positive.end());
        return all;
    }();
    return limits;
}

namespace {

// Appends bucket (limit, count) pairs, merging each run of empty buckets into its last limit.
void encode_buckets(const std::vector<double>& limits, const std::vector<double>& counts, Histogram& h) {
    for (size_t i = 0; i < counts.size();) {
        double limit = limits[i], count = counts[i];
        ++i;
        if (count <= 0.0) {
            while (i < counts.size() && counts[i] <= 0.0) limit = limits[i++];
        }
        h.bucket_limit.push_back(limit);
        h.bucket.push_back(count);
    }
}

}  // namespace

Histogram histogram_of(std::span<const float> values) {
    const std::vector<double>& limits = default_bucket_limits();
    std::vector<double> counts(limits.size(), 0.0);
    Histogram h;
    h.min = std::numeric_limits<double>::max();
    h.max = -std::numeric_limits<double>::max();
    for (const float f : values) {
        if (!std::isfinite(f)) continue;
        const double v = f;
        const size_t b = static_cast<size_t>(std::upper_bound(limits.begin(), limits.end(), v) - limits.begin());
        counts[std::min(b, limits.size() - 1)] += 1.0;
        h.min = std::min(h.min, v);
        h.max = std::max(h.max, v);
        h.num += 1.0;
        h.sum += v;
        h.sum_squares += v * v;
    }
    if (h.num == 0.0) h.min = h.max = 0.0;
    encode_buckets(limits, counts, h);
    return h;
}

}  // namespace ampgrad::tensorboard
