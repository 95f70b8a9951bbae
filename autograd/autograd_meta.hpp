// autograd_meta.hpp: the per-tensor autograd state hung off TensorImpl: the gradient, grad_fn
// (for non-leaves), requires_grad (for leaves), and the hooks that belong to the tensor itself.
#pragma once
#include <memory>
#include <string>

#include "autograd/hooks.hpp"
#include "core/tensor.hpp"

namespace ampgrad::autograd {

class Node;

// What a view remembers about the tensor whose memory it shows (view_history.cpp). `base` is the
// root: a view of a view records the original tensor, never another view.
struct ViewInfo {
    Tensor base;
    uint64_t base_generation = 0;   // base's history_generation when this view's grad_fn was made
    bool made_in_no_grad = false;   // created with grad mode off: in-place with grad is an error
};

// Hung off TensorImpl::autograd_meta (a core AutogradMetaInterface); meta_of/maybe_meta cast back.
struct AutogradMeta : AutogradMetaInterface {
    // A grad_fn chain can be 100k nodes long: the destructor releases it iteratively (node.hpp).
    ~AutogradMeta() override;

    bool requires_grad = false;            // leaves only; a non-leaf requires grad via grad_fn
    bool retains_grad = false;
    Tensor grad;
    std::shared_ptr<Node> grad_fn;
    uint32_t output_nr = 0;
    std::weak_ptr<Node> grad_accumulator;  // the leaf's AccumulateGrad, while a graph uses it
    std::shared_ptr<HookList<TensorHook>> leaf_hooks;                    // tensor hooks on a leaf
    std::shared_ptr<HookList<PostAccumulateGradHook>> post_accumulate_hooks;
    std::string name;
    // Set by view ops (view.cpp) when the base requires grad (custom Functions and the autocast
    // cast cache treat such views specially).
    bool is_differentiable_view = false;
    // Set on every view op's output (see view_history.hpp). An in-place op that rewrites a
    // tensor's history bumps its history_generation; a view whose base moved on regenerates its
    // grad_fn the next time it is asked for it.
    std::unique_ptr<ViewInfo> view;
    uint64_t history_generation = 0;
};

AutogradMeta& meta_of(const Tensor& t);               // creates it if missing
AutogradMeta* maybe_meta(const Tensor& t);            // null if none
AutogradMeta* fresh_meta(const Tensor& t);            // maybe_meta, with a stale view grad_fn regenerated
// The edge a gradient for `t` should flow along: grad_fn/output_nr, a leaf's AccumulateGrad,
// or an invalid edge if t does not require grad.
struct Edge;
Edge gradient_edge(const Tensor& t);
std::shared_ptr<Node> grad_accumulator(const Tensor& leaf);
// Make `t` the `output_nr`-th output of `fn` (used by ops and by in-place history rebasing).
void set_history(const Tensor& t, const std::shared_ptr<Node>& fn, uint32_t output_nr);

}  // namespace ampgrad::autograd
