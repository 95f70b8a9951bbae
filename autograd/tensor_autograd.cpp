// tensor_autograd.cpp: the autograd half of Tensor: requires_grad, grad, grad_fn, hooks,
// retain_grad, detach, backward; and the helpers that wire tensors to graph edges.
#include "autograd/autograd.hpp"
#include "autograd/autograd_meta.hpp"
#include "autograd/engine.hpp"
#include "autograd/node.hpp"
#include "autograd/view_history.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad {
namespace autograd {

AutogradMeta::~AutogradMeta() {
    if (grad_fn) release_node_iteratively(std::move(grad_fn));
}

// TensorImpl only ever holds an AutogradMeta, so the casts below are exact.
AutogradMeta& meta_of(const Tensor& t) {
    if (!t.defined()) throw ValueError("autograd: the tensor is undefined (a default-constructed Tensor)");
    auto& m = t.impl()->autograd_meta;
    if (!m) m = std::make_unique<AutogradMeta>();
    return static_cast<AutogradMeta&>(*m);
}

// null for a tensor with no autograd state, an undefined one included
AutogradMeta* maybe_meta(const Tensor& t) {
    return t.defined() ? static_cast<AutogradMeta*>(t.impl()->autograd_meta.get()) : nullptr;
}

// maybe_meta, with a view's grad_fn brought up to date first (view_history.hpp).
AutogradMeta* fresh_meta(const Tensor& t) {
    AutogradMeta* m = maybe_meta(t);
    if (m && m->view) refresh_view_history(t, *m);
    return m;
}

std::shared_ptr<Node> grad_accumulator(const Tensor& leaf) {
    AutogradMeta& m = meta_of(leaf);
    if (auto acc = m.grad_accumulator.lock()) return acc;
    auto acc = std::make_shared<AccumulateGrad>(leaf);
    m.grad_accumulator = acc;
    return acc;
}

Edge gradient_edge(const Tensor& t) {
    if (!t.defined()) return {};
    AutogradMeta* m = fresh_meta(t);
    if (!m) return {};
    if (m->grad_fn) return {m->grad_fn, m->output_nr};
    if (m->requires_grad) return {grad_accumulator(t), 0};
    return {};
}

void set_history(const Tensor& t, const std::shared_ptr<Node>& fn, uint32_t output_nr) {
    AutogradMeta& m = meta_of(t);
    // An in-place op rebases t onto a new node: its retain_grad() hook moves along (docs/autograd.md §3).
    if (m.retains_grad && m.grad_fn && fn && (m.grad_fn != fn || m.output_nr != output_nr)) {
        if (const auto* hook = m.grad_fn->retains_grad_hook(m.output_nr)) {
            fn->set_retains_grad_hook(output_nr, *hook);
            m.grad_fn->set_retains_grad_hook(m.output_nr, nullptr);
        }
    }
    m.grad_fn = fn;
    m.output_nr = output_nr;
    m.requires_grad = false;
}

}  // namespace autograd

using autograd::AutogradMeta;
using autograd::fresh_meta;
using autograd::maybe_meta;
using autograd::meta_of;

bool Tensor::requires_grad() const {
    const AutogradMeta* m = fresh_meta(*this);
    return m && (m->requires_grad || m->grad_fn);
}

Tensor& Tensor::requires_grad_(bool required) {
    AutogradMeta* m = maybe_meta(*this);
    if (m && m->grad_fn) {
        if (!required)
            throw AutogradError(
                "requires_grad_: you can only change requires_grad flags of leaf variables. If you want to use a "
                "computed variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach().");
        return *this;
    }
    if (required && !is_floating(dtype()))
        throw DTypeError(fmt::format("requires_grad_: only Tensors of floating point dtype can require gradients, "
                                     "got {}", describe()));
    meta_of(*this).requires_grad = required;
    return *this;
}

bool Tensor::is_leaf() const {
    const AutogradMeta* m = fresh_meta(*this);
    return !m || !m->grad_fn;
}

const Tensor& Tensor::grad() const {
    static const Tensor undefined;
    const AutogradMeta* m = maybe_meta(*this);
    return m ? m->grad : undefined;
}

Tensor& Tensor::mutable_grad() const { return meta_of(*this).grad; }
void Tensor::set_grad(const Tensor& g) const { meta_of(*this).grad = g; }

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
    static const std::shared_ptr<autograd::Node> none;
    const AutogradMeta* m = fresh_meta(*this);
    return m ? m->grad_fn : none;
}

uint32_t Tensor::output_nr() const {
    const AutogradMeta* m = fresh_meta(*this);
    return m ? m->output_nr : 0;
}

void Tensor::set_name(std::string name) const { meta_of(*this).name = std::move(name); }
std::string Tensor::name() const {
    const AutogradMeta* m = maybe_meta(*this);
    return m ? m->name : std::string();
}

Tensor Tensor::detach() const {
    if (!defined()) return {};
    // Shares storage and the version counter; no autograd history.
    return Tensor(std::make_shared<TensorImpl>(impl_->storage, impl_->sizes, impl_->strides, impl_->offset,
                                               impl_->dtype, impl_->version));
}

Tensor& Tensor::detach_() {
    if (AutogradMeta* m = maybe_meta(*this)) {
        m->grad_fn.reset();
        m->requires_grad = false;
    }
    return *this;
}

namespace autograd {

RemovableHandle register_hook(const Tensor& t, std::string_view key, TensorHook hook) {
    if (!t.requires_grad())
        throw AutogradError(fmt::format("register_hook: cannot register a hook on a tensor that doesn't require "
                                        "gradient ({})", t.describe()));
    if (const auto& fn = t.grad_fn()) return fn->add_tensor_pre_hook(t.output_nr(), std::move(hook), key);
    return grad_accumulator(t)->add_tensor_pre_hook(0, std::move(hook), key);
}

RemovableHandle register_post_accumulate_grad_hook(const Tensor& t, std::string_view key,
                                                   PostAccumulateGradHook hook) {
    if (!t.requires_grad())
        throw AutogradError(fmt::format("register_post_accumulate_grad_hook: cannot register a hook on a tensor that "
                                        "doesn't require gradient ({})", t.describe()));
    if (!t.is_leaf())
        throw AutogradError(fmt::format("register_post_accumulate_grad_hook: post accumulate grad hooks cannot be "
                                        "registered on non-leaf tensors ({})", t.describe()));
    AutogradMeta& m = meta_of(t);
    if (!m.post_accumulate_hooks) m.post_accumulate_hooks = std::make_shared<HookList<PostAccumulateGradHook>>();
    return add_hook(m.post_accumulate_hooks, std::move(hook), key);
}

}  // namespace autograd

autograd::RemovableHandle Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
    return autograd::register_hook(*this, {}, std::move(hook));
}

autograd::RemovableHandle Tensor::register_post_accumulate_grad_hook(std::function<void(Tensor&)> hook) const {
    return autograd::register_post_accumulate_grad_hook(*this, {}, std::move(hook));
}

void Tensor::retain_grad() const {
    if (!requires_grad()) throw AutogradError("can't retain_grad on Tensor that has requires_grad=False");
    if (is_leaf()) return;                       // leaves always keep .grad
    AutogradMeta& m = meta_of(*this);
    if (m.retains_grad) return;
    m.retains_grad = true;
    std::weak_ptr<TensorImpl> weak = impl_;      // weak: tensor -> grad_fn -> hook must not cycle
    // Out of place, like PyTorch: under create_graph the retained .grad carries history.
    m.grad_fn->set_retains_grad_hook(m.output_nr, [weak](const Tensor& g) {
        auto impl = weak.lock();
        if (!impl || !g.defined()) return;
        Tensor self(impl);
        AutogradMeta& sm = meta_of(self);
        sm.grad = sm.grad.defined() ? sm.grad + g : ampgrad::clone(g);
    });
}

bool Tensor::retains_grad() const {
    const AutogradMeta* m = maybe_meta(*this);
    return m && m->retains_grad;
}

void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph, bool create_graph,
                      const tensor_list& inputs) const {
    autograd::backward({*this}, gradient.defined() ? tensor_list{gradient} : tensor_list{}, retain_graph, create_graph,
                       inputs);
}

}  // namespace ampgrad
