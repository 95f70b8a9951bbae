// engine.cpp: the backward engine (pytorch-semantics §1, §3).
//
//   execute_graph()
//     1. make a GraphTask (new id, parent = the task already running on this thread, if any)
//     2. count dependencies: how many edges point at each node reachable from the roots
//     3. in grad()/inputs= mode, mark which nodes lie on a path to a requested edge (exec_info)
//     4. run the ready queue: pop the newest ready node, run its hooks and apply(), add each
//        produced gradient into the next node's input buffer; a node is ready at 0 dependencies
//     5. run the queued callbacks (FIFO; a callback may queue more)
// Reentrant backward (called from inside a node/hook) simply runs steps 1-5 for a nested task,
// recursively on this thread, with its own ready queue.
#include "autograd/engine.hpp"

#include <atomic>
#include <queue>

#include "autograd/anomaly_mode.hpp"
#include "autograd/autograd_meta.hpp"
#include "autograd/grad_mode.hpp"
#include "autograd/ops/autocast_hook.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::autograd {

namespace {

struct Capture {
    uint32_t input_nr;     // slot of the node's incoming gradients
    size_t output_index;   // position in the captured results
};
struct ExecInfo {
    bool needed = false;
    std::vector<Capture> captures;
};

// Root node: hands the seed gradients to the roots' edges.
class GraphRoot final : public Node {
public:
    GraphRoot(edge_list roots, tensor_list grads)
        : Node("GraphRoot", std::move(roots), kAccumulateGradSequenceNr), grads_(std::move(grads)) {}
    tensor_list apply(tensor_list&&) override { return grads_; }

private:
    tensor_list grads_;
};

struct NodeTask {
    Node* node;
    tensor_list inputs;
};

}  // namespace

struct GraphTask {
    int64_t id = -1;
    bool keep_graph = false;
    bool create_graph = false;
    bool accumulate_grad = true;
    int depth = 0;
    GraphTask* parent = nullptr;
    std::unordered_map<const Node*, int> dependencies;
    std::unordered_map<const Node*, tensor_list> buffers;      // gradients waiting for a node
    std::unordered_map<const Node*, ExecInfo> exec_info;       // empty: run every node
    tensor_list captured;
    std::vector<std::function<void()>> final_callbacks;
};

namespace {
thread_local GraphTask* t_current_task = nullptr;
std::atomic<int64_t> g_next_task_id{0};

GraphTask* outermost_task() {
    GraphTask* t = t_current_task;
    while (t && t->parent) t = t->parent;
    return t;
}

// Restores the thread's task and grad mode even when backward throws.
struct TaskScope {
    GraphTask* saved;
    AutoGradMode grad_mode;
    amp::AutocastSuspendGuard no_autocast;      // backward runs in the forward's dtypes
    explicit TaskScope(GraphTask* task) : saved(t_current_task), grad_mode(task->create_graph) { t_current_task = task; }
    ~TaskScope() { t_current_task = saved; }
};
}  // namespace

int64_t current_graph_task_id() { return t_current_task ? t_current_task->id : -1; }
int current_graph_task_depth() { return t_current_task ? t_current_task->depth + 1 : 0; }

int64_t outermost_graph_task_id() {
    GraphTask* t = outermost_task();
    return t ? t->id : -1;
}

void queue_callback(std::function<void()> fn, CallbackScope scope) {
    if (!t_current_task) throw AutogradError("queue_callback: Final callbacks can only be installed during backward pass.");
    GraphTask* task = scope == CallbackScope::kOutermost ? outermost_task() : t_current_task;
    task->final_callbacks.push_back(std::move(fn));
}

bool checkpoint_valid() {
    for (GraphTask* t = t_current_task; t; t = t->parent)
        if (!t->exec_info.empty() || !t->accumulate_grad) return false;
    return true;
}

bool task_should_compute(const Node* fn) {
    GraphTask* t = t_current_task;
    if (!t || t->exec_info.empty()) return true;
    auto it = t->exec_info.find(fn);
    return it != t->exec_info.end() && (it->second.needed || !it->second.captures.empty());
}

namespace {

void compute_dependencies(GraphTask& task, Node* root) {
    std::vector<Node*> stack{root};
    std::unordered_map<const Node*, bool> seen;
    seen[root] = true;
    while (!stack.empty()) {
        Node* n = stack.back();
        stack.pop_back();
        for (const Edge& e : n->next_edges()) {
            if (!e.fn) continue;
            ++task.dependencies[e.fn.get()];
            if (!seen[e.fn.get()]) {
                seen[e.fn.get()] = true;
                stack.push_back(e.fn.get());
            }
        }
    }
}

// Mark every node from which one of `outputs` can be reached (iterative post-order DFS).
void init_exec_info(GraphTask& task, Node* root, const edge_list& outputs) {
    for (size_t i = 0; i < outputs.size(); ++i) {
        if (!outputs[i].fn) continue;
        task.exec_info[outputs[i].fn.get()].captures.push_back({outputs[i].input_nr, i});
    }
    struct Frame { Node* node; size_t next; };
    std::vector<Frame> stack{{root, 0}};
    std::unordered_map<const Node*, bool> visited{{root, true}};
    while (!stack.empty()) {
        Frame& f = stack.back();
        if (f.next < f.node->next_edges().size()) {
            Node* child = f.node->next_edges()[f.next++].fn.get();
            if (child && !visited[child]) {
                visited[child] = true;
                stack.push_back({child, 0});
            }
            continue;
        }
        Node* n = f.node;
        stack.pop_back();
        bool needed = false;
        auto it = task.exec_info.find(n);
        if (it != task.exec_info.end() && !it->second.captures.empty()) needed = true;   // a requested edge
        for (const Edge& e : n->next_edges()) {
            if (!e.fn) continue;
            auto c = task.exec_info.find(e.fn.get());
            if (c != task.exec_info.end() && c->second.needed) needed = true;
        }
        if (needed) task.exec_info[n].needed = true;
    }
    // Nodes whose only role is to receive a captured gradient need not run in grad() mode.
    for (auto& [node, info] : task.exec_info) {
        if (!task.accumulate_grad && !info.captures.empty()) {
            bool feeds_other = false;
            for (const Edge& e : node->next_edges()) {
                auto c = task.exec_info.find(e.fn.get());
                if (e.fn && c != task.exec_info.end() && c->second.needed) feeds_other = true;
            }
            if (!feeds_other) info.needed = false;
        }
    }
}

// A hook returned something incompatible with the gradient it replaced (pytorch-semantics §2).
void check_hook_result(const Tensor& before, const Tensor& after, const std::string& hook_name) {
    if (!before.defined()) {
        if (after.defined())
            throw AutogradError(fmt::format("hook '{}': can't replace a None gradient with a non-None value", hook_name));
        return;
    }
    if (after.dtype() != before.dtype())
        throw AutogradError(fmt::format("hook '{}' has changed the type of value (was {} got {})", hook_name,
                                        dtype_name(before.dtype()), dtype_name(after.dtype())));
    if (after.device() != before.device())
        throw AutogradError(fmt::format("hook '{}' has changed the device of value (was {} got {})", hook_name,
                                        before.device().str(), after.device().str()));
    if (after.sizes() != before.sizes())
        throw AutogradError(fmt::format("hook '{}' has changed the size of value (was {} got {})", hook_name,
                                        before.shape_str(), after.shape_str()));
}

void run_tensor_pre_hooks(Node& node, tensor_list& grads) {
    for (uint32_t slot = 0; slot < grads.size(); ++slot) {
        for (auto& [id, hook] : node.tensor_pre_hooks(slot)) {
            Tensor replaced = hook(grads[slot]);
            if (!replaced.defined()) continue;
            check_hook_result(grads[slot], replaced, fmt::format("tensor hook {} on {}", id, node.name()));
            grads[slot] = std::move(replaced);
        }
        if (auto* retain = node.retains_grad_hook(slot)) (*retain)(grads[slot]);
    }
}

void check_list_hook_result(const tensor_list& before, const tensor_list& after, const std::string& hook_name) {
    if (after.size() != before.size())
        throw AutogradError(fmt::format("hook '{}' has returned an incorrect number of values (got {}, but expected {})",
                                        hook_name, after.size(), before.size()));
    for (size_t i = 0; i < before.size(); ++i)
        if (before[i].defined() || after[i].defined()) check_hook_result(before[i], after[i], hook_name);
}

// validate_outputs (pytorch-semantics §1.7): count, shape (sum down if broadcastable), dtype, device.
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
                                                node.name(), i, g.shape_str(), shape_str(m.shape)));
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

tensor_list call_function(GraphTask& task, Node& node, tensor_list&& inputs) {
    run_tensor_pre_hooks(node, inputs);
    for (auto& [id, hook] : node.pre_hooks()) {
        tensor_list r = hook(inputs);
        if (r.empty()) continue;
        check_list_hook_result(inputs, r, fmt::format("prehook {} on {}", id, node.name()));
        inputs = std::move(r);
    }
    tensor_list grad_outputs_for_hooks = node.has_post_hooks() ? inputs : tensor_list{};
    tensor_list outputs = node.apply(std::move(inputs));
    validate_grads(node, outputs);
    if (anomaly_mode_enabled()) check_anomaly(node, outputs);
    for (auto& [id, hook] : node.post_hooks()) {
        tensor_list r = hook(outputs, grad_outputs_for_hooks);
        if (r.empty()) continue;
        check_list_hook_result(outputs, r, fmt::format("hook {} on {}", id, node.name()));
        outputs = std::move(r);
    }
    if (!task.keep_graph) node.release_variables();
    return outputs;
}

void accumulate_into(tensor_list& buffer, size_t slot, Tensor&& grad) {
    if (!grad.defined()) return;
    Tensor& cur = buffer[slot];
    if (!cur.defined()) {
        cur = std::move(grad);
    } else if (GradMode::is_enabled()) {
        cur = cur + grad;                                        // create_graph: keep history
    } else if (cur.impl_ptr().use_count() == 1 && cur.is_contiguous() && cur.sizes() == grad.sizes() &&
               cur.dtype() == grad.dtype()) {
        cur.add_(grad);                                          // we own it: add in place
    } else {
        cur = cur + grad;
    }
}

struct ReadyOrder {
    bool operator()(const NodeTask& a, const NodeTask& b) const {
        return a.node->sequence_nr() < b.node->sequence_nr();   // max-heap: newest first
    }
};

void run_ready_queue(GraphTask& task, Node* root) {
    std::priority_queue<NodeTask, std::vector<NodeTask>, ReadyOrder> ready;
    ready.push({root, {}});
    while (!ready.empty()) {
        NodeTask t = std::move(const_cast<NodeTask&>(ready.top()));
        ready.pop();
        Node& node = *t.node;
        bool needed = true;
        if (!task.exec_info.empty()) {
            auto it = task.exec_info.find(&node);
            if (it != task.exec_info.end() && !it->second.captures.empty()) {
                tensor_list hooked = t.inputs;
                if (!it->second.needed) run_tensor_pre_hooks(node, hooked);
                for (const Capture& c : it->second.captures) task.captured[c.output_index] = hooked[c.input_nr];
            }
            needed = it != task.exec_info.end() && it->second.needed;
        }
        if (!needed) continue;
        tensor_list outputs = call_function(task, node, std::move(t.inputs));
        for (size_t i = 0; i < outputs.size(); ++i) {
            const Edge& e = node.next_edge(i);
            if (!e.fn) continue;
            Node* next = e.fn.get();
            tensor_list& buf = task.buffers[next];
            if (buf.empty()) buf.resize(std::max<size_t>(next->num_grad_outputs(), e.input_nr + 1));
            accumulate_into(buf, e.input_nr, std::move(outputs[i]));
            if (--task.dependencies[next] == 0) {
                ready.push({next, std::move(buf)});
                task.buffers.erase(next);
            }
        }
    }
}

void run_final_callbacks(GraphTask& task) {
    // Index loop: a callback may queue more callbacks, which then run in this same loop.
    for (size_t i = 0; i < task.final_callbacks.size(); ++i) {
        std::function<void()> cb = std::move(task.final_callbacks[i]);
        cb();
    }
    task.final_callbacks.clear();
}

}  // namespace

tensor_list execute_graph(const edge_list& roots, const tensor_list& root_grads, const ExecuteOptions& opts) {
    GraphTask task;
    task.id = g_next_task_id.fetch_add(1);
    task.keep_graph = opts.keep_graph;
    task.create_graph = opts.create_graph;
    task.accumulate_grad = opts.accumulate_grad;
    task.parent = t_current_task;
    task.depth = t_current_task ? t_current_task->depth + 1 : 0;
    task.captured.resize(opts.outputs.size());

    auto root = std::make_shared<GraphRoot>(roots, root_grads);
    compute_dependencies(task, root.get());
    if (!opts.outputs.empty()) init_exec_info(task, root.get(), opts.outputs);
    {
        TaskScope scope(&task);
        run_ready_queue(task, root.get());
        run_final_callbacks(task);
    }
    return std::move(task.captured);
}

}  // namespace ampgrad::autograd
