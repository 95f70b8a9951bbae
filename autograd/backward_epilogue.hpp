// backward_epilogue.hpp: "run this once at the end of each user backward", for gradient hooks
// that bucket and reduce (DDP's Reducer, the ZeRO engine). Each post-accumulate-grad hook calls
// on_hook(); the first one of a backward runs `begin` and queues `end` on the OUTERMOST graph task
// (CallbackScope::kOutermost), so `end` runs once, after every reentrant checkpoint phase: the
// nested tasks' hooks see the same outermost id and do not queue it again. This replaces
// DeepSpeed's BackwardHookStateManager (deepspeed/runtime/base_optimizer.py), which needs a hook
// count per phase and a fallback when the callback cannot be queued.
//
//   autograd::BackwardEpilogue epilogue([&] { reset_buckets(); }, [&] { flush_and_wait(); });
//   p.register_post_accumulate_grad_hook([&](Tensor&) { if (epilogue.on_hook()) bucket(p); });
#pragma once
#include <cstdint>
#include <functional>

namespace ampgrad::autograd {

class BackwardEpilogue {
public:
    // ignore_backward_in_forward: hooks fired by a backward called inside a forward (a tiled loss,
    // docs/autograd.md §5) are not the user's backward: on_hook() returns false for them.
    BackwardEpilogue(std::function<void()> begin, std::function<void()> end, bool ignore_backward_in_forward = true);

    // Returns true if the caller should handle this gradient (false: a backward inside a forward).
    bool on_hook();
    bool in_backward() const { return task_id_ >= 0; }   // begun, `end` not yet run
    int64_t epilogues_run() const { return runs_; }
    // Forget an epilogue that never ran (its backward threw before the callbacks).
    void reset() { task_id_ = -1; }

private:
    std::function<void()> begin_, end_;
    bool ignore_in_forward_;
    int64_t task_id_ = -1;   // the outermost graph task whose `end` is queued
    int64_t runs_ = 0;
};

}  // namespace ampgrad::autograd
