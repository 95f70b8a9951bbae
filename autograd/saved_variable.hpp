// saved_variable.hpp: a tensor saved in forward for use in backward. It remembers the version
// counter at save time (to detect in-place modification), can be freed after backward
// (to detect a second backward), and goes through saved-tensor pack/unpack hooks when set.
#pragma once
#include <any>
#include <functional>
#include <memory>
#include <string_view>

#include "core/tensor.hpp"

namespace ampgrad::autograd {

class Node;

// The pair installed by SavedTensorsHooksGuard (and by non-reentrant checkpointing).
struct SavedTensorHooks {
    std::function<std::any(const Tensor&)> pack;
    std::function<Tensor(const std::any&)> unpack;
};

class SavedVariable {
public:
    SavedVariable() = default;
    // is_output: the tensor is an output of the node saving it. We then keep a detached alias
    // (no reference cycle through grad_fn) and re-attach the node on unpack.
    SavedVariable(const Tensor& t, bool is_output);

    // Returns the saved tensor; throws AutogradError if it was freed or modified in place.
    Tensor unpack(const std::shared_ptr<Node>& saved_for) const;
    void release();
    bool defined() const { return was_defined_; }
    size_t nbytes() const { return nbytes_; }                     // of the tensor as saved
    bool packed_by_hook() const { return unpack_hook_ != nullptr; }  // memory then held by the hook
    bool released() const { return released_; }

private:
    Tensor data_;                         // empty when released or when packed by a hook
    std::any packed_;                     // what the pack hook returned
    std::function<Tensor(const std::any&)> unpack_hook_;
    uint32_t saved_version_ = 0;
    uint32_t output_nr_ = 0;
    bool is_output_ = false;
    bool was_defined_ = false;
    bool released_ = false;
    bool requires_grad_ = false;
    size_t nbytes_ = 0;
    std::shared_ptr<Node> grad_fn_of_input_;    // with hooks, non-output: grad_fn (or AccumulateGrad) at save
    Shape shape_;
    DType dtype_ = kFloat32;
};

// Installs pack/unpack hooks for every tensor saved in this scope on this thread (nestable).
class SavedTensorsHooksGuard {
public:
    explicit SavedTensorsHooksGuard(SavedTensorHooks hooks);
    ~SavedTensorsHooksGuard();
    SavedTensorsHooksGuard(const SavedTensorsHooksGuard&) = delete;
    SavedTensorsHooksGuard& operator=(const SavedTensorsHooksGuard&) = delete;
};
const SavedTensorHooks* current_saved_tensor_hooks();   // innermost, or null

}  // namespace ampgrad::autograd
