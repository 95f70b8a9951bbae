// autocast_policy.cpp: THE autocast cast policy, one table keyed by op name,
// and the pure function that turns a policy plus input dtypes into casts. The categories and op
// lists follow PyTorch's (aten/src/ATen/autocast_mode.h), restricted to the ops ampgrad has; the same table
// serves the CPU and CUDA device types. Print it with `build/tools/amp_policy`.
#include "amp/autocast_policy.hpp"

#include <array>

#include <fmt/format.h>

namespace ampgrad::amp {

namespace {

using enum CastPolicy;

// clang-format off
constexpr std::array kPolicyTable = {
    // ---- lower precision: GEMM-shaped ops, where f16/bf16 tensor cores give the speed ----
    PolicyEntry{"matmul",                            kLowerPrecision, "GEMM: f16/bf16 inputs, f32 accumulation"},
    PolicyEntry{"mm",                                kLowerPrecision, "GEMM: f16/bf16 inputs, f32 accumulation"},
    PolicyEntry{"bmm",                               kLowerPrecision, "batched GEMM: f16/bf16 inputs, f32 accumulation"},
    PolicyEntry{"linear",                            kLowerPrecision, "GEMM plus bias: f16/bf16 inputs, f32 accumulation"},
    PolicyEntry{"lora_linear",                       kLowerPrecision, "LoRA's two thin GEMMs (x A^T) B^T added to y"},
    PolicyEntry{"scaled_dot_product_attention",      kLowerPrecision, "two GEMMs around a softmax"},
    // ---- fp32: ops whose range or precision f16/bf16 cannot hold ----
    PolicyEntry{"exp",                               kFp32, "exp overflows f16 above x = 11.1"},
    PolicyEntry{"log",                               kFp32, "log of small values needs f32's range"},
    PolicyEntry{"pow",                               kFp32, "powers overflow/underflow f16 quickly"},
    PolicyEntry{"rsqrt",                             kFp32, "1/sqrt(x) of small x overflows f16"},
    PolicyEntry{"reciprocal",                        kFp32, "1/x of small x overflows f16"},
    PolicyEntry{"layer_norm",                        kFp32, "mean/variance reductions need f32"},
    PolicyEntry{"logsumexp",                         kFp32, "reduction of exponentials"},
    PolicyEntry{"norm",                              kFp32, "sum of squares overflows f16"},
    PolicyEntry{"mse_loss",                          kFp32, "loss: a reduction whose value is scaled"},
    PolicyEntry{"cross_entropy",                     kFp32, "loss: log-softmax plus a reduction"},
    PolicyEntry{"binary_cross_entropy_with_logits",  kFp32, "loss: log-sigmoid plus a reduction"},
    PolicyEntry{"expm1",                             kFp32, "exp(x) - 1 overflows f16 above x = 11.1"},
    PolicyEntry{"log1p",                             kFp32, "log(1 + x) of small x needs f32's precision"},
    PolicyEntry{"rms_norm",                          kFp32, "mean of squares: a reduction that needs f32"},
    // ---- fp32 output dtype: the input is read as is, the result is computed and kept in f32 ----
    PolicyEntry{"softmax",                           kFp32OutputDtype, "exp-normalise; f32 result (PyTorch: dtype=f32)"},
    PolicyEntry{"log_softmax",                       kFp32OutputDtype, "exp-normalise; f32 result (PyTorch: dtype=f32)"},
    PolicyEntry{"sum",                               kFp32OutputDtype, "long sums lose f16 precision; f32 result"},
    PolicyEntry{"prod",                              kFp32OutputDtype, "long products overflow f16; f32 result"},
    // ---- widest type: mixed inputs meet in the widest floating dtype ----
    PolicyEntry{"cat",                               kPromote, "joins tensors: widest floating dtype wins"},
    PolicyEntry{"stack",                             kPromote, "joins tensors: widest floating dtype wins"},
    PolicyEntry{"atan2",                             kPromote, "two angles' coordinates: widest floating dtype wins"},
    PolicyEntry{"scatter_add",                       kPromote, "adds src into x: widest floating dtype wins (PyTorch's list)"},
    // ---- input dtype: on none of PyTorch's lists; listed so that the choice is recorded ----
    PolicyEntry{"sin",                               kInputDtype, "bounded output; f16/bf16 round it once"},
    PolicyEntry{"cos",                               kInputDtype, "bounded output; f16/bf16 round it once"},
    PolicyEntry{"exp2",                              kInputDtype, "not on PyTorch's fp32 list (unlike exp)"},
    PolicyEntry{"erf",                               kInputDtype, "bounded output; f16/bf16 round it once"},
    PolicyEntry{"sign",                              kInputDtype, "exact in any dtype"},
    PolicyEntry{"floor",                             kInputDtype, "exact in any dtype"},
    PolicyEntry{"ceil",                              kInputDtype, "exact in any dtype"},
    PolicyEntry{"round",                             kInputDtype, "exact in any dtype"},
    PolicyEntry{"trunc",                             kInputDtype, "exact in any dtype"},
    PolicyEntry{"fmod",                              kInputDtype, "exact in any dtype"},
    PolicyEntry{"remainder",                         kInputDtype, "one rounding of b added back"},
    PolicyEntry{"lerp",                              kInputDtype, "one dtype for all inputs, as PyTorch requires"},
    PolicyEntry{"logical_and",                       kInputDtype, "bool result"},
    PolicyEntry{"logical_or",                        kInputDtype, "bool result"},
    PolicyEntry{"logical_xor",                       kInputDtype, "bool result"},
    PolicyEntry{"apply_rotary_emb",                  kInputDtype, "x cos + rotate(x) sin; normal type promotion"},
    PolicyEntry{"chunk",                             kInputDtype, "views: no arithmetic"},
    PolicyEntry{"tril",                              kInputDtype, "selects elements: exact in any dtype"},
    PolicyEntry{"triu",                              kInputDtype, "selects elements: exact in any dtype"},
    PolicyEntry{"masked_fill",                       kInputDtype, "selects elements; the value takes x's dtype"},
    PolicyEntry{"repeat_interleave",                 kInputDtype, "copies elements: exact in any dtype"},
    PolicyEntry{"repeat",                            kInputDtype, "copies elements: exact in any dtype"},
    PolicyEntry{"flip",                              kInputDtype, "moves elements: exact in any dtype"},
    PolicyEntry{"roll",                              kInputDtype, "moves elements: exact in any dtype"},
    PolicyEntry{"sort",                              kInputDtype, "moves elements (also argsort, topk): exact in any dtype"},
    PolicyEntry{"cumsum",                            kFp32OutputDtype, "long running sums lose f16 precision; f32 result (PyTorch: dtype=f32)"},
    PolicyEntry{"index_add",                         kInputDtype, "not on PyTorch's lists: x and source must share a dtype"},
    PolicyEntry{"take_along_dim",                    kInputDtype, "copies elements: exact in any dtype"},
    // ---- banned ----
    PolicyEntry{"binary_cross_entropy",              kBanned, "log(p) of probabilities rounded to f16 is unsafe"},
};
// clang-format on

// The widest floating dtype among the eligible inputs (f32 beats f16/bf16; f16 + bf16 -> f32).
std::optional<DType> widest_eligible(std::span<const CastInput> inputs, std::span<const AutocastState, kNumDeviceTypes> state) {
    std::optional<DType> widest;
    for (const CastInput& in : inputs) {
        if (!is_eligible(in, state)) continue;
        widest = widest ? promote_types(*widest, in.dtype) : in.dtype;
    }
    return widest;
}

}  // namespace

std::string_view policy_name(CastPolicy policy) {
    switch (policy) {
        case kLowerPrecision: return "lower_precision";
        case kFp32: return "fp32";
        case kFp32OutputDtype: return "fp32_output_dtype";
        case kPromote: return "promote";
        case kBanned: return "banned";
        case kInputDtype: return "input_dtype";
    }
    return "?";
}

std::span<const PolicyEntry> policy_table() { return kPolicyTable; }

const PolicyEntry* find_policy(std::string_view op) {
    for (const PolicyEntry& e : kPolicyTable)
        if (e.op == op) return &e;
    return nullptr;
}

bool is_eligible(const CastInput& in, std::span<const AutocastState, kNumDeviceTypes> state) {
    return in.defined && is_floating(in.dtype) && in.dtype != kFloat64 && state[device_type_index(in.device)].enabled;
}

std::vector<std::optional<DType>> decide_casts(CastPolicy policy, std::span<const CastInput> inputs,
                                               std::span<const AutocastState, kNumDeviceTypes> state) {
    std::vector<std::optional<DType>> targets(inputs.size());
    std::optional<DType> widest = policy == kPromote ? widest_eligible(inputs, state) : std::nullopt;
    for (size_t i = 0; i < inputs.size(); ++i) {
        const CastInput& in = inputs[i];
        if (!is_eligible(in, state)) continue;
        std::optional<DType> target;
        switch (policy) {
            case kLowerPrecision: target = state[device_type_index(in.device)].dtype; break;
            case kFp32: target = kFloat32; break;
            case kFp32OutputDtype: if (i == 0) target = kFloat32; break;   // only the data input
            case kPromote: target = widest; break;
            case kBanned: break;
            case kInputDtype: break;
        }
        if (target && *target != in.dtype) targets[i] = target;
    }
    return targets;
}

std::string banned_message(std::string_view op) {
    return fmt::format(
        "{}: torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
        "F::binary_cross_entropy takes probabilities, and a sigmoid rounded to "
        "f16/bf16 saturates to exactly 0 or 1, so log(p) is -inf. Many models use a sigmoid layer right "
        "before the binary cross entropy layer; in this case, combine the two layers using "
        "F::binary_cross_entropy_with_logits, which is safe to autocast (or compute this loss outside the "
        "AutocastGuard, on f32 inputs)",
        op);
}

std::string explain(std::string_view op, std::span<const CastInput> inputs, std::span<const AutocastState, kNumDeviceTypes> state) {
    const PolicyEntry* entry = find_policy(op);
    std::string out;
    if (!entry) {
        out = fmt::format("{}: not in the autocast table: inputs are never cast; normal type promotion "
                          "applies (f16 with f32 gives f32)\n", op);
    } else {
        out = fmt::format("{}: policy {} ({})\n", op, policy_name(entry->policy), entry->why);
        if (entry->policy == kBanned) return out + "  under autocast this op throws AmpError\n";
    }
    std::vector<std::optional<DType>> targets =
        entry ? decide_casts(entry->policy, inputs, state) : std::vector<std::optional<DType>>(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
        const CastInput& in = inputs[i];
        std::string where = fmt::format("  input {}: ", i);
        if (!in.defined) { out += where + "undefined: skipped\n"; continue; }
        std::string from = fmt::format("{} {}", dtype_name(in.dtype), device_type_name(in.device));
        if (targets[i]) {
            out += fmt::format("{}{} -> {}\n", where, from, dtype_name(*targets[i]));
        } else if (!state[device_type_index(in.device)].enabled) {
            out += fmt::format("{}{}: kept (autocast is off for {})\n", where, from, device_type_name(in.device));
        } else if (!is_floating(in.dtype) || in.dtype == kFloat64) {
            out += fmt::format("{}{}: kept (only f32/f16/bf16 are cast; f64 and integers never)\n", where, from);
        } else if (entry && entry->policy == kInputDtype) {
            out += fmt::format("{}{}: kept (this op runs in its inputs' dtype)\n", where, from);
        } else if (entry && entry->policy == kFp32OutputDtype && i > 0) {
            out += fmt::format("{}{}: kept (only the data input is cast)\n", where, from);
        } else {
            out += fmt::format("{}{}: kept (already the target dtype)\n", where, from);
        }
    }
    return out;
}

std::string policy_table_text() {
    std::string out =
        "ampgrad autocast policy (amp/autocast_policy.cpp); eligible inputs: defined, f32/f16/bf16 (never\n"
        "f64 or integers), on a device type whose autocast is enabled. Defaults: cpu bf16, cuda f16.\n";
    for (CastPolicy policy : {CastPolicy::kLowerPrecision, CastPolicy::kFp32, CastPolicy::kFp32OutputDtype,
                              CastPolicy::kPromote, CastPolicy::kBanned, CastPolicy::kInputDtype}) {
        out += fmt::format("\n{}:\n", policy_name(policy));
        for (const PolicyEntry& e : kPolicyTable)
            if (e.policy == policy) out += fmt::format("  {:<34} {}\n", e.op, e.why);
    }
    out += "\nany other op: never cast; normal type promotion (f16 with f32 gives f32)\n";
    return out;
}

}  // namespace ampgrad::amp
