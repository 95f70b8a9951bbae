// reorder_test.cpp: autograd/ops/reorder.cpp (repeat, flip, roll, cumsum) and slice (view.cpp)
// against PyTorch fixtures (forward and backward), f64 gradcheck and gradgradcheck, dtypes, 0-d,
// empty and non-contiguous inputs, the view behaviour of slice (shared storage, in-place writes
// through it), Python's slicing bounds, and bad input.
#include <doctest/doctest.h>

#include <cmath>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

const Tolerance kExact{0, 0};

// y (and dx, for a floating x) of a one-output op against its fixture
void check_fixture(const std::string& name, const std::function<Tensor(const Tensor&)>& fn, Tolerance value_tol) {
    CAPTURE(name);
    Fixture fx = load_fixture(name);
    Tensor x = fx.at("x").clone();
    if (!is_floating(x.dtype())) {
        Tensor y = fn(x);
        CHECK(y.dtype() == fx.at("y").dtype());
        CHECK(y.to_vector<int64_t>() == fx.at("y").to_vector<int64_t>());
        return;
    }
    x.requires_grad_(true);
    Tensor y = fn(x);
    CHECK_CLOSE(y, fx.at("y"), value_tol);
    y.backward(fx.at("dy"));
    CHECK_CLOSE(x.grad(), fx.at("dx"), tol_for(kFloat32, 8));
}

void check_gradcheck(const std::function<Tensor(const Tensor&)>& fn) {
    manual_seed(26);
    Tensor x = randn({2, 3, 4}, TensorOptions(kFloat64).requires_grad(true));
    auto f = [&](const tensor_list& t) { return tensor_list{fn(t[0])}; };
    CHECK(autograd::gradcheck(f, {x}));
    CHECK(autograd::gradgradcheck(f, {x}));
}

const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> kMoves = {
    {"reorder_repeat", [](const Tensor& x) { return x.repeat({2, 1, 1, 3}); }},
    {"reorder_repeat_2d", [](const Tensor& x) { return x.select(0, 0).repeat({3, 2}); }},
    {"reorder_flip_0_2", [](const Tensor& x) { return flip(x, {0, 2}); }},
    {"reorder_flip_last", [](const Tensor& x) { return x.flip({-1}); }},
    {"reorder_roll_dims", [](const Tensor& x) { return roll(x, {1, -5}, {0, 2}); }},
    {"reorder_roll_flat", [](const Tensor& x) { return x.roll({5}); }},
    {"reorder_roll_big", [](const Tensor& x) { return roll(x, {7}, {1}); }},
    {"reorder_slice_neg", [](const Tensor& x) { return x.slice(1, -5, 100, 2); }},
    {"reorder_slice_step3", [](const Tensor& x) { return slice(x, 0, 1, std::nullopt, 3); }},
};

}  // namespace

TEST_CASE("repeat, flip, roll and slice match PyTorch, forward and backward") {
    for (const auto& [name, fn] : kMoves) check_fixture(name, fn, kExact);   // the values only move
}

TEST_CASE("cumsum matches PyTorch: float rows along either dim, int32 summed in int64") {
    check_fixture("reorder_cumsum_last", [](const Tensor& x) { return cumsum(x, -1); }, tol_for(kFloat32, 4));
    check_fixture("reorder_cumsum_dim0", [](const Tensor& x) { return x.cumsum(0); }, tol_for(kFloat32, 4));
    check_fixture("reorder_cumsum_int", [](const Tensor& x) { return cumsum(x, 1); }, kExact);
    Tensor flags = tensor<bool>({true, false, true}, {3});
    CHECK(cumsum(flags, 0).dtype() == kInt64);
    CHECK(cumsum(flags, 0).to_vector<int64_t>() == std::vector<int64_t>{1, 1, 2});
    Tensor as_f64 = cumsum(tensor<float>({1, 2, 3}), 0, kFloat64);
    CHECK(as_f64.dtype() == kFloat64);
    CHECK(as_f64.to_vector<double>() == std::vector<double>{1, 3, 6});
}

TEST_CASE("repeat, flip, roll, cumsum and slice: f64 gradcheck and gradgradcheck") {
    check_gradcheck([](const Tensor& x) { return repeat(x, {2, 1, 2}); });
    check_gradcheck([](const Tensor& x) { return flip(x, {0, -1}); });
    check_gradcheck([](const Tensor& x) { return roll(x, {2, -1}, {2, 1}); });
    check_gradcheck([](const Tensor& x) { return roll(x, {3}); });
    check_gradcheck([](const Tensor& x) { return cumsum(x, 1); });
    check_gradcheck([](const Tensor& x) { return cumsum(x * x, -1); });
    check_gradcheck([](const Tensor& x) { return slice(x, 2, 1, std::nullopt, 2); });
}

TEST_CASE("f16/bf16: the moves are exact, cumsum within the dtype's tolerance of f64") {
    manual_seed(5);
    Tensor x = randn({3, 9});
    for (DType dtype : {kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dtype));
        Tensor low = x.to(dtype), wide = low.to(kFloat64);
        CHECK_CLOSE(flip(low, {1}), flip(wide, {1}), kExact);
        CHECK_CLOSE(roll(low, {4}, {1}), roll(wide, {4}, {1}), kExact);
        CHECK_CLOSE(repeat(low, {2, 2}), repeat(wide, {2, 2}), kExact);
        Tensor sums = cumsum(low, 1);
        CHECK(sums.dtype() == dtype);
        CHECK_CLOSE(sums, cumsum(wide, 1), tol_for(dtype, 9));
    }
}

TEST_CASE("0-d, empty and non-contiguous inputs, and ints and bools keep their dtype") {
    Tensor s = full({}, 2.5);
    CHECK(flip(s, {}).item<double>() == 2.5);
    CHECK(roll(s, {1}).item<double>() == 2.5);
    CHECK(cumsum(s, 0).item<double>() == 2.5);
    CHECK(repeat(s, {3}).sizes() == Shape{3});
    CHECK(roll(zeros({0, 3}), {1}, {0}).sizes() == Shape{0, 3});
    CHECK(cumsum(zeros({2, 0}), 1).sizes() == Shape{2, 0});
    CHECK(repeat(zeros({2}), {0, 2}).sizes() == Shape{0, 4});
    Tensor base = tensor<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
    Tensor t = base.transpose(0, 1);                                               // (3,2) non-contiguous
    CHECK(flip(t, {0}).contiguous().to_vector<int64_t>() == std::vector<int64_t>{3, 6, 2, 5, 1, 4});
    CHECK(cumsum(t, 0).contiguous().to_vector<int64_t>() == std::vector<int64_t>{1, 4, 3, 9, 6, 15});
    Tensor flags = tensor<bool>({true, false, false}, {3});
    CHECK(flip(flags, {0}).dtype() == kBool);
    CHECK(roll(flags, {1}).to(kInt64).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 0});
    Tensor copy = flip(base, {});                                                  // a new tensor, never the input
    CHECK_FALSE(copy.is_same(base));
}

TEST_CASE("slice is a view with Python's bounds, and writes through it reach the base and its gradient") {
    Tensor x = arange(10).to(kFloat32);
    CHECK(x.slice(0, -3, 100, 2).to_vector<float>() == std::vector<float>{7, 9});
    CHECK(x.slice(0, 5, 2).numel() == 0);
    CHECK(x.slice(0, -100, 2).to_vector<float>() == std::vector<float>{0, 1});
    CHECK(x.slice(0, std::nullopt, std::nullopt, 4).to_vector<float>() == std::vector<float>{0, 4, 8});
    Tensor base = zeros({6});
    Tensor every_other = base.slice(0, 1, std::nullopt, 2);
    every_other.fill_(1.0);
    CHECK(base.to_vector<float>() == std::vector<float>{0, 1, 0, 1, 0, 1});
    Tensor leaf = ones({6}, TensorOptions().requires_grad(true));
    Tensor y = leaf * 2.0;
    Tensor view = y.slice(0, 0, std::nullopt, 3);                                  // elements 0 and 3
    view.mul_(full({2}, 5.0));
    y.sum().backward();
    CHECK(leaf.grad().to_vector<float>() == std::vector<float>{10, 2, 2, 10, 2, 2});
}

TEST_CASE("bad input gets typed errors naming the op") {
    Tensor x = zeros({2, 3});
    CHECK_THROWS_WITH_AS(repeat(x, {2}), doctest::Contains("repeat: the number of repeats"), ValueError);
    CHECK_THROWS_AS(repeat(x, {1, -1}), ValueError);
    CHECK_THROWS_WITH_AS(flip(x, {0, -2}), doctest::Contains("appears multiple times"), ValueError);
    CHECK_THROWS_AS(flip(x, {2}), IndexError);
    CHECK_THROWS_WITH_AS(roll(x, {1, 2}, {0}), doctest::Contains("roll: shifts and dims must align"), ValueError);
    CHECK_THROWS_AS(roll(x, {1, 2}), ValueError);
    CHECK_THROWS_AS(cumsum(x, 2), IndexError);
    CHECK_THROWS_WITH_AS(x.slice(1, 0, 2, 0), doctest::Contains("slice: step must be positive"), ValueError);
    CHECK_THROWS_AS(x.slice(1, 0, 2, -1), ValueError);
    CHECK_THROWS_AS(x.slice(2), IndexError);
    CHECK_THROWS_AS(full({}, 1.0).slice(0), IndexError);
}
