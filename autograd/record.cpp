// record.cpp: wiring a freshly computed op into the graph (see record.hpp).
#include "autograd/record.hpp"

#include "autograd/anomaly_mode.hpp"
#include "autograd/autograd_meta.hpp"
#include "autograd/checkpoint_state.hpp"

namespace ampgrad::autograd {

bool any_requires_grad(std::span<const Tensor> tensors) {
    for (const Tensor& t : tensors)
        if (t.defined() && t.requires_grad()) return true;
    return false;
}

tensor_list record_impl(std::string_view op, tensor_list outputs, std::span<const Tensor> inputs,
                        std::span<const Tensor> saved, BackwardFn fn) {
    edge_list edges;
    edges.reserve(inputs.size());
    std::vector<TensorMeta> input_meta;
    input_meta.reserve(inputs.size());
    for (const Tensor& in : inputs) {
        edges.push_back(gradient_edge(in));
        input_meta.push_back(in.defined() ? TensorMeta::of(in) : TensorMeta{});
    }
    auto node = std::make_shared<FunctionNode>(op, std::move(edges), std::vector<SavedVariable>{}, std::move(fn));
    node->input_meta = std::move(input_meta);
    node->output_meta.reserve(outputs.size());
    for (uint32_t i = 0; i < outputs.size(); ++i) {
        node->output_meta.push_back(TensorMeta::of(outputs[i]));
        if (is_floating(outputs[i].dtype())) set_history(outputs[i], node, i);
    }
    // Save after set_history so saved outputs know their output_nr.
    auto& saved_vars = node->mutable_saved();
    saved_vars.reserve(saved.size());
    for (const Tensor& s : saved) {
        bool is_output = false;
        for (const Tensor& o : outputs) is_output = is_output || (s.defined() && o.is_same(s));
        saved_vars.emplace_back(s, is_output);
    }
    if (anomaly_mode_enabled()) node->creation_trace = capture_creation_trace();
    node->checkpointed = in_checkpoint_region();
    return outputs;
}

}  // namespace ampgrad::autograd
