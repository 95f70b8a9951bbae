// run_states.hpp: a training run's saved state under names that do not depend on how it was laid out,
// so that `ampgrad verify` (app/verify_runs.hpp) can compare a one-process run with a ZeRO run at
// any world size and stage, bit for bit.
//
//   param/<name>        the model's parameters (and saved buffers), in their saved dtype
//   master/<name>       the f32 master weights (fp16-master, or ZeRO's masters)
//   exp_avg/<name>      each optimizer state, by parameter (AdamW: exp_avg, exp_avg_sq, step)
//
// The plain trainer writes model.safetensors (a tied weight once, with its alias recorded) and
// optimizer.safetensors ("<state>.<parameter>"); a ZeRO checkpoint writes one flat range per rank
// (zero/checkpoint.hpp), which is read back through the manifest's parameter table. ZeRO keeps one
// step counter for the whole flat buffer: it is given to every parameter, as the plain optimizer
// stores it.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace ampgrad::app {

using CanonicalState = std::map<std::string, Tensor>;   // layout-free name -> CPU tensor, as saved

// The state of one checkpoint directory of either kind (IOError naming it when it is neither).
CanonicalState read_canonical_state(const std::string& checkpoint_dir);

// The checkpoints a run folder holds, by step: OUT/checkpoints/step-N (or a checkpoints root
// itself). Directories of unfinished saves (hidden temporaries) are not listed.
std::map<int64_t, std::string> list_checkpoints(const std::string& run_dir);

}  // namespace ampgrad::app
