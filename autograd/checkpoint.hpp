// checkpoint.hpp: activation checkpointing. fn's intermediate tensors are not kept for backward;
// backward recomputes them from fn's inputs, replaying the forward's RNG and autocast state.
//
//   tensor_list h = checkpoint([&](const tensor_list& in) { return tensor_list{block(in[0])}; }, {x});
//
// Two variants (PyTorch's torch/utils/checkpoint.py; docs/autograd.md §7 compares them):
//   non-reentrant (default): fn runs normally, but every tensor its ops save is replaced by a
//     placeholder through saved-tensor hooks. The first unpack in a graph task recomputes fn
//     (stopping as soon as every saved tensor is back) and fills the placeholders for that task.
//     Works with grad(), backward(inputs=) and nesting.
//   reentrant (use_reentrant = true): fn runs under no_grad inside one custom Function whose
//     backward recomputes fn with grad and calls backward() on it: a nested graph task, so
//     parameter hooks inside fn fire in a second phase. Needs a plain .backward().
#pragma once
#include <functional>

#include "core/tensor.hpp"

namespace ampgrad {

struct CheckpointOptions {
    bool use_reentrant = false;
    bool preserve_rng_state = true;   // replay the forward's random numbers on recompute
    bool early_stop = true;           // non-reentrant: stop recomputing once every saved tensor is back
    bool determinism_check = true;    // non-reentrant: recomputed tensors must match (count, shape, dtype, device)
};

using CheckpointFn = std::function<tensor_list(const tensor_list&)>;

tensor_list checkpoint(const CheckpointFn& fn, const tensor_list& inputs, CheckpointOptions opts = {});

}  // namespace ampgrad
