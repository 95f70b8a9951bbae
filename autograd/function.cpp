// function.cpp: the non-template half of custom autograd functions (function.hpp): the context,
// the node, and wrapping forward's outputs into the graph (PyTorch's _wrap_outputs).
#include "autograd/function.hpp"

#include <cxxabi.h>

#include <cstdlib>

#include "autograd/anomaly_mode.hpp"
#include "autograd/autograd_meta.hpp"
#include "autograd/checkpoint_state.hpp"
#include "autograd/record.hpp"
#include "autograd/view_history.hpp"
#include "core/error.hpp"

namespace ampgrad::autograd {

// ---- IValue ----

double IValue::toDouble() const {
    if (const int64_t* i = std::get_if<int64_t>(&v_)) return static_cast<double>(*i);
    return get<double>("double");
}

std::string_view IValue::type_name() const {
    static constexpr std::string_view names[] = {"None", "bool", "int", "double", "string", "Tensor", "int list",
                                                 "custom"};
    return names[v_.index()];
}

void IValue::throw_wrong_type(std::string_view wanted) const {
    throw ValueError(fmt::format("saved_data: expected a {} but the value is a {}", wanted, type_name()));
}

// ---- AutogradContext ----

void AutogradContext::save_for_backward(tensor_list to_save) { to_save_ = std::move(to_save); }

tensor_list AutogradContext::get_saved_variables() const {
    tensor_list out;
    out.reserve(saved_.size());
    std::shared_ptr<Node> self = node_ ? node_->shared_from_this() : nullptr;
    for (const SavedVariable& s : saved_) out.push_back(s.unpack(self));
    return out;
}

void AutogradContext::mark_dirty(const tensor_list& inputs) {
    for (const Tensor& t : inputs)
        if (t.defined()) dirty_.insert(t.impl());
}

void AutogradContext::mark_non_differentiable(const tensor_list& outputs) {
    for (const Tensor& t : outputs)
        if (t.defined()) non_differentiable_.insert(t.impl());
}

bool AutogradContext::needs_input_grad(size_t i) const { return node_ && node_->needs_input_grad(i); }

// ---- CustomFunctionNode ----

CustomFunctionNode::CustomFunctionNode(std::string_view name, edge_list next_edges, std::vector<bool> is_tensor_arg,
                                       CustomBackwardFn backward)
    : Node(name, std::move(next_edges), next_sequence_nr()),
      is_tensor_arg_(std::move(is_tensor_arg)),
      backward_(std::move(backward)) {
    ctx_.node_ = this;
}

// Calls the user's backward, then maps its per-argument gradients to per-edge ones.
tensor_list CustomFunctionNode::apply(tensor_list&& grad_outputs) {
    if (ctx_.materialize_grads_)
        for (size_t i = 0; i < grad_outputs.size() && i < output_meta.size(); ++i)
            if (!grad_outputs[i].defined()) grad_outputs[i] = output_meta[i].zeros();
    tensor_list grads = backward_(&ctx_, std::move(grad_outputs));
    size_t n_args = is_tensor_arg_.size();
    // Returning too many results is fine as long as the extra ones are undefined (libtorch).
    if (grads.size() > n_args) {
        bool extra_defined = false;
        for (size_t i = n_args; i < grads.size(); ++i) extra_defined = extra_defined || grads[i].defined();
        if (!extra_defined) grads.resize(n_args);
    }
    if (grads.size() != n_args)
        throw AutogradError(fmt::format("function {} returned an incorrect number of gradients (expected {}, got {}): "
                                        "backward returns one gradient per forward argument (Function {} returned an "
                                        "invalid number of gradients - expected {}, but got {})",
                                        name(), n_args, grads.size(), name(), n_args, grads.size()));
    tensor_list result;
    result.reserve(num_grad_inputs());
    for (size_t i = 0; i < n_args; ++i) {
        if (is_tensor_arg_[i]) {
            result.push_back(std::move(grads[i]));
        } else if (grads[i].defined()) {
            throw AutogradError(fmt::format("function {} returned a gradient that is defined at position {}, but the "
                                            "corresponding forward input was not a Tensor ({})",
                                            name(), i + 1, grads[i].describe()));
        }
    }
    return result;
}

void CustomFunctionNode::release_variables() {
    for (SavedVariable& s : ctx_.saved_) s.release();
}

size_t CustomFunctionNode::saved_bytes() const {
    size_t n = 0;
    for (const SavedVariable& s : ctx_.saved_)
        if (!s.packed_by_hook() && !s.released()) n += s.nbytes();
    return n;
}

// ---- FunctionApply ----

FunctionApply::FunctionApply(std::string_view name, tensor_list ins, std::vector<bool> is_tensor_arg,
                             CustomBackwardFn bw)
    : inputs(std::move(ins)) {
    recording = GradMode::is_enabled() && any_requires_grad(inputs);
    edge_list edges;
    if (recording) {
        edges.reserve(inputs.size());
        for (const Tensor& t : inputs) edges.push_back(gradient_edge(t));
    }
    node = std::make_shared<CustomFunctionNode>(name, std::move(edges), std::move(is_tensor_arg), std::move(bw));
    if (recording)
        for (const Tensor& t : inputs) node->input_meta.push_back(t.defined() ? TensorMeta::of(t) : TensorMeta{});
}

namespace {

bool contains(const tensor_list& list, const TensorImpl* impl) {
    for (const Tensor& t : list)
        if (t.impl() == impl) return true;
    return false;
}

// An input forward modified in place (ctx->mark_dirty) becomes an output of our node.
void rebase_dirty_input(const Tensor& out, const std::shared_ptr<CustomFunctionNode>& node, uint32_t output_nr) {
    if (out.is_leaf() && out.requires_grad())
        throw AutogradError(fmt::format("{}: a leaf Variable that requires grad has been used in an in-place "
                                        "operation ({} was marked dirty)", node->name(), out.describe()));
    const AutogradMeta* m = maybe_meta(out);
    if (m && m->is_differentiable_view)
        throw AutogradError(fmt::format("{}: marking a view of a tensor that requires grad dirty is not supported "
                                        "({}); clone() it first", node->name(), out.describe()));
    rebase_history(out, node, output_nr);
}

}  // namespace

tensor_list FunctionApply::finish(tensor_list outputs) {
    AutogradContext& ctx = node->ctx();
    for (const TensorImpl* d : ctx.dirty_)
        if (!contains(outputs, d))
            throw AutogradError(fmt::format("{}: Some elements marked as dirty during the forward method were not "
                                            "returned as output.", node->name()));
    for (uint32_t i = 0; i < outputs.size(); ++i) {
        Tensor& out = outputs[i];
        if (recording) node->output_meta.push_back(out.defined() ? TensorMeta::of(out) : TensorMeta{});
        if (!out.defined()) continue;
        bool is_input = contains(inputs, out.impl());
        bool is_dirty = ctx.dirty_.count(out.impl()) > 0;
        bool differentiable = recording && !ctx.non_differentiable_.count(out.impl()) && is_floating(out.dtype());
        if (!differentiable) {
            if (is_input && !is_dirty) out = out.detach();           // an alias without history
        } else if (is_dirty) {
            rebase_dirty_input(out, node, i);
        } else if (is_input || out.requires_grad()) {
            out = out.detach();                                     // keep the caller's tensor as it was
            set_history(out, node, i);
        } else {
            set_history(out, node, i);
        }
    }
    if (recording) {
        // After wrapping, so a saved output is recognised as ours (saved without a cycle).
        ctx.saved_.reserve(ctx.to_save_.size());
        for (const Tensor& t : ctx.to_save_) ctx.saved_.emplace_back(t, t.defined() && t.grad_fn() == node);
        if (anomaly_mode_enabled()) node->creation_trace = capture_creation_trace();
        node->checkpointed = in_checkpoint_region();
    }
    ctx.to_save_.clear();
    return outputs;
}

namespace detail {

std::string function_name(const char* mangled) {
    int status = 0;
    char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    std::string name = status == 0 && demangled ? demangled : mangled;
    std::free(demangled);
    size_t template_start = name.find('<');
    size_t last_colon = name.rfind("::", template_start);
    return last_colon == std::string::npos ? name : name.substr(last_colon + 2);
}

}  // namespace detail

}  // namespace ampgrad::autograd
