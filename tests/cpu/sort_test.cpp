// sort_test.cpp: cpu/sort.cpp and cpu/cumsum.cpp called directly through the kernel registry: a
// hand-worked row for the stable order (ties, NaN, -0/+0 in both directions), the gather and its
// inverse scatter with a shared (1,K) index, an out-of-range index refused with an IndexError before
// any work, and running sums accumulated in fp32 for f16.
#include <doctest/doctest.h>

#include <cmath>

#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("cpu sort kernel: stable, NaN largest, both directions") {
    const double nan = std::nan("");
    Tensor x = tensor(std::vector<double>{2.0, nan, -1.0, 2.0, nan, -0.0, 0.0}, {1, 7});
    Tensor values = empty({1, 7}, TensorOptions(kFloat64)), indices = empty({1, 7}, TensorOptions(kInt64));
    kernels::sort(values, indices, x, false);
    CHECK(indices.to_vector<int64_t>() == std::vector<int64_t>{2, 5, 6, 0, 3, 1, 4});   // -0 == 0: index order
    kernels::sort(values, indices, x, true);
    CHECK(indices.to_vector<int64_t>() == std::vector<int64_t>{1, 4, 0, 3, 5, 6, 2});   // NaN first, ties kept
    auto v = values.to_vector<double>();
    CHECK((std::isnan(v[0]) && std::isnan(v[1]) && v[2] == 2.0 && v[6] == -1.0));
}

TEST_CASE("cpu take_along_last and put_along_last: a shared index, inverse of each other, bad index refused") {
    Tensor x = tensor<float>({0, 1, 2, 3, 4, 5, 6, 7}, {2, 4});
    Tensor index = tensor<int64_t>({3, 0, 2}, {1, 3});                       // one row shared by both rows
    Tensor taken = empty({2, 3});
    kernels::take_along_last(taken, x, index);
    CHECK(taken.to_vector<float>() == std::vector<float>{3, 0, 2, 7, 4, 6});
    Tensor put = zeros({2, 4});
    kernels::put_along_last(put, taken, index);
    CHECK(put.to_vector<float>() == std::vector<float>{0, 0, 2, 3, 4, 0, 6, 7});   // column 1 never written
    Tensor bad = tensor<int64_t>({4}, {1, 1});
    CHECK_THROWS_WITH_AS(kernels::take_along_last(empty({2, 1}), x, bad),
                         doctest::Contains("index 4 is out of range for a dim of size 4"), IndexError);
    CHECK_THROWS_AS(kernels::put_along_last(zeros({2, 4}), empty({2, 1}), bad), IndexError);
}

TEST_CASE("cpu sort, take_along_last, put_along_last refuse operands that do not fit") {
    Tensor x = tensor<float>({0, 1, 2, 3, 4, 5, 6, 7}, {2, 4});
    TensorOptions i64(kInt64);
    CHECK_THROWS(kernels::sort(empty({2, 4}), empty({2, 3}, i64), x, false));          // indices (R,N)
    CHECK_THROWS(kernels::sort(empty({2, 4}, TensorOptions(kFloat64)), empty({2, 4}, i64), x, false));   // dtype
    Tensor index = tensor<int64_t>({3, 0, 2}, {1, 3});
    CHECK_THROWS(kernels::take_along_last(empty({3, 3}), x, index));                  // more rows than in
    CHECK_THROWS(kernels::take_along_last(empty({2, 2}), x, index));                  // K differs from index
    CHECK_THROWS(kernels::take_along_last(empty({2, 3}), x, tensor<int64_t>({0, 1, 2, 3, 0, 1, 2, 3, 0}, {3, 3})));
    CHECK_THROWS(kernels::put_along_last(zeros({1, 4}), empty({2, 3}), index));      // fewer rows than src
}

TEST_CASE("cpu cumsum kernel: int64 exact, f16 accumulated in fp32 and rounded once per element") {
    Tensor ints = tensor<int64_t>({1, -2, 3, 4000000000LL}, {1, 4});
    Tensor sums = empty({1, 4}, TensorOptions(kInt64));
    kernels::cumsum(sums, ints);
    CHECK(sums.to_vector<int64_t>() == std::vector<int64_t>{1, -1, 2, 4000000002LL});
    // 2048 + 1 + 1 in f16: a running f16 sum would stay at 2048 (2049 is not representable); fp32 gives 2050
    Tensor x = tensor<float>({2048, 1, 1}, {1, 3}).to(kFloat16);
    Tensor out = empty({1, 3}, TensorOptions(kFloat16));
    kernels::cumsum(out, x);
    CHECK(out.to(kFloat32).to_vector<float>() == std::vector<float>{2048, 2048, 2050});
    CHECK_THROWS_AS(kernels::cumsum(empty({1, 3}, TensorOptions(kBool)), zeros({1, 3}, TensorOptions(kBool))),
                    DTypeError);
}
