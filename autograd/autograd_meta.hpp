// autograd_meta.hpp: the per-tensor autograd state hung off TensorImpl: the gradient, grad_fn
// (for non-leaves), requires_grad (for leaves), and the hooks that belong to the tensor itself.
#pragma once
#include <memory>
#include <string>

#include "autograd/hooks.hpp"
#include "core/tensor.hpp"

namespace ampgrad::autograd {

class Node;

struct AutogradMeta {
    bool requires_grad = false;            // leaves only; a non-leaf requires grad via grad_fn
    bool retains_grad = false;
    Tensor grad;
    std::shared_ptr<Node> grad_fn;
    uint32_t output_nr = 0;
    std::weak_ptr<Node> grad_accumulator;  // the leaf's AccumulateGrad, while a graph uses it
    std::shared_ptr<HookList<TensorHook>> leaf_hooks;                    // tensor hooks on a leaf
    std::shared_ptr<HookList<PostAccumulateGradHook>> post_accumulate_hooks;
    std::string name;
    // Set by view ops (view.cpp) when the base requires grad: in-place ops on such a view
    // would have to rewrite the base's history, which we do not support (clear error instead).
    bool is_differentiable_view = false;
};

AutogradMeta& meta_of(const Tensor& t);               // creates it if missing
AutogradMeta* maybe_meta(const Tensor& t);            // null if none
// The edge a gradient for `t` should flow along: grad_fn/output_nr, a leaf's AccumulateGrad,
// or an invalid edge if t does not require grad.
struct Edge;
Edge gradient_edge(const Tensor& t);
std::shared_ptr<Node> grad_accumulator(const Tensor& leaf);
// Make `t` the `output_nr`-th output of `fn` (used by ops and by in-place history rebasing).
void set_history(const Tensor& t, const std::shared_ptr<Node>& fn, uint32_t output_nr);

}  // namespace ampgrad::autograd
