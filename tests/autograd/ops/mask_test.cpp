// mask_test.cpp: autograd/ops/mask.cpp: chunk, tril, triu, masked_fill and repeat_interleave against
// PyTorch fixtures (forward and backward), f64 gradcheck and gradgradcheck, dtypes kept (bool and
// integer inputs, f16/bf16 exact since the ops only move or zero elements), PyTorch's edge cases
// (uneven and fewer chunks, empty dims, repeats of 0), and bad input.
#include <doctest/doctest.h>

#include <cmath>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

const Tolerance kExact{0, 0};

// y and dx of a one-output op against its fixture
void check_fixture(const std::string& name, const std::function<Tensor(const Tensor&)>& fn) {
    CAPTURE(name);
    Fixture fx = load_fixture(name);
    Tensor x = fx.at("x").clone().requires_grad_(true);
    Tensor y = fn(x);
    CHECK_CLOSE(y, fx.at("y"), kExact);                          // the ops only move or zero elements
    y.backward(fx.at("dy"));
    CHECK_CLOSE(x.grad(), fx.at("dx"), tol_for(kFloat32));
}

void check_gradcheck(const std::function<Tensor(const Tensor&)>& fn) {
    manual_seed(89);
    Tensor x = randn({2, 3, 4}, TensorOptions(kFloat64).requires_grad(true));
    auto f = [&](const tensor_list& t) { return tensor_list{fn(t[0])}; };
    CHECK(autograd::gradcheck(f, {x}));
    CHECK(autograd::gradgradcheck(f, {x}));
}

}  // namespace

TEST_CASE("chunk matches PyTorch: uneven pieces, and fewer pieces than asked") {
    for (auto [name, chunks, dim, expected] : {std::tuple{"mask_chunk_uneven", 2, -1, 2}, {"mask_chunk_fewer", 4, 1, 3}}) {
        CAPTURE(name);
        Fixture fx = load_fixture(name);
        Tensor x = fx.at("x").clone().requires_grad_(true);
        tensor_list pieces = chunk(x, chunks, dim);
        REQUIRE(pieces.size() == static_cast<size_t>(expected));
        Tensor loss = zeros({});
        for (size_t i = 0; i < pieces.size(); ++i) {
            CHECK_CLOSE(pieces[i], fx.at("y" + std::to_string(i)), kExact);
            loss = loss + sum(pieces[i] * fx.at("dy" + std::to_string(i)));
        }
        loss.backward();
        CHECK_CLOSE(x.grad(), fx.at("dx"), tol_for(kFloat32));
    }
    tensor_list empty_pieces = chunk(zeros({2, 0}), 3, 1);        // an empty dim: `chunks` empty pieces
    CHECK(empty_pieces.size() == 3);
    CHECK(empty_pieces[2].sizes() == Shape{2, 0});
}

TEST_CASE("tril and triu match PyTorch below, on and above the main diagonal") {
    for (int64_t d : {-1, 0, 2}) {
        check_fixture(fmt::format("mask_tril_{}", d), [d](const Tensor& x) { return tril(x, d); });
        check_fixture(fmt::format("mask_triu_{}", d), [d](const Tensor& x) { return triu(x, d); });
    }
    Tensor b = ones({3, 3}, TensorOptions(kBool));
    Tensor lower = tril(b);
    CHECK(lower.dtype() == kBool);
    CHECK(lower.to(kInt64).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0, 1, 1, 0, 1, 1, 1});
    CHECK(triu(tensor<int64_t>({1, 2, 3, 4}, {2, 2}), 1).to_vector<int64_t>() == std::vector<int64_t>{0, 2, 0, 0});
}

TEST_CASE("masked_fill matches PyTorch, broadcasts, and converts the value to x's dtype") {
    check_fixture("mask_masked_fill", [](const Tensor& x) {
        return masked_fill(x, tensor<bool>({true, false, false, true, false}, {1, 5}), -1e9);
    });
    Tensor filled = masked_fill(zeros({3}), tensor<bool>({true, false}, {2, 1}), 1.5);   // (2,3)
    CHECK(filled.sizes() == Shape{2, 3});
    CHECK(filled.to_vector<float>() == std::vector<float>{1.5, 1.5, 1.5, 0, 0, 0});
    Tensor ints = masked_fill(tensor<int64_t>({0, 1, 2}), tensor<bool>({true, false, true}), 2.7);
    CHECK(ints.dtype() == kInt64);
    CHECK(ints.to_vector<int64_t>() == std::vector<int64_t>{2, 1, 2});                  // truncated, as PyTorch
    Tensor h = masked_fill(zeros({2}, TensorOptions(kFloat16)), tensor<bool>({true, false}), -INFINITY);
    CHECK(h.dtype() == kFloat16);
    CHECK(std::isinf(h.to(kFloat32).to_vector<float>()[0]));
}

TEST_CASE("repeat_interleave matches PyTorch along a dim and over the flattened input") {
    check_fixture("mask_repeat_interleave_dim", [](const Tensor& x) { return repeat_interleave(x, 3, 1); });
    check_fixture("mask_repeat_interleave_flat", [](const Tensor& x) { return repeat_interleave(x, 2); });
    Tensor x = tensor<int64_t>({0, 1, 2, 3, 4, 5}, {2, 3});
    CHECK(repeat_interleave(x, 2, 1).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5});
    CHECK(repeat_interleave(x, 2, 0).sizes() == Shape{4, 3});
    CHECK(repeat_interleave(x, 0, 0).sizes() == Shape{0, 3});
}

TEST_CASE("the mask ops pass float64 gradcheck and gradgradcheck") {
    check_gradcheck([](const Tensor& x) { return tril(x, -1) * x; });
    check_gradcheck([](const Tensor& x) { return triu(x, 1) * x; });
    check_gradcheck([](const Tensor& x) { return masked_fill(x * x, x > 0.5, 2.0); });
    check_gradcheck([](const Tensor& x) { return repeat_interleave(x, 2, -1) * repeat_interleave(x, 2, -1); });
    check_gradcheck([](const Tensor& x) { return chunk(x, 2, -1)[0] * chunk(x, 2, -1)[1]; });
}

TEST_CASE("the mask ops keep f16/bf16 exactly") {
    manual_seed(97);
    for (DType dt : {kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        Tensor x = randn({3, 4}).to(dt);
        CHECK_CLOSE(tril(x).to(kFloat64), tril(x.to(kFloat64)), kExact);
        CHECK_CLOSE(repeat_interleave(x, 2, 0).to(kFloat64), repeat_interleave(x.to(kFloat64), 2, 0), kExact);
        CHECK(masked_fill(x, x > 0.0, 0.1).dtype() == dt);
    }
}

TEST_CASE("the mask ops reject bad input with typed errors naming the op") {
    CHECK_THROWS_WITH_AS(tril(randn({3})), doctest::Contains("tril"), ShapeError);
    CHECK_THROWS_AS(triu(scalar_tensor(1.0)), ShapeError);
    CHECK_THROWS_WITH_AS(masked_fill(randn({3}), ones({3}), 0.0), doctest::Contains("masked_fill"), DTypeError);
    CHECK_THROWS_AS(masked_fill(randn({3}), tensor<bool>({true, false}), 0.0), ShapeError);
    CHECK_THROWS_AS(chunk(randn({3}), 0), ValueError);
    CHECK_THROWS_AS(chunk(randn({3}), 2, 1), IndexError);
    CHECK_THROWS_AS(repeat_interleave(randn({3}), -1), ValueError);
    CHECK_THROWS_AS(repeat_interleave(randn({3}), 2, 2), IndexError);
}
