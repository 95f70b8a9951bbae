// loss_test.cpp: cross_entropy (ignore_index, 1-d logits, all ignored -> nan), mse_loss,
// binary_cross_entropy_with_logits and binary_cross_entropy: PyTorch fixtures, f64 gradcheck
// and gradgradcheck, the fused cross-entropy backward vs its create_graph form, f16/bf16 against
// f64, and bad input.
#include <doctest/doctest.h>

#include <cmath>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("cross_entropy matches PyTorch, with ignored rows and 1-d logits") {
    for (const char* name : {"nnf_cross_entropy", "nnf_cross_entropy_ignore2", "nnf_cross_entropy_1d"}) {
        CAPTURE(name);
        Fixture fx = load_fixture(name);
        auto ignore = static_cast<int64_t>(fx.param("ignore_index"));
        Tensor logits = fx.at("logits").clone().requires_grad_(true);
        Tensor loss = F::cross_entropy(logits, fx.at("targets"), ignore);
        CHECK(loss.dim() == 0);
        CHECK_CLOSE(loss, fx.at("out"), tol_for(kFloat32));
        Tensor fused = autograd::grad({loss}, {logits}, {fx.at("dout")}, true)[0];
        CHECK_CLOSE(fused, fx.at("dlogits"), tol_for(kFloat32));
        Tensor graph = autograd::grad({loss}, {logits}, {fx.at("dout")}, true, true)[0];
        CHECK_CLOSE(graph, fx.at("dlogits"), tol_for(kFloat32));
    }
}

TEST_CASE("cross_entropy passes float64 gradcheck and gradgradcheck") {
    manual_seed(37);
    Tensor logits = randn({4, 6}, TensorOptions(kFloat64).requires_grad(true));
    Tensor targets = tensor<int64_t>({5, -100, 0, 2});
    auto f = [&](const tensor_list& in) { return tensor_list{F::cross_entropy(in[0], targets)}; };
    CHECK(autograd::gradcheck(f, {logits}));
    CHECK(autograd::gradgradcheck(f, {logits}));
}

TEST_CASE("cross_entropy with every row ignored is nan, and its gradient is zero") {
    Tensor logits = randn({3, 4}, TensorOptions().requires_grad(true));
    Tensor loss = F::cross_entropy(logits, tensor<int64_t>({-100, -100, -100}));
    CHECK(std::isnan(loss.item<float>()));
    loss.backward();
    CHECK(equal(logits.grad(), zeros({3, 4})));
}

TEST_CASE("cross_entropy is stable for huge logits and matches log_softmax") {
    Tensor logits = tensor<float>({1000.0f, -1000.0f, 0.0f, 50.0f, 51.0f, 49.0f}, {2, 3});
    Tensor targets = tensor<int64_t>({1, 0});
    Tensor loss = F::cross_entropy(logits, targets);
    // row 0: 2000; row 1: -log_softmax(50 | 50,51,49)
    Tensor ls = F::log_softmax(logits.to(kFloat64), 1);
    double row1 = -ls.to_vector<double>()[3];
    CHECK(loss.item<double>() == doctest::Approx((2000.0 + row1) / 2).epsilon(1e-6));
}

TEST_CASE("cross_entropy in f16/bf16 stays within dtype tolerance of f64") {
    manual_seed(41);
    Tensor targets = tensor<int64_t>({3, 0, 63, -100, 17, 9, 9, 1});
    for (DType dt : {kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        Tensor logits = (randn({8, 64}) * 3.0).to(dt).requires_grad_(true);
        Tensor l64 = logits.detach().to(kFloat64).requires_grad_(true);
        Tensor loss = F::cross_entropy(logits, targets), loss64 = F::cross_entropy(l64, targets);
        CHECK(loss.dtype() == dt);
        loss.backward();
        loss64.backward();
        CHECK(logits.grad().dtype() == dt);
        CHECK_CLOSE(loss, loss64, tol_for(dt, 1));
        CHECK_CLOSE(logits.grad(), l64.grad(), tol_for(dt, 1));
    }
}

TEST_CASE("mse_loss and the binary cross-entropies match PyTorch") {
    struct LossCase {
        const char* fixture;
        Tensor (*fn)(const Tensor&, const Tensor&);
    };
    for (LossCase c : {LossCase{"nnf_mse_loss", F::mse_loss},
                       LossCase{"nnf_bce_with_logits", F::binary_cross_entropy_with_logits},
                       LossCase{"nnf_bce", F::binary_cross_entropy}}) {
        CAPTURE(c.fixture);
        Fixture fx = load_fixture(c.fixture);
        Tensor input = fx.at("input").clone().requires_grad_(true);
        Tensor target = fx.at("target").clone().requires_grad_(true);
        Tensor loss = c.fn(input, target);
        CHECK(loss.dim() == 0);
        CHECK_CLOSE(loss, fx.at("out"), tol_for(kFloat32));
        loss.backward(fx.at("dout"));
        CHECK_CLOSE(input.grad(), fx.at("dinput"), tol_for(kFloat32));
        CHECK_CLOSE(target.grad(), fx.at("dtarget"), tol_for(kFloat32));
    }
}

TEST_CASE("mse_loss and the binary cross-entropies pass float64 gradcheck and gradgradcheck") {
    manual_seed(43);
    auto opts = TensorOptions(kFloat64).requires_grad(true);
    Tensor a = randn({3, 4}, opts), b = randn({3, 4}, opts);
    Tensor p = (rand({3, 4}, TensorOptions(kFloat64)) * 0.8 + 0.1).detach().requires_grad_(true);
    Tensor y = rand({3, 4}, opts);
    auto mse = [](const tensor_list& in) { return tensor_list{F::mse_loss(in[0], in[1])}; };
    auto bcel = [](const tensor_list& in) { return tensor_list{F::binary_cross_entropy_with_logits(in[0], in[1])}; };
    auto bce = [](const tensor_list& in) { return tensor_list{F::binary_cross_entropy(in[0], in[1])}; };
    CHECK(autograd::gradcheck(mse, {a, b}));
    CHECK(autograd::gradgradcheck(mse, {a, b}));
    CHECK(autograd::gradcheck(bcel, {a, y}));
    CHECK(autograd::gradgradcheck(bcel, {a, y}));
    CHECK(autograd::gradcheck(bce, {p, y}));
    CHECK(autograd::gradgradcheck(bce, {p, y}));
    // mse_loss broadcasts the target like PyTorch (the mean is over the broadcast shape)
    Tensor row = randn({4}, opts);
    CHECK(autograd::gradcheck(mse, {a, row}));
}

TEST_CASE("mse_loss and the binary cross-entropies in f16/bf16 stay within dtype tolerance of f64") {
    manual_seed(47);
    for (DType dt : {kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        Tensor x = randn({4, 16}).to(dt), t = rand({4, 16}).to(dt);
        Tensor p = (rand({4, 16}) * 0.8 + 0.1).to(dt);
        Tensor x64 = x.to(kFloat64), t64 = t.to(kFloat64), p64 = p.to(kFloat64);
        // each loss is a few elementwise stages (each rounded) and a mean
        CHECK_CLOSE(F::mse_loss(x, t), F::mse_loss(x64, t64), tol_for(dt, 4));
        CHECK_CLOSE(F::binary_cross_entropy_with_logits(x, t), F::binary_cross_entropy_with_logits(x64, t64),
                    tol_for(dt, 8));
        CHECK_CLOSE(F::binary_cross_entropy(p, t), F::binary_cross_entropy(p64, t64), tol_for(dt, 8));
        Tensor xg = x.detach().requires_grad_(true), xg64 = x64.detach().requires_grad_(true);
        F::binary_cross_entropy_with_logits(xg, t).backward();
        F::binary_cross_entropy_with_logits(xg64, t64).backward();
        CHECK_CLOSE(xg.grad(), xg64.grad(), tol_for(dt, 4));
    }
}

TEST_CASE("binary_cross_entropy_with_logits does not overflow for large logits") {
    Tensor x = tensor<float>({100.0f, -100.0f});
    Tensor y = tensor<float>({0.0f, 1.0f});
    CHECK(F::binary_cross_entropy_with_logits(x, y).item<float>() == doctest::Approx(100.0));
    CHECK(F::binary_cross_entropy(tensor<float>({0.0f}), tensor<float>({1.0f})).item<float>() == 100.0f);
}

TEST_CASE("losses reject bad input") {
    Tensor logits = zeros({4, 5});
    CHECK_THROWS_WITH_AS(F::cross_entropy(logits, zeros({4})),         // floating but not shaped like the logits
                         doctest::Contains("cross_entropy: class-index targets must be int64 but got (4) f32 cpu"),
                         DTypeError);
    CHECK_THROWS_WITH_AS(F::cross_entropy(logits, zeros({4}, TensorOptions(kInt32))),
                         doctest::Contains("cross_entropy: targets must be int64 class indices"), DTypeError);
    CHECK_THROWS_WITH_AS(F::cross_entropy(logits, tensor<int64_t>({0, 1, 2})),
                         doctest::Contains("logits are (4,5) f32 cpu, targets are (3) i64 cpu"), ShapeError);
    CHECK_THROWS_WITH_AS(F::cross_entropy(logits, tensor<int64_t>({0, 5, 1, 1})),
                         doctest::Contains("cross_entropy: target 5 is out of range for logits (4,5) f32 cpu"),
                         IndexError);
    CHECK_THROWS_AS(F::cross_entropy(logits, tensor<int64_t>({0, -1, 1, 1})), IndexError);
    CHECK_THROWS_AS(F::cross_entropy(zeros({4, 5}, TensorOptions(kInt64)), tensor<int64_t>({0, 1, 2, 3})),
                    DTypeError);
    CHECK_THROWS_WITH_AS(F::mse_loss(zeros({2, 3}), zeros({4})),
                         doctest::Contains("mse_loss: shapes cannot be broadcast: a is (2,3) f32 cpu, b is (4) f32 "
                                           "cpu"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(F::mse_loss(zeros({2}), zeros({2}, TensorOptions(kFloat64))),
                         doctest::Contains("mse_loss: dtypes differ: input is (2) f32 cpu, target is (2) f64 cpu"),
                         DTypeError);
    CHECK_THROWS_WITH_AS(F::binary_cross_entropy_with_logits(zeros({2, 3}), zeros({3})),
                         doctest::Contains("target must have the input's shape: input is (2,3) f32 cpu, target is "
                                           "(3) f32 cpu"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(F::binary_cross_entropy(tensor<float>({0.5f, 1.5f}), zeros({2})),
                         doctest::Contains("binary_cross_entropy: all elements of input should be between 0 and 1"),
                         ValueError);
}

TEST_CASE("losses follow the autocast policy: f32 losses, binary_cross_entropy banned") {
    Tensor logits = randn({3, 4}).to(kBFloat16);
    Tensor p = full({3}, 0.5), y = full({3}, 1.0);
    amp::AutocastGuard guard(kCPU, kBFloat16);
    CHECK(F::cross_entropy(logits, tensor<int64_t>({0, 1, 3})).dtype() == kFloat32);
    CHECK(F::mse_loss(logits, logits).dtype() == kFloat32);
    CHECK(F::binary_cross_entropy_with_logits(logits, logits).dtype() == kFloat32);
    CHECK_THROWS_WITH_AS(F::binary_cross_entropy(p, y), doctest::Contains("binary_cross_entropy: torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast"),
                         AmpError);
}
