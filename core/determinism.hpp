// determinism.hpp: the process-wide deterministic mode (issue 35; docs/determinism.md). Under it the
// same model, data and seed give the same bits whatever the layout (world size, ZeRO stage,
// accumulation split, thread count): the ZeRO engine adds the micro-batches' gradients in one
// binary tree over the global micro-batch index (dist/tree_reduce.hpp), and the trainer keys its
// batches and dropout masks on (seed, step, global micro-batch). Like grad mode, a flag that code
// reads where it chooses between a fast order and a fixed one.
//
//   ampgrad::set_deterministic(true);
//   { ampgrad::DeterministicGuard off(false); ... }   // scoped
#pragma once

namespace ampgrad {

void set_deterministic(bool on);
bool deterministic();

// Sets the mode for a scope and restores the previous one.
class DeterministicGuard {
public:
    explicit DeterministicGuard(bool on) : previous_(deterministic()) { set_deterministic(on); }
    ~DeterministicGuard() { set_deterministic(previous_); }
    DeterministicGuard(const DeterministicGuard&) = delete;
    DeterministicGuard& operator=(const DeterministicGuard&) = delete;

private:
    bool previous_;
};

}  // namespace ampgrad
