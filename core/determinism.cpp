// determinism.cpp: the deterministic mode's flag (core/determinism.hpp). Process-wide, not per
// thread: the kernels' worker threads and the training loop must agree on it.
#include "core/determinism.hpp"

#include <atomic>

namespace ampgrad {

namespace {
std::atomic<bool> deterministic_mode{false};
}

void set_deterministic(bool on) { deterministic_mode.store(on, std::memory_order_relaxed); }
bool deterministic() { return deterministic_mode.load(std::memory_order_relaxed); }

}  // namespace ampgrad
