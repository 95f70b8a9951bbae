// activation_plan.hpp: the activation bytes of one micro-batch, by layer kind, for `ampgrad plan`
// (app/memory_plan.hpp). Each count is the tensors an op keeps for its backward, read off the op's
// record(...) call in autograd/ops/ (the "saved" list), per token:
//
//   LayerNorm / RMSNorm   x and its row statistics (layer_norm.cpp: x, mean, rstd; rms_norm.cpp: x, rstd)
//   Linear                its input x (matmul.cpp, linear); under autocast the input's low-precision copy,
//                         one per Linear that reads it (q/k/v_proj each cast the normed x)
//   SDPA (fused)          q, k, v, out and the row log-sum-exp (attention_fused.cpp)
//   rotary                its input (rotary.cpp), then the rotated q, k that SDPA keeps
//   GELU / SiLU, product  the activation's input (activation.cpp) and its output (the next GEMM's input)
//   cross-entropy         the log-probabilities (cross_entropy.cpp)
//
// Views (split, transpose, reshape of a heads-last buffer) share storage and are counted once.
// --checkpoint-blocks keeps only each block's input and recomputes one block at a time in backward.
#pragma once
#include <cstdint>

#include "app/memory_plan.hpp"

namespace ampgrad::app {

// The bytes per element of the tensors a step keeps: the residual stream and norm inputs, the
// GEMM inputs and outputs (the autocast dtype), and the loss's log-probabilities.
struct ActivationDtypes {
    int64_t residual = 4;
    int64_t compute = 4;
    int64_t loss = 4;
    bool autocast = false;   // GEMM inputs are cast copies (one per Linear), not the norm's output
};

// The activation dtypes of a --prec mode (fp32, bf16, fp16, fp16-master), in one process or under --zero.
ActivationDtypes activation_dtypes(const std::string& prec, bool zero);

struct ActivationBytes {
    int64_t norms = 0, attention = 0, mlp = 0;   // all layers (or, checkpointed, the kept inputs + one layer)
    int64_t head_and_loss = 0;                   // final norm, head input, log-probabilities, batch ids
    int64_t loss_backward = 0;                   // the gradient of the logits made at backward's start
    int64_t attention_workspace = 0;             // the GEMM attention path's scores/probabilities chunk
    // At backward's start; the attention workspace lives only inside the attention kernels, when
    // the loss's gradient is gone, so it is not part of this sum.
    int64_t total() const { return norms + attention + mlp + head_and_loss + loss_backward; }
};

// One micro-batch of `batch` rows of `context` tokens on one rank.
ActivationBytes activation_bytes(const ModelShape& m, const ActivationDtypes& d, int64_t batch, int64_t context,
                                 bool checkpoint_blocks, const std::string& device);

}  // namespace ampgrad::app
