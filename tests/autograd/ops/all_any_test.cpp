// all_any_test.cpp: all and any (autograd/ops/all_any.cpp) against PyTorch 2.15's values for the same
// tensors (NaN counts as nonzero; an empty tensor is all() true and any() false), along a dim with
// and without keepdim, on bool, integer, f16 and f32 tensors; never differentiable.
#include <doctest/doctest.h>

#include <limits>

#include "tests/support/check_close.hpp"

using namespace ampgrad;

namespace {

std::vector<bool> bools(const Tensor& t) {
    std::vector<bool> out;
    for (int64_t v : t.to(kInt64).to_vector<int64_t>()) out.push_back(v != 0);
    return out;
}

}  // namespace

TEST_CASE("all / any: PyTorch's values, NaN counts as nonzero, along a dim, keepdim") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (DType dt : {kFloat32, kFloat16}) {
        CAPTURE(dt);
        Tensor x = tensor(std::vector<double>{1, 0, 2, 3, 4, nan}, {2, 3}).to(dt);   // (2,3)
        // torch: x.all() False, x.any() True, x.all(1) [False, True], x.any(0) [True, True, True]
        CHECK(x.all().dtype() == kBool);
        CHECK(x.all().dim() == 0);
        CHECK_FALSE(x.all().item<bool>());
        CHECK(x.any().item<bool>());
        CHECK(bools(x.all(1)) == std::vector<bool>{false, true});
        CHECK(bools(all(x, -1)) == std::vector<bool>{false, true});
        CHECK(bools(x.any(0)) == std::vector<bool>{true, true, true});
        CHECK(x.all(0, true).sizes() == Shape{1, 3});
    }
    Tensor empty = zeros({0, 3});                                                    // torch: True, False
    CHECK(empty.all().item<bool>());
    CHECK_FALSE(empty.any().item<bool>());
    CHECK(bools(empty.all(0)) == std::vector<bool>{true, true, true});
    Tensor ints = zeros({2}, kInt64);                                                // torch: any False, all False
    CHECK_FALSE(ints.any().item<bool>());
    CHECK_FALSE(ints.all().item<bool>());
    CHECK((ones({4}) > 0).all().item<bool>());
    CHECK(any(tensor(std::vector<int64_t>{0, 1}, {2}).to(kBool)).item<bool>());
}

TEST_CASE("all / any are not differentiable") {
    Tensor x = randn({3}, TensorOptions().requires_grad(true));
    Tensor a = (x * 2.0).all(), b = any(x * 2.0, 0);
    CHECK_FALSE(a.requires_grad());
    CHECK_FALSE(b.requires_grad());
}
