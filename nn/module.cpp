// module.cpp: the module tree (registration, dotted names, recursive traversal), conversion with
// .to(), and state_dict()/load_state_dict() with PyTorch's error reporting.
#include "nn/module.hpp"

#include <algorithm>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "core/set_data.hpp"

namespace ampgrad::nn {

// ---- NamedTensors ----

void NamedTensors::insert(std::string name, Tensor t) {
    if (contains(name)) throw ValueError(fmt::format("NamedTensors: duplicate key \"{}\"", name));
    items_.emplace_back(std::move(name), std::move(t));
}

const Tensor* NamedTensors::find(const std::string& name) const {
    for (const Item& item : items_)
        if (item.first == name) return &item.second;
    return nullptr;
}

const Tensor& NamedTensors::at(const std::string& name) const {
    if (const Tensor* t = find(name)) return *t;
    throw ValueError(fmt::format("NamedTensors: no key \"{}\" (keys: {})", name, fmt::join(keys(), ", ")));
}

Tensor& NamedTensors::at(const std::string& name) {
    return const_cast<Tensor&>(static_cast<const NamedTensors&>(*this).at(name));
}

std::vector<std::string> NamedTensors::keys() const {
    std::vector<std::string> out;
    for (const Item& item : items_) out.push_back(item.first);
    return out;
}

std::vector<Tensor> NamedTensors::values() const {
    std::vector<Tensor> out;
    for (const Item& item : items_) out.push_back(item.second);
    return out;
}

// ---- registration ----

void Module::check_new_name(const std::string& kind, const std::string& name) const {
    if (name.empty() || name.find('.') != std::string::npos)
        throw ValueError(fmt::format("{}: {} name \"{}\" must be non-empty and contain no \".\"", type_name_, kind, name));
    auto taken = [&](const auto& list) {
        return std::any_of(list.begin(), list.end(), [&](const auto& item) { return item.first == name; });
    };
    if (taken(params_) || taken(buffers_) || taken(children_))
        throw ValueError(fmt::format("{}: attribute \"{}\" already exists; cannot register {} \"{}\"", type_name_, name,
                                     kind, name));
}

Tensor& Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
    check_new_name("parameter", name);
    if (!t.defined()) throw ValueError(fmt::format("{}: parameter \"{}\" is an undefined tensor", type_name_, name));
    if (!t.is_leaf())
        throw ValueError(fmt::format("{}: cannot register non-leaf tensor {} as parameter \"{}\"; register "
                                     "t.detach() instead", type_name_, t.describe(), name));
    t.requires_grad_(requires_grad);
    if (t.name().empty()) t.set_name(path_prefix_ + name);   // a tied tensor keeps the name it was first given
    params_.emplace_back(name, std::move(t));
    return params_.back().second;
}

Tensor Module::remove_parameter(const std::string& name) {
    for (auto it = params_.begin(); it != params_.end(); ++it) {
        if (it->first != name) continue;
        Tensor removed = std::move(it->second);
        params_.erase(it);
        return removed;
    }
    throw ValueError(fmt::format("{}: no parameter \"{}\" to remove", type_name_, name));
}

Tensor& Module::register_buffer(const std::string& name, Tensor t) {
    check_new_name("buffer", name);
    buffers_.emplace_back(name, std::move(t));
    return buffers_.back().second;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> child) {
    check_new_name("module", name);
    if (!child) throw ValueError(fmt::format("{}: submodule \"{}\" is null", type_name_, name));
    child->rename_parameters(path_prefix_ + name + ".");
    children_.emplace_back(name, std::move(child));
}

// Sets every parameter's tensor name to prefix + its path below this module. A parent calls
// this when it adopts the module, so the last registration (the root's) gives the full path;
// the prefix is remembered, so modules added later (ModuleList::push_back) get it too.
void Module::rename_parameters(const std::string& prefix) {
    path_prefix_ = prefix;
    for (auto& [name, p] : params_) p.set_name(prefix + name);
    for (auto& [name, child] : children_) child->rename_parameters(prefix + name + ".");
}

// ---- traversal ----

void Module::collect(const std::string& prefix, bool params, bool recurse, NamedTensors& out,
                     std::vector<const TensorImpl*>& seen) const {
    for (const auto& [name, t] : params ? params_ : buffers_) {
        if (!t.defined() || std::find(seen.begin(), seen.end(), t.impl()) != seen.end()) continue;
        seen.push_back(t.impl());
        out.insert(prefix + name, t);
    }
    if (!recurse) return;
    for (const auto& [name, child] : children_) child->collect(prefix + name + ".", params, true, out, seen);
}

NamedTensors Module::named_parameters(bool recurse) const {
    NamedTensors out;
    std::vector<const TensorImpl*> seen;
    collect("", true, recurse, out, seen);
    return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
    NamedTensors out;
    std::vector<const TensorImpl*> seen;
    collect("", false, recurse, out, seen);
    return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const { return named_parameters(recurse).values(); }
std::vector<Tensor> Module::buffers(bool recurse) const { return named_buffers(recurse).values(); }

std::vector<std::shared_ptr<Module>> Module::children() const {
    std::vector<std::shared_ptr<Module>> out;
    for (const auto& [name, child] : children_) out.push_back(child);
    return out;
}

void Module::collect_modules(const std::string& prefix,
                             std::vector<NamedModule>& out,
                             std::vector<const Module*>& seen) const {
    for (const auto& [name, child] : children_) {
        if (std::find(seen.begin(), seen.end(), child.get()) != seen.end()) continue;
        seen.push_back(child.get());
        std::string path = prefix.empty() ? name : prefix + "." + name;
        out.emplace_back(path, child);
        child->collect_modules(path, out, seen);
    }
}

std::vector<NamedModule> Module::named_modules(const std::string& prefix,
                                                                                   bool include_self) const {
    std::vector<NamedModule> out;
    std::vector<const Module*> seen{this};
    if (include_self) {
        auto self = std::const_pointer_cast<Module>(weak_from_this().lock());
        if (!self)
            throw ValueError(fmt::format("{}: named_modules(include_self=true) needs the module to be owned by a "
                                         "std::shared_ptr (make it with std::make_shared)", type_name_));
        out.emplace_back(prefix, std::move(self));
    }
    collect_modules(prefix, out, seen);
    return out;
}

std::vector<std::shared_ptr<Module>> Module::modules(bool include_self) const {
    std::vector<std::shared_ptr<Module>> out;
    for (auto& [name, m] : named_modules("", include_self)) out.push_back(std::move(m));
    return out;
}

// ---- mode, placement, gradients ----

void Module::train(bool on) {
    training_ = on;
    for (auto& [name, child] : children_) child->train(on);
}

namespace {

// t's values in another dtype or on another device (a copy; core/set_data.hpp puts it in t).
Tensor converted(const Tensor& t, DType dtype, Device device) {
    Tensor out = make_empty(t.sizes(), dtype, device);
    copy_(out, t.detach());
    return out;
}

// Convert a parameter or buffer (and its grad) to dtype/device, keeping its identity.
void convert_in_place(const Tensor& t, DType dtype, Device device) {
    if (!t.defined() || (t.dtype() == dtype && t.device() == device)) return;
    set_data(t, converted(t, dtype, device), VersionBump::kYes);
    if (const Tensor& g = t.grad(); g.defined()) t.set_grad(converted(g, dtype, device));
}

}  // namespace

void Module::to(DType dtype) {
    if (!is_floating(dtype))
        throw DTypeError(fmt::format("{}: to() only accepts floating dtypes, but got {}", type_name_, dtype_name(dtype)));
    NoGradGuard no_grad;
    for (const Tensor& t : parameters()) if (is_floating(t.dtype())) convert_in_place(t, dtype, t.device());
    for (const Tensor& t : buffers()) if (is_floating(t.dtype())) convert_in_place(t, dtype, t.device());
}

void Module::cast_parameters(DType dtype) {
    if (!is_floating(dtype))
        throw DTypeError(fmt::format("{}: cast_parameters() only accepts floating dtypes, but got {}", type_name_,
                                     dtype_name(dtype)));
    NoGradGuard no_grad;
    for (const Tensor& t : parameters()) if (is_floating(t.dtype())) convert_in_place(t, dtype, t.device());
}

void Module::to(Device device) {
    NoGradGuard no_grad;
    for (const Tensor& t : parameters()) convert_in_place(t, t.dtype(), device);
    for (const Tensor& t : buffers()) convert_in_place(t, t.dtype(), device);
}

void Module::zero_grad(bool set_to_none) {
    NoGradGuard no_grad;
    for (Tensor& p : parameters()) {
        if (!p.grad().defined()) continue;
        if (set_to_none) {
            p.set_grad(Tensor());
        } else {
            Tensor& g = p.mutable_grad();
            if (g.grad_fn()) g = g.detach();
            g.zero_();
        }
    }
}

// ---- checkpoints ----

void Module::collect_state(const std::string& prefix, NamedTensors& out) const {
    for (const auto& [name, t] : params_) if (t.defined()) out.insert(prefix + name, t.detach());
    for (const auto& [name, t] : buffers_) if (t.defined()) out.insert(prefix + name, t.detach());
    for (const auto& [name, child] : children_) child->collect_state(prefix + name + ".", out);
}

StateDict Module::state_dict() const {
    StateDict out;
    collect_state("", out);
    return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
    std::map<std::string, Shape> shapes;
    for (const auto& [key, t] : state) shapes[key] = t.sizes();
    check_state_shapes(shapes, strict);
    NamedTensors own;                                  // the live tensors, by the same keys
    collect_state("", own);
    NoGradGuard no_grad;
    for (auto& [key, t] : own) {
        Tensor dst = t;                                // shares storage with the parameter/buffer
        if (const Tensor* src = state.find(key)) copy_(dst, src->detach());
    }
}

void Module::check_state_shapes(const std::map<std::string, Shape>& shapes, bool strict) const {
    NamedTensors own;
    collect_state("", own);
    std::vector<std::string> missing, unexpected, mismatched;
    for (const auto& [key, t] : own) {
        auto src = shapes.find(key);
        if (src == shapes.end()) missing.push_back(fmt::format("\"{}\"", key));
        else if (src->second != t.sizes())
            mismatched.push_back(fmt::format("size mismatch for {}: copying a param with shape {} from checkpoint, the "
                                             "shape in current model is {}.", key, shape_str(src->second),
                                             t.shape_str()));
    }
    for (const auto& [key, shape] : shapes)
        if (!own.contains(key)) unexpected.push_back(fmt::format("\"{}\"", key));
    std::string errors;
    if (strict && !missing.empty()) errors += fmt::format("\n\tMissing key(s) in state_dict: {}.", fmt::join(missing, ", "));
    if (strict && !unexpected.empty())
        errors += fmt::format("\n\tUnexpected key(s) in state_dict: {}.", fmt::join(unexpected, ", "));
    for (const std::string& m : mismatched) errors += "\n\t" + m;
    if (!errors.empty()) {
        std::string msg = fmt::format("load_state_dict: Error(s) in loading state_dict for {}:{}", type_name_, errors);
        if (!mismatched.empty()) throw ShapeError(msg);
        throw ValueError(msg);
    }
}

// ---- forward hooks ----

autograd::RemovableHandle Module::register_forward_pre_hook(ForwardPreHookInputs hook) {
    if (!hook) throw ValueError(fmt::format("{}.register_forward_pre_hook: the hook is empty", type_name_));
    return autograd::add_hook(pre_hooks_, std::move(hook));
}

autograd::RemovableHandle Module::register_forward_hook(ForwardHookInputs hook) {
    if (!hook) throw ValueError(fmt::format("{}.register_forward_hook: the hook is empty", type_name_));
    return autograd::add_hook(post_hooks_, std::move(hook));
}

// The one-tensor forms see (and may replace) the first input.
autograd::RemovableHandle Module::register_forward_pre_hook(ForwardPreHook hook) {
    if (!hook) throw ValueError(fmt::format("{}.register_forward_pre_hook: the hook is empty", type_name_));
    return register_forward_pre_hook(ForwardPreHookInputs(
        [hook = std::move(hook)](Module& m, const std::vector<Tensor>& inputs) -> std::vector<Tensor> {
            Tensor replaced = hook(m, inputs.empty() ? Tensor() : inputs[0]);
            if (!replaced.defined() || inputs.empty()) return {};
            std::vector<Tensor> out = inputs;
            out[0] = replaced;
            return out;
        }));
}

autograd::RemovableHandle Module::register_forward_hook(ForwardHook hook) {
    if (!hook) throw ValueError(fmt::format("{}.register_forward_hook: the hook is empty", type_name_));
    return register_forward_hook(ForwardHookInputs(
        [hook = std::move(hook)](Module& m, const std::vector<Tensor>& inputs, const Tensor& output) {
            return hook(m, inputs.empty() ? Tensor() : inputs[0], output);
        }));
}

// Hooks get the module itself (non-const, as in PyTorch, where a hook may change it).
std::vector<Tensor> Module::run_forward_pre_hooks(std::vector<Tensor> inputs) const {
    auto& self = const_cast<Module&>(*this);
    pre_hooks_->for_each([&](const auto& entry) {
        std::vector<Tensor> replaced = (*entry.fn)(self, inputs);
        if (!replaced.empty()) inputs = std::move(replaced);
    });
    return inputs;
}

Tensor Module::run_forward_hooks(const std::vector<Tensor>& inputs, Tensor output) const {
    auto& self = const_cast<Module&>(*this);
    post_hooks_->for_each([&](const auto& entry) {
        Tensor replaced = (*entry.fn)(self, inputs, output);
        if (replaced.defined()) output = replaced;
    });
    return output;
}

}  // namespace ampgrad::nn
