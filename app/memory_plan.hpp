// memory_plan.hpp: `ampgrad plan`'s arithmetic: the bytes one rank of a training run will hold at its
// peak, before the run, from the same flags as `train` (model, --prec, --zero, --batch-size,
// --block-size, --grad-accum, --checkpoint-blocks, --device) plus the number of ranks. The answer is
// split into the terms a user can act on: parameters, gradients, optimizer state, master weights,
// activations by layer kind, the attention workspace, communication buckets and allocator overhead.
//
// How it is computed (docs/profiling.md, "Planning memory"):
//   - model states follow the ZeRO paper's accounting (Rajbhandari et al. 2020, Table 1; DeepSpeed's
//     estimate_zero*_model_states_mem_needs) with this engine's actual buffers (zero/engine.cpp);
//   - activations are the tensors each op saves for backward (autograd/ops/*.cpp record(...) calls),
//     counted per token per layer kind (app/activation_plan.hpp);
//   - the peak is the larger of two moments: the start of backward (every activation saved, the
//     loss's gradient just made) and the optimizer step (every gradient made, the optimizer's work
//     buffers live). Which one it is is part of the answer.
// It is checked against the CPU allocator's high-water mark in tests/app/memory_plan_test.cpp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "app/run_config.hpp"

namespace ampgrad::app {

struct PlanRequest {
    RunConfig run;          // the train flags: batch_size is all ranks' (as in train), zero -1 means none
    int world_size = 1;     // --world-size: the ranks the run will have
    int64_t vocab_size = 0; // the model's V (0: the preset's own)
};

struct MemoryTerm {
    std::string name;       // "parameters", "activations: attention", ...
    int64_t bytes = 0;      // held at the peak, one rank
    std::string formula;    // how it was counted, in symbols and numbers
};

// The sizes a plan is made from (read from the model the flags describe, built without values).
struct ModelShape {
    std::string family;     // "gpt", "llama", "qwen2"
    int64_t num_parameters = 0;     // trainable elements (a tied head counted once)
    int64_t matmul_weight_numel = 0;   // elements of 2-D weights that enter a GEMM (autocast copies them)
    int64_t n_layer = 0, hidden = 0, mlp_hidden = 0, n_head = 0, n_kv_head = 0, head_size = 0;
    int64_t vocab = 0, padded_vocab = 0, context = 0;
    int64_t buffer_bytes = 0;       // non-trainable state (rotary tables)
    std::vector<int64_t> param_numels;  // each trainable parameter's elements, in order (ZeRO's flat layout)
    int64_t layer_numel = 0;            // the trainable elements of one block (the first)
    // --prec fp8: the weights of the Linears that run in fp8 (amp::Fp8Training's choice: all but the
    // first and the last), which autocast does not copy to bf16, and the fp8 recipe's state.
    int64_t fp8_weight_numel = 0;
    int64_t fp8_state_bytes = 0;
};

struct MemoryPlan {
    ModelShape model;
    int64_t batch_per_rank = 0, context = 0;
    std::string peak_moment;        // "start of backward" or "optimizer step"
    std::vector<MemoryTerm> terms;  // at the peak; their sum is total_bytes
    int64_t total_bytes = 0;
    std::string largest;            // the largest term's name and share
    std::string advice;             // the flag that would cut it most, and what to
};

ModelShape model_shape(const RunConfig& run, int64_t vocab_size);
// ValueError naming the flag for a combination train refuses (fp16 with --zero, a batch the ranks
// cannot split, world size > 1 without --zero).
MemoryPlan plan_memory(const PlanRequest& request);
// The plan as `ampgrad plan` prints it: one row per term, the total, the largest term and the advice.
std::string format_plan(const MemoryPlan& plan);
std::string format_bytes(int64_t bytes);   // "1.23 GiB", "456.0 MiB", "789 B"

}  // namespace ampgrad::app
