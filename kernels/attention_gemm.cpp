// attention_gemm.cpp: the GEMM attention path (what and why: kernels/attention_gemm.hpp). Grouped-query
// attention needs no special case: in a (B,NH,T,HS) layout a kv head's `rep` = NH / NKV query heads
// are consecutive, so they stack into one (rep*T, HS) matrix against that kv head's (S, HS) keys.
// Every input is then a batch of G = B*NKV groups (a view where the strides allow, as for a KV
// cache's slice; else a contiguous copy), and each product is one batched GEMM per chunk:
//   forward:  S = scale q k^T (compute type);  P, lse = masked softmax of S;  O = P v
//   backward: S = scale q k^T;  P = exp(S - lse);  dv = P^T dO;  dP = dO v^T (into S's buffer);
//             dS = P (dP - D) (into P's buffer);  dq = scale dS k;  dk = scale dS^T q
// dv and dk sum over the group's query heads inside the GEMM's inner dimension, so they are
// written once and need no accumulation.
#include "kernels/attention_gemm.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string_view>

#include "core/error.hpp"
#include "kernels/capabilities.hpp"
#include "kernels/fused_kernels.hpp"
#include "kernels/kernel_preconditions.hpp"

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

// t (B,H,R,X) seen as G groups of (rows, X): a view when t's strides allow one (a contiguous tensor,
// or a KV cache's slice along its time dim) and, if `contiguous`, that view is contiguous; else a
// contiguous copy. (The GEMMs read strided operands; the row kernels read contiguous rows.)
Tensor as_groups(const Tensor& t, int64_t G, int64_t rows, int64_t cols, bool contiguous = false) {
    const Shape shape{G, rows, cols};
    if (auto strides = view_strides(t, shape)) {
        Tensor view = make_view(t, shape, *strides, t.storage_offset());
        if (!contiguous || view.is_contiguous()) return view;
    }
    Tensor copy = make_empty(t.sizes(), t.dtype(), t.device());
    kernels::copy(copy, t);
    return make_view(copy, shape, contiguous_strides(shape), 0);
}

// Where a result (B,H,R,X) is written, as (G, rows, X) groups: t itself when contiguous, else a
// contiguous scratch tensor that finish() copies into t. Undefined when t is.
Tensor output_groups(const Tensor& t, int64_t G, int64_t rows, int64_t cols) {
    if (!t.defined()) return t;
    const Tensor dense = t.is_contiguous() ? t : make_empty(t.sizes(), t.dtype(), t.device());
    const Shape shape{G, rows, cols};
    return make_view(dense, shape, contiguous_strides(shape), dense.storage_offset());
}
void finish(const Tensor& t, const Tensor& written) {
    if (!t.defined() || written.raw_data() == t.raw_data()) return;
    kernels::copy(t, make_view(written, t.sizes(), contiguous_strides(t.sizes()), written.storage_offset()));
}

// Groups [g0, g1) of a (G, rows, cols) tensor.
Tensor groups_slice(const Tensor& t, int64_t g0, int64_t g1) {
    return make_view(t, {g1 - g0, t.size(1), t.size(2)}, t.strides(), t.storage_offset() + g0 * t.stride(0));
}
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

bool attention_uses_gemm(const Tensor& q, const Tensor& k) {
    switch (attention_path()) {
        case AttentionPath::kFused: return false;
        case AttentionPath::kGemm: return true;
        case AttentionPath::kAuto: {   // the backend's measurement (its row of kernels/capabilities.hpp)
            const BackendCapabilities& c = backend_capabilities(q.device().type);
            return c.attention_prefers_gemm != nullptr && c.attention_prefers_gemm(q.dtype(), q.size(2) * k.size(2));
        }
    }
    return false;
}

int64_t attention_workspace_bytes(const Tensor& q, int64_t workspace_bytes) {
    if (workspace_bytes > 0) return workspace_bytes;
    return backend_capabilities(q.device().type).attention_workspace_bytes;
}

void attention_forward_gemm(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                            double scale, bool causal, int64_t workspace_bytes) {
    check_attention_args("attention (gemm path)", out, lse, q, k, v);
    if (lse.numel() == 0) return;                                    // B*NH*T == 0
    const Groups g = groups_of(q, k, v);
    const DType dtype = q.dtype(), compute = lse.dtype();
    const Tensor qg = as_groups(q, g.G, g.R, g.HS), kg = as_groups(k, g.G, g.S, g.HS);
    const Tensor vg = as_groups(v, g.G, g.S, g.HSv), og = output_groups(out, g.G, g.R, g.HSv);
    const int64_t chunk = chunk_groups(g, dtype, q, workspace_bytes);
    const Tensor scores = make_empty({chunk, g.R, g.S}, compute, q.device());   // (chunk,R,S)
    const Tensor probs = make_empty({chunk, g.R, g.S}, dtype, q.device());      // (chunk,R,S)
    for (int64_t g0 = 0; g0 < g.G; g0 += chunk) {
        const int64_t g1 = std::min(g.G, g0 + chunk);
        const Tensor s = groups_slice(scores, 0, g1 - g0), p = groups_slice(probs, 0, g1 - g0);
        kernels::gemm(s, groups_slice(qg, g0, g1), groups_slice(kg, g0, g1), false, true, scale, 0.0);   // scale q k^T
        kernels::attention_probs(p, flat_slice(lse, g0 * g.R, g1 * g.R), s, g.T, causal, false);
        kernels::gemm(groups_slice(og, g0, g1), p, groups_slice(vg, g0, g1), false, false, 1.0, 0.0);     // P v
    }
    finish(out, og);
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
    const Tensor qa = as_groups(q, g.G, g.R, g.HS), ka = as_groups(k, g.G, g.S, g.HS);
    const Tensor va = as_groups(v, g.G, g.S, g.HSv), oa = as_groups(out, g.G, g.R, g.HSv, true);
    const Tensor doa = as_groups(dout, g.G, g.R, g.HSv, true);
    const Tensor dqa = output_groups(dq, g.G, g.R, g.HS), dka = output_groups(dk, g.G, g.S, g.HS);
    const Tensor dva = output_groups(dv, g.G, g.S, g.HSv);
    const int64_t chunk = chunk_groups(g, dtype, q, workspace_bytes);
    const Tensor scores = make_empty({chunk, g.R, g.S}, compute, q.device());   // S, then dP
    const Tensor probs = make_empty({chunk, g.R, g.S}, dtype, q.device());      // P, then dS
    for (int64_t g0 = 0; g0 < g.G; g0 += chunk) {
        const int64_t g1 = std::min(g.G, g0 + chunk);
        const Tensor s = groups_slice(scores, 0, g1 - g0), p = groups_slice(probs, 0, g1 - g0);
        const Tensor qg = groups_slice(qa, g0, g1), kg = groups_slice(ka, g0, g1);
        const Tensor vg = groups_slice(va, g0, g1), dog = groups_slice(doa, g0, g1);
        kernels::gemm(s, qg, kg, false, true, scale, 0.0);                       // (n,R,S) = scale q k^T
        kernels::attention_probs(p, flat_slice(lse, g0 * g.R, g1 * g.R), s, g.T, causal, true);
        if (dva.defined()) kernels::gemm(groups_slice(dva, g0, g1), p, dog, true, false, 1.0, 0.0);   // P^T dO
        if (!dqa.defined() && !dka.defined()) continue;
        kernels::gemm(s, dog, vg, false, true, 1.0, 0.0);                        // (n,R,S) dP = dO v^T
        kernels::attention_score_grad(p, p, s, dog, groups_slice(oa, g0, g1));   // dS, in place of P
        if (dqa.defined()) kernels::gemm(groups_slice(dqa, g0, g1), p, kg, false, false, scale, 0.0);  // scale dS k
        if (dka.defined()) kernels::gemm(groups_slice(dka, g0, g1), p, qg, true, false, scale, 0.0);   // scale dS^T q
    }
    finish(dq, dqa);
    finish(dk, dka);
    finish(dv, dva);
}

}  // namespace ampgrad
