// index_derived_test.cpp: autograd/ops/index_derived.cpp: take_along_dim (with dim, broadcast, and
// flattened), F::one_hot, and repeat_interleave with a tensor of repeats (and of the repeats alone)
// against PyTorch 2.15 fixtures, f64 gradcheck and gradgradcheck, PyTorch's edge cases, and bad
// input with typed errors naming the op.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

const Tolerance kExact{0, 0};

// y and dx of a one-input op against its fixture
void check_fixture(const std::string& name, const std::function<Tensor(const Tensor&, const Fixture&)>& fn) {
    CAPTURE(name);
    Fixture fx = load_fixture(name);
    Tensor x = fx.at("x").clone().requires_grad_(true);
    Tensor y = fn(x, fx);
    CHECK_CLOSE(y, fx.at("y"), kExact);
    y.backward(fx.at("dy"));
    CHECK_CLOSE(x.grad(), fx.at("dx"), tol_for(kFloat32));
}

std::vector<int64_t> values(const Tensor& t) { return t.to_vector<int64_t>(); }
Tensor i64(const std::vector<int64_t>& v, const Shape& shape) { return tensor<int64_t>(v, shape); }

}  // namespace

TEST_CASE("take_along_dim matches PyTorch: negative indices, broadcast x, flattened form") {
    check_fixture("index_take_along_dim", [](const Tensor& x, const Fixture& fx) {
        return take_along_dim(x, fx.at("indices"), 1);
    });
    check_fixture("index_take_along_dim_broadcast", [](const Tensor& x, const Fixture& fx) {
        return x.take_along_dim(fx.at("indices"), -1);
    });
    check_fixture("index_take_along_dim_flat", [](const Tensor& x, const Fixture& fx) {
        return take_along_dim(x, fx.at("indices"));
    });
    CHECK(take_along_dim(scalar_tensor(2.0), scalar_tensor(0.0, TensorOptions(kInt64))).sizes() == Shape{1});
}

TEST_CASE("one_hot matches PyTorch with inferred and given num_classes") {
    for (std::string name : {"index_one_hot", "index_one_hot_5"}) {
        CAPTURE(name);
        Fixture fx = load_fixture(name);
        Tensor y = F::one_hot(fx.at("x"), static_cast<int64_t>(fx.param("num_classes")));
        CHECK(y.dtype() == kInt64);
        CHECK_CLOSE(y, fx.at("y"), kExact);
        CHECK_CLOSE(fx.at("x").one_hot(static_cast<int64_t>(fx.param("num_classes"))), fx.at("y"), kExact);   // the method
    }
    CHECK(F::one_hot(scalar_tensor(2.0, TensorOptions(kInt64))).sizes() == Shape{3});
    CHECK(F::one_hot(zeros({0}, TensorOptions(kInt64)), 3).sizes() == Shape{0, 3});
}

TEST_CASE("repeat_interleave with a tensor of repeats matches PyTorch, and the repeats-only form") {
    check_fixture("index_repeat_interleave_tensor", [](const Tensor& x, const Fixture& fx) {
        return repeat_interleave(x, fx.at("repeats"), 0);
    });
    Fixture fx = load_fixture("index_repeat_interleave_repeats");
    CHECK_CLOSE(repeat_interleave(fx.at("repeats")), fx.at("y"), kExact);
    Tensor r32 = tensor<int32_t>({1, 0, 3});
    CHECK(repeat_interleave(r32).dtype() == kInt32);                     // keeps the repeats' dtype
    CHECK(repeat_interleave(zeros({0}, TensorOptions(kInt64))).numel() == 0);

    Tensor x = i64({0, 1, 2, 3, 4, 5}, {2, 3});
    CHECK(values(x.repeat_interleave(i64({1, 2, 0}, {3}), 1)) == std::vector<int64_t>{0, 1, 1, 3, 4, 4});
    CHECK(values(repeat_interleave(x, scalar_tensor(2.0, TensorOptions(kInt64)), 1)) ==
          values(repeat_interleave(x, 2, 1)));                            // 0-d repeats: one count for all
    CHECK(values(repeat_interleave(x, i64({2}, {1}), -2)) == values(repeat_interleave(x, 2, 0)));
    CHECK(values(repeat_interleave(x, i64({1, 2, 0, 1, 1, 1}, {6}))) == std::vector<int64_t>{0, 1, 1, 3, 4, 5});
    CHECK(repeat_interleave(x, i64({1, 2, 0}, {3}), 1, 3).sizes() == Shape{2, 3});   // output_size given
    CHECK(values(repeat_interleave(x, tensor<int32_t>({2, 0}), 0)) == std::vector<int64_t>{0, 1, 2, 0, 1, 2});
}

TEST_CASE("take_along_dim and repeat_interleave pass float64 gradcheck and gradgradcheck") {
    manual_seed(5);
    Tensor x = randn({3, 4}, TensorOptions(kFloat64).requires_grad(true));
    Tensor idx = i64({1, -1, 1, 0, 3, 3}, {3, 2});
    auto take = [&](const tensor_list& t) { return tensor_list{take_along_dim(t[0], idx, 1).pow(2.0)}; };
    CHECK(autograd::gradcheck(take, {x}));
    CHECK(autograd::gradgradcheck(take, {x}));
    Tensor row = randn({1, 4}, TensorOptions(kFloat64).requires_grad(true));   // broadcast over idx's rows
    CHECK(autograd::gradcheck(take, {row}));
    Tensor repeats = i64({2, 0, 3}, {3});
    auto rep = [&](const tensor_list& t) { return tensor_list{repeat_interleave(t[0], repeats, 0).pow(2.0)}; };
    CHECK(autograd::gradcheck(rep, {x}));
    CHECK(autograd::gradgradcheck(rep, {x}));
}

TEST_CASE("take_along_dim, one_hot and repeat_interleave reject bad input with typed errors") {
    Tensor x = randn({2, 3});
    CHECK_THROWS_WITH_AS(take_along_dim(x, i64({2, 0}, {2, 1}).to(kInt32), 1),
                         doctest::Contains("take_along_dim: indices must be int64"), DTypeError);
    CHECK_THROWS_WITH_AS(take_along_dim(x, i64({2}, {1}), 1), doctest::Contains("same number of dims"), ShapeError);
    CHECK_THROWS_WITH_AS(take_along_dim(x, i64({3, 0}, {2, 1}), 1),
                         doctest::Contains("index 3 is out of bounds for dimension 1 with size 3"), IndexError);
    CHECK_THROWS_WITH_AS(take_along_dim(x, i64({-4, 0}, {2, 1}), 1), doctest::Contains("take_along_dim"), IndexError);
    CHECK_THROWS_WITH_AS(take_along_dim(x, i64({6}, {1})),
                         doctest::Contains("index 6 is out of bounds for dimension 0 with size 6"), IndexError);
    CHECK_THROWS_AS(take_along_dim(x, i64({0, 0, 0}, {3, 1}), 1), ShapeError);   // 2 and 3 do not broadcast
    CHECK_THROWS_AS(take_along_dim(scalar_tensor(1.0), scalar_tensor(0.0, TensorOptions(kInt64)), 0), IndexError);

    CHECK_THROWS_WITH_AS(F::one_hot(tensor<int32_t>({0, 1})), doctest::Contains("one_hot: input must be an int64"),
                         DTypeError);
    CHECK_THROWS_WITH_AS(F::one_hot(i64({0, -1}, {2}), 3), doctest::Contains("non-negative"), ValueError);
    CHECK_THROWS_WITH_AS(F::one_hot(i64({0, 2}, {2}), 2), doctest::Contains("smaller than num_classes = 2"),
                         ValueError);
    CHECK_THROWS_WITH_AS(F::one_hot(zeros({0}, TensorOptions(kInt64))), doctest::Contains("empty"), ValueError);
    CHECK_THROWS_AS(F::one_hot(i64({0}, {1}), -2), ValueError);
    CHECK_THROWS_AS(F::one_hot(zeros({0}, TensorOptions(kInt64)), 0), ValueError);   // as PyTorch

    CHECK_THROWS_WITH_AS(repeat_interleave(i64({1, -1}, {2})), doctest::Contains("can not be negative"), ValueError);
    CHECK_THROWS_AS(repeat_interleave(i64({1}, {1, 1})), ShapeError);
    CHECK_THROWS_AS(repeat_interleave(scalar_tensor(2.0, TensorOptions(kInt64))), ShapeError);
    CHECK_THROWS_AS(repeat_interleave(tensor<float>({2.0f})), DTypeError);
    CHECK_THROWS_WITH_AS(repeat_interleave(x, i64({1, 2}, {2}), 1), doctest::Contains("same size as the input"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(repeat_interleave(x, i64({1, 2, 0}, {3}), 1, 4), doctest::Contains("output_size 4"),
                         ValueError);
    CHECK_THROWS_AS(repeat_interleave(x, i64({1, 2, 0}, {1, 3}), 1), ShapeError);
    CHECK_THROWS_AS(repeat_interleave(scalar_tensor(5.0), i64({3}, {1}), 0), IndexError);
    CHECK(repeat_interleave(scalar_tensor(5.0), i64({3}, {1})).sizes() == Shape{3});
}
