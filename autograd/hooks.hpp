// hooks.hpp: hook signatures, the hook list every registration goes into, and the handle whose
// remove() takes a hook out again. Lists are shared_ptr-owned so a handle that outlives its
// tensor or node is harmless: remove() then does nothing.
#pragma once
#include <algorithm>
#include <any>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/tensor.hpp"

namespace ampgrad::autograd {

// A tensor hook sees the gradient of one tensor; returning an undefined Tensor keeps it.
using TensorHook = std::function<Tensor(const Tensor& grad)>;
// Node pre-hook: sees the gradients flowing into a node (one per forward output);
// returning an empty list keeps them.
using NodePreHook = std::function<tensor_list(const tensor_list& grad_outputs)>;
// Node post-hook: sees the gradients the node produced (one per forward input) and its incoming
// gradients; returning an empty list keeps what the node produced.
using NodePostHook = std::function<tensor_list(const tensor_list& grad_inputs, const tensor_list& grad_outputs)>;
// Runs on a leaf after its .grad was updated.
using PostAccumulateGradHook = std::function<void(Tensor& param)>;

template <typename Fn>
class HookList {
public:
    uint64_t add(Fn fn) {
        uint64_t id = next_id_++;
        hooks_.emplace_back(id, std::move(fn));
        return id;
    }
    void remove(uint64_t id) {
        auto it = std::find_if(hooks_.begin(), hooks_.end(), [id](const auto& h) { return h.first == id; });
        if (it != hooks_.end()) hooks_.erase(it);
    }
    bool empty() const { return hooks_.empty(); }
    size_t size() const { return hooks_.size(); }
    // Snapshot so a hook may add or remove hooks while the list is being run.
    std::vector<std::pair<uint64_t, Fn>> snapshot() const { return hooks_; }

private:
    std::vector<std::pair<uint64_t, Fn>> hooks_;
    uint64_t next_id_ = 0;
};

class RemovableHandle {
public:
    RemovableHandle() = default;
    explicit RemovableHandle(std::function<void()> remover) : remover_(std::move(remover)) {}
    // Unregister the hook. Safe to call twice, or after its tensor/node is gone.
    void remove() {
        if (remover_) {
            auto r = std::move(remover_);
            remover_ = nullptr;
            r();
        }
    }

private:
    std::function<void()> remover_;
};

template <typename Fn>
RemovableHandle add_hook(const std::shared_ptr<HookList<Fn>>& list, Fn fn) {
    uint64_t id = list->add(std::move(fn));
    std::weak_ptr<HookList<Fn>> weak = list;
    return RemovableHandle([weak, id] {
        if (auto l = weak.lock()) l->remove(id);
    });
}

}  // namespace ampgrad::autograd
