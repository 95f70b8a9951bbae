// reduce_test.cpp: sum, mean, max/amax, argmax, logsumexp, norm, var, sum_to: f64 gradcheck,
// PyTorch fixtures (forward + backward), f16/bf16 against f64, and bad input.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {
using UnaryFn = std::function<Tensor(const Tensor&)>;

void check_fixture(const std::string& name, const UnaryFn& fn) {
    CAPTURE(name);
    Fixture fx = load_fixture(name);
    Tensor x = fx.at("x").clone().requires_grad_(true);
    Tensor y = fn(x);
    y.backward(fx.at("dy"));
    CHECK_CLOSE(y, fx.at("y"), tol_for(kFloat32));
    CHECK_CLOSE(x.grad(), fx.at("dx"), tol_for(kFloat32));
}

void check_gradcheck(const UnaryFn& fn, const Shape& shape) {
    manual_seed(7);
    Tensor x = randn(shape, TensorOptions(kFloat64).requires_grad(true));
    CHECK(autograd::gradcheck([&](const tensor_list& in) { return tensor_list{fn(in[0])}; }, {x}));
}

// Forward in f16/bf16 against the same op in f64 on the same (rounded) inputs.
void check_low_precision(const UnaryFn& fn, const Shape& shape, double ops = 8) {
    manual_seed(11);
    for (DType dt : {kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        Tensor x = randn(shape).to(dt);
        Tensor ref = fn(x.to(kFloat64));
        Tensor got = fn(x);
        CHECK(got.dtype() == dt);
        CHECK_CLOSE(got, ref, tol_for(dt, ops));
    }
}
}  // namespace

TEST_CASE("reductions match PyTorch forward and backward") {
    check_fixture("reduce_sum_dims", [](const Tensor& t) { return t.sum({0, 2}); });
    check_fixture("reduce_sum_keepdim", [](const Tensor& t) { return t.sum({1}, true); });
    check_fixture("reduce_mean_dim", [](const Tensor& t) { return t.mean({-1}); });
    check_fixture("reduce_amax_dim", [](const Tensor& t) { return t.amax({1}); });
    check_fixture("reduce_max_dim", [](const Tensor& t) { return t.max(2).first; });
    check_fixture("reduce_logsumexp", [](const Tensor& t) { return t.logsumexp(1); });
    check_fixture("reduce_norm", [](const Tensor& t) { return t.norm().reshape({1}); });
    check_fixture("reduce_var", [](const Tensor& t) { return t.var(2); });
    check_fixture("reduce_amax_ties", [](const Tensor& t) { return t.amax({1}); });
}

TEST_CASE("reductions pass float64 gradcheck") {
    check_gradcheck([](const Tensor& t) { return t.sum(); }, {3, 4});
    check_gradcheck([](const Tensor& t) { return t.sum({0}, true); }, {3, 4});
    check_gradcheck([](const Tensor& t) { return t.mean({1}); }, {3, 4});
    check_gradcheck([](const Tensor& t) { return t.amax({0}); }, {3, 4});
    check_gradcheck([](const Tensor& t) { return t.max(1, true).first; }, {3, 4});
    check_gradcheck([](const Tensor& t) { return t.logsumexp(0); }, {3, 4});
    check_gradcheck([](const Tensor& t) { return t.norm(); }, {3, 4});
    check_gradcheck([](const Tensor& t) { return t.var(1, false); }, {3, 4});
    check_gradcheck([](const Tensor& t) { return sum_to(t, {1, 4}); }, {3, 4});
}

TEST_CASE("reductions in f16/bf16 stay within dtype tolerance of f64") {
    check_low_precision([](const Tensor& t) { return t.sum({1}); }, {8, 64}, 16);
    check_low_precision([](const Tensor& t) { return t.mean({0}); }, {64, 8}, 16);
    check_low_precision([](const Tensor& t) { return t.amax({1}); }, {8, 64}, 1);
    check_low_precision([](const Tensor& t) { return t.var(1); }, {8, 64}, 16);
}

TEST_CASE("argmax and max indices pick the first maximum") {
    Tensor x = tensor<float>({1, 3, 3, 2, 5, 5, 0, 1}, {2, 4});
    CHECK(x.argmax(1).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
    auto [v, i] = x.max(0, true);
    CHECK(v.sizes() == Shape{1, 4});
    CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 1, 0, 0});
}

TEST_CASE("integer sums return int64 and an empty sum is zero") {
    Tensor x = tensor<int32_t>({1, 2, 3, 4}, {2, 2});
    Tensor s = x.sum();
    CHECK(s.dtype() == kInt64);
    CHECK(s.item<int64_t>() == 10);
    CHECK(zeros({0, 3}).sum().item<float>() == 0.0f);
}

TEST_CASE("logsumexp of a row of -inf is -inf, not nan") {
    Tensor x = full({2, 3}, -INFINITY);
    for (float v : x.logsumexp(1).to_vector<float>()) CHECK(v == -INFINITY);
}

TEST_CASE("reductions reject bad dims with the op's name") {
    Tensor x = zeros({2, 3});
    CHECK_THROWS_WITH_AS(x.sum({2}), doctest::Contains("sum: dimension 2 is out of range"), IndexError);
    CHECK_THROWS_WITH_AS(x.sum({1, -1}), doctest::Contains("sum: dim 1 appears multiple times"), ValueError);
    CHECK_THROWS_WITH_AS(tensor<int64_t>({1, 2}).mean(), doctest::Contains("mean:"), DTypeError);
    CHECK_THROWS_WITH_AS(sum_to(zeros({2, 3}), {4, 3}), doctest::Contains("sum_to:"), ShapeError);
}
