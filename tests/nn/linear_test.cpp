// linear_test.cpp: nn::Linear: forward == x W^T + b (and PyTorch's values and grads), f64
// gradcheck, f16/bf16 forward, default init bounds, bad input errors.
#include <doctest/doctest.h>

#include <cmath>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

// Loads the fixture's weight/bias into `fc` (in place, as load_state_dict does).
void load_from(nn::Linear& fc, const Fixture& fx) {
    nn::StateDict sd;
    sd.insert("weight", fx.at("weight"));
    if (fx.tensors.count("bias")) sd.insert("bias", fx.at("bias"));
    fc.load_state_dict(sd);
}

}  // namespace

TEST_CASE("Linear matches PyTorch forward and backward") {
    for (const char* name : {"nn_linear", "nn_linear_no_bias"}) {
        CAPTURE(name);
        Fixture fx = load_fixture(name);
        bool has_bias = fx.tensors.count("bias") > 0;
        nn::Linear fc(4, 5, has_bias);
        load_from(fc, fx);
        Tensor x = fx.at("x").clone().requires_grad_(true);
        Tensor y = fc.forward(x);
        CHECK_CLOSE(y, fx.at("y"), tol_for(kFloat32));
        y.backward(fx.at("dy"));
        CHECK_CLOSE(x.grad(), fx.at("dx"), tol_for(kFloat32));
        CHECK_CLOSE(fc.weight.grad(), fx.at("dweight"), tol_for(kFloat32));
        if (has_bias) CHECK_CLOSE(fc.bias.grad(), fx.at("dbias"), tol_for(kFloat32));
    }
}

TEST_CASE("Linear forward equals x @ W^T + b") {
    manual_seed(5);
    nn::Linear fc(6, 3);
    Tensor x = randn({4, 6});
    CHECK_CLOSE(fc.forward(x), matmul(x, fc.weight.t()) + fc.bias, tol_for(kFloat32));
}

TEST_CASE("Linear passes f64 gradcheck for x, weight and bias") {
    manual_seed(6);
    nn::Linear fc(3, 2, true, TensorOptions(kFloat64));
    Tensor x = randn({2, 3}, TensorOptions(kFloat64)).requires_grad_(true);
    CHECK(autograd::gradcheck([&](const tensor_list& in) { return tensor_list{linear(in[0], in[1], in[2])}; },
                              {x, fc.weight, fc.bias}));
}

TEST_CASE("Linear in f16 and bf16 is within tolerance of f64") {
    manual_seed(7);
    nn::Linear ref(8, 4, true, TensorOptions(kFloat64));
    Tensor x = randn({3, 8}, TensorOptions(kFloat64));
    Tensor y64 = ref.forward(x);
    for (DType dt : {kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        nn::Linear low(8, 4, true, TensorOptions(dt));
        low.load_state_dict(ref.state_dict());                 // cast to the module's dtype on load
        CHECK(low.weight.dtype() == dt);
        Tensor y = low.forward(x.to(dt));
        CHECK_CLOSE(y, y64, tol_for(dt, 16));                  // inputs rounded too: a few more roundings
    }
}

TEST_CASE("Linear default init is U(-1/sqrt(in), 1/sqrt(in)) from the seeded generator") {
    manual_seed(42);
    nn::Linear a(256, 128);
    manual_seed(42);
    nn::Linear b(256, 128);
    CHECK(equal(a.weight, b.weight));                           // reproducible from the seed
    CHECK(equal(a.bias, b.bias));
    double bound = 1.0 / 16.0;
    std::vector<float> w = a.weight.to_vector<float>();
    double sum = 0, sum_sq = 0, max_abs = 0;
    for (float v : w) { sum += v; sum_sq += double(v) * v; max_abs = std::max(max_abs, double(std::abs(v))); }
    double n = static_cast<double>(w.size());
    CHECK(max_abs <= bound);
    CHECK(max_abs > 0.99 * bound);
    CHECK(std::abs(sum / n) < 0.01 * bound);
    CHECK(sum_sq / n == doctest::Approx(bound * bound / 3.0).epsilon(0.02));   // var of U(-b,b) is b^2/3
    for (float v : a.bias.to_vector<float>()) CHECK(std::abs(v) <= bound);
    CHECK(a.weight.sizes() == Shape{128, 256});
    CHECK(a.named_parameters().keys() == std::vector<std::string>{"weight", "bias"});
}

TEST_CASE("Linear rejects negative sizes and inputs of the wrong width") {
    CHECK_THROWS_WITH_AS(nn::Linear(-1, 3), doctest::Contains("Linear: feature counts must be non-negative"), ValueError);
    nn::Linear fc(4, 2);
    CHECK_THROWS_AS(fc.forward(zeros({3, 5})), ShapeError);
}
