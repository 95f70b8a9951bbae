// grad_mode.cpp: thread-local grad mode, anomaly mode and checkpoint-region flags.
#include "autograd/grad_mode.hpp"

#include "autograd/checkpoint_state.hpp"

namespace ampgrad {

namespace {
thread_local bool t_grad_enabled = true;
thread_local bool t_in_checkpoint = false;
}  // namespace

bool GradMode::is_enabled() { return t_grad_enabled; }
void GradMode::set_enabled(bool enabled) { t_grad_enabled = enabled; }

namespace autograd {
bool in_checkpoint_region() { return t_in_checkpoint; }
CheckpointRegionGuard::CheckpointRegionGuard() : previous_(t_in_checkpoint) { t_in_checkpoint = true; }
CheckpointRegionGuard::~CheckpointRegionGuard() { t_in_checkpoint = previous_; }
}  // namespace autograd

}  // namespace ampgrad
