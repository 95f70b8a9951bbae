// autograd.hpp: the public autograd API.
//
//   Tensor w = randn({3, 3}, TensorOptions().requires_grad(true));
//   Tensor loss = (x.matmul(w)).tanh().sum();         // records a graph of Nodes
//   loss.backward();                                  // w.grad() now holds dloss/dw
//   auto [gx] = autograd::grad({loss2}, {x});         // or get gradients without touching .grad
//
// The engine (engine.hpp) runs one GraphTask per call; hooks, custom Functions and
// checkpointing plug into it. docs/autograd.md walks through how.
#pragma once
#include <optional>

#include "autograd/engine.hpp"
#include "autograd/grad_mode.hpp"
#include "autograd/hooks.hpp"
#include "autograd/node.hpp"
#include "core/tensor.hpp"

namespace ampgrad::autograd {

// Accumulate gradients of `outputs` (seeded with grad_outputs, or ones for scalars) into the .grad
// of the leaves (or only of `inputs`, when given). retain_graph defaults to create_graph.
void backward(const tensor_list& outputs, const tensor_list& grad_outputs = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
              const tensor_list& inputs = {});

// Return d(outputs)/d(inputs) without touching .grad. An undefined entry where an input was
// unused (only with allow_unused; with materialize_grads, zeros instead).
tensor_list grad(const tensor_list& outputs, const tensor_list& inputs, const tensor_list& grad_outputs = {},
                 std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                 bool allow_unused = false, bool materialize_grads = false);

// Deduplicated hook registration (docs/autograd.md §3): registering again under the same
// key replaces the earlier hook instead of adding one, so code that re-registers every step
// (e.g. in forward) keeps one hook. The key also names the hook in error messages.
RemovableHandle register_hook(const Tensor& t, std::string_view key, TensorHook hook);
RemovableHandle register_post_accumulate_grad_hook(const Tensor& t, std::string_view key,
                                                   PostAccumulateGradHook hook);

}  // namespace ampgrad::autograd
