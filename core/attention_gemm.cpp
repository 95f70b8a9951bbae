// attention_gemm.cpp: the GEMM attention path (what and why: core/attention_gemm.hpp). Grouped-query
// attention needs no special case: with q, k, v dense, a kv head's `rep` = NH / NKV query heads are
// consecutive, so they stack into one (rep*T, HS) matrix against that kv head's (S, HS) keys. Every
// input is then a batch of G = B*NKV groups, and each product is one batched GEMM per chunk:
//   forward:  S = scale q k^T (compute type);  P, lse = masked softmax of S;  O = P v
//   backward: S = scale q k^T;  P = exp(S - lse);  dv = P^T dO;  dP = dO v^T (into S's buffer);
//             dS = P (dP - D) (into P's buffer);  dq = scale dS k;  dk = scale dS^T q
// dv and dk sum over the group's query heads inside the GEMM's inner dimension, so they are
// written once and need no accumulation.
#include "core/attention_gemm.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string_view>

#include "core/error.hpp"
#include "core/fused_kernels.hpp"
#include "core/kernel_preconditions.hpp"

namespace ampgrad {

namespace {

AttentionPath path_from_environment() {
    const char* value = std::getenv("AMPGRAD_ATTENTION");
    const std::string_view v = value ? value : "";
    if (v.empty() || v == "auto") return AttentionPath::kAuto;
    if (v == "fused") return AttentionPath::kFused;
    if (v == "gemm") return AttentionPath::kGemm;
    throw ValueError(fmt::format("AMPGRAD_ATTENTION: expected 'auto', 'fused' or 'gemm', got '{}'", v));
}

std::atomic<AttentionPath>& path_slot() {
    static std::atomic<AttentionPath> slot{path_from_environment()};
    return slot;
}

// The sizes of one call, with the inputs seen as G groups of R query rows.
struct Groups {
    int64_t B, NH, NKV, T, S, HS, HSv;
    int64_t G, R;   // G = B*NKV kv heads; R = (NH/NKV)*T query rows per kv head
};

Groups groups_of(const Tensor& q, const Tensor& k, const Tensor& v) {
    Groups g{q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3), v.size(3), 0, 0};
    g.G = g.B * g.NKV;
    g.R = (g.NH / g.NKV) * g.T;
    return g;
}

// t itself when contiguous, else a contiguous copy of it.
Tensor dense(const Tensor& t) {
    if (t.is_contiguous()) return t;
    Tensor copy = make_empty(t.sizes(), t.dtype(), t.device());
    kernels::copy(copy, t);
    return copy;
}

// Where a result of t's shape is written: t itself when contiguous, else a scratch tensor that
// finish() copies into t. Undefined when t is.
Tensor output_for(const Tensor& t) {
    if (!t.defined() || t.is_contiguous()) return t;
    return make_empty(t.sizes(), t.dtype(), t.device());
}
void finish(const Tensor& t, const Tensor& written) {
    if (t.defined() && written.raw_data() != t.raw_data()) kernels::copy(t, written);
}

// Groups [g0, g1) of a contiguous tensor seen as (G, rows, cols).
Tensor groups_slice(const Tensor& t, int64_t g0, int64_t g1, int64_t rows, int64_t cols) {
    return make_view(t, {g1 - g0, rows, cols}, {rows * cols, cols, 1}, t.storage_offset() + g0 * rows * cols);
}
// The first n groups of a (chunk, rows, cols) workspace.
Tensor first_groups(const Tensor& t, int64_t n) { return groups_slice(t, 0, n, t.size(1), t.size(2)); }
// Elements [begin, end) of a contiguous tensor, as 1-d.
Tensor flat_slice(const Tensor& t, int64_t begin, int64_t end) {
    return make_view(t, {end - begin}, {1}, t.storage_offset() + begin);
}

// kv heads per chunk: as many as the workspace bound holds (scores and P of each), at least one.
int64_t chunk_groups(const Groups& g, DType dtype, const Tensor& q, int64_t workspace_bytes) {
    const int64_t per_group = g.R * g.S * static_cast<int64_t>(element_size(attention_compute_dtype(dtype)) +
                                                               element_size(dtype));
    const int64_t fit = per_group == 0 ? g.G : attention_workspace_bytes(q, workspace_bytes) / per_group;
    return std::clamp<int64_t>(fit, 1, std::max<int64_t>(g.G, 1));
}

}  // namespace

void set_attention_path(AttentionPath path) { path_slot().store(path); }
AttentionPath attention_path() { return path_slot().load(); }

const char* attention_path_name(AttentionPath path) {
    switch (path) {
        case AttentionPath::kAuto: return "auto";
        case AttentionPath::kFused: return "fused";
        case AttentionPath::kGemm: return "gemm";
    }
    return "?";
}

bool attention_uses_gemm(const Tensor& q) {
    switch (attention_path()) {
        case AttentionPath::kFused: return false;
        case AttentionPath::kGemm: return true;
        case AttentionPath::kAuto: return q.device().type == DeviceType::kCUDA && q.dtype() != kFloat64;
    }
    return false;
}

int64_t attention_workspace_bytes(const Tensor& q, int64_t workspace_bytes) {
    if (workspace_bytes > 0) return workspace_bytes;
    return q.device().is_cpu() ? int64_t(64) << 20 : int64_t(1) << 30;
}

void attention_forward_gemm(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                            double scale, bool causal, int64_t workspace_bytes) {
    check_attention_args("attention (gemm path)", out, lse, q, k, v);
    if (lse.numel() == 0) return;                                    // B*NH*T == 0
    const Groups g = groups_of(q, k, v);
    const DType dtype = q.dtype(), compute = lse.dtype();
    const Tensor qd = dense(q), kd = dense(k), vd = dense(v), od = output_for(out);
    const int64_t chunk = chunk_groups(g, dtype, q, workspace_bytes);
    const Tensor scores = make_empty({chunk, g.R, g.S}, compute, q.device());   // (chunk,R,S)
    const Tensor probs = make_empty({chunk, g.R, g.S}, dtype, q.device());      // (chunk,R,S)
    for (int64_t g0 = 0; g0 < g.G; g0 += chunk) {
        const int64_t g1 = std::min(g.G, g0 + chunk);
        const Tensor s = first_groups(scores, g1 - g0), p = first_groups(probs, g1 - g0);
        kernels::gemm(s, groups_slice(qd, g0, g1, g.R, g.HS), groups_slice(kd, g0, g1, g.S, g.HS), false, true, scale,
                      0.0);                                          // (n,R,S) = scale q k^T
        kernels::attention_probs(p, flat_slice(lse, g0 * g.R, g1 * g.R), s, g.T, causal, false);
        kernels::gemm(groups_slice(od, g0, g1, g.R, g.HSv), p, groups_slice(vd, g0, g1, g.S, g.HSv), false, false, 1.0,
                      0.0);                                          // (n,R,HSv) = P v
    }
    finish(out, od);
}

void attention_backward_gemm(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                             const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             double scale, bool causal, int64_t workspace_bytes) {
    check_attention_args("attention_backward (gemm path)", out, lse, q, k, v);
    check_attention_grads("attention_backward (gemm path)", dq, dk, dv, dout, out, q, k, v);
    auto has_elements = [](const Tensor& t) { return t.defined() && t.numel() > 0; };
    if (!has_elements(dq) && !has_elements(dk) && !has_elements(dv)) return;   // T == 0 still zeroes dk, dv
    const Groups g = groups_of(q, k, v);
    if (g.T == 0) {                                                  // no query rows: dk = dv = 0
        for (const Tensor* grad : {&dk, &dv})
            if (grad->defined()) kernels::fill(*grad, 0.0);
        return;
    }
    const DType dtype = q.dtype(), compute = lse.dtype();
    const Tensor qd = dense(q), kd = dense(k), vd = dense(v), outd = dense(out), doutd = dense(dout);
    const Tensor dqd = output_for(dq), dkd = output_for(dk), dvd = output_for(dv);
    const int64_t chunk = chunk_groups(g, dtype, q, workspace_bytes);
    const Tensor scores = make_empty({chunk, g.R, g.S}, compute, q.device());   // S, then dP
    const Tensor probs = make_empty({chunk, g.R, g.S}, dtype, q.device());      // P, then dS
    for (int64_t g0 = 0; g0 < g.G; g0 += chunk) {
        const int64_t g1 = std::min(g.G, g0 + chunk);
        const Tensor s = first_groups(scores, g1 - g0), p = first_groups(probs, g1 - g0);
        const Tensor qg = groups_slice(qd, g0, g1, g.R, g.HS), kg = groups_slice(kd, g0, g1, g.S, g.HS);
        const Tensor vg = groups_slice(vd, g0, g1, g.S, g.HSv), dog = groups_slice(doutd, g0, g1, g.R, g.HSv);
        kernels::gemm(s, qg, kg, false, true, scale, 0.0);                       // (n,R,S) = scale q k^T
        kernels::attention_probs(p, flat_slice(lse, g0 * g.R, g1 * g.R), s, g.T, causal, true);
        if (dvd.defined())
            kernels::gemm(groups_slice(dvd, g0, g1, g.S, g.HSv), p, dog, true, false, 1.0, 0.0);   // P^T dO
        if (!dqd.defined() && !dkd.defined()) continue;
        kernels::gemm(s, dog, vg, false, true, 1.0, 0.0);                        // (n,R,S) dP = dO v^T
        kernels::attention_score_grad(p, p, s, dog, groups_slice(outd, g0, g1, g.R, g.HSv));   // dS, in place
        if (dqd.defined())
            kernels::gemm(groups_slice(dqd, g0, g1, g.R, g.HS), p, kg, false, false, scale, 0.0);  // scale dS k
        if (dkd.defined())
            kernels::gemm(groups_slice(dkd, g0, g1, g.S, g.HS), p, qg, true, false, scale, 0.0);   // scale dS^T q
    }
    finish(dq, dqd);
    finish(dk, dkd);
    finish(dv, dvd);
}

}  // namespace ampgrad
