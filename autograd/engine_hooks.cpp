// engine_hooks.cpp: running hooks around Node::apply and checking what they and apply return
// (PyTorch's validate_outputs in torch/csrc/autograd/engine.cpp; docs/autograd.md §3). See engine_hooks.hpp
// for the order.
#include "autograd/engine_hooks.hpp"

#include <fmt/ranges.h>

#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::autograd {

namespace {

// "hook 'scale'" for a keyed hook, else "hook 'tensor hook #3 on MulBackward output 0'".
template <typename Entry>
std::string hook_name(const Entry& e, std::string_view kind, const Node& node, int slot = -1) {
    if (!e.key.empty()) return e.key;
    std::string name = fmt::format("{} #{} on {}", kind, e.id, node.name());
    if (slot >= 0) name += fmt::format(" output {}", slot);
    return name;
}

// A hook returned something incompatible with the gradient it replaced.
void check_hook_result(const Tensor& before, const Tensor& after, const std::string& name) {
    if (!before.defined()) {
        if (after.defined())
            throw AutogradError(fmt::format("hook '{}': can't replace a None gradient with a non-None value (got {})",
                                            name, after.describe()));
        return;
    }
    if (!after.defined()) return;                 // a list hook may drop a gradient
    if (after.dtype() != before.dtype())
        throw AutogradError(fmt::format("hook '{}' has changed the type of value (was {} got {})", name,
                                        dtype_name(before.dtype()), dtype_name(after.dtype())));
    if (after.device() != before.device())
        throw AutogradError(fmt::format("hook '{}' has changed the device of value (was {} got {})", name,
                                        before.device().str(), after.device().str()));
    if (after.sizes() != before.sizes())
        throw AutogradError(fmt::format("hook '{}' has changed the size of value (was {} got {})", name,
                                        before.shape_str(), after.shape_str()));
}

void check_list_hook_result(const tensor_list& before, const tensor_list& after, const std::string& name) {
    if (after.size() != before.size())
        throw AutogradError(fmt::format("hook '{}' has returned an incorrect number of values (got {}, but expected {})",
                                        name, after.size(), before.size()));
    for (size_t i = 0; i < before.size(); ++i)
        if (before[i].defined() || after[i].defined()) check_hook_result(before[i], after[i], name);
}

// PyTorch prints shapes in these messages as lists: [2, 3].
std::string bracket_shape(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

}  // namespace

void run_tensor_pre_hooks(Node& node, tensor_list& grads) {
    for (uint32_t slot = 0; slot < grads.size(); ++slot) {
        if (auto hooks = node.tensor_pre_hooks(slot)) {
            hooks->for_each([&](const auto& entry) {
                Tensor replaced = (*entry.fn)(grads[slot]);
                if (!replaced.defined()) return;                 // undefined: keep the gradient
                check_hook_result(grads[slot], replaced, hook_name(entry, "tensor hook", node, static_cast<int>(slot)));
                grads[slot] = std::move(replaced);
            });
        }
        if (auto* retain = node.retains_grad_hook(slot)) (*retain)(grads[slot]);
    }
}

void run_pre_hooks(Node& node, tensor_list& grads) {
    auto hooks = node.pre_hooks();                               // a copy: the list outlives the walk
    hooks->for_each([&](const auto& entry) {
        tensor_list r = (*entry.fn)(grads);
        if (r.empty()) return;                                   // empty: keep the gradients
        check_list_hook_result(grads, r, hook_name(entry, "prehook", node));
        grads = std::move(r);
    });
}

void run_post_hooks(Node& node, tensor_list& grad_inputs, const tensor_list& grad_outputs) {
    auto hooks = node.post_hooks();
    hooks->for_each([&](const auto& entry) {
        tensor_list r = (*entry.fn)(grad_inputs, grad_outputs);
        if (r.empty()) return;
        check_list_hook_result(grad_inputs, r, hook_name(entry, "hook", node));
        grad_inputs = std::move(r);
    });
}

void validate_grads(Node& node, tensor_list& grads) {
    if (grads.size() != node.num_grad_inputs())
        throw AutogradError(fmt::format("Function {} returned an invalid number of gradients - expected {}, but got {}",
                                        node.name(), node.num_grad_inputs(), grads.size()));
    for (size_t i = 0; i < grads.size(); ++i) {
        Tensor& g = grads[i];
        if (!g.defined() || !node.next_edge(i).valid() || i >= node.input_meta.size()) continue;
        const TensorMeta& m = node.input_meta[i];
        if (g.sizes() != m.shape) {
            try {
                g = sum_to(g, m.shape);
            } catch (const ShapeError&) {
                throw AutogradError(fmt::format("Function {} returned an invalid gradient at index {} - got {} but "
                                                "expected shape compatible with {}",
                                                node.name(), i, bracket_shape(g.sizes()), bracket_shape(m.shape)));
            }
        }
        if (g.device() != m.device) {
            if (g.dim() == 0) g = g.to(m.device);
            else
                throw AutogradError(fmt::format("Function {} returned an invalid gradient at index {} - expected "
                                                "device {} but got {}", node.name(), i, m.device.str(), g.device().str()));
        }
        if (g.dtype() != m.dtype) g = g.to(m.dtype);
    }
}

}  // namespace ampgrad::autograd
