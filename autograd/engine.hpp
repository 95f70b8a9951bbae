// engine.hpp: runs backward. One GraphTask per backward()/grad() call, with an id from a global
// counter; a ready queue ordered by sequence number (newest node first); gradients summed per
// input slot until a node's dependencies reach zero; queued callbacks after the last node.
// Reentrant calls (backward inside a node or hook) run a nested task on the same thread.
// Read docs/autograd.md for the walk-through.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "autograd/node.hpp"

namespace ampgrad::autograd {

// Where a queued callback belongs. kCurrent: the innermost running task (PyTorch's behaviour).
// kOutermost: the first task on this thread's stack, so a ZeRO-style epilogue runs once after
// every reentrant phase (e.g. reentrant checkpointing's nested backward calls).
enum class CallbackScope { kCurrent, kOutermost };

struct GraphTask;

// -1 outside backward; constant within one task (nested tasks get their own id).
int64_t current_graph_task_id();
// Depth of the graph task stack on this thread (0 outside backward).
int current_graph_task_depth();
// Queue fn to run once, FIFO, after every node of the task has run. Throws outside backward.
void queue_callback(std::function<void()> fn, CallbackScope scope = CallbackScope::kCurrent);
// True when every task on this thread's stack is a plain .backward() with no `inputs=` and no
// grad() (reentrant checkpointing requires it).
bool checkpoint_valid();
// The running task's id of the outermost task (-1 outside backward).
int64_t outermost_graph_task_id();

// Whether the current graph task will run `fn` (always true outside backward or for a plain
// backward(); in grad()/backward(inputs=) mode only nodes on a path to a requested input run).
bool task_should_compute(const Node* fn);

struct ExecuteOptions {
    bool keep_graph = false;
    bool create_graph = false;
    bool accumulate_grad = true;      // backward(): write .grad; grad(): capture instead
    edge_list outputs;                // restrict to these edges (grad() / backward(inputs=))
};

// Run backward from `roots` seeded with `root_grads`. Returns the captured gradients, one per
// ExecuteOptions::outputs entry (undefined where no gradient arrived).
tensor_list execute_graph(const edge_list& roots, const tensor_list& root_grads, const ExecuteOptions& opts);

}  // namespace ampgrad::autograd
