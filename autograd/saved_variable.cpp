// saved_variable.cpp: saving, version checking, releasing and pack/unpack hooks for tensors
// kept for backward (docs/autograd.md §1; PyTorch's torch/csrc/autograd/saved_variable.cpp).
#include "autograd/saved_variable.hpp"

#include <vector>

#include "autograd/autograd_meta.hpp"
#include "autograd/node.hpp"
#include "core/error.hpp"

namespace ampgrad::autograd {

namespace {
thread_local std::vector<SavedTensorHooks> t_hook_stack;
}  // namespace

SavedTensorsHooksGuard::SavedTensorsHooksGuard(SavedTensorHooks hooks) { t_hook_stack.push_back(std::move(hooks)); }
SavedTensorsHooksGuard::~SavedTensorsHooksGuard() { t_hook_stack.pop_back(); }
const SavedTensorHooks* current_saved_tensor_hooks() { return t_hook_stack.empty() ? nullptr : &t_hook_stack.back(); }

SavedVariable::SavedVariable(const Tensor& t, bool is_output) {
    if (!t.defined()) return;
    was_defined_ = true;
    is_output_ = is_output;
    saved_version_ = t._version();
    requires_grad_ = t.requires_grad();
    output_nr_ = t.output_nr();
    shape_ = t.sizes();
    dtype_ = t.dtype();
    nbytes_ = static_cast<size_t>(t.numel()) * t.element_size();
    if (const SavedTensorHooks* hooks = current_saved_tensor_hooks()) {
        // An output goes to the hook detached: a hook that keeps its argument then cannot form the
        // cycle output -> grad_fn -> packed output. unpack() re-attaches the node.
        packed_ = hooks->pack(is_output ? t.detach() : t);
        unpack_hook_ = hooks->unpack;
        if (t._version() != saved_version_)
            throw AutogradError(
                "A saved tensor pack hook is modifying its input in place. Tensors provided as input to pack hook "
                "can not be modified by in-place operations as this can lead to unexpected side-effects.");
        // A non-output keeps its graph position: its grad_fn, or for a leaf its AccumulateGrad, so
        // the unpacked tensor (a new tensor the hook made) still sends gradient to the leaf.
        if (!is_output && requires_grad_) grad_fn_of_input_ = t.grad_fn() ? t.grad_fn() : grad_accumulator(t);
        return;
    }
    // An output keeps a detached alias (shares storage and version counter) to avoid the cycle
    // output -> grad_fn -> saved output; the node is re-attached on unpack.
    data_ = is_output ? t.detach() : t;
}

void SavedVariable::release() {
    data_ = Tensor();
    packed_.reset();
    grad_fn_of_input_.reset();
    released_ = true;
}

Tensor SavedVariable::unpack(const std::shared_ptr<Node>& saved_for) const {
    if (!was_defined_) return Tensor();
    if (released_)
        throw AutogradError(
            "Trying to backward through the graph a second time (or directly access saved tensors after they have "
            "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
            "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or "
            "if you need to access saved tensors after calling backward.");
    if (unpack_hook_) {
        Tensor t = unpack_hook_(packed_);
        if (!t.defined()) return t;
        if (t.sizes() != shape_ || t.dtype() != dtype_)
            throw AutogradError(fmt::format("saved tensor unpack hook for {} returned {} but {} {} was saved",
                                            saved_for ? saved_for->name() : "?", t.describe(), shape_str(shape_),
                                            dtype_name(dtype_)));
        if (!requires_grad_) return t;
        // Re-attach history: outputs to the node that saved them; inputs to their grad_fn.
        Tensor alias = t.detach();
        if (is_output_) set_history(alias, saved_for, output_nr_);
        else if (grad_fn_of_input_) set_history(alias, grad_fn_of_input_, output_nr_);
        else return t;
        return alias;
    }
    if (data_._version() != saved_version_) {
        std::string node_name = saved_for ? saved_for->name() : "?";
        throw AutogradError(fmt::format(
            "one of the variables needed for gradient computation has been modified by an inplace operation: "
            "[{} {}], which is output {} of {}, is at version {}; expected version {} instead. Hint: enable anomaly "
            "detection to find the operation that failed to compute its gradient, with "
            "autograd::AnomalyModeGuard.",
            dtype_name(dtype_), shape_str(shape_), output_nr_, node_name, data_._version(), saved_version_));
    }
    if (is_output_ && requires_grad_) {
        Tensor alias = data_.detach();
        set_history(alias, saved_for, output_nr_);
        return alias;
    }
    return data_;
}

}  // namespace ampgrad::autograd
