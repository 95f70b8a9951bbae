// module.hpp: nn::Module, the base of every layer: a tree of named parameters, buffers and
// submodules, as in PyTorch. Names are dotted paths from the root ("0.weight", "fc1.bias");
// each parameter's tensor name (Tensor::name()) is set to that path, so the AMP scaler and
// anomaly mode can say which parameter overflowed.
//
//   struct MLP : nn::Module {
//       std::shared_ptr<nn::Linear> fc1, fc2;
//       MLP() : Module("MLP") {
//           fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 8));
//           fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 2));
//       }
//       Tensor forward(const Tensor& x) { return fc2->forward(fc1->forward(x).relu()); }
//   };
//   auto net = std::make_shared<MLP>();   // net->named_parameters(): fc1.weight, fc1.bias, fc2.weight, fc2.bias
#pragma once
#include <functional>
#include <type_traits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/hooks.hpp"
#include "core/profiler.hpp"
#include "core/tensor.hpp"

namespace ampgrad::nn {

// An insertion-ordered name -> tensor list (PyTorch's OrderedDict): iterate with
// `for (const auto& [name, t] : dict)` (or libtorch's item.key() / item.value()), look up with at(name).
class NamedTensors {
public:
    struct Item : std::pair<std::string, Tensor> {
        using std::pair<std::string, Tensor>::pair;
        const std::string& key() const { return first; }
        const Tensor& value() const { return second; }
    };
    NamedTensors() = default;
    // save_safetensors(path, {{"w", w}, {"b", b}}); in the list's order (ValueError on a duplicate)
    NamedTensors(std::initializer_list<std::pair<std::string, Tensor>> items) {
        for (const auto& [name, t] : items) insert(name, t);
    }
    // from any map of name -> Tensor (std::map, std::unordered_map), in its iteration order
    template <typename Map>
        requires std::is_convertible_v<typename Map::mapped_type, Tensor> &&
                 std::is_convertible_v<typename Map::key_type, std::string>
    NamedTensors(const Map& map) {   // NOLINT: a map reads as the dict it is
        for (const auto& [name, t] : map) insert(name, t);
    }
    void insert(std::string name, Tensor t);                // ValueError on a duplicate name
    const Tensor& at(const std::string& name) const;        // ValueError naming the key if missing
    Tensor& at(const std::string& name);
    const Tensor& operator[](const std::string& name) const { return at(name); }
    const Tensor* find(const std::string& name) const;      // null if missing
    bool contains(const std::string& name) const { return find(name) != nullptr; }
    size_t size() const { return items_.size(); }
    bool empty() const { return items_.empty(); }
    std::vector<std::string> keys() const;
    std::vector<Tensor> values() const;
    std::vector<Item>::const_iterator begin() const { return items_.begin(); }
    std::vector<Item>::const_iterator end() const { return items_.end(); }

private:
    std::vector<Item> items_;
};
using StateDict = NamedTensors;

class Module;
// One (name, module) of named_children() / named_modules(): a pair (structured bindings work) with
// libtorch's item.key() / item.value().
struct NamedModule : std::pair<std::string, std::shared_ptr<Module>> {
    using std::pair<std::string, std::shared_ptr<Module>>::pair;
    const std::string& key() const { return first; }
    const std::shared_ptr<Module>& value() const { return second; }
};
// Forward hooks, as PyTorch's Module.register_forward_pre_hook / register_forward_hook. PyTorch hands
// a hook the tuple of forward's arguments; here a hook takes either all of the module's tensor
// inputs (`const std::vector<Tensor>& inputs`: an attention block's x, cos and sin) or, the
// one-tensor form, the first input alone. Both kinds share one list and run in registration order.
// A pre-hook runs before forward and may replace the inputs (return a non-empty vector, or a defined
// Tensor for the first input); a post-hook runs after it with the inputs and the output and may
// replace the output (return a defined Tensor).
// ZeRO stage 3 gathers a module's parameters in the pre-hook and releases them in the post-hook.
using ForwardPreHook = std::function<Tensor(Module& module, const Tensor& input)>;
using ForwardHook = std::function<Tensor(Module& module, const Tensor& input, const Tensor& output)>;
using ForwardPreHookInputs = std::function<std::vector<Tensor>(Module& module, const std::vector<Tensor>& inputs)>;
using ForwardHookInputs =
    std::function<Tensor(Module& module, const std::vector<Tensor>& inputs, const Tensor& output)>;

class Module : public std::enable_shared_from_this<Module> {
public:
    explicit Module(std::string type_name = "Module") : type_name_(std::move(type_name)) {}
    virtual ~Module() = default;
    Module(const Module&) = delete;
    Module& operator=(const Module&) = delete;

    // The layer's type, e.g. "Linear" (libtorch's Module::name()).
    const std::string& name() const { return type_name_; }

    // ---- the tree ----
    // Stores `t` as a leaf parameter (requires_grad set as given) and returns the stored handle.
    Tensor& register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
    Tensor& register_buffer(const std::string& name, Tensor t);   // state that is not trained
    template <typename M>
    std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
        add_child(name, module);
        return module;
    }

    // Parameters of this module and (if recurse) its descendants, depth first in registration
    // order; a parameter shared by two modules (tied weights) is listed once.
    std::vector<Tensor> parameters(bool recurse = true) const;
    NamedTensors named_parameters(bool recurse = true) const;
    std::vector<Tensor> buffers(bool recurse = true) const;
    NamedTensors named_buffers(bool recurse = true) const;
    std::vector<std::shared_ptr<Module>> children() const;
    const std::vector<NamedModule>& named_children() const { return children_; }
    // This module (named `prefix`, "" by default) and every descendant, depth first in registration
    // order, keyed by dotted path ("h.0.attn"); a module reachable twice is listed once, as in
    // PyTorch. include_self needs the module to be owned by a std::shared_ptr (ValueError if not).
    std::vector<NamedModule> named_modules(const std::string& prefix = "",
                                                                               bool include_self = true) const;
    std::vector<std::shared_ptr<Module>> modules(bool include_self = true) const;

    // ---- forward hooks (registration order; handle.remove() takes one out) ----
    autograd::RemovableHandle register_forward_pre_hook(ForwardPreHook hook);
    autograd::RemovableHandle register_forward_pre_hook(ForwardPreHookInputs hook);
    autograd::RemovableHandle register_forward_hook(ForwardHook hook);
    autograd::RemovableHandle register_forward_hook(ForwardHookInputs hook);
    // Hooks that return nothing (PyTorch's usual `return None`) only look: they change nothing.
    template <typename F>
        requires std::is_void_v<std::invoke_result_t<F&, Module&, const Tensor&>>
    autograd::RemovableHandle register_forward_pre_hook(F hook) {
        return register_forward_pre_hook(ForwardPreHook([h = std::move(hook)](Module& m, const Tensor& x) mutable {
            h(m, x);
            return Tensor();
        }));
    }
    template <typename F>
        requires std::is_void_v<std::invoke_result_t<F&, Module&, const std::vector<Tensor>&>>
    autograd::RemovableHandle register_forward_pre_hook(F hook) {
        return register_forward_pre_hook(
            ForwardPreHookInputs([h = std::move(hook)](Module& m, const std::vector<Tensor>& xs) mutable {
                h(m, xs);
                return std::vector<Tensor>{};
            }));
    }
    template <typename F>
        requires std::is_void_v<std::invoke_result_t<F&, Module&, const Tensor&, const Tensor&>>
    autograd::RemovableHandle register_forward_hook(F hook) {
        return register_forward_hook(
            ForwardHook([h = std::move(hook)](Module& m, const Tensor& x, const Tensor& y) mutable {
                h(m, x, y);
                return Tensor();
            }));
    }
    template <typename F>
        requires std::is_void_v<std::invoke_result_t<F&, Module&, const std::vector<Tensor>&, const Tensor&>>
    autograd::RemovableHandle register_forward_hook(F hook) {
        return register_forward_hook(
            ForwardHookInputs([h = std::move(hook)](Module& m, const std::vector<Tensor>& xs, const Tensor& y) mutable {
                h(m, xs, y);
                return Tensor();
            }));
    }
    bool has_forward_hooks() const { return !pre_hooks_->empty() || !post_hooks_->empty(); }
    // What PyTorch's Module.__call__ does around forward: pre-hooks, body(input), post-hooks.
    // Layers wrap their forward in it: `return with_forward_hooks(x, [&](const Tensor& in) {...});`
    // With the profiler on, each call is a "module" span named after the layer (core/profiler.hpp).
    template <typename Body>
    Tensor with_forward_hooks(const Tensor& input, Body&& body) const {
        profiler::Span span("module", type_name_, [&] { return "{\"input\": " + profiler::json_string(input.describe()) + "}"; });
        if (!has_forward_hooks()) return body(input);
        std::vector<Tensor> in = run_forward_pre_hooks({input});
        return run_forward_hooks(in, body(in[0]));
    }
    // The same for a forward of several tensors: body gets the (possibly replaced) inputs.
    //   return with_forward_hooks({x, cos, sin}, [&](const std::vector<Tensor>& in) {...});
    template <typename Body>
    Tensor with_forward_hooks(std::vector<Tensor> inputs, Body&& body) const {
        profiler::Span span("module", type_name_);
        if (!has_forward_hooks()) return body(inputs);
        inputs = run_forward_pre_hooks(std::move(inputs));
        return run_forward_hooks(inputs, body(inputs));
    }

    // ---- mode, placement, gradients ----
    virtual void train(bool on = true);          // recursive; Dropout reads is_training()
    void eval() { train(false); }
    bool is_training() const { return training_; }
    // Converts floating parameters and buffers in place (the tensors keep their identity, so an
    // optimizer built earlier still holds them, and keep requires_grad); grads are converted too.
    void to(DType dtype);
    void to(Device device);
    // Converts floating parameters only, in place as to(dtype); buffers keep their dtype (DeepSpeed's
    // mixed-precision cast, which keeps f32 buffers; the ZeRO engine's fp16/bf16 modes call it).
    void cast_parameters(DType dtype);
    void zero_grad(bool set_to_none = true);

    // ---- checkpoints ----
    // Parameters then buffers, module by module, keyed by dotted name; tensors are detached
    // views of the live data (copy them to snapshot).
    StateDict state_dict() const;
    // Copies each entry into the matching parameter/buffer (cast to its dtype and device).
    // Throws ShapeError for a shape mismatch (always), ValueError for missing or unexpected keys
    // (strict only); the message lists every problem with its key.
    void load_state_dict(const StateDict& state, bool strict = true);
    // load_state_dict's checks alone, against the shapes a state would bring, by key (e.g. read from a
    // file's header before any tensor data): the same errors, nothing copied.
    void check_state_shapes(const std::map<std::string, Shape>& shapes, bool strict = true) const;

protected:
    void add_child(const std::string& name, std::shared_ptr<Module> child);
    // Takes parameter `name` out of this module and returns it (ValueError if there is none). A layer
    // whose weight changes form uses it: nn::Linear::quantize_nf4.
    Tensor remove_parameter(const std::string& name);

private:
    void collect(const std::string& prefix, bool params, bool recurse, NamedTensors& out,
                 std::vector<const TensorImpl*>& seen) const;
    void collect_state(const std::string& prefix, NamedTensors& out) const;
    void collect_modules(const std::string& prefix, std::vector<NamedModule>& out,
                         std::vector<const Module*>& seen) const;
    void rename_parameters(const std::string& prefix);
    void check_new_name(const std::string& kind, const std::string& name) const;
    std::vector<Tensor> run_forward_pre_hooks(std::vector<Tensor> inputs) const;
    Tensor run_forward_hooks(const std::vector<Tensor>& inputs, Tensor output) const;

    std::string type_name_;
    std::string path_prefix_;          // this module's dotted path from the root plus ".", or ""
    bool training_ = true;
    std::vector<std::pair<std::string, Tensor>> params_;
    std::vector<std::pair<std::string, Tensor>> buffers_;
    std::vector<NamedModule> children_;
    // one-tensor hooks are stored wrapped in the inputs form
    std::shared_ptr<autograd::HookList<ForwardPreHookInputs>> pre_hooks_ =
        std::make_shared<autograd::HookList<ForwardPreHookInputs>>();
    std::shared_ptr<autograd::HookList<ForwardHookInputs>> post_hooks_ =
        std::make_shared<autograd::HookList<ForwardHookInputs>>();
};

}  // namespace ampgrad::nn
