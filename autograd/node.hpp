// node.hpp: the autograd graph. Every differentiable op's output points (grad_fn) at a Node;
// a Node's next_edges point at the Nodes of its inputs, or at an AccumulateGrad for a leaf.
// The engine (engine.hpp) walks this graph from the loss back to the leaves.
//
// Vocabulary (as in PyTorch): a Node's *grad outputs* are the gradients w.r.t. the forward
// op's outputs (what flows in during backward); its *grad inputs* are the gradients w.r.t. the
// forward op's inputs (what it returns, one per next edge).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "autograd/hooks.hpp"
#include "autograd/saved_variable.hpp"
#include "core/tensor.hpp"

namespace ampgrad::autograd {

class Node;
struct GraphTask;

struct Edge {
    std::shared_ptr<Node> fn;      // null: this input needs no gradient
    uint32_t input_nr = 0;         // which grad-output slot of fn the gradient goes to
    bool valid() const { return fn != nullptr; }
};
using edge_list = std::vector<Edge>;

// Shape/dtype/device of a tensor as seen in forward: used to validate and zero-fill gradients.
struct TensorMeta {
    Shape shape;
    DType dtype = kFloat32;
    Device device{};
    static TensorMeta of(const Tensor& t) { return {t.sizes(), t.dtype(), t.device()}; }
    Tensor zeros() const;
};

// What the engine keeps on a node while a graph task runs it (engine.cpp). A field here rather
// than a hash map keyed by node keeps backward's per-node cost low. A node reached by two live
// tasks at once (reentrant or concurrent backward over one graph) belongs to the task that
// claimed it first; the other task keeps its state for that node in a side table.
struct NodeTaskState {
    std::atomic<GraphTask*> owner{nullptr};
    int dependencies = 0;        // edges from nodes of the task that have not run yet
    bool needed = true;          // grad()/inputs= mode: lies on a path to a requested gradient
    bool captured = false;       // grad() mode: receives a requested gradient
    bool visited = false;        // scratch for the engine's graph walks
    tensor_list buffer;          // incoming gradients, summed per slot, until the node runs
};

class Node : public std::enable_shared_from_this<Node> {
public:
    Node(std::string_view op, edge_list next_edges, uint64_t sequence_nr);
    virtual ~Node();
    Node(const Node&) = delete;
    Node& operator=(const Node&) = delete;

    // "mul", "matmul", "AccumulateGrad"...: used in errors, anomaly reports and graph dumps.
    std::string_view op() const { return op_; }
    // PyTorch's names: "MulBackward0" for a built-in op (op in CamelCase + "Backward0"),
    // "<Name>Backward" for a custom Function, "AccumulateGrad" for a leaf's accumulator.
    std::string name() const;
    uint64_t sequence_nr() const { return sequence_nr_; }
    const edge_list& next_edges() const { return next_edges_; }
    edge_list& mutable_next_edges() { return next_edges_; }
    const Edge& next_edge(size_t i) const { return next_edges_[i]; }
    size_t num_grad_inputs() const { return next_edges_.size(); }

    // forward outputs (one per incoming gradient) and forward inputs (one per next edge)
    std::vector<TensorMeta> output_meta;
    std::vector<TensorMeta> input_meta;
    size_t num_grad_outputs() const { return output_meta.size(); }

    // Compute grad inputs from grad outputs. Called by the engine with grad mode = create_graph.
    virtual tensor_list apply(tensor_list&& grad_outputs) = 0;
    // Free saved tensors after the node ran without retain_graph.
    virtual void release_variables() {}
    virtual bool is_accumulate_grad() const { return false; }
    virtual size_t saved_bytes() const { return 0; }      // for graph dumps
    // Whether the engine needs the gradient for next_edges()[i] in the current graph task.
    bool needs_input_grad(size_t i) const;

    // ---- hooks (docs/autograd.md §3; run order: tensor pre -> retains_grad -> pre -> apply -> post) ----
    // A non-empty key replaces the hook registered earlier under the same key (hooks.hpp).
    RemovableHandle register_prehook(NodePreHook hook, std::string_view key = {});
    RemovableHandle register_hook(NodePostHook hook, std::string_view key = {});
    // Hooks that return nothing only look: they keep the gradients (as an empty list does).
    template <typename F>
        requires std::is_void_v<std::invoke_result_t<F&, const tensor_list&>>
    RemovableHandle register_prehook(F hook, std::string_view key = {}) {
        return register_prehook(NodePreHook([h = std::move(hook)](const tensor_list& g) mutable {
            h(g);
            return tensor_list{};
        }), key);
    }
    template <typename F>
        requires std::is_void_v<std::invoke_result_t<F&, const tensor_list&, const tensor_list&>>
    RemovableHandle register_hook(F hook, std::string_view key = {}) {
        return register_hook(NodePostHook([h = std::move(hook)](const tensor_list& in, const tensor_list& out) mutable {
            h(in, out);
            return tensor_list{};
        }), key);
    }
    // Tensor hooks for forward output slot `output_nr`; for AccumulateGrad they live on the leaf.
    virtual RemovableHandle add_tensor_pre_hook(uint32_t output_nr, TensorHook hook, std::string_view key = {});
    // The hook list of one slot (null if none); for AccumulateGrad, the leaf's list.
    virtual std::shared_ptr<HookList<TensorHook>> tensor_pre_hooks(uint32_t output_nr) const;
    // Cheap tests the engine makes before looking at any hook list.
    virtual bool has_tensor_pre_hooks() const { return !tensor_pre_hooks_.empty() || !retains_grad_hooks_.empty(); }
    bool has_pre_hooks() const { return pre_hooks_ && !pre_hooks_->empty(); }
    size_t num_hooks() const;                       // pre + post + tensor hooks registered now
    void set_retains_grad_hook(uint32_t output_nr, std::function<void(const Tensor&)> hook);
    const std::function<void(const Tensor&)>* retains_grad_hook(uint32_t output_nr) const;
    const std::shared_ptr<HookList<NodePreHook>>& pre_hooks() const { return pre_hooks_; }     // may be null
    const std::shared_ptr<HookList<NodePostHook>>& post_hooks() const { return post_hooks_; }  // may be null
    bool has_post_hooks() const { return post_hooks_ && !post_hooks_->empty(); }

    // ---- debugging ----
    std::string creation_trace;       // where in forward this node was made (anomaly mode only)
    bool checkpointed = false;        // made inside a checkpointed region (graph dumps)

    NodeTaskState task_state;         // engine.cpp only

protected:
    std::string_view op_;
    uint64_t sequence_nr_;
    edge_list next_edges_;

private:
    std::shared_ptr<HookList<NodePreHook>> pre_hooks_;
    std::shared_ptr<HookList<NodePostHook>> post_hooks_;
    std::vector<std::shared_ptr<HookList<TensorHook>>> tensor_pre_hooks_;   // per output slot
    std::vector<std::function<void(const Tensor&)>> retains_grad_hooks_;    // per output slot
};

// A differentiable op's node: the backward lambda sits next to the forward in autograd/ops/.
class BackwardContext;
using BackwardFn = std::function<tensor_list(BackwardContext& ctx, const tensor_list& grad_outputs)>;

class FunctionNode : public Node {
public:
    FunctionNode(std::string_view op, edge_list next_edges, std::vector<SavedVariable> saved, BackwardFn fn);
    tensor_list apply(tensor_list&& grad_outputs) override;
    void release_variables() override;
    size_t saved_bytes() const override;
    const std::vector<SavedVariable>& saved() const { return saved_; }
    std::vector<SavedVariable>& mutable_saved() { return saved_; }

private:
    std::vector<SavedVariable> saved_;
    BackwardFn fn_;
};

// What a backward lambda sees: its saved tensors (version-checked) and which grads are needed.
class BackwardContext {
public:
    BackwardContext(FunctionNode& node) : node_(node) {}  // NOLINT
    Tensor saved(size_t i) const;
    bool needs_input_grad(size_t i) const { return node_.needs_input_grad(i); }
    const TensorMeta& input_meta(size_t i) const { return node_.input_meta[i]; }
    FunctionNode& node() const { return node_; }

private:
    FunctionNode& node_;
};

// The sink for a leaf's gradient: writes .grad, then runs post-accumulate-grad hooks.
class AccumulateGrad : public Node {
public:
    explicit AccumulateGrad(Tensor variable);
    tensor_list apply(tensor_list&& grad_outputs) override;
    bool is_accumulate_grad() const override { return true; }
    RemovableHandle add_tensor_pre_hook(uint32_t output_nr, TensorHook hook, std::string_view key = {}) override;
    std::shared_ptr<HookList<TensorHook>> tensor_pre_hooks(uint32_t output_nr) const override;
    bool has_tensor_pre_hooks() const override;
    const Tensor& variable() const { return variable_; }

private:
    Tensor variable_;
};

// Hand a node to a thread-local graveyard instead of letting it die recursively: destroying a
// 100k-node chain through nested shared_ptr destructors would overflow the stack.
void release_node_iteratively(std::shared_ptr<Node>&& node);

uint64_t next_sequence_nr();
inline constexpr uint64_t kAccumulateGradSequenceNr = std::numeric_limits<uint64_t>::max();

}  // namespace ampgrad::autograd
