// histogram.hpp: a histogram of values in TensorBoard's default buckets, the fields of a
// HistogramProto. TensorFlow's default bucket limits (tensorflow/core/lib/histogram/histogram.cc)
// grow by 10% from 1e-12 to 1e20 on both sides of zero: ..., -1.1e-12, -1e-12, 0, 1e-12, 1.1e-12, ...,
// then +-DBL_MAX, about 1,550 limits. Bucket i counts the values v with limit[i-1] <= v < limit[i];
// runs of empty buckets are merged into one, as TensorFlow's EncodeToProto does, so the written
// histogram stays small.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace ampgrad::tensorboard {

struct Histogram {
    double min = 0.0, max = 0.0, num = 0.0, sum = 0.0, sum_squares = 0.0;
    std::vector<double> bucket_limit;   // the upper (exclusive) limit of each bucket
    std::vector<double> bucket;         // how many values fell into it
};

const std::vector<double>& default_bucket_limits();

// The histogram of the finite values (NaN and +-inf are left out, and not counted in num).
Histogram histogram_of(std::span<const float> values);

}  // namespace ampgrad::tensorboard
