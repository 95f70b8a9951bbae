// attention_gemm_test.cpp: the GEMM attention path (kernels/attention_gemm.cpp) on the CPU against the
// fused CPU kernel (cpu/attention.cpp, itself checked against an f64 composition and PyTorch's
// values): out, lse, dq, dk, dv in f64, f32, f16 and bf16, causal and not, T != S both ways,
// grouped-query heads, strided inputs and outputs, one kv head per chunk, HS == 0, T == 0 and -inf /
// NaN rows; the path setting. Its two row kernels: tests/cpu/attention_rows_test.cpp. The same code
// runs on a GPU with cuBLAS's products: tests/cuda/attention_test.cpp compares that with the CPU.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "kernels/attention_gemm.hpp"
#include "kernels/fused_kernels.hpp"
#include "cpu/attention.hpp"
#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

struct Results {
    Tensor out, lse, dq, dk, dv;
};

struct Inputs {
    Tensor q, k, v, dout;
};

std::vector<bool> nan_mask(const Tensor& t) {
    std::vector<bool> mask;
    for (double x : t.to(kFloat64).contiguous().to_vector<double>()) mask.push_back(std::isnan(x));
    return mask;
}

DType lse_dtype(DType dtype) { return dtype == kFloat64 ? kFloat64 : kFloat32; }

// Outputs written through transposed (non-contiguous) views, as the op layer writes them.
Results empty_results(const Inputs& in) {
    const Tensor& q = in.q;
    Results r;
    r.out = empty({q.size(0), q.size(2), q.size(1), in.v.size(3)}, q.dtype()).transpose(1, 2);
    r.lse = empty({q.size(0), q.size(1), q.size(2)}, lse_dtype(q.dtype()));
    r.dq = empty({q.size(0), q.size(2), q.size(1), q.size(3)}, q.dtype()).transpose(1, 2);
    r.dk = empty(in.k.sizes(), q.dtype());
    r.dv = empty(in.v.sizes(), q.dtype());
    return r;
}

Results fused(const Inputs& in, bool causal, double scale) {
    Results r = empty_results(in);
    cpu::AttentionArgs a{r.out, r.lse, in.q, in.k, in.v, scale, causal};
    cpu::attention_forward(a);
    cpu::attention_backward({a, in.dout, r.dq, r.dk, r.dv});
    return r;
}

Results gemm_path(const Inputs& in, bool causal, double scale, int64_t workspace_bytes = 0) {
    Results r = empty_results(in);
    attention_forward_gemm(r.out, r.lse, in.q, in.k, in.v, scale, causal, workspace_bytes);
    attention_backward_gemm(r.dq, r.dk, r.dv, in.dout, r.out, r.lse, in.q, in.k, in.v, scale, causal, workspace_bytes);
    return r;
}

Inputs sample_inputs(DType dtype, int64_t B, int64_t NH, int64_t NKV, int64_t T, int64_t S, int64_t HS,
                     int64_t HSv) {
    return {randn({B, NH, T, HS}).to(dtype), randn({B, NKV, S, HS}).to(dtype), randn({B, NKV, S, HSv}).to(dtype),
            randn({B, NH, T, HSv}).to(dtype)};
}

// f32/f64 multiply the same values in another order; f16/bf16 also round P and dS to the dtype
// before their products (as FlashAttention does), where the fused kernel keeps them in f32.
void check_same(const Results& got, const Results& want, DType dtype) {
    const bool half = dtype == kFloat16 || dtype == kBFloat16;
    const Tolerance out_tol = half ? tol_for(dtype, 4) : tol_for(dtype);
    const Tolerance grad_tol = half ? tol_for(dtype, 16) : tol_for(dtype, 8);
    CHECK_CLOSE(got.out, want.out, out_tol);
    CHECK_CLOSE(got.lse, want.lse, tol_for(lse_dtype(dtype)));
    CHECK_CLOSE(got.dq, want.dq, grad_tol);
    CHECK_CLOSE(got.dk, want.dk, grad_tol);
    CHECK_CLOSE(got.dv, want.dv, grad_tol);
}

}  // namespace

TEST_CASE("gemm attention path equals the fused kernel: every dtype, causal, T != S, grouped-query heads") {
    manual_seed(211);
    struct Case {
        int64_t NH, NKV, T, S, HS, HSv;
    };
    for (DType dtype : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
        for (Case c : {Case{3, 3, 6, 6, 5, 4}, Case{4, 2, 4, 7, 8, 8}, Case{4, 1, 9, 3, 3, 6},
                       Case{2, 2, 33, 40, 16, 16}}) {
            for (bool causal : {false, true}) {
                CAPTURE(dtype_name(dtype));
                CAPTURE(c.NH);
                CAPTURE(c.NKV);
                CAPTURE(c.T);
                CAPTURE(c.S);
                CAPTURE(causal);
                const Inputs in = sample_inputs(dtype, 2, c.NH, c.NKV, c.T, c.S, c.HS, c.HSv);
                const double scale = 1.0 / std::sqrt(static_cast<double>(c.HS));
                check_same(gemm_path(in, causal, scale), fused(in, causal, scale), dtype);
            }
        }
    }
}

TEST_CASE("gemm attention path reads strided q/k/v and KV-cache slices, and gives the same result one kv head per chunk") {
    manual_seed(223);
    const int64_t B = 2, T = 9, NH = 4, HS = 4;
    Tensor qkv = randn({B, T, 3 * NH * HS}, kFloat32);                          // (B,T,3C)
    tensor_list parts = split(qkv, NH * HS, 2);
    tensor_list heads;
    for (const Tensor& p : parts) heads.push_back(p.view({B, T, NH, HS}).transpose(1, 2));   // (B,NH,T,HS)
    REQUIRE_FALSE(heads[0].is_contiguous());
    Tensor dout = randn({B, NH, T, HS}).transpose(2, 3).contiguous().transpose(2, 3);          // odd strides
    const Inputs in{heads[0], heads[1], heads[2], dout};
    const Results whole = gemm_path(in, true, 0.5);
    check_same(whole, fused(in, true, 0.5), kFloat32);
    // A workspace of one byte: every chunk holds one kv head (8 chunks instead of 1).
    const Results chunked = gemm_path(in, true, 0.5, 1);
    check_same(chunked, whole, kFloat32);
    // k and v as a KV cache's slices along time (read as strided groups, not copied), T != S.
    Tensor cache_k = randn({B, NH, 20, HS}), cache_v = randn({B, NH, 20, HS});
    const Inputs cached{heads[0], cache_k.narrow(2, 0, 13), cache_v.narrow(2, 0, 13), dout};
    REQUIRE_FALSE(cached.k.is_contiguous());
    check_same(gemm_path(cached, false, 0.5), fused(cached, false, 0.5), kFloat32);
}

// Causal attention with T == S over several tiles (kernels/attention_gemm.cpp: 64 rows a tile, so
// 150 rows are tiles of 64, 64 and 22): the products skip the masked part above the diagonal tiles.
// q, k, v cut from one fused QKV projection and heads-last dout and outputs, as the GPT passes them,
// are multiplied in place one batch entry at a time (4 heads of 150 x 150 x 32: past the in-place
// threshold; bf16 on a CPU with native bf16 products copies them to dense heads first); contiguous
// inputs take whole-tensor slabs. Both against the fused kernel. (Smaller heads, as in the cases
// above, take the dense copies.)
TEST_CASE("gemm attention path: causal tiles over T = S = 150, head-strided and dense operands, every dtype") {
    manual_seed(229);
    const int64_t B = 2, T = 150, NH = 4, HS = 32;
    for (DType dtype : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dtype));
        Tensor qkv = randn({B, T, 3 * NH * HS}).to(dtype);                           // (B,T,3C)
        tensor_list heads;
        for (const Tensor& p : split(qkv, NH * HS, 2)) heads.push_back(p.view({B, T, NH, HS}).transpose(1, 2));
        Tensor dout = randn({B, T, NH, HS}).to(dtype).transpose(1, 2);               // (B,NH,T,HS), heads-last
        const Inputs strided{heads[0], heads[1], heads[2], dout};
        const Inputs dense{heads[0].contiguous(), heads[1].contiguous(), heads[2].contiguous(), dout.contiguous()};
        for (bool causal : {true, false}) {
            CAPTURE(causal);
            const Results want = fused(strided, causal, 0.3);
            check_same(gemm_path(strided, causal, 0.3), want, dtype);
            check_same(gemm_path(dense, causal, 0.3), want, dtype);
        }
    }
}

// Grouped-query heads past the in-place threshold (4 query heads on 2 kv heads, 150 x 150 x 32): k and v
// heads-last are read in place; the stacked query heads of a kv head are not one strided matrix, so q
// and dO are copied per slab and O and dq written through a scratch. No causal tiles (stacked rows).
TEST_CASE("gemm attention path: grouped-query heads-last operands past the in-place threshold") {
    manual_seed(233);
    const int64_t B = 2, T = 150, NH = 4, NKV = 2, HS = 32;
    for (DType dtype : {kFloat64, kFloat32}) {
        CAPTURE(dtype_name(dtype));
        auto heads_last = [&](int64_t heads) { return randn({B, T, heads, HS}).to(dtype).transpose(1, 2); };
        const Inputs in{heads_last(NH), heads_last(NKV), heads_last(NKV), heads_last(NH)};
        for (bool causal : {true, false}) {
            CAPTURE(causal);
            check_same(gemm_path(in, causal, 0.3), fused(in, causal, 0.3), dtype);
        }
    }
}

TEST_CASE("gemm attention path: q empty by its head size, and no queries, still write every output") {
    auto nan_filled = [](const Shape& shape) { return full(shape, NAN, TensorOptions(kFloat64)); };
    for (bool causal : {false, true}) {
        CAPTURE(causal);
        manual_seed(227);
        const Inputs in{randn({1, 2, 4, 0}, kFloat64), randn({1, 2, 5, 0}, kFloat64), randn({1, 2, 5, 3}, kFloat64),
                        randn({1, 2, 4, 3}, kFloat64)};                                  // HS == 0
        Results want = fused(in, causal, 0.5);
        Tensor out = nan_filled({1, 2, 4, 3}), lse = nan_filled({1, 2, 4});
        attention_forward_gemm(out, lse, in.q, in.k, in.v, 0.5, causal);
        CHECK_CLOSE(out, want.out, tol_for(kFloat64));
        CHECK_CLOSE(lse, want.lse, tol_for(kFloat64));
        Tensor dq = nan_filled(in.q.sizes()), dk = nan_filled(in.k.sizes()), dv = nan_filled(in.v.sizes());
        attention_backward_gemm(dq, dk, dv, in.dout, out, lse, in.q, in.k, in.v, 0.5, causal);
        CHECK_CLOSE(dv, want.dv, tol_for(kFloat64));

        Tensor q0 = randn({1, 2, 0, 3}, kFloat64), k0 = randn({1, 2, 5, 3}, kFloat64);   // T == 0
        Tensor out0 = empty({1, 2, 0, 3}, kFloat64), lse0 = empty({1, 2, 0}, kFloat64);
        attention_forward_gemm(out0, lse0, q0, k0, in.v, 0.5, causal);
        Tensor dk0 = nan_filled(k0.sizes()), dv0 = nan_filled(in.v.sizes());
        attention_backward_gemm(empty({1, 2, 0, 3}, kFloat64), dk0, dv0, empty({1, 2, 0, 3}, kFloat64), out0, lse0, q0,
                                k0, in.v, 0.5, causal);
        CHECK(equal(dk0, zeros(k0.sizes(), kFloat64)));
        CHECK(equal(dv0, zeros(in.v.sizes(), kFloat64)));
    }
}

// PyTorch's values (tests/cpu/attention_test.cpp checks the fused kernel against the same): a -inf
// score weighs exactly 0; an inf in q against keys of both signs gives a NaN lse and a NaN row.
TEST_CASE("gemm attention path: -inf scores weigh 0, and an inf query row comes out NaN, as the fused kernel") {
    const double inf = std::numeric_limits<double>::infinity();
    auto f64 = [](std::vector<double> values, Shape shape) { return tensor<double>(values, shape); };
    const Inputs minus_inf_key{f64({1.0, 0.3}, {1, 1, 2, 1}), f64({-inf, 0.5}, {1, 1, 2, 1}),
                               f64({inf, 2.0}, {1, 1, 2, 1}), f64({1.0, -1.0}, {1, 1, 2, 1})};
    const Inputs inf_query{f64({inf, 0.5}, {1, 1, 2, 1}), f64({1.0, -1.0}, {1, 1, 2, 1}),
                           f64({0.25, 2.0}, {1, 1, 2, 1}), f64({1.0, 1.0}, {1, 1, 2, 1})};
    for (const Inputs* in : {&minus_inf_key, &inf_query}) {
        for (bool causal : {false, true}) {
            CAPTURE(causal);
            const Results got = gemm_path(*in, causal, 1.0), want = fused(*in, causal, 1.0);
            for (auto [g, w] : {std::pair{got.out, want.out}, std::pair{got.lse, want.lse}, std::pair{got.dq, want.dq},
                                std::pair{got.dk, want.dk}, std::pair{got.dv, want.dv}}) {
                CHECK(nan_mask(g) == nan_mask(w));
                CHECK_CLOSE(g, w, tol_for(kFloat64));
            }
        }
    }
}

TEST_CASE("attention path setting: auto takes the GEMM path for f32 (f16/bf16 off the CPU), and names") {
    const AttentionPath before = attention_path();
    Tensor q64 = zeros({1, 1, 16, 1}, kFloat64), q32 = zeros({1, 1, 16, 1}, kFloat32);
    Tensor k32 = zeros({1, 1, 16, 1}, kFloat32), small_k32 = zeros({1, 1, 15, 1}, kFloat32);
    set_attention_path(AttentionPath::kAuto);
    CHECK(attention_uses_gemm(q32, k32));                     // 16 x 16 scores per head
    CHECK_FALSE(attention_uses_gemm(q32, small_k32));          // 16 x 15: the fused loops
    CHECK_FALSE(attention_uses_gemm(q64, k32.to(kFloat64)));  // f64: the fused kernels
    CHECK_FALSE(attention_uses_gemm(q32.to(kFloat16), k32.to(kFloat16)));     // CPU halves keep P, dS in f32
    CHECK_FALSE(attention_uses_gemm(q32.to(kBFloat16), k32.to(kBFloat16)));
    set_attention_path(AttentionPath::kGemm);
    CHECK(attention_uses_gemm(q64, k32.to(kFloat64)));
    set_attention_path(AttentionPath::kFused);
    CHECK_FALSE(attention_uses_gemm(q32, k32));
    CHECK(std::string(attention_path_name(AttentionPath::kGemm)) == "gemm");
    CHECK(attention_workspace_bytes(q32) == int64_t(64) << 20);
    CHECK(attention_workspace_bytes(q32, 4096) == 4096);
    set_attention_path(before);
}
