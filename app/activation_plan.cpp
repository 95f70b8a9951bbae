// activation_plan.cpp: activation bytes per layer kind (app/activation_plan.hpp), from the tensors the
// ops save for backward. Every count below is bytes per token; the caller multiplies by B*T.
#include "app/activation_plan.hpp"

#include <algorithm>

#include "core/device.hpp"
#include "kernels/attention_gemm.hpp"
#include "kernels/capabilities.hpp"

namespace ampgrad::app {

namespace {

struct PerToken {
    int64_t norms = 0, attention = 0, mlp = 0;
};

// One GPT-2 block: ln_1 -> c_attn -> SDPA -> c_proj (+x), ln_2 -> c_fc -> GELU -> c_proj (+h). (C)
PerToken gpt_block(const ModelShape& m, const ActivationDtypes& d) {
    const int64_t C = m.hidden, a = d.compute;
    PerToken p;
    p.norms = 2 * (d.residual * C + 2 * 4);                        // x and h, mean and rstd (f32)
    p.attention = a * C                                            // c_attn's input (ln_1's output or its cast)
                  + a * 3 * C                                      // q, k, v: views of c_attn's output
                  + a * C + 4 * m.n_head;                          // SDPA's out (c_proj's input), lse
    p.mlp = a * C + a * 4 * C + a * 4 * C;                         // c_fc's input, GELU's input, c_proj's input
    return p;
}

// One Llama layer: RMSNorm -> q/k/v_proj -> rotary(q, k) -> SDPA -> o_proj (+x), RMSNorm -> SwiGLU (+h). (H)
PerToken llama_block(const ModelShape& m, const ActivationDtypes& d) {
    const int64_t H = m.hidden, I = m.mlp_hidden, KV = m.n_kv_head * m.head_size, a = d.compute;
    const int64_t Q = m.n_head * m.head_size;
    PerToken p;
    p.norms = 2 * (d.residual * H + 4);                            // x and h, rstd (f32)
    p.attention = (d.autocast ? 3 : 1) * a * H                     // q/k/v_proj's input (a cast each under autocast)
                  + a * (Q + KV)                                   // rotary's inputs q, k
                  + a * (Q + KV) + a * KV                          // rotated q, k and v, kept by SDPA
                  + a * Q + 4 * m.n_head;                          // SDPA's out (o_proj's input), lse
    p.mlp = (d.autocast ? 2 : 1) * a * H                           // gate/up_proj's input
            + a * I * 4;                                           // gate, silu(gate), up, their product
    return p;
}

// The GEMM attention path's scores (compute dtype) and probabilities (the input dtype), chunked to the
// backend's workspace bound (kernels/attention_gemm.cpp, chunk_groups); 0 when the fused kernel runs.
int64_t attention_workspace(const ModelShape& m, const ActivationDtypes& d, int64_t batch, int64_t T,
                            const std::string& device) {
    const DeviceType type = device == "cuda" ? kCUDA : kCPU;
    bool gemm = false;
    switch (attention_path()) {
        case AttentionPath::kFused: gemm = false; break;
        case AttentionPath::kGemm: gemm = true; break;
        case AttentionPath::kAuto: {
            if (!has_backend_capabilities(type)) break;
            const BackendCapabilities& c = backend_capabilities(type);
            gemm = c.attention_prefers_gemm != nullptr &&
                   c.attention_prefers_gemm(d.compute == 4 ? kFloat32 : kBFloat16, T * T);
        }
    }
    if (!gemm) return 0;
    const int64_t per_head = T * T * (4 + d.compute), heads = batch * m.n_head;
    const int64_t bound = has_backend_capabilities(type)
                              ? backend_capabilities(type).attention_workspace_bytes : int64_t(64) << 20;
    return std::min(heads, std::max<int64_t>(1, bound / per_head)) * per_head;
}

}  // namespace

ActivationDtypes activation_dtypes(const std::string& prec, bool zero) {
    // Autocast runs the norms and the loss in f32 (their inputs cast up: amp/autocast_policy.cpp), so
    // what they save is f32 even over f16 weights. One process autocasts fp16-master's forward too
    // (app/precision.cpp); the ZeRO engine does not (app/zero_training.cpp): everything stays f16.
    // fp8 saves what bf16 autocast does: the fp8 Linears keep their bf16 input (nn/linear.cpp).
    if (prec == "bf16" || prec == "fp16" || prec == "fp8" || (prec == "fp16-master" && !zero))
        return {.residual = 4, .compute = 2, .loss = 4, .autocast = true};
    if (prec == "fp16-master") return {.residual = 2, .compute = 2, .loss = 2, .autocast = false};
    return {};   // fp32
}

ActivationBytes activation_bytes(const ModelShape& m, const ActivationDtypes& d, int64_t batch, int64_t context,
                                 bool checkpoint_blocks, const std::string& device) {
    const int64_t tokens = batch * context, L = m.n_layer;
    const PerToken layer = m.family == "gpt" ? gpt_block(m, d) : llama_block(m, d);
    ActivationBytes b;
    // Every layer's saved tensors, or with --checkpoint-blocks each block's input (the residual
    // stream, kept by the checkpoint) plus one block recomputed at a time.
    const int64_t layers = checkpoint_blocks ? 1 : L;
    b.norms = tokens * (layers * layer.norms + (checkpoint_blocks ? L * d.residual * m.hidden : 0));
    b.attention = tokens * layers * layer.attention;
    b.mlp = tokens * layers * layer.mlp;
    // Final norm (input + stats), the head's input, the loss's log-probabilities (loss dtype) and the
    // batch's ids and targets (int64).
    b.head_and_loss = tokens * (d.residual * m.hidden + 8 + d.compute * m.hidden + d.loss * m.vocab + 16);
    // Backward's start: one (B*T,V) gradient in the loss dtype lives beside the saved tensors (measured:
    // the loss's own intermediates are freed as its backward makes the next one).
    b.loss_backward = tokens * d.loss * m.vocab;
    b.attention_workspace = attention_workspace(m, d, batch, context, device);
    return b;
}

}  // namespace ampgrad::app
