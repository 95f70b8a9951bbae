// autograd.cpp: the user-facing backward() and grad() (PyTorch's torch/autograd/__init__.py): argument
// checks, seeding scalar roots with ones, then one call into the engine.
#include "autograd/autograd.hpp"

#include <cstdio>
#include <mutex>

#include "autograd/autograd_meta.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::autograd {

namespace {

// Roots and their seed gradients, with PyTorch's checks and messages.
void make_roots(const tensor_list& outputs, const tensor_list& grad_outputs, const char* api, edge_list& roots,
                tensor_list& seeds) {
    if (!grad_outputs.empty() && grad_outputs.size() != outputs.size())
        throw ValueError(fmt::format("{}: got {} grad_outputs for {} outputs", api, grad_outputs.size(),
                                     outputs.size()));
    for (size_t i = 0; i < outputs.size(); ++i) {
        const Tensor& out = outputs[i];
        if (!out.defined()) throw ValueError(fmt::format("{}: output {} is undefined", api, i));
        Edge e = gradient_edge(out);
        if (!e.valid())
            throw AutogradError(fmt::format("{}: element {} of tensors does not require grad and does not have a "
                                            "grad_fn", api, i));
        Tensor g = grad_outputs.empty() ? Tensor() : grad_outputs[i];
        if (!g.defined()) {
            if (out.numel() != 1)
                throw AutogradError(fmt::format("{}: grad can be implicitly created only for scalar outputs (output {} "
                                                "is {})", api, i, out.describe()));
            if (!is_floating(out.dtype()))
                throw AutogradError(fmt::format("{}: grad can be implicitly created only for real scalar outputs but "
                                                "got {}", api, dtype_name(out.dtype())));
            g = ones_like(out);
        } else if (g.sizes() != out.sizes()) {
            throw ShapeError(fmt::format("{}: Mismatch in shape: grad_output[{}] has a shape of {} and output[{}] has "
                                         "a shape of {}.", api, i, g.shape_str(), i, out.shape_str()));
        } else if (g.device() != out.device()) {
            throw DeviceError(fmt::format("{}: grad_output[{}] is on {} but output[{}] is on {}", api, i,
                                          g.device().str(), i, out.device().str()));
        }
        roots.push_back(std::move(e));
        seeds.push_back(std::move(g));
    }
}

}  // namespace

void backward(const tensor_list& outputs, const tensor_list& grad_outputs, std::optional<bool> retain_graph,
              bool create_graph, const tensor_list& inputs) {
    if (create_graph && inputs.empty()) {
        static std::once_flag warned;
        std::call_once(warned, [] {
            std::fprintf(stderr, "ampgrad warning: backward(create_graph=true) makes a reference cycle between each "
                                 "parameter and its .grad (the gradient's graph refers to the parameter), which leaks "
                                 "memory until .grad is reset. Prefer autograd::grad() when building a graph of the "
                                 "gradients.\n");
        });
    }
    edge_list roots;
    tensor_list seeds;
    make_roots(outputs, grad_outputs, "backward", roots, seeds);
    ExecuteOptions opts;
    opts.keep_graph = retain_graph.value_or(create_graph);
    opts.create_graph = create_graph;
    opts.accumulate_grad = true;
    for (const Tensor& in : inputs) {
        if (!in.requires_grad())
            throw AutogradError("backward: One of the differentiated Tensors does not require grad");
        in.retain_grad();
        opts.outputs.push_back(gradient_edge(in));
    }
    execute_graph(roots, seeds, opts);
}

tensor_list grad(const tensor_list& outputs, const tensor_list& inputs, const tensor_list& grad_outputs,
                 std::optional<bool> retain_graph, bool create_graph, bool allow_unused, bool materialize_grads) {
    if (inputs.empty()) throw ValueError("grad: grad requires non-empty inputs.");
    if (materialize_grads && !allow_unused)
        throw ValueError("grad: Expected allow_unused to be True or not passed when materialize_grads=True, but got: "
                         "allow_unused=False.");
    edge_list roots;
    tensor_list seeds;
    make_roots(outputs, grad_outputs, "grad", roots, seeds);
    ExecuteOptions opts;
    opts.keep_graph = retain_graph.value_or(create_graph);
    opts.create_graph = create_graph;
    opts.accumulate_grad = false;
    for (const Tensor& in : inputs) {
        if (!in.defined() || !in.requires_grad())
            throw AutogradError("grad: One of the differentiated Tensors does not require grad");
        opts.outputs.push_back(gradient_edge(in));
    }
    tensor_list result = execute_graph(roots, seeds, opts);
    for (size_t i = 0; i < result.size(); ++i) {
        if (result[i].defined()) continue;
        if (materialize_grads) result[i] = zeros_like(inputs[i]);
        else if (!allow_unused)
            throw AutogradError("grad: One of the differentiated Tensors appears to not have been used in the graph. "
                                "Set allow_unused=True if this is the desired behavior.");
    }
    return result;
}

}  // namespace ampgrad::autograd
