// engine.cpp: the backward engine (docs/autograd.md §2-5; PyTorch's torch/csrc/autograd/engine.cpp).
//
//   execute_graph()
//     1. make a GraphTask (new id; parent = the task already running on this thread, if any)
//     2. claim every node reachable from the roots and count its dependencies: how many edges
//        point at it (kept on the node itself, in Node::task_state)
//     3. in grad()/inputs= mode, mark which nodes lie on a path to a requested edge (exec info)
//     4. run the ready queue: pop the newest ready node, run its hooks and apply(), add each
//        produced gradient into the next node's input buffer; a node is ready at 0 dependencies
//     5. give the nodes back (their task_state is reset; also done when a node throws)
//     6. run the queued callbacks (FIFO; a callback may queue more)
// Reentrant backward (called from inside a node, hook or custom Function) runs steps 1-6 for a
// nested task, recursively on this thread, with its own ready queue.
#include "autograd/engine.hpp"

#include <atomic>
#include <queue>
#include <unordered_map>

#include "autograd/anomaly_mode.hpp"
#include "autograd/autograd_meta.hpp"
#include "autograd/engine_hooks.hpp"
#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/autocast_state.hpp"
#include "core/error.hpp"
#include "core/profiler.hpp"

namespace ampgrad::autograd {

namespace {

// Root node: hands the seed gradients to the roots' edges.
class GraphRoot final : public Node {
public:
    GraphRoot(edge_list roots, tensor_list grads)
        : Node("GraphRoot", std::move(roots), kAccumulateGradSequenceNr), grads_(std::move(grads)) {}
    tensor_list apply(tensor_list&&) override { return grads_; }

private:
    tensor_list grads_;
};

struct Capture {
    const Node* node;      // the node whose incoming gradient is requested
    uint32_t input_nr;     // which of its incoming slots
    size_t output_index;   // position in the captured results
};

}  // namespace

struct GraphTask {
    int64_t id = -1;
    bool keep_graph = false;
    bool create_graph = false;
    bool exec_mode = false;           // grad()/inputs=: only `needed` nodes run
    bool from_forward = false;        // started inside a forward region (see engine.hpp)
    int depth = 0;                    // 0 for an outermost task
    int forward_depth_at_start = 0;
    GraphTask* parent = nullptr;
    std::vector<Node*> claimed;       // nodes whose task_state this task owns
    std::unordered_map<const Node*, NodeTaskState> side;   // nodes another live task owns
    std::vector<Capture> captures;
    tensor_list captured;
    std::vector<std::function<void()>> final_callbacks;

    GraphTask() = default;
    GraphTask(const GraphTask&) = delete;
    GraphTask& operator=(const GraphTask&) = delete;
    ~GraphTask() { release_nodes(); }

    // The state of a node this task has reached (claimed or in the side table).
    NodeTaskState& state(Node* n) {
        if (n->task_state.owner.load(std::memory_order_relaxed) == this) return n->task_state;
        return side[n];
    }
    NodeTaskState* find_state(const Node* n) {
        if (n->task_state.owner.load(std::memory_order_relaxed) == this) return const_cast<NodeTaskState*>(&n->task_state);
        auto it = side.find(n);
        return it == side.end() ? nullptr : &it->second;
    }
    // Reach a node: claim it, or fall back to the side table. Returns false if already reached.
    bool reach(Node* n) {
        GraphTask* expected = nullptr;
        if (n->task_state.owner.compare_exchange_strong(expected, this, std::memory_order_acquire)) {
            claimed.push_back(n);
            return true;
        }
        if (expected == this) return false;
        return side.try_emplace(n).second;
    }
    // Gives every node back; returns true if one was left holding gradients it never consumed.
    bool release_nodes() {
        bool leftover = false;
        for (auto& [n, s] : side) leftover = leftover || has_gradients(s);
        for (Node* n : claimed) {
            NodeTaskState& s = n->task_state;
            leftover = leftover || has_gradients(s);
            tensor_list().swap(s.buffer);
            s.dependencies = 0;
            s.needed = true;
            s.captured = false;
            s.visited = false;
            s.owner.store(nullptr, std::memory_order_release);
        }
        claimed.clear();
        side.clear();
        return leftover;
    }
    static bool has_gradients(const NodeTaskState& s) {
        for (const Tensor& g : s.buffer)
            if (g.defined()) return true;
        return false;
    }
};

namespace {

// Nested tasks run recursively on this thread (a few KB of stack each); beyond this depth a clear
// error beats a stack overflow. (PyTorch hands deep tasks to another thread instead.)
constexpr int kMaxReentrantDepth = 256;

thread_local GraphTask* t_current_task = nullptr;
thread_local int t_forward_depth = 0;
std::atomic<int64_t> g_next_task_id{0};

GraphTask* outermost_task() {
    GraphTask* t = t_current_task;
    while (t && t->parent) t = t->parent;
    return t;
}

// Makes `task` current for the scope and restores the previous one, also when backward throws.
// Grad mode equals create_graph inside backward, as in PyTorch; backward never autocasts.
struct TaskScope {
    GraphTask* saved;
    AutoGradMode grad_mode;
    autocast::SuspendGuard no_autocast;
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
    if (!t_current_task)
        throw AutogradError("queue_callback: Final callbacks can only be installed during backward pass.");
    GraphTask* task = scope == CallbackScope::kOutermost ? outermost_task() : t_current_task;
    task->final_callbacks.push_back(std::move(fn));
}

bool checkpoint_valid() {
    for (GraphTask* t = t_current_task; t; t = t->parent)
        if (t->exec_mode) return false;
    return true;
}

bool task_should_compute(const Node* fn) {
    GraphTask* t = t_current_task;
    if (!t || !t->exec_mode) return true;
    const NodeTaskState* s = t->find_state(fn);
    return s && (s->needed || s->captured);
}

bool will_engine_execute_node(const Node* fn) {
    GraphTask* t = t_current_task;
    if (!t || !fn) return false;
    const NodeTaskState* s = t->find_state(fn);
    return s && (!t->exec_mode || s->needed || s->captured);
}

int64_t count_leaves_to_accumulate(const std::vector<Tensor>& leaves) {
    if (!t_current_task) return 0;
    int64_t n = 0;
    for (const Tensor& leaf : leaves) {
        const AutogradMeta* m = maybe_meta(leaf);
        if (!m) continue;
        std::shared_ptr<Node> acc = m->grad_accumulator.lock();
        if (acc && will_engine_execute_node(acc.get())) ++n;
    }
    return n;
}

bool backward_called_from_forward() { return t_current_task && t_current_task->from_forward; }
ForwardRegionGuard::ForwardRegionGuard() { ++t_forward_depth; }
ForwardRegionGuard::~ForwardRegionGuard() { --t_forward_depth; }

namespace {

// Claim every node reachable from the root and count the edges pointing at it.
void compute_dependencies(GraphTask& task, Node* root) {
    task.reach(root);
    std::vector<Node*> stack{root};
    while (!stack.empty()) {
        Node* n = stack.back();
        stack.pop_back();
        for (const Edge& e : n->next_edges()) {
            Node* next = e.fn.get();
            if (!next) continue;
            bool first_time = task.reach(next);
            ++task.state(next).dependencies;
            if (first_time) stack.push_back(next);
        }
    }
}

// grad()/backward(inputs=) (PyTorch's exec_info): the requested edges' nodes are captured (grad) or needed
// (backward); then every node from which such a node can be reached is needed too
// (iterative post-order DFS).
void init_exec_info(GraphTask& task, Node* root, const edge_list& outputs, bool accumulate_grad) {
    task.exec_mode = true;
    for (Node* n : task.claimed) task.state(n).needed = false;
    for (auto& [n, s] : task.side) s.needed = false;
    for (size_t i = 0; i < outputs.size(); ++i) {
        Node* fn = outputs[i].fn.get();
        if (!fn) continue;
        NodeTaskState* s = task.find_state(fn);
        if (!s) continue;                               // not reachable from the roots
        if (accumulate_grad) {
            s->needed = true;
        } else {
            s->captured = true;
            task.captures.push_back({fn, outputs[i].input_nr, i});
        }
    }
    struct Frame { Node* node; size_t next; };
    std::vector<Frame> stack{{root, 0}};
    task.state(root).visited = true;
    while (!stack.empty()) {
        Frame& f = stack.back();
        if (f.next < f.node->next_edges().size()) {
            Node* child = f.node->next_edges()[f.next++].fn.get();
            if (!child) continue;
            NodeTaskState& cs = task.state(child);
            if (!cs.visited) {
                cs.visited = true;
                stack.push_back({child, 0});
            }
            continue;
        }
        Node* n = f.node;
        stack.pop_back();
        NodeTaskState& s = task.state(n);
        for (const Edge& e : n->next_edges()) {
            if (!e.fn) continue;
            const NodeTaskState& c = task.state(e.fn.get());
            if (c.needed || c.captured) s.needed = true;
        }
    }
}

// grad(): record the requested incoming gradients of `node`. If the node will not run, its tensor
// pre-hooks run here (so a hook on an input still sees and may change its gradient); if it
// will run, the raw value is captured and the hooks run later, in call_function (as PyTorch's engine does).
void capture_gradients(GraphTask& task, Node& node, const tensor_list& inputs, bool will_run) {
    tensor_list hooked;
    const tensor_list* source = &inputs;
    if (!will_run && node.has_tensor_pre_hooks()) {
        hooked = inputs;
        run_tensor_pre_hooks(node, hooked);
        source = &hooked;
    }
    for (const Capture& c : task.captures)
        if (c.node == &node && c.input_nr < source->size()) task.captured[c.output_index] = (*source)[c.input_nr];
}

tensor_list call_function(GraphTask& task, Node& node, tensor_list&& inputs) {
    if (node.has_tensor_pre_hooks()) run_tensor_pre_hooks(node, inputs);
    if (node.has_pre_hooks()) run_pre_hooks(node, inputs);
    tensor_list grad_outputs_for_hooks = node.has_post_hooks() ? inputs : tensor_list{};
    std::optional<profiler::Span> span;   // the node's name is built only while profiling
    if (profiler::enabled()) [[unlikely]] span.emplace("backward", node.name());
    tensor_list outputs = node.apply(std::move(inputs));
    validate_grads(node, outputs);
    if (anomaly_mode_enabled()) check_anomaly(node, outputs);
    if (node.has_post_hooks()) run_post_hooks(node, outputs, grad_outputs_for_hooks);
    if (!task.keep_graph) node.release_variables();
    return outputs;
}

// Anomaly mode: an AutogradError raised while running a node also names where in the forward
// that node was made (PyTorch prints the forward traceback the same way).
tensor_list call_function_traced(GraphTask& task, Node& node, tensor_list&& inputs) {
    try {
        return call_function(task, node, std::move(inputs));
    } catch (const AutogradError& e) {
        std::string what = e.what();
        if (node.creation_trace.empty() || what.find("The forward call that created") != std::string::npos) throw;
        throw AutogradError(fmt::format("{}\nThe forward call that created {} (op '{}'):\n{}", what, node.name(),
                                        node.op(), node.creation_trace));
    }
}

// Sum `grad` into slot `slot` of a node's input buffer (InputBuffer::add).
void accumulate_into(tensor_list& buffer, size_t slot, Tensor&& grad) {
    if (!grad.defined()) return;
    Tensor& cur = buffer[slot];
    if (!cur.defined()) {
        cur = std::move(grad);
    } else if (GradMode::is_enabled()) {
        cur = cur + grad;                                        // create_graph: keep history
    } else if (cur.impl_ptr().use_count() == 1 && cur.impl()->storage.use_count() == 1 && cur.is_contiguous() &&
               cur.sizes() == grad.sizes() && cur.dtype() == grad.dtype()) {
        cur.add_(grad);                                          // nobody else sees it: in place
    } else {
        cur = cur + grad;
    }
}

struct ReadyNode {
    uint64_t sequence_nr;
    Node* node;
    bool operator<(const ReadyNode& o) const { return sequence_nr < o.sequence_nr; }   // newest first
};

// Hand a node's outputs to the next nodes; push those whose dependencies reach zero.
void route_outputs(GraphTask& task, Node& node, tensor_list& outputs, std::priority_queue<ReadyNode>& ready) {
    for (size_t i = 0; i < outputs.size(); ++i) {
        const Edge& e = node.next_edge(i);
        Node* next = e.fn.get();
        if (!next) continue;
        NodeTaskState& s = task.state(next);
        bool is_ready = --s.dependencies == 0;
        if (task.exec_mode && !s.needed && !s.captured) continue;      // never runs: drop
        if (s.buffer.empty()) s.buffer.resize(std::max<size_t>(next->num_grad_outputs(), e.input_nr + 1));
        accumulate_into(s.buffer, e.input_nr, std::move(outputs[i]));
        if (is_ready) ready.push({next->sequence_nr(), next});
    }
}

void run_ready_queue(GraphTask& task, Node* root) {
    std::priority_queue<ReadyNode> ready;
    ready.push({root->sequence_nr(), root});
    while (!ready.empty()) {
        Node& node = *ready.top().node;
        ready.pop();
        NodeTaskState& s = task.state(&node);
        tensor_list inputs = std::move(s.buffer);
        s.buffer.clear();
        if (task.exec_mode) {
            if (s.captured) capture_gradients(task, node, inputs, s.needed);
            if (!s.needed) continue;
        }
        tensor_list outputs = anomaly_mode_enabled() ? call_function_traced(task, node, std::move(inputs))
                                                     : call_function(task, node, std::move(inputs));
        route_outputs(task, node, outputs, ready);
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
    // The root is made first so it outlives the task: ~GraphTask gives back every claimed node,
    // the root included, also when a node throws.
    if (t_current_task && t_current_task->depth + 1 >= kMaxReentrantDepth)
        throw AutogradError(fmt::format("backward: reentrant backward nested {} deep (the limit is {}); a node or "
                                        "hook keeps calling backward() from inside backward",
                                        t_current_task->depth + 2, kMaxReentrantDepth));
    auto root = std::make_shared<GraphRoot>(roots, root_grads);
    GraphTask task;
    task.id = g_next_task_id.fetch_add(1);
    task.keep_graph = opts.keep_graph;
    task.create_graph = opts.create_graph;
    task.parent = t_current_task;
    task.depth = task.parent ? task.parent->depth + 1 : 0;
    task.forward_depth_at_start = t_forward_depth;
    task.from_forward = task.parent ? task.parent->from_forward || t_forward_depth > task.parent->forward_depth_at_start
                                    : t_forward_depth > 0;
    task.captured.resize(opts.accumulate_grad ? 0 : opts.outputs.size());

    // Seeds are validated like any node's results (validate_grads): e.g. an f64 seed for an f32 root is cast.
    root->input_meta.reserve(roots.size());
    for (size_t i = 0; i < roots.size(); ++i) {
        const Edge& e = roots[i];
        bool known = e.fn && e.input_nr < e.fn->output_meta.size();
        root->input_meta.push_back(known ? e.fn->output_meta[e.input_nr]
                                         : (i < root_grads.size() && root_grads[i].defined() ? TensorMeta::of(root_grads[i])
                                                                                            : TensorMeta{}));
    }
    compute_dependencies(task, root.get());
    if (!opts.outputs.empty()) init_exec_info(task, root.get(), opts.outputs, opts.accumulate_grad);
    {
        TaskScope scope(&task);
        run_ready_queue(task, root.get());
        // Nodes go back before the callbacks run (a callback may start a backward over this graph).
        // As in PyTorch: a node that got some gradient but never all of them means the graph changed under us.
        if (task.release_nodes()) throw AutogradError("backward: could not compute gradients for some functions");
        run_final_callbacks(task);
    }
    return std::move(task.captured);
}

}  // namespace ampgrad::autograd
