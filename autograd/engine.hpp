// engine.hpp: runs backward. One GraphTask per backward()/grad() call, with an id from a global
// counter; a ready queue ordered by sequence number (newest node first); gradients summed per
// input slot until a node's dependencies reach zero; queued callbacks after the last node.
// Reentrant calls (backward inside a node, hook or custom Function) run a nested task on the
// same thread. Read docs/autograd.md for the walk-through.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "autograd/node.hpp"

namespace ampgrad::autograd {

// Where a queued callback belongs.
//   kCurrent:   the innermost running task; it runs when that task ends (PyTorch's behaviour).
//   kOutermost: the first task on this thread's stack, so an epilogue (ZeRO's gradient flush)
//               runs once, after every reentrant phase, e.g. after reentrant checkpointing's
//               nested backward calls have all finished.
enum class CallbackScope { kCurrent, kOutermost };

// -1 outside backward; constant within one task (a nested task has its own id, and the parent's
// id is current again once the nested task returns).
int64_t current_graph_task_id();
// The id of the outermost task on this thread's stack (-1 outside backward).
int64_t outermost_graph_task_id();
// Number of tasks on this thread's stack: 0 outside backward, 1 in a plain backward, 2 inside a
// backward called from a hook of that backward, ...
int current_graph_task_depth();
// Queue fn to run once, FIFO, after every node of the task has run (a callback may queue more).
// Throws AutogradError outside backward.
void queue_callback(std::function<void()> fn, CallbackScope scope = CallbackScope::kCurrent);
// True when every task on this thread's stack is a plain .backward() (no `inputs=`, not grad()):
// reentrant checkpointing needs it.
bool checkpoint_valid();
// Whether the current graph task will run `fn`: always true outside backward and in a plain
// backward(); in grad()/backward(inputs=) mode only nodes on a path to a requested input run.
bool task_should_compute(const Node* fn);
// PyTorch's torch._C._will_engine_execute_node: whether the running task reached `fn` when it
// walked the graph from its roots (and, in grad()/inputs= mode, needs it). False outside backward.
bool will_engine_execute_node(const Node* fn);
// How many of `leaves` the running task will accumulate a gradient into (their AccumulateGrad
// node is in its graph). A ZeRO epilogue counts once per backward phase with this, rather than
// once per hook (DeepSpeed's count_used_parameters_in_backward; PR #7886 made it once per phase).
// 0 outside backward.
int64_t count_leaves_to_accumulate(const std::vector<Tensor>& leaves);

// ---- backward called from inside a forward ----
// A custom Function's forward or a checkpointed region may itself call backward() (a tiled loss
// does). Such a task is not "the user's backward": hooks that count phases (ZeRO) ask this.
// True while the running task was started from inside a forward region opened after the
// enclosing task (if any) began.
bool backward_called_from_forward();
// Marks "inside a forward" for the scope (Function::apply and checkpoint() open one).
class ForwardRegionGuard {
public:
    ForwardRegionGuard();
    ~ForwardRegionGuard();
    ForwardRegionGuard(const ForwardRegionGuard&) = delete;
    ForwardRegionGuard& operator=(const ForwardRegionGuard&) = delete;
};

struct ExecuteOptions {
    bool keep_graph = false;
    bool create_graph = false;
    bool accumulate_grad = true;      // backward(): write .grad; grad(): capture instead
    edge_list outputs;                // restrict to these edges (grad() / backward(inputs=))
};

// Run backward from `roots` seeded with `root_grads`. Returns the captured gradients, one per
// ExecuteOptions::outputs entry (undefined where no gradient arrived; empty for backward()).
tensor_list execute_graph(const edge_list& roots, const tensor_list& root_grads, const ExecuteOptions& opts);

}  // namespace ampgrad::autograd
