// gradcheck_test.cpp: autograd::gradcheck itself (autograd/gradcheck.cpp): it passes a correct
// backward and names the worst element of a wrong one; like PyTorch's it takes inputs of any layout
// and (with a warning) any floating dtype, and a function returning one Tensor.
#include <doctest/doctest.h>

#include "ampgrad/ampgrad.h"

using namespace ampgrad;

namespace {
// x * x with a backward that is off by a factor 3: 6x instead of 2x
struct WrongSquare : autograd::Function<WrongSquare> {
    static autograd::tensor_list forward(autograd::AutogradContext* ctx, const Tensor& x) {
        ctx->save_for_backward({x});
        return {x * x};
    }
    static autograd::variable_list backward(autograd::AutogradContext* ctx, autograd::variable_list grads) {
        autograd::Variable x = ctx->get_saved_variables()[0];
        return {grads[0] * x * 6.0};
    }
};
}  // namespace

TEST_CASE("gradcheck passes a correct backward and names the mismatch of a wrong one") {
    Tensor x = randn({3}, TensorOptions(kFloat64).requires_grad(true));
    CHECK(autograd::gradcheck([](const tensor_list& in) { return tensor_list{in[0].tanh()}; }, {x}));
    auto wrong = [](const tensor_list& in) { return WrongSquare::apply(in[0]); };
    CHECK_THROWS_WITH_AS(autograd::gradcheck(wrong, {x}), doctest::Contains("Jacobian mismatch"), AutogradError);
    CHECK_FALSE(autograd::gradcheck(wrong, {x}, {.raise_exception = false}));
}

TEST_CASE("gradcheck takes a non-contiguous input and a function returning one Tensor") {
    Tensor base = randn({4, 3}, kFloat64);
    Tensor xt = base.t().requires_grad_(true);                        // (3,4), strides (1,3)
    CHECK(!xt.is_contiguous());
    CHECK(autograd::gradcheck([](const tensor_list& in) { return in[0].exp().sum(1); }, {xt}));
    CHECK(equal(xt, base.t()));                                        // perturbations undone
}

TEST_CASE("gradcheck runs an f32 input with looser tolerances, as PyTorch's does (it warns)") {
    Tensor x = tensor<float>({0.5f, -1.0f, 2.0f}).requires_grad_(true);
    CHECK(autograd::gradcheck([](const tensor_list& in) { return in[0] * 2.0; }, {x},
                              {.eps = 1e-3, .atol = 1e-2, .rtol = 1e-2}));
    auto wrong = [](const tensor_list& in) { return WrongSquare::apply(in[0]); };
    CHECK_FALSE(autograd::gradcheck(wrong, {x}, {.eps = 1e-3, .atol = 1e-2, .rtol = 1e-2, .raise_exception = false}));
}
