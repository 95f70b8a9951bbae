// record.hpp: how an op joins the graph. An op computes its outputs with backend kernels, then
// calls record() with its inputs, the tensors its backward needs, and the backward lambda:
//
//   Tensor y = ...forward kernel...;                                   // (*)
//   return record("tanh", y, {x}, {y}, [](BackwardContext& ctx, const tensor_list& dy) {
//       Tensor y = ctx.saved(0);                                       // version-checked
//       return tensor_list{dy[0] * (1 - y * y)};
//   });
//
// When grad mode is off or no input requires grad, record() returns the outputs untouched and
// the lambda is never even converted to a std::function.
#pragma once
#include <initializer_list>
#include <span>
#include <string_view>
#include <utility>

#include "autograd/grad_mode.hpp"
#include "autograd/node.hpp"

namespace ampgrad::autograd {

bool any_requires_grad(std::span<const Tensor> tensors);
tensor_list record_impl(std::string_view op, tensor_list outputs, std::span<const Tensor> inputs,
                        std::span<const Tensor> saved, BackwardFn fn);

template <typename F>
Tensor record(std::string_view op, Tensor output, std::initializer_list<Tensor> inputs,
              std::initializer_list<Tensor> saved, F&& backward) {
    std::span<const Tensor> in(inputs.begin(), inputs.size());
    if (!GradMode::is_enabled() || !any_requires_grad(in)) return output;
    return record_impl(op, {std::move(output)}, in, std::span<const Tensor>(saved.begin(), saved.size()),
                       BackwardFn(std::forward<F>(backward)))[0];
}

template <typename F>
tensor_list record_multi(std::string_view op, tensor_list outputs, std::span<const Tensor> inputs,
                         std::span<const Tensor> saved, F&& backward) {
    if (!GradMode::is_enabled() || !any_requires_grad(inputs)) return outputs;
    return record_impl(op, std::move(outputs), inputs, saved, BackwardFn(std::forward<F>(backward)));
}

}  // namespace ampgrad::autograd
