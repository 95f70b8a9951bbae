// checkpoint_state.hpp: a thread-local flag saying "we are inside a checkpointed forward", so
// nodes made there are marked in graph dumps. Set by checkpoint.cpp.
#pragma once

namespace ampgrad::autograd {

bool in_checkpoint_region();

class CheckpointRegionGuard {
public:
    CheckpointRegionGuard();
    ~CheckpointRegionGuard();
    CheckpointRegionGuard(const CheckpointRegionGuard&) = delete;
    CheckpointRegionGuard& operator=(const CheckpointRegionGuard&) = delete;

private:
    bool previous_;
};

}  // namespace ampgrad::autograd
