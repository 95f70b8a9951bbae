// gradcheck.hpp: compare autograd's Jacobian with central finite differences, in float64.
//
//   auto x = randn({3, 4}, TensorOptions(kFloat64).requires_grad(true));
//   CHECK(autograd::gradcheck([](const tensor_list& in) { return tensor_list{in[0].tanh()}; }, {x}));
//
// On mismatch it throws AutogradError naming the output/input pair and the worst element
// (numerical vs analytical), or returns false when raise_exception is off.
#pragma once
#include <functional>
#include <type_traits>

#include "core/tensor.hpp"

namespace ampgrad::autograd {

struct GradcheckOptions {
    double eps = 1e-6;
    double atol = 1e-5;
    double rtol = 1e-3;
    bool raise_exception = true;
};

using GradcheckFn = std::function<tensor_list(const tensor_list&)>;
bool gradcheck(const GradcheckFn& fn, const tensor_list& inputs, GradcheckOptions opts = {});
// A function of one output may return it as a Tensor.
template <typename F>
    requires std::is_convertible_v<std::invoke_result_t<F&, const tensor_list&>, Tensor>
bool gradcheck(F fn, const tensor_list& inputs, GradcheckOptions opts = {}) {
    return gradcheck(GradcheckFn([f = std::move(fn)](const tensor_list& in) mutable { return tensor_list{f(in)}; }),
                     inputs, opts);
}
// Second order: gradcheck of the function that returns the first-order gradients (create_graph).
bool gradgradcheck(const GradcheckFn& fn, const tensor_list& inputs, GradcheckOptions opts = {});

}  // namespace ampgrad::autograd
