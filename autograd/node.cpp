// node.cpp: Node bookkeeping (hooks, iterative release), FunctionNode and AccumulateGrad.
#include "autograd/node.hpp"

#include <algorithm>
#include <atomic>
#include <numeric>

#include "autograd/autograd_meta.hpp"
#include "autograd/engine.hpp"
#include "autograd/function.hpp"
#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::autograd {

uint64_t next_sequence_nr() {
    static std::atomic<uint64_t> counter{0};
    return counter.fetch_add(1, std::memory_order_relaxed);
}

// ---- iterative destruction ----

namespace {
thread_local bool t_draining = false;
thread_local std::vector<std::shared_ptr<Node>> t_graveyard;
}  // namespace

void release_node_iteratively(std::shared_ptr<Node>&& node) {
    if (!node) return;
    if (node.use_count() > 1) { node.reset(); return; }   // someone else keeps it alive
    t_graveyard.push_back(std::move(node));
    if (t_draining) return;                                // an outer call is draining
    t_draining = true;
    while (!t_graveyard.empty()) {
        std::shared_ptr<Node> n = std::move(t_graveyard.back());
        t_graveyard.pop_back();
        n.reset();                                         // its ~Node pushes children here
    }
    t_draining = false;
}

Tensor TensorMeta::zeros() const { return ampgrad::zeros(shape, TensorOptions().dtype(dtype).device(device)); }

Node::Node(std::string_view op, edge_list next_edges, uint64_t sequence_nr)
    : op_(op), sequence_nr_(sequence_nr), next_edges_(std::move(next_edges)) {}

Node::~Node() {
    for (Edge& e : next_edges_) release_node_iteratively(std::move(e.fn));
}

std::string Node::name() const {
    if (is_accumulate_grad()) return "AccumulateGrad";
    if (op_ == "GraphRoot") return "GraphRoot";   // PyTorch's two engine nodes keep their plain names
    if (op_ == "copy_slices") return "CopySlices";
    std::string n(op_);
    if (!n.empty()) n[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(n[0])));
    for (size_t i = 0; i < n.size(); ++i) {       // snake_case -> CamelCase: layer_norm -> LayerNorm
        if (n[i] == '_' && i + 1 < n.size()) {
            n.erase(i, 1);
            n[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(n[i])));
        }
    }
    // A custom Function's node is "<Name>Backward", as PyTorch names a Python Function's node.
    const bool custom = dynamic_cast<const CustomFunctionNode*>(this) != nullptr;
    return n + (custom ? "Backward" : "Backward0");
}

bool Node::needs_input_grad(size_t i) const {
    if (i >= next_edges_.size() || !next_edges_[i].valid()) return false;
    return task_should_compute(next_edges_[i].fn.get());
}

RemovableHandle Node::register_prehook(NodePreHook hook, std::string_view key) {
    if (!pre_hooks_) pre_hooks_ = std::make_shared<HookList<NodePreHook>>();
    return add_hook(pre_hooks_, std::move(hook), key);
}

RemovableHandle Node::register_hook(NodePostHook hook, std::string_view key) {
    if (!post_hooks_) post_hooks_ = std::make_shared<HookList<NodePostHook>>();
    return add_hook(post_hooks_, std::move(hook), key);
}

RemovableHandle Node::add_tensor_pre_hook(uint32_t output_nr, TensorHook hook, std::string_view key) {
    if (tensor_pre_hooks_.size() <= output_nr) tensor_pre_hooks_.resize(output_nr + 1);
    auto& list = tensor_pre_hooks_[output_nr];
    if (!list) list = std::make_shared<HookList<TensorHook>>();
    return add_hook(list, std::move(hook), key);
}

size_t Node::num_hooks() const {
    size_t n = (pre_hooks_ ? pre_hooks_->size() : 0) + (post_hooks_ ? post_hooks_->size() : 0);
    for (const auto& list : tensor_pre_hooks_) n += list ? list->size() : 0;
    return n;
}

std::shared_ptr<HookList<TensorHook>> Node::tensor_pre_hooks(uint32_t output_nr) const {
    return output_nr < tensor_pre_hooks_.size() ? tensor_pre_hooks_[output_nr] : nullptr;
}

void Node::set_retains_grad_hook(uint32_t output_nr, std::function<void(const Tensor&)> hook) {
    if (retains_grad_hooks_.size() <= output_nr) retains_grad_hooks_.resize(output_nr + 1);
    retains_grad_hooks_[output_nr] = std::move(hook);
}

const std::function<void(const Tensor&)>* Node::retains_grad_hook(uint32_t output_nr) const {
    if (output_nr >= retains_grad_hooks_.size() || !retains_grad_hooks_[output_nr]) return nullptr;
    return &retains_grad_hooks_[output_nr];
}


// ---- FunctionNode ----

FunctionNode::FunctionNode(std::string_view op, edge_list next_edges, std::vector<SavedVariable> saved, BackwardFn fn)
    : Node(op, std::move(next_edges), next_sequence_nr()), saved_(std::move(saved)), fn_(std::move(fn)) {}

tensor_list FunctionNode::apply(tensor_list&& grad_outputs) {
    // Built-in backward formulas may assume every incoming gradient is defined.
    for (size_t i = 0; i < grad_outputs.size(); ++i)
        if (!grad_outputs[i].defined()) grad_outputs[i] = output_meta[i].zeros();
    BackwardContext ctx(*this);
    return fn_(ctx, grad_outputs);
}

void FunctionNode::release_variables() {
    for (SavedVariable& s : saved_) s.release();
}

// Bytes the graph itself holds: tensors packed by a saved-tensor hook (checkpointing, offload)
// are held by the hook instead, and released tensors by nobody.
size_t FunctionNode::saved_bytes() const {
    size_t n = 0;
    for (const SavedVariable& s : saved_)
        if (!s.packed_by_hook() && !s.released()) n += s.nbytes();
    return n;
}

Tensor BackwardContext::saved(size_t i) const {
    AMPGRAD_CHECK(i < node_.saved().size(), "{}: saved({}) but only {} tensors were saved", node_.name(), i,
                  node_.saved().size());
    return node_.saved()[i].unpack(node_.shared_from_this());
}

// ---- AccumulateGrad ----

AccumulateGrad::AccumulateGrad(Tensor variable)
    : Node("AccumulateGrad", {}, kAccumulateGradSequenceNr), variable_(std::move(variable)) {
    output_meta.push_back(TensorMeta::of(variable_));
}

RemovableHandle AccumulateGrad::add_tensor_pre_hook(uint32_t, TensorHook hook, std::string_view key) {
    AutogradMeta& m = meta_of(variable_);
    if (!m.leaf_hooks) m.leaf_hooks = std::make_shared<HookList<TensorHook>>();
    return add_hook(m.leaf_hooks, std::move(hook), key);
}

bool AccumulateGrad::has_tensor_pre_hooks() const {
    AutogradMeta* m = maybe_meta(variable_);
    return m && m->leaf_hooks && !m->leaf_hooks->empty();
}

std::shared_ptr<HookList<TensorHook>> AccumulateGrad::tensor_pre_hooks(uint32_t) const {
    AutogradMeta* m = maybe_meta(variable_);
    return m ? m->leaf_hooks : nullptr;
}

// ---- PyTorch's gradient layout contract (torch/csrc/autograd/utils/grad_layout_contract.h) ----
// A parameter that is non-overlapping and dense (a permutation of a contiguous tensor, e.g. a
// transposed weight) gets a .grad with its own strides; any other parameter a contiguous one.

namespace {

// Dims of size > 1, by stride ascending, must step through the storage with no gap and no overlap.
bool non_overlapping_and_dense(const Tensor& t) {
    if (t.is_contiguous()) return true;
    std::vector<size_t> dims;
    for (size_t d = 0; d < t.sizes().size(); ++d)
        if (t.sizes()[d] != 1) dims.push_back(d);
    std::sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return t.strides()[a] < t.strides()[b]; });
    int64_t expected = 1;
    for (size_t d : dims) {
        if (t.strides()[d] != expected) return false;
        expected *= t.sizes()[d];
    }
    return true;
}

bool obeys_layout_contract(const Tensor& grad, const Tensor& param) {
    if (param.is_contiguous() || !non_overlapping_and_dense(param)) return grad.is_contiguous();
    for (size_t d = 0; d < param.sizes().size(); ++d)
        if (param.sizes()[d] != 1 && grad.strides()[d] != param.strides()[d]) return false;
    return true;
}

// A copy of grad laid out as the contract asks for param: for a dense non-contiguous param, the
// gradient permuted so that param's dims run outermost first, copied contiguous, and permuted back.
// clone() keeps the graph under create_graph; without grad mode the copy has no history.
Tensor clone_obeying_contract(const Tensor& grad, const Tensor& param) {
    const Tensor source = GradMode::is_enabled() ? grad : grad.detach();
    if (param.is_contiguous() || !non_overlapping_and_dense(param)) return source.clone();
    const size_t n = param.sizes().size();
    Shape order(n);                                          // dims by stride, outermost first
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return param.strides()[static_cast<size_t>(a)] > param.strides()[static_cast<size_t>(b)];
    });
    Shape back(n);
    for (size_t i = 0; i < n; ++i) back[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
    return source.permute(order).clone().permute(back);
}

}  // namespace

// PyTorch's AccumulateGrad (torch/csrc/autograd/functions/accumulate_grad.h): steal, copy or add.
tensor_list AccumulateGrad::apply(tensor_list&& grad_outputs) {
    Tensor& incoming = grad_outputs[0];
    if (!incoming.defined()) return {};
    AutogradMeta& m = meta_of(variable_);
    if (m.grad_fn) throw AutogradError("AccumulateGrad: leaf variable has been moved into the graph interior");
    if (!m.grad.defined()) {
        // Steal the buffer when nothing else can see it (no other handle, no other view of its
        // storage); otherwise keep our own copy. Under create_graph the copy is a differentiable
        // clone, so .grad carries history but never aliases the incoming tensor.
        // The copy follows the parameter's layout (the contract above).
        bool can_steal = !GradMode::is_enabled() && incoming.impl_ptr().use_count() == 1 &&
                         incoming.impl()->storage.use_count() == 1 && obeys_layout_contract(incoming, variable_) &&
                         !maybe_meta(incoming);
        if (can_steal) m.grad = std::move(incoming);
        else m.grad = clone_obeying_contract(incoming, variable_);
    } else if (GradMode::is_enabled()) {
        m.grad = m.grad + incoming;                 // create_graph: out of place, keeps history
    } else {
        NoGradGuard no_grad;
        m.grad.add_(incoming);
    }
    if (auto hooks = m.post_accumulate_hooks) hooks->for_each([&](const auto& entry) { (*entry.fn)(variable_); });
    return {};
}

}  // namespace ampgrad::autograd
