// index_test.cpp: cpu/index.cpp's gather and scatter kernels called directly: strided and broadcast
// operands (the layouts index_select and index_add hand them), every index checked before anything
// is written, and scatter's fixed order (duplicates: the last write wins, sums in index order).
#include <doctest/doctest.h>

#include "ampgrad/ampgrad.h"
#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("cpu gather reads strided self and a broadcast (stride 0) index") {
    Tensor self = arange(0.0, 12.0, 1.0).view({3, 4}).t();              // (4,3), strides (1,4)
    Tensor row = tensor<int64_t>({2, 0});
    Tensor index = make_view(row, {4, 2}, {0, 1}, 0);                  // (4,2): [2,0] on every row
    Tensor out = make_empty({4, 2}, kFloat32, Device(kCPU));
    kernels::gather(out, self, index, 1);
    CHECK(out.to_vector<float>() == std::vector<float>{8, 0, 9, 1, 10, 2, 11, 3});
}

TEST_CASE("cpu scatter applies a slice's positions in index order") {
    Tensor self = zeros({2, 3});
    Tensor index = tensor<int32_t>({1, 1, 1, 0, 2, 0}, {2, 3});
    Tensor src = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    kernels::scatter(self, index, src, 1, false);                        // repeated targets: last wins
    CHECK(self.to_vector<float>() == std::vector<float>{0, 3, 0, 6, 0, 5});
    kernels::scatter(self, index, src, 1, true);
    CHECK(self.to_vector<float>() == std::vector<float>{0, 9, 0, 16, 0, 10});
    Tensor value = make_view(tensor<float>({7}), {2, 3}, {0, 0}, 0);    // the value form: src stride 0
    kernels::scatter(self, index, value, 1, false);
    CHECK(self.to_vector<float>() == std::vector<float>{0, 7, 0, 7, 0, 7});
}

TEST_CASE("cpu gather and scatter check every index before writing") {
    Tensor self = zeros({2, 3});
    Tensor index = tensor<int64_t>({0, 1, 3, 0}, {2, 2});
    CHECK_THROWS_WITH_AS(kernels::scatter(self, index, ones({2, 2}), 1, true),
                         "index 3 is out of bounds for dimension 1 with size 3", IndexError);
    CHECK(self.to_vector<float>() == std::vector<float>(6, 0.0f));      // nothing written
    Tensor out = make_empty({2, 2}, kFloat32, Device(kCPU));
    CHECK_THROWS_AS(kernels::gather(out, self, index, 1), IndexError);
    CHECK_THROWS_AS(kernels::gather(out, self, ones({2, 2}), 1), DTypeError);
}
