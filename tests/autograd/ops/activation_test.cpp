// activation_test.cpp: tanh, sigmoid, relu, gelu (erf, tanh) and silu: PyTorch fixtures for
// forward, backward and double backward; f64 gradcheck and gradgradcheck; the fused backward
// kernel against the differentiable (create_graph) form; f16/bf16 against f64; bad input.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

using UnaryFn = std::function<Tensor(const Tensor&)>;

struct Activation {
    const char* name;
    UnaryFn fn;
};

std::vector<Activation> activations() {
    return {{"tanh", [](const Tensor& x) { return tanh(x); }},
            {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
            {"relu", [](const Tensor& x) { return relu(x); }},
            {"gelu_erf", [](const Tensor& x) { return gelu(x); }},
            {"gelu_tanh", [](const Tensor& x) { return gelu(x, true); }},
            {"silu", [](const Tensor& x) { return silu(x); }}};
}

}  // namespace

TEST_CASE("activations match PyTorch forward, backward and double backward") {
    for (const Activation& act : activations()) {
        std::string name = std::string("activation_") + act.name;
        CAPTURE(name);
        Fixture fx = load_fixture(name);
        Tensor x = fx.at("x").clone().requires_grad_(true);
        Tensor y = act.fn(x);
        CHECK_CLOSE(y, fx.at("y"), tol_for(kFloat32));
        // first order through the fused kernel (grad mode off in backward)
        Tensor dx = autograd::grad({y}, {x}, {fx.at("dy")}, true)[0];
        CHECK_CLOSE(dx, fx.at("dx"), tol_for(kFloat32));
        // first order through the differentiable form, then second order through it
        Tensor dx_graph = autograd::grad({y}, {x}, {fx.at("dy")}, true, true)[0];
        CHECK_CLOSE(dx_graph, fx.at("dx"), tol_for(kFloat32));
        if (std::string(act.name) == "relu") {
            CHECK_FALSE(dx_graph.requires_grad());         // relu'' = 0: no graph to differentiate
            continue;
        }
        Tensor ddx = autograd::grad({(dx_graph * fx.at("v")).sum()}, {x})[0];
        CHECK_CLOSE(ddx, fx.at("ddx"), tol_for(kFloat32));
    }
}

TEST_CASE("activations pass float64 gradcheck and gradgradcheck") {
    for (const Activation& act : activations()) {
        CAPTURE(act.name);
        manual_seed(43);
        Tensor x = randn({3, 5}, TensorOptions(kFloat64)) * 2.0;
        // keep relu's kink away from the finite-difference step
        x = where(abs(x) < 1e-3, x + 0.1, x).detach().requires_grad_(true);
        auto f = [&](const tensor_list& in) { return tensor_list{act.fn(in[0])}; };
        CHECK(autograd::gradcheck(f, {x}));
        if (std::string(act.name) != "relu") CHECK(autograd::gradgradcheck(f, {x}));
    }
}

TEST_CASE("gelu third derivative is available through create_graph") {
    // gelu''(x) = phi(x) (2 - x^2); gelu'''(x) = phi(x) (x^3 - 4x); at x = 1: -3 phi(1)
    Tensor x = full({1}, 1.0, TensorOptions(kFloat64).requires_grad(true));
    Tensor d1 = autograd::grad({gelu(x)}, {x}, {}, true, true)[0];
    Tensor d2 = autograd::grad({d1}, {x}, {}, true, true)[0];
    Tensor d3 = autograd::grad({d2}, {x})[0];
    double phi1 = 0.24197072451914337;
    CHECK(d2.item<double>() == doctest::Approx(phi1).epsilon(1e-12));
    CHECK(d3.item<double>() == doctest::Approx(-3 * phi1).epsilon(1e-12));
}

TEST_CASE("activations in f16/bf16 stay within dtype tolerance of f64 (forward and backward)") {
    manual_seed(47);
    for (const Activation& act : activations()) {
        for (DType dt : {kFloat16, kBFloat16}) {
            CAPTURE(act.name);
            CAPTURE(dtype_name(dt));
            Tensor x = (randn({4, 16}) * 3.0).to(dt).requires_grad_(true);
            Tensor x64 = x.detach().to(kFloat64).requires_grad_(true);
            Tensor dy = randn({4, 16}).to(dt);
            Tensor y = act.fn(x), y64 = act.fn(x64);
            CHECK(y.dtype() == dt);
            y.backward(dy);
            y64.backward(dy.to(kFloat64));
            CHECK(x.grad().dtype() == dt);
            // computed in f32 from the same rounded inputs and rounded once
            CHECK_CLOSE(y, y64, tol_for(dt, 1));
            CHECK_CLOSE(x.grad(), x64.grad(), tol_for(dt, 1));
        }
    }
}

TEST_CASE("activations handle special values like PyTorch") {
    Tensor x = tensor<float>({-INFINITY, -100.0f, 0.0f, 100.0f, INFINITY});
    CHECK(tanh(x).to_vector<float>() == std::vector<float>{-1, -1, 0, 1, 1});
    CHECK(sigmoid(x).to_vector<float>() == std::vector<float>{0, 0, 0.5f, 1, 1});
    CHECK(relu(x).to_vector<float>() == std::vector<float>{0, 0, 0, 100, INFINITY});
    CHECK(gelu(x).to_vector<float>()[3] == 100.0f);
    CHECK(std::isnan(relu(tensor<float>({NAN})).item<float>()));
}

TEST_CASE("the fused backward reads a broadcast (stride-0) upstream gradient") {
    Tensor x = tensor<double>({-1, 0.5, 2}, {3}, TensorOptions(kFloat64).requires_grad(true));
    tanh(x).sum().backward();                                    // dy is a stride-0 expand of one value
    Tensor t = tanh(x.detach());
    CHECK_CLOSE(x.grad(), 1.0 - t * t, tol_for(kFloat64));
}

TEST_CASE("activations on integer tensors follow PyTorch, bad input throws") {
    Tensor i = tensor<int64_t>({-2, 0, 3});
    CHECK(relu(i).dtype() == kInt64);                                  // relu keeps integers
    CHECK(relu(i).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 3});
    CHECK(tanh(i).dtype() == kFloat32);                                // tanh/sigmoid promote to f32
    CHECK_CLOSE(sigmoid(i), sigmoid(i.to(kFloat32)), tol_for(kFloat32));
    CHECK_THROWS_WITH_AS(gelu(i), doctest::Contains("gelu: expected a floating tensor but got (3) i64 cpu"),
                         DTypeError);
    CHECK_THROWS_WITH_AS(silu(i), doctest::Contains("silu: expected a floating tensor"), DTypeError);
    CHECK_THROWS_WITH_AS(gelu(Tensor()), doctest::Contains("gelu: argument 'input' is an undefined tensor"),
                         ValueError);
    CHECK_THROWS_AS(F::relu(zeros({2}, TensorOptions(kBool))), DTypeError);
    CHECK_THROWS_AS(tanh(zeros({2}, TensorOptions(kBool))), DTypeError);
}

// What is saved for backward matches PyTorch (tools/autograd/derivatives.yaml): tanh, sigmoid and
// relu save their output, gelu and silu their input. The version counter shows it both ways.
TEST_CASE("tanh, sigmoid and relu save their output: modifying it in place is an error, modifying the input is not") {
    for (const Activation& act : activations()) {
        std::string name = act.name;
        bool saves_output = name == "tanh" || name == "sigmoid" || name == "relu";
        CAPTURE(name);
        manual_seed(5);
        Tensor a = randn({2, 3}, TensorOptions(kFloat64)).requires_grad_(true);
        {   // b = f(x); b.mul_(2); backward
            Tensor b = act.fn(a * 1.0);
            b.mul_(2.0);
            if (saves_output) {
                std::string message;
                try {
                    b.sum().backward();
                } catch (const AutogradError& e) {
                    message = e.what();
                }
                CHECK(message.find("one of the variables needed for gradient computation has been modified by an "
                                   "inplace operation: [f64 (2,3)], which is output 0 of") != std::string::npos);
                CHECK(message.find("is at version 1; expected version 0 instead") != std::string::npos);
            } else {
                CHECK_NOTHROW(b.sum().backward());
            }
        }
        a.set_grad(Tensor());
        {   // b = f(x); x.mul_(2); backward: the gradient is f' at the value x had in forward
            Tensor x = a * 1.0;
            Tensor b = act.fn(x);
            x.mul_(2.0);
            if (saves_output) {
                b.sum().backward();
                Tensor expected = autograd::grad({act.fn(a)}, {a}, {ones_like(b)})[0];
                CHECK_CLOSE(a.grad(), expected, tol_for(kFloat64));
            } else {
                CHECK_THROWS_WITH_AS(b.sum().backward(), doctest::Contains("modified by an inplace operation"),
                                     AutogradError);
            }
        }
    }
}

TEST_CASE("a saved output holds no reference to its own node (no cycle), and double backward still sees it") {
    for (const Activation& act : activations()) {
        CAPTURE(act.name);
        Tensor a = randn({4}, TensorOptions(kFloat64)).requires_grad_(true);
        std::weak_ptr<autograd::Node> node;
        {
            Tensor b = act.fn(a);
            node = b.grad_fn();
            CHECK_FALSE(node.expired());
        }
        CHECK(node.expired());                     // the output was the node's last owner
    }
    // tanh'' through the saved output: d/dx (1 - tanh^2) = -2 tanh (1 - tanh^2)
    Tensor x = tensor<double>({0.3, -1.2}, {2}, TensorOptions(kFloat64).requires_grad(true));
    Tensor d1 = autograd::grad({tanh(x).sum()}, {x}, {}, true, true)[0];
    Tensor d2 = autograd::grad({d1.sum()}, {x})[0];
    Tensor t = tanh(x.detach());
    CHECK_CLOSE(d2, t * (t * t - 1.0) * 2.0, tol_for(kFloat64));
}
