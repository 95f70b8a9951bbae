// deterministic_run.hpp: what `train --deterministic` adds to the trainer (issue 35;
// docs/determinism.md). The ZeRO engine adds the gradients in one tree (zero/engine_tree.cpp); the
// trainer makes every micro-batch's inputs a function of the global micro-batch index, not of the
// rank: micro-batch g = rank * grad_accum + k of step s draws its windows, and its dropout masks,
// from Philox streams keyed on (seed, s, g). The logged loss is the tree mean over the same index.
#pragma once
#include <cstdint>
#include <vector>

#include "app/run_config.hpp"

namespace ampgrad::app {

// What a keyed stream is for: each gets its own key, so batches and dropout never share draws.
enum class KeyedStream : uint64_t { kBatches = 1, kDropout = 2 };

// A 64-bit seed for (run seed, step, global micro-batch, stream), from one Philox block.
uint64_t keyed_seed(uint64_t seed, int64_t step, int64_t global_micro_batch, KeyedStream stream);

// --deterministic: ValueError unless the run uses the ZeRO engine (--zero 0..3; stage 0 is plain data
// parallelism, in one process too) and world size and grad_accum are powers of two.
void check_deterministic_run(const RunConfig& cfg, int world_size);

// The mean of every rank's micro-batch losses (this rank's in `mine`, in micro-batch order), added
// in the binary tree over the global micro-batch index: the same bits in every layout. A collective
// when distributed.
double tree_mean_loss(const std::vector<double>& mine, bool distributed);

}  // namespace ampgrad::app
