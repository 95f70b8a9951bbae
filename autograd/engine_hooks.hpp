// engine_hooks.hpp: the per-node steps the engine runs around Node::apply (internal to
// engine.cpp). Order per node (docs/autograd.md §3): tensor pre-hooks (registration order) ->
// retains_grad -> node pre-hooks -> apply -> validate the gradients -> post-hooks. A hook's bad
// return value (other size, dtype, device, or count) is an AutogradError naming the hook.
#pragma once
#include "autograd/node.hpp"

namespace ampgrad::autograd {

// Tensor hooks of each incoming slot (each may replace the gradient), then retains_grad.
void run_tensor_pre_hooks(Node& node, tensor_list& grads);
// Node pre-hooks: each may replace the whole list of incoming gradients.
void run_pre_hooks(Node& node, tensor_list& grads);
// Node post-hooks: each sees (grad_inputs, grad_outputs) and may replace grad_inputs.
void run_post_hooks(Node& node, tensor_list& grad_inputs, const tensor_list& grad_outputs);
// PyTorch's validate_outputs (torch/csrc/autograd/engine.cpp): count; shape (summed down when it broadcasts); device; dtype (cast).
void validate_grads(Node& node, tensor_list& grads);

}  // namespace ampgrad::autograd
