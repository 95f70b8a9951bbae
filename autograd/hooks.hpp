// hooks.hpp: hook signatures, the hook list every registration goes into, and the handle whose
// remove() takes a hook out again. Lists are shared_ptr-owned so a handle that outlives its
// tensor or node is harmless: remove() then does nothing. remove() erases the entry (PyTorch
// leaves a null slot behind, so add/remove in a loop grows the list forever),
// and a registration with a key replaces the earlier hook with that key instead of adding one.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
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
    struct Entry {
        uint64_t id;
        std::string key;                  // empty: not deduplicated; also the hook's name in errors
        std::shared_ptr<const Fn> fn;     // shared: a hook removed while it runs stays alive
    };

    // Adds fn and returns its id. With a non-empty key, a hook already registered under that key
    // is replaced in place (same id, same position) so re-registering every step stays O(1) in size.
    uint64_t add(Fn fn, std::string_view key = {}) {
        auto shared = std::make_shared<const Fn>(std::move(fn));
        if (!key.empty()) {
            for (Entry& e : hooks_) {
                if (e.key == key) {
                    e.fn = std::move(shared);
                    return e.id;
                }
            }
        }
        uint64_t id = next_id_++;
        hooks_.push_back({id, std::string(key), std::move(shared)});
        return id;
    }
    void remove(uint64_t id) {
        auto it = find(id);
        if (it != hooks_.end() && it->id == id) hooks_.erase(it);
    }
    bool empty() const { return hooks_.empty(); }
    size_t size() const { return hooks_.size(); }

    // Calls visit(entry) for each hook registered when the walk starts, in registration order,
    // without copying the list. A hook may add or remove hooks meanwhile: added ones are not
    // visited in this walk; removed ones are skipped if not reached yet.
    template <typename Visit>
    void for_each(Visit&& visit) const {
        uint64_t end = next_id_, next = 0;
        for (;;) {
            auto it = find(next);                      // ids are ascending in the list
            if (it == hooks_.end() || it->id >= end) return;
            Entry entry = *it;
            next = entry.id + 1;
            visit(entry);
        }
    }

private:
    typename std::vector<Entry>::const_iterator find(uint64_t id) const {
        return std::lower_bound(hooks_.begin(), hooks_.end(), id, [](const Entry& e, uint64_t v) { return e.id < v; });
    }
    typename std::vector<Entry>::iterator find(uint64_t id) {
        return std::lower_bound(hooks_.begin(), hooks_.end(), id, [](const Entry& e, uint64_t v) { return e.id < v; });
    }
    std::vector<Entry> hooks_;
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
    bool active() const { return remover_ != nullptr; }

private:
    std::function<void()> remover_;
};

// RAII form: the hook lives exactly as long as this object (explicit handle lifetime).
//   ScopedHook h = param.register_post_accumulate_grad_hook(fn);   // removed when h dies
class ScopedHook {
public:
    ScopedHook() = default;
    ScopedHook(RemovableHandle h) : handle_(std::move(h)) {}  // NOLINT: implicit on purpose
    ~ScopedHook() { handle_.remove(); }
    ScopedHook(ScopedHook&& o) noexcept : handle_(std::exchange(o.handle_, RemovableHandle())) {}
    ScopedHook& operator=(ScopedHook&& o) noexcept {
        if (this != &o) {
            handle_.remove();
            handle_ = std::exchange(o.handle_, RemovableHandle());
        }
        return *this;
    }
    ScopedHook(const ScopedHook&) = delete;
    ScopedHook& operator=(const ScopedHook&) = delete;
    void remove() { handle_.remove(); }
    // Give up ownership: the hook then stays registered.
    RemovableHandle release() { return std::exchange(handle_, RemovableHandle()); }

private:
    RemovableHandle handle_;
};

template <typename Fn>
RemovableHandle add_hook(const std::shared_ptr<HookList<Fn>>& list, Fn fn, std::string_view key = {}) {
    uint64_t id = list->add(std::move(fn), key);
    std::weak_ptr<HookList<Fn>> weak = list;
    return RemovableHandle([weak, id] {
        if (auto l = weak.lock()) l->remove(id);
    });
}

}  // namespace ampgrad::autograd

namespace ampgrad {

// Tensor::register_hook for a hook that returns nothing (declared in core/tensor.hpp): it only looks,
// so the wrapper hands back an undefined Tensor, which keeps the gradient.
template <typename F, typename Handle>
    requires std::is_void_v<std::invoke_result_t<F&, const Tensor&>>
Handle Tensor::register_hook(F hook) const {
    return register_hook(std::function<Tensor(const Tensor&)>([h = std::move(hook)](const Tensor& g) mutable {
        h(g);
        return Tensor();
    }));
}

}  // namespace ampgrad

