// gemm_test.cpp: cuda/gemm.cu (cuBLAS) against a float64 reference computed here from the same
// rounded inputs: every trans_a/trans_b combination, alpha/beta, batch broadcast (stride 0),
// column-major and odd-strided operands (copied first), 2-d operands, K == 0, and out written in place
// with row and batch strides (interleaved heads, a tile). Then
// kernels::gemm_epilogue (cuBLASLt) against the CPU kernel: bias and bias+GELU, with and without
// bias and aux, every transpose, N a multiple of 8 (aux fused in cuBLASLt) and not (GELU as a
// pass), K == 0.
#include "kernels/fused_kernels.hpp"
#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

// out (B,M,N) = alpha * op(a) @ op(b) + beta * c0, in double. a is (B,M,K) or, if ta, (B,K,M);
// b is (B,K,N) or, if tb, (B,N,K); 2-d operands are a batch of one.
Tensor reference_gemm(const Tensor& a, const Tensor& b, const Tensor& c0, bool ta, bool tb, double alpha,
                      double beta) {
    std::vector<double> av = host_values(a), bv = host_values(b), cv = host_values(c0);
    int64_t d = c0.dim();
    int64_t B = d == 3 ? c0.size(0) : 1, M = c0.size(d - 2), N = c0.size(d - 1);
    int64_t K = ta ? a.size(d - 2) : a.size(d - 1);
    auto a_at = [&](int64_t bi, int64_t i, int64_t k) {                    // op(a)[bi, i, k]
        return av[static_cast<size_t>(ta ? (bi * K + k) * M + i : (bi * M + i) * K + k)];
    };
    auto b_at = [&](int64_t bi, int64_t k, int64_t j) {                    // op(b)[bi, k, j]
        return bv[static_cast<size_t>(tb ? (bi * N + j) * K + k : (bi * K + k) * N + j)];
    };
    std::vector<double> out(static_cast<size_t>(B * M * N));
    for (int64_t bi = 0; bi < B; ++bi)
        for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
                double acc = 0;
                for (int64_t k = 0; k < K; ++k) acc += a_at(bi, i, k) * b_at(bi, k, j);
                size_t o = static_cast<size_t>((bi * M + i) * N + j);
                out[o] = alpha * acc + beta * cv[o];
            }
    return tensor(out, c0.sizes());
}

Tolerance gemm_tol(DType dtype) {
    return dtype == kFloat32 ? Tolerance{1e-5, 1e-5} : tol_for(dtype);
}

// Runs the GPU gemm into a copy of c0 and checks it against the reference.
void check_gemm(const Tensor& a_gpu, const Tensor& b_gpu, const Tensor& c0, bool ta, bool tb, double alpha,
                double beta, std::optional<Tolerance> tol = std::nullopt) {
    Tensor out = to_gpu(c0);
    kernels::gemm(out, a_gpu, b_gpu, ta, tb, alpha, beta);
    CHECK_GPU_CLOSE(out, reference_gemm(a_gpu, b_gpu, c0, ta, tb, alpha, beta), tol.value_or(gemm_tol(c0.dtype())));
}

}  // namespace

TEST_CASE("cuda gemm: every transpose combination, alpha and beta, in f32, f64, f16, bf16" * skip_without_gpu()) {
    const int64_t B = 3, M = 5, K = 7, N = 4;
    for (DType dtype : kFloatDTypes) {
        for (bool ta : {false, true}) {
            for (bool tb : {false, true}) {
                CAPTURE(dtype_name(dtype));
                CAPTURE(ta);
                CAPTURE(tb);
                Tensor a = to_gpu(sample(ta ? Shape{B, K, M} : Shape{B, M, K}, dtype, 1));
                Tensor b = to_gpu(sample(tb ? Shape{B, N, K} : Shape{B, K, N}, dtype, 2));
                Tensor c0 = sample({B, M, N}, dtype, 3);
                check_gemm(a, b, c0, ta, tb, 1.0, 0.0);
                check_gemm(a, b, c0, ta, tb, 0.5, 1.5);
            }
        }
    }
}

TEST_CASE("cuda gemm: broadcast batch, column-major and odd-strided operands, 2-d, K == 0" * skip_without_gpu()) {
    const int64_t B = 2, M = 3, K = 4, N = 5;
    Tensor c0 = sample({B, M, N}, kFloat32, 4);
    Tensor b = to_gpu(sample({B, K, N}, kFloat32, 5));
    SUBCASE("a broadcast over the batch (stride 0)") {
        Tensor a1 = to_gpu(sample({1, M, K}, kFloat32, 6));
        check_gemm(make_view(a1, {B, M, K}, {0, K, 1}, 0), b, c0, false, false, 1.0, 1.0);
    }
    SUBCASE("a column-major: a transposed view is used without a copy") {
        Tensor at = to_gpu(sample({B, K, M}, kFloat32, 7));
        check_gemm(make_view(at, {B, M, K}, {K * M, 1, M}, 0), b, c0, false, false, 1.0, 0.0);
        check_gemm(make_view(at, {B, M, K}, {K * M, 1, M}, 0), b, c0, false, false, 2.0, -1.0);
    }
    SUBCASE("a with every other column: copied to contiguous first") {
        Tensor wide = to_gpu(sample({B, M, 2 * K}, kFloat32, 8));
        check_gemm(make_view(wide, {B, M, K}, {2 * M * K, 2 * K, 2}, 0), b, c0, false, false, 1.0, 0.0);
    }
    SUBCASE("2-d operands") {
        Tensor a2 = to_gpu(sample({M, K}, kFloat64, 9)), b2 = to_gpu(sample({N, K}, kFloat64, 10));
        check_gemm(a2, b2, sample({M, N}, kFloat64, 11), false, true, 1.0, 0.0);
    }
    SUBCASE("K == 0: out = beta * out") {
        Tensor a0 = make_empty({B, M, 0}, kFloat32, kGpu), b0 = make_empty({B, 0, N}, kFloat32, kGpu);
        check_gemm(a0, b0, c0, false, false, 1.0, 2.0);
        check_gemm(a0, b0, c0, false, false, 1.0, 0.0);
    }
}

// out with dense rows at any row and batch stride (kernels/kernels.hpp), as the CPU's attention path
// writes tiles and heads: cuBLAS's ldc and strideC, the storage around out unchanged.
TEST_CASE("cuda gemm: out as interleaved heads and as a tile, the storage around it untouched" * skip_without_gpu()) {
    const int64_t NH = 3, T = 5, HS = 4, K = 6;
    for (DType dtype : kFloatDTypes) {
        CAPTURE(dtype_name(dtype));
        Tensor a = to_gpu(sample({NH, T, K}, dtype, 21)), b = to_gpu(sample({NH, K, HS}, dtype, 22));
        Tensor store = to_gpu(sample({T, NH, HS}, dtype, 23));                       // (T,NH,HS)
        Tensor heads = make_view(store, {NH, T, HS}, {HS, NH * HS, 1}, 0);           // (NH,T,HS), rows interleaved
        const Tensor c0 = to_host(heads.contiguous());
        kernels::gemm(heads, a, b, false, false, 0.75, 0.5);
        CHECK_GPU_CLOSE(heads.contiguous(), reference_gemm(a, b, c0, false, false, 0.75, 0.5), gemm_tol(dtype));

        Tensor buffer = to_gpu(sample({2, 8, 7}, dtype, 24));
        const Tensor before = to_host(buffer);
        Tensor tile = make_view(buffer, {2, 4, 3}, {56, 7, 1}, 2 * 7 + 1);            // rows 2..5, columns 1..3
        Tensor a2 = to_gpu(sample({2, 4, K}, dtype, 25)), b2 = to_gpu(sample({2, 3, K}, dtype, 26));
        const Tensor t0 = to_host(tile.contiguous());
        kernels::gemm(tile, a2, b2, false, true, 1.0, 0.0);
        CHECK_GPU_CLOSE(tile.contiguous(), reference_gemm(a2, b2, t0, false, true, 1.0, 0.0), gemm_tol(dtype));
        Tensor after = to_host(buffer);
        kernels::fill(make_view(after, {2, 4, 3}, {56, 7, 1}, 2 * 7 + 1), 0.0);
        kernels::fill(make_view(before, {2, 4, 3}, {56, 7, 1}, 2 * 7 + 1), 0.0);
        CHECK(equal(after, before));
    }
}

TEST_CASE("cuda gemm: mismatched dtypes are an internal error, not a wrong answer" * skip_without_gpu()) {
    Tensor a = to_gpu(sample({2, 3}, kFloat32, 12)), b = to_gpu(sample({3, 4}, kFloat64, 13));
    Tensor out = make_empty({2, 4}, kFloat32, kGpu);
    CHECK_THROWS_AS(kernels::gemm(out, a, b, false, false, 1.0, 0.0), InternalError);
    Tensor out16 = make_empty({2, 4}, kFloat16, kGpu), b32 = to_gpu(sample({3, 4}, kFloat32, 13));
    CHECK_THROWS_AS(kernels::gemm(out16, a, b32, false, false, 1.0, 0.0), InternalError);   // f32 into f16
}

// The attention GEMM path's scores: cuBLAS's mixed-precision GemmEx (f16/bf16 in, f32 out), held to
// 2e-5 against the double product of the same inputs (tensor cores accumulate in f32 with their own
// alignment), so a rounding to f16/bf16 (about 1e-3) would fail.
TEST_CASE("cuda gemm: f16/bf16 operands write an f32 out without rounding" * skip_without_gpu()) {
    const int64_t B = 3, M = 5, K = 33, N = 4;
    for (DType dtype : {kFloat16, kBFloat16}) {
        for (bool ta : {false, true}) {
            for (bool tb : {false, true}) {
                CAPTURE(dtype_name(dtype));
                CAPTURE(ta);
                CAPTURE(tb);
                Tensor a = to_gpu(sample(ta ? Shape{B, K, M} : Shape{B, M, K}, dtype, 14));
                Tensor b = to_gpu(sample(tb ? Shape{B, N, K} : Shape{B, K, N}, dtype, 15));
                Tensor c0 = sample({B, M, N}, kFloat32, 16);
                check_gemm(a, b, c0, ta, tb, 0.5, 0.0, Tolerance{2e-5, 2e-5});
                check_gemm(a, b, c0, ta, tb, 1.0, 1.0, Tolerance{2e-5, 2e-5});
            }
        }
    }
}

// ---- kernels::gemm_epilogue ----

namespace {

struct EpilogueCase {
    DType dtype;
    int64_t M, K, N;
    bool ta, tb, with_bias, with_aux;
    GemmEpilogue epilogue;
};

// Runs the epilogue GEMM on the CPU and on the GPU from the same inputs and compares out and aux.
void check_epilogue(const EpilogueCase& c) {
    const bool gelu = c.epilogue == GemmEpilogue::kBiasGeluTanh;
    Tensor a = sample(c.ta ? Shape{c.K, c.M} : Shape{c.M, c.K}, c.dtype, 21);
    Tensor b = sample(c.tb ? Shape{c.N, c.K} : Shape{c.K, c.N}, c.dtype, 22);
    Tensor bias = c.with_bias ? sample({c.N}, c.dtype, 23) : Tensor();
    Tensor out = make_empty({c.M, c.N}, c.dtype, kHost);
    Tensor aux = c.with_aux ? make_empty({c.M, c.N}, c.dtype, kHost) : Tensor();
    kernels::gemm_epilogue(out, aux, a, b, c.ta, c.tb, bias, c.epilogue);

    Tensor out_gpu = make_empty({c.M, c.N}, c.dtype, kGpu);
    Tensor aux_gpu = c.with_aux ? make_empty({c.M, c.N}, c.dtype, kGpu) : Tensor();
    kernels::gemm_epilogue(out_gpu, aux_gpu, to_gpu(a), to_gpu(b), c.ta, c.tb,
                           c.with_bias ? to_gpu(bias) : Tensor(), c.epilogue);
    // cuBLASLt's fused GELU may use the hardware tanh approximation (about 2^-11 relative
    // error), so an f32 GELU output is held to half precision's tolerance; aux (no tanh) is not.
    Tolerance out_tol = gelu && c.dtype == kFloat32 ? tol_for(kFloat16) : gemm_tol(c.dtype);
    CHECK_GPU_CLOSE(out_gpu, out, out_tol);
    if (c.with_aux) CHECK_GPU_CLOSE(aux_gpu, aux, gemm_tol(c.dtype));
}

}  // namespace

TEST_CASE("cuda gemm_epilogue: bias and bias+GELU match the CPU kernel in f32, f64, f16, bf16" * skip_without_gpu()) {
    for (DType dtype : kFloatDTypes) {
        for (GemmEpilogue ep : {GemmEpilogue::kBias, GemmEpilogue::kBiasGeluTanh}) {
            for (int64_t N : {16, 12}) {                    // aux leading dimension a multiple of 8, and not
                CAPTURE(dtype_name(dtype));
                CAPTURE(static_cast<int>(ep));
                CAPTURE(N);
                const bool gelu = ep == GemmEpilogue::kBiasGeluTanh;
                check_epilogue({dtype, 9, 24, N, false, false, true, gelu, ep});
                check_epilogue({dtype, 9, 24, N, true, true, true, false, ep});
                check_epilogue({dtype, 9, 24, N, false, true, false, gelu, ep});
            }
        }
    }
}

TEST_CASE("cuda gemm_epilogue: transposes, K == 0 and empty outputs" * skip_without_gpu()) {
    const GemmEpilogue gelu = GemmEpilogue::kBiasGeluTanh;
    for (bool ta : {false, true})
        for (bool tb : {false, true}) {
            CAPTURE(ta);
            CAPTURE(tb);
            check_epilogue({kFloat16, 33, 40, 24, ta, tb, true, true, gelu});
            check_epilogue({kBFloat16, 7, 16, 8, ta, tb, true, false, GemmEpilogue::kBias});
        }
    SUBCASE("K == 0: out = gelu(bias), aux = bias") { check_epilogue({kFloat32, 4, 0, 8, false, false, true, true, gelu}); }
    SUBCASE("M == 0: nothing to write") { check_epilogue({kFloat32, 0, 5, 8, false, false, true, true, gelu}); }
}

// Each stream has its own cuBLAS/cuBLASLt workspace (cuda/gemm_lt.cuh, gemm_workspace), kept for the
// process: after a plain cuBLAS GEMM on the default stream and on every stream of the pool (32, handed
// out round-robin by new_stream), each of those 33 streams holds a live 32 MiB block, so at least
// 33 x 32 MiB stay allocated. (Before the fix cuBLAS used its own workspace on every stream: none.)
// The GEMMs, in flight on all those streams at once, agree with the reference.
TEST_CASE("cuda gemm: each stream keeps a workspace of its own; GEMMs on 33 streams agree" * skip_without_gpu()) {
    Tensor a = to_gpu(sample({64, 48}, kFloat32, 81)), b = to_gpu(sample({48, 32}, kFloat32, 82));
    Tensor c0 = sample({64, 32}, kFloat32, 83);
    const Tensor want = reference_gemm(a, b, c0, false, false, 1.0, 0.0);
    std::vector<Stream> streams = {current_stream(kGpu)};
    for (int i = 0; i < 32; ++i) streams.push_back(new_stream(kGpu));
    std::vector<Tensor> outs;
    for (const Stream& s : streams) {
        StreamGuard guard(s);
        outs.push_back(to_gpu(c0));
        kernels::gemm(outs.back(), a, b, false, false, 1.0, 0.0);                       // (64,32)
    }
    synchronize(kGpu);
    CHECK(memory_allocated(kGpu) >= int64_t{33} * (32 << 20));
    for (const Tensor& out : outs) CHECK_GPU_CLOSE(out, want, gemm_tol(kFloat32));
}
