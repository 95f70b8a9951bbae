// attention_gemm.cpp: the GEMM attention path (what and why: kernels/attention_gemm.hpp). Grouped-query
// attention needs no special case: in a (B,NH,T,HS) layout a kv head's `rep` = NH / NKV query heads
// are consecutive, so they stack into one (rep*T, HS) matrix against that kv head's (S, HS) keys.
// Every input is then a batch of G = B*NKV groups, taken a slab of groups at a time (a view where the
// strides allow: a contiguous tensor, a KV cache's slice, or the heads of one batch entry of a
// head-strided tensor; else a copy of the slab), and each product is one batched GEMM per slab
// (per causal tile, see tiles_of):
//   forward:  S = scale q k^T (compute type);  P, lse = masked softmax of S;  O = P v
//   backward: S = scale q k^T;  P = exp(S - lse);  dv = P^T dO;  dP = dO v^T (into S's buffer);
//             dS = P (dP - D) (into P's buffer);  dq = scale dS k;  dk = scale dS^T q
// dv and dk sum over the group's query heads inside the GEMM's inner dimension, so they are
// written once and need no accumulation. docs/ops/attention.md explains slabs and tiles.
#include "kernels/attention_gemm.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

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

// Groups [g0, g1) of a (G, rows, cols) tensor.
Tensor groups_slice(const Tensor& t, int64_t g0, int64_t g1) {
    return make_view(t, {g1 - g0, t.size(1), t.size(2)}, t.strides(), t.storage_offset() + g0 * t.stride(0));
}
// Rows [r0, r1) and columns [c0, c1) of every matrix of a (n, rows, cols) tensor.
Tensor tile_of(const Tensor& t, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    return make_view(t, {t.size(0), r1 - r0, c1 - c0}, t.strides(),
                     t.storage_offset() + r0 * t.stride(1) + c0 * t.stride(2));
}
// Elements [begin, end) of a contiguous tensor, as 1-d.
Tensor flat_slice(const Tensor& t, int64_t begin, int64_t end) {
    return make_view(t, {end - begin}, {1}, t.storage_offset() + begin);
}

// ---- slabs: the kv heads one pass of products covers ----
// A slab is groups [g0, g1) of the G kv heads. When every operand is contiguous, a slab may span
// batch entries (one pass for the whole call when the workspace allows). Otherwise each slab stays
// inside one batch entry b, where a head-strided tensor such as (B,T,NH,HS).transpose(1, 2) (q, k,
// v cut from a fused QKV projection, and the op's heads-last outputs) is a plain (heads, T, HS)
// view with row stride NH*HS: the products read and write it in place, with no transposing copy.
struct Slab {
    int64_t g0, g1;
};

std::vector<Slab> slabs_of(const Groups& g, int64_t chunk, bool per_batch_entry) {
    std::vector<Slab> slabs;
    const int64_t span = per_batch_entry ? g.NKV : g.G;   // slabs never cross a multiple of span
    for (int64_t first = 0; first < g.G; first += span)
        for (int64_t g0 = first; g0 < first + span; g0 += chunk) slabs.push_back({g0, std::min(first + span, g0 + chunk)});
    return slabs;
}

// Groups [s.g0, s.g1) of t (B,H,X,cols), H = NKV heads or their query heads, as (g1-g0, rows, cols)
// with rows = (H/NKV)*X: a view where t's strides allow one, else nothing.
std::optional<Tensor> slab_view(const Tensor& t, int64_t NKV, Slab s, int64_t rows, int64_t cols) {
    const Shape shape{s.g1 - s.g0, rows, cols};
    const Shape whole{t.size(0) * NKV, rows, cols};
    if (auto strides = view_strides(t, whole)) return groups_slice(make_view(t, whole, *strides, t.storage_offset()), s.g0, s.g1);
    const int64_t per = t.size(1) / NKV, b = s.g0 / NKV;
    if ((s.g1 - 1) / NKV != b) return std::nullopt;
    const Tensor heads = make_view(t, {(s.g1 - s.g0) * per, t.size(2), t.size(3)}, {t.stride(1), t.stride(2), t.stride(3)},
                                   t.storage_offset() + b * t.stride(0) + (s.g0 % NKV) * per * t.stride(1));
    if (auto strides = view_strides(heads, shape)) return make_view(heads, shape, *strides, heads.storage_offset());
    return std::nullopt;
}

// The slab's heads of t as stored, (B,H,X,cols) -> (heads, X, cols). Only a slab inside one batch
// entry gets here: slabs span entries only when every operand is contiguous, and so a view.
Tensor slab_heads(const Tensor& t, int64_t NKV, Slab s) {
    const int64_t per = t.size(1) / NKV, b = s.g0 / NKV;
    AMPGRAD_CHECK((s.g1 - 1) / NKV == b, "attention (gemm path): slab [{}, {}) of {} spans batch entries", s.g0,
                  s.g1, t.describe());
    return make_view(t, {(s.g1 - s.g0) * per, t.size(2), t.size(3)}, {t.stride(1), t.stride(2), t.stride(3)},
                     t.storage_offset() + b * t.stride(0) + (s.g0 % NKV) * per * t.stride(1));
}

// The slab of an input: its view, or (strides that do not allow one, or `dense` asked and the view
// is not contiguous) a contiguous copy of the slab alone, in one copy.
Tensor slab_input(const Tensor& t, int64_t NKV, Slab s, int64_t rows, int64_t cols, bool dense = false) {
    std::optional<Tensor> view = slab_view(t, NKV, s, rows, cols);
    if (view && (!dense || view->is_contiguous())) return *view;
    const Tensor heads = slab_heads(t, NKV, s);
    Tensor copy = make_empty(heads.sizes(), t.dtype(), t.device());
    kernels::copy(copy, heads);
    return make_view(copy, {s.g1 - s.g0, rows, cols}, contiguous_strides({s.g1 - s.g0, rows, cols}), 0);
}

// Where the products write a slab of an output: the output itself (a view with dense rows), or a
// contiguous scratch that flush() copies into it. Undefined when the output is.
class SlabOutput {
public:
    SlabOutput(const Tensor& t, int64_t NKV, Slab s, int64_t rows, int64_t cols) {
        if (!t.defined()) return;
        std::optional<Tensor> view = slab_view(t, NKV, s, rows, cols);
        if (view && gemm_out_rows_dense(*view)) {
            target_ = *view;
            return;
        }
        dest_ = slab_heads(t, NKV, s);
        const Tensor scratch = make_empty(dest_.sizes(), t.dtype(), t.device());
        target_ = make_view(scratch, {s.g1 - s.g0, rows, cols}, contiguous_strides({s.g1 - s.g0, rows, cols}), 0);
    }
    bool defined() const { return target_.defined(); }
    const Tensor& target() const { return target_; }
    void flush() const {
        if (dest_.defined()) kernels::copy(dest_, make_view(target_, dest_.sizes(), contiguous_strides(dest_.sizes()), 0));
    }

private:
    Tensor target_, dest_;   // dest_: the output's slab, when target_ is a scratch
};

// kv heads per slab: as many as the workspace bound holds (scores and P of each), at least one.
int64_t chunk_groups(const Groups& g, DType dtype, const Tensor& q, int64_t workspace_bytes) {
    const int64_t per_group = g.R * g.S * static_cast<int64_t>(element_size(attention_compute_dtype(dtype)) +
                                                               element_size(dtype));
    const int64_t fit = per_group == 0 ? g.G : attention_workspace_bytes(q, workspace_bytes) / per_group;
    return std::clamp<int64_t>(fit, 1, std::max<int64_t>(g.G, 1));
}

// ---- causal tiles ----
// Under the causal mask (T == S, one query head per kv head) query rows [i0, i1) see keys [0, i1)
// only, so the products run on tiles of kCausalTileRows rows and skip the masked part above the
// diagonal tiles: 5/8 of the full square's multiply-adds at 4 tiles, about half for many. A tile is
// rows [r0, r1) against keys [k0, k1). Query tiles (scores, P v, dP, dS k) cut the rows; key tiles
// (P^T dO, dS^T q) cut the keys, each against the rows that see them. Without the mask, or with
// stacked query heads, one tile covers the whole (R, S) square. The masked entries inside a diagonal
// tile are still computed; the row kernels weigh them 0 (and never read the ones left unwritten).
constexpr int64_t kCausalTileRows = 64;

struct Tile {
    int64_t r0, r1, k0, k1;
};
struct Tiles {
    std::vector<Tile> query, key;
};

Tiles tiles_of(const Groups& g, bool causal) {
    if (!causal || g.NH != g.NKV || g.T != g.S || g.T <= kCausalTileRows) return {{{0, g.R, 0, g.S}}, {{0, g.R, 0, g.S}}};
    Tiles tiles;
    for (int64_t i0 = 0; i0 < g.T; i0 += kCausalTileRows) {
        const int64_t i1 = std::min(g.T, i0 + kCausalTileRows);
        tiles.query.push_back({i0, i1, 0, i1});
        tiles.key.push_back({i0, g.R, i0, i1});
    }
    return tiles;
}

// ---- dense operands, where the backend wants them (its attention_dense_heads) or the heads are small ----
// Below this many multiply-adds per product of one batch entry (NH*T*S*HS), its products are too small
// to pay for their calls: GPT `tiny` (4 heads of 64x64x32 a batch entry) ran 12% slower with its heads in
// place than with dense copies, `small` (8 heads of 128x128x32) 6.5% faster (docs/benchmarks.md).
constexpr int64_t kMinInPlaceWork = int64_t(1) << 21;

bool heads_in_place(const Tensor& q, const Groups& g) {
    const BackendCapabilities& c = backend_capabilities(q.device().type);
    const bool dense_wanted = c.attention_dense_heads != nullptr && c.attention_dense_heads(q.dtype());
    return !dense_wanted && g.NH * g.T * g.S * g.HS >= kMinInPlaceWork;
}
// An input (B,H,X,cols) that cannot be seen as (B*NKV, rows, cols) groups, copied to a dense tensor.
Tensor grouped_input(const Tensor& t, int64_t NKV, int64_t rows, int64_t cols) {
    if (!t.defined() || view_strides(t, {t.size(0) * NKV, rows, cols})) return t;
    Tensor copy = make_empty(t.sizes(), t.dtype(), t.device());
    kernels::copy(copy, t);
    return copy;
}
// A non-contiguous output's dense stand-in, copied into it by finish().
Tensor dense_output(const Tensor& t) {
    return !t.defined() || t.is_contiguous() ? t : make_empty(t.sizes(), t.dtype(), t.device());
}
void finish(const Tensor& t, const Tensor& written) {
    if (t.defined() && written.raw_data() != t.raw_data()) kernels::copy(t, written);
}

// Whether every operand is contiguous, so that a slab may span batch entries.
bool all_contiguous(std::initializer_list<const Tensor*> tensors) {
    return std::all_of(tensors.begin(), tensors.end(), [](const Tensor* t) { return !t->defined() || t->is_contiguous(); });
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

namespace {

void forward_slabs(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                   double scale, bool causal, int64_t workspace_bytes, bool tiled) {
    const Groups g = groups_of(q, k, v);
    const DType dtype = q.dtype(), compute = lse.dtype();
    const int64_t chunk = chunk_groups(g, dtype, q, workspace_bytes);
    const Tiles tiles = tiles_of(g, causal && tiled);
    const bool per_entry = !all_contiguous({&out, &q, &k, &v});
    const Tensor scores = make_empty({chunk, g.R, g.S}, compute, q.device());   // (chunk,R,S)
    const Tensor probs = make_empty({chunk, g.R, g.S}, dtype, q.device());      // (chunk,R,S)
    for (const Slab slab : slabs_of(g, chunk, per_entry)) {
        const int64_t n = slab.g1 - slab.g0;
        const Tensor qs = slab_input(q, g.NKV, slab, g.R, g.HS), ks = slab_input(k, g.NKV, slab, g.S, g.HS);
        const Tensor vs = slab_input(v, g.NKV, slab, g.S, g.HSv);
        const SlabOutput os(out, g.NKV, slab, g.R, g.HSv);
        const Tensor s = groups_slice(scores, 0, n), p = groups_slice(probs, 0, n);
        for (const Tile t : tiles.query)                                                  // S = scale q k^T
            kernels::gemm(tile_of(s, t.r0, t.r1, t.k0, t.k1), tile_of(qs, t.r0, t.r1, 0, g.HS),
                          tile_of(ks, t.k0, t.k1, 0, g.HS), false, true, scale, 0.0);
        kernels::attention_probs(p, flat_slice(lse, slab.g0 * g.R, slab.g1 * g.R), s, g.T, causal, false);
        for (const Tile t : tiles.query)                                                  // O = P v
            kernels::gemm(tile_of(os.target(), t.r0, t.r1, 0, g.HSv), tile_of(p, t.r0, t.r1, t.k0, t.k1),
                          tile_of(vs, t.k0, t.k1, 0, g.HSv), false, false, 1.0, 0.0);
        os.flush();
    }
}

}  // namespace

void attention_forward_gemm(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                            double scale, bool causal, int64_t workspace_bytes) {
    check_attention_args("attention (gemm path)", out, lse, q, k, v);
    if (lse.numel() == 0) return;                                    // B*NH*T == 0
    const Groups g = groups_of(q, k, v);
    if (heads_in_place(q, g)) return forward_slabs(out, lse, q, k, v, scale, causal, workspace_bytes, true);
    const Tensor dense_out = dense_output(out);
    forward_slabs(dense_out, lse, grouped_input(q, g.NKV, g.R, g.HS), grouped_input(k, g.NKV, g.S, g.HS),
                  grouped_input(v, g.NKV, g.S, g.HSv), scale, causal, workspace_bytes, false);
    finish(out, dense_out);
}

namespace {

// The backward's products and row kernel for one slab: the operands' slabs, P and dS in `p`, S and
// then dP in `s` (both (n,R,S)); writes dq, dk, dv where defined.
struct BackwardSlab {
    Tensor q, k, v, dout, out_dense, dout_dense, lse, s, p;
    const SlabOutput *dq, *dk, *dv;
};

void backward_slab(const BackwardSlab& b, const Tiles& tiles, const Groups& g, double scale, bool causal) {
    for (const Tile t : tiles.query)                                                      // S = scale q k^T
        kernels::gemm(tile_of(b.s, t.r0, t.r1, t.k0, t.k1), tile_of(b.q, t.r0, t.r1, 0, g.HS),
                      tile_of(b.k, t.k0, t.k1, 0, g.HS), false, true, scale, 0.0);
    kernels::attention_probs(b.p, b.lse, b.s, g.T, causal, true);
    if (b.dv->defined())
        for (const Tile t : tiles.key)                                                    // dv = P^T dO
            kernels::gemm(tile_of(b.dv->target(), t.k0, t.k1, 0, g.HSv), tile_of(b.p, t.r0, t.r1, t.k0, t.k1),
                          tile_of(b.dout, t.r0, t.r1, 0, g.HSv), true, false, 1.0, 0.0);
    if (!b.dq->defined() && !b.dk->defined()) return;
    for (const Tile t : tiles.query)                                                      // dP = dO v^T
        kernels::gemm(tile_of(b.s, t.r0, t.r1, t.k0, t.k1), tile_of(b.dout, t.r0, t.r1, 0, g.HSv),
                      tile_of(b.v, t.k0, t.k1, 0, g.HSv), false, true, 1.0, 0.0);
    kernels::attention_score_grad(b.p, b.p, b.s, b.dout_dense, b.out_dense, g.T, causal);   // dS, in place of P
    if (b.dq->defined())
        for (const Tile t : tiles.query)                                                  // dq = scale dS k
            kernels::gemm(tile_of(b.dq->target(), t.r0, t.r1, 0, g.HS), tile_of(b.p, t.r0, t.r1, t.k0, t.k1),
                          tile_of(b.k, t.k0, t.k1, 0, g.HS), false, false, scale, 0.0);
    if (b.dk->defined())
        for (const Tile t : tiles.key)                                                    // dk = scale dS^T q
            kernels::gemm(tile_of(b.dk->target(), t.k0, t.k1, 0, g.HS), tile_of(b.p, t.r0, t.r1, t.k0, t.k1),
                          tile_of(b.q, t.r0, t.r1, 0, g.HS), true, false, scale, 0.0);
}

void backward_slabs(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout, const Tensor& out,
                    const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                    int64_t workspace_bytes, bool tiled) {
    const Groups g = groups_of(q, k, v);
    const DType dtype = q.dtype(), compute = lse.dtype();
    const int64_t chunk = chunk_groups(g, dtype, q, workspace_bytes);
    const Tiles tiles = tiles_of(g, causal && tiled);
    const bool per_entry = !all_contiguous({&dq, &dk, &dv, &dout, &out, &q, &k, &v});
    const Tensor scores = make_empty({chunk, g.R, g.S}, compute, q.device());   // S, then dP
    const Tensor probs = make_empty({chunk, g.R, g.S}, dtype, q.device());      // P, then dS
    for (const Slab slab : slabs_of(g, chunk, per_entry)) {
        const int64_t n = slab.g1 - slab.g0;
        const SlabOutput dqs(dq, g.NKV, slab, g.R, g.HS), dks(dk, g.NKV, slab, g.S, g.HS);
        const SlabOutput dvs(dv, g.NKV, slab, g.S, g.HSv);
        const Tensor dout_dense = slab_input(dout, g.NKV, slab, g.R, g.HSv, true);   // the row kernel's
        BackwardSlab b{slab_input(q, g.NKV, slab, g.R, g.HS), slab_input(k, g.NKV, slab, g.S, g.HS),
                       slab_input(v, g.NKV, slab, g.S, g.HSv), dout_dense,
                       slab_input(out, g.NKV, slab, g.R, g.HSv, true), dout_dense,
                       flat_slice(lse, slab.g0 * g.R, slab.g1 * g.R), groups_slice(scores, 0, n),
                       groups_slice(probs, 0, n), &dqs, &dks, &dvs};
        backward_slab(b, tiles, g, scale, causal);
        for (const SlabOutput* grad : {&dqs, &dks, &dvs}) grad->flush();
    }
}

}  // namespace

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
    if (heads_in_place(q, g))
        return backward_slabs(dq, dk, dv, dout, out, lse, q, k, v, scale, causal, workspace_bytes, true);
    const Tensor dqd = dense_output(dq), dkd = dense_output(dk), dvd = dense_output(dv);
    backward_slabs(dqd, dkd, dvd, grouped_input(dout, g.NKV, g.R, g.HSv), grouped_input(out, g.NKV, g.R, g.HSv), lse,
                   grouped_input(q, g.NKV, g.R, g.HS), grouped_input(k, g.NKV, g.S, g.HS),
                   grouped_input(v, g.NKV, g.S, g.HSv), scale, causal, workspace_bytes, false);
    finish(dq, dqd);
    finish(dk, dkd);
    finish(dv, dvd);
}

}  // namespace ampgrad
