// autocast.cpp: placeholder state for the autocast hook until the AMP issue lands.
#include "autograd/ops/autocast_hook.hpp"

namespace ampgrad::amp {

namespace {
thread_local bool t_suspended = false;
}  // namespace

bool autocast_active() { return false && !t_suspended; }
void autocast_inputs(std::string_view, std::initializer_list<Tensor*>) {}

AutocastSuspendGuard::AutocastSuspendGuard() : previous_(t_suspended) { t_suspended = true; }
AutocastSuspendGuard::~AutocastSuspendGuard() { t_suspended = previous_; }

}  // namespace ampgrad::amp
