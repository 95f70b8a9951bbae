// attention_test.cpp: both CUDA attention paths, cuda/attention.cu's flash-style kernels and the
// GEMM path (kernels/attention_gemm.cpp on cuBLAS with cuda/attention_rows.cu), against the fused CPU
// kernel (cpu/attention.cpp) on the same inputs: out, lse, dq, dk, dv in f32, f64, f16 and bf16,
// causal and not, T != S both ways, tile-straddling sizes, a strided q (a view of a (B,T,NH,HS)
// tensor), a row whose scores are all -inf, empty inputs and the fused kernel's head-size limit.
#include <limits>

#include "kernels/fused_kernels.hpp"
#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

struct AttentionCase {
    DType dtype;
    int64_t B, NH, T, S, HS, HSv;
    bool causal;
};

struct AttentionInputs {
    Tensor q, k, v, dout;        // on one device
};

struct AttentionResults {
    Tensor out, lse, dq, dk, dv;
};

DType lse_dtype(DType dtype) { return dtype == kFloat64 ? kFloat64 : kFloat32; }

// Forward then backward through the kernels on the inputs' device, on the current path.
AttentionResults run(const AttentionCase& c, const AttentionInputs& in, double scale) {
    Device dev = in.q.device();
    AttentionResults r;
    r.out = make_empty({c.B, c.NH, c.T, c.HSv}, c.dtype, dev);
    r.lse = make_empty({c.B, c.NH, c.T}, lse_dtype(c.dtype), dev);
    attention_forward_on_path(r.out, r.lse, in.q, in.k, in.v, scale, c.causal);
    r.dq = make_empty(in.q.sizes(), c.dtype, dev);
    r.dk = make_empty(in.k.sizes(), c.dtype, dev);
    r.dv = make_empty(in.v.sizes(), c.dtype, dev);
    attention_backward_on_path(r.dq, r.dk, r.dv, in.dout, r.out, r.lse, in.q, in.k, in.v, scale, c.causal);
    return r;
}

AttentionInputs sample_inputs(const AttentionCase& c) {
    return {sample({c.B, c.NH, c.T, c.HS}, c.dtype, 31), sample({c.B, c.NH, c.S, c.HS}, c.dtype, 32),
            sample({c.B, c.NH, c.S, c.HSv}, c.dtype, 33), sample({c.B, c.NH, c.T, c.HSv}, c.dtype, 34)};
}

AttentionInputs to_gpu(const AttentionInputs& in) {
    return {testing::to_gpu(in.q), testing::to_gpu(in.k), testing::to_gpu(in.v), testing::to_gpu(in.dout)};
}

// Outputs round once from the compute type; the gradients sum products of rounded values twice
// over (dS, then dS k), hence the looser f16/bf16 tolerance there. The GEMM path also rounds P and dS
// to f16/bf16 before multiplying (as FlashAttention does): tests/core/attention_gemm_test.cpp's bounds.
bool half(DType dtype) { return dtype == kFloat16 || dtype == kBFloat16; }
Tolerance out_tol(DType dtype) {
    return half(dtype) && attention_path() == AttentionPath::kGemm ? tol_for(dtype, 8.0) : tol_for(dtype);
}
Tolerance grad_tol(DType dtype) {
    if (dtype == kFloat32) return {1e-4, 1e-4};
    if (dtype == kFloat64) return tol_for(dtype);
    return tol_for(dtype, attention_path() == AttentionPath::kGemm ? 16.0 : 8.0);
}

// The CPU reference: the fused kernel, whatever path the GPU runs.
AttentionResults run_on_cpu(const AttentionCase& c, const AttentionInputs& in, double scale);

AttentionResults run_on_cpu(const AttentionCase& c, const AttentionInputs& in, double scale) {
    ScopedAttentionPath fused(AttentionPath::kFused);
    return run(c, in, scale);
}

// The same inputs on the host and on the GPU (any strides on either side), the GPU on each path.
void check_case(const AttentionCase& c, const AttentionInputs& host, const AttentionInputs& gpu_in,
                const std::vector<AttentionPath>& paths = kAttentionPaths) {
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.HS));
    AttentionResults cpu = run_on_cpu(c, host, scale);
    for (AttentionPath path : paths) {
        CAPTURE(attention_path_name(path));
        ScopedAttentionPath scoped(path);
        AttentionResults gpu = run(c, gpu_in, scale);
        CHECK_GPU_CLOSE(gpu.out, cpu.out, out_tol(c.dtype));
        CHECK_GPU_CLOSE(gpu.lse, cpu.lse, out_tol(lse_dtype(c.dtype)));
        CHECK_GPU_CLOSE(gpu.dq, cpu.dq, grad_tol(c.dtype));
        CHECK_GPU_CLOSE(gpu.dk, cpu.dk, grad_tol(c.dtype));
        CHECK_GPU_CLOSE(gpu.dv, cpu.dv, grad_tol(c.dtype));
    }
}
void check_case(const AttentionCase& c, const AttentionInputs& host,
                const std::vector<AttentionPath>& paths = kAttentionPaths) {
    check_case(c, host, to_gpu(host), paths);
}

// A host tensor of `dtype` holding `values` (row-major).
Tensor host_tensor(const std::vector<double>& values, const Shape& shape, DType dtype) {
    return copy_to(tensor(values, shape), kHost, dtype);
}

}  // namespace

TEST_CASE("cuda attention: forward and backward match the CPU kernel in f32, f64, f16, bf16" * skip_without_gpu()) {
    for (DType dtype : kFloatDTypes) {
        for (bool causal : {false, true}) {
            CAPTURE(dtype_name(dtype));
            CAPTURE(causal);
            AttentionCase square{dtype, 2, 3, 40, 40, 16, 16, causal};
            check_case(square, sample_inputs(square));
            AttentionCase more_keys{dtype, 1, 2, 37, 45, 16, 24, causal};        // T < S, tiles straddled
            check_case(more_keys, sample_inputs(more_keys));
            AttentionCase more_queries{dtype, 2, 1, 45, 20, 24, 8, causal};      // T > S: rows past S see all keys
            check_case(more_queries, sample_inputs(more_queries));
        }
    }
}

TEST_CASE("cuda attention: head sizes 64 and 256, and a strided q" * skip_without_gpu()) {
    for (bool causal : {false, true}) {
        CAPTURE(causal);
        AttentionCase wide{kFloat32, 1, 2, 70, 70, 64, 64, causal};
        check_case(wide, sample_inputs(wide));
        AttentionCase widest{kBFloat16, 1, 1, 33, 33, 256, 256, causal};
        check_case(widest, sample_inputs(widest));
        AttentionCase widest64{kFloat64, 1, 1, 17, 17, 256, 256, causal};       // the largest shared memory
        check_case(widest64, sample_inputs(widest64));
    }
    SUBCASE("q a (B,NH,T,HS) view of a (B,T,NH,HS) tensor, as from a fused QKV projection") {
        AttentionCase c{kFloat32, 2, 3, 20, 20, 16, 16, true};
        AttentionInputs host = sample_inputs(c);
        AttentionInputs gpu = to_gpu(host);
        Tensor dense = sample({c.B, c.T, c.NH, c.HS}, kFloat32, 35), dense_gpu = testing::to_gpu(dense);
        const Shape strides{c.T * c.NH * c.HS, c.HS, c.NH * c.HS, 1};
        host.q = make_view(dense, {c.B, c.NH, c.T, c.HS}, strides, 0);
        gpu.q = make_view(dense_gpu, {c.B, c.NH, c.T, c.HS}, strides, 0);
        check_case(c, host, gpu);
    }
}

TEST_CASE("cuda attention: a row whose scores are all -inf gets P = 0 and lse = -inf" * skip_without_gpu()) {
    for (DType dtype : {kFloat32, kFloat16}) {
        CAPTURE(dtype_name(dtype));
        AttentionCase c{dtype, 1, 2, 9, 11, 8, 8, false};
        AttentionInputs in = sample_inputs(c);
        std::vector<double> k = host_values(in.k), q = host_values(in.q);
        for (double& x : k) x = std::fabs(x) + 0.1;                           // every key positive ...
        for (int64_t x = 0; x < c.HS; ++x) q[static_cast<size_t>(3 * c.HS + x)] = -INFINITY;   // ... row 3 of head 0: -inf
        in.k = host_tensor(k, in.k.sizes(), dtype);
        in.q = host_tensor(q, in.q.sizes(), dtype);
        // head 0's dk is NaN on both sides (dk = dS^T q multiplies the dead row's dS = 0 by its
        // -inf q); CHECK_CLOSE equates NaN with NaN and -inf with -inf.
        check_case(c, in);
        for (AttentionPath path : kAttentionPaths) {
            ScopedAttentionPath scoped(path);
            Tensor lse = make_empty({1, 2, 9}, kFloat32, kGpu), out = make_empty({1, 2, 9, 8}, dtype, kGpu);
            attention_forward_on_path(out, lse, testing::to_gpu(in.q), testing::to_gpu(in.k), testing::to_gpu(in.v),
                                      1.0, false);
            CHECK(host_values(lse)[3] == -std::numeric_limits<double>::infinity());
        }
    }
}

// A NaN in one query row makes every score of that row NaN: its output and lse are NaN on both
// devices (the GPU's fmax-based row max drops NaN, so testing the max alone took it for a row of -inf).
TEST_CASE("cuda attention: a query row with a NaN comes out NaN, as on the CPU" * skip_without_gpu()) {
    AttentionCase c{kFloat32, 1, 1, 5, 7, 8, 8, false};
    AttentionInputs in = sample_inputs(c);
    std::vector<double> q = host_values(in.q);
    q[static_cast<size_t>(2 * c.HS)] = NAN;                                     // row 2
    in.q = host_tensor(q, in.q.sizes(), kFloat32);
    AttentionResults cpu = run_on_cpu(c, in, 0.5);
    for (AttentionPath path : kAttentionPaths) {
        CAPTURE(attention_path_name(path));
        ScopedAttentionPath scoped(path);
        AttentionResults gpu = run(c, to_gpu(in), 0.5);
        const std::vector<double> out = host_values(gpu.out), lse = host_values(gpu.lse);
        CHECK(std::isnan(lse[2]));
        for (int64_t x = 0; x < c.HSv; ++x) CHECK(std::isnan(out[static_cast<size_t>(2 * c.HSv + x)]));
        CHECK_GPU_CLOSE(gpu.out, cpu.out, out_tol(kFloat32));                   // NaN equals NaN here
        CHECK_GPU_CLOSE(gpu.lse, cpu.lse, out_tol(kFloat32));
    }
}

TEST_CASE("cuda attention: empty inputs, and head sizes past the kernel's limit" * skip_without_gpu()) {
    SUBCASE("T == 0 and B == 0: nothing to do, no error") {
        for (AttentionCase c : {AttentionCase{kFloat32, 1, 2, 0, 5, 8, 8, true}, AttentionCase{kFloat32, 0, 2, 4, 5, 8, 8, false}}) {
            for (AttentionPath path : kAttentionPaths) {
                ScopedAttentionPath scoped(path);
                AttentionInputs gpu = to_gpu(sample_inputs(c));
                AttentionResults r = run(c, gpu, 1.0);
                CHECK(r.out.numel() == 0);
            }
        }
    }
    SUBCASE("q empty by its head size, and T == 0 with keys: every output written, as on the CPU") {
        // Outputs start as NaN so that one left unwritten shows; scale is explicit (HS may be 0).
        for (AttentionCase c : {AttentionCase{kFloat32, 1, 2, 6, 5, 0, 8, false}, AttentionCase{kFloat32, 1, 2, 6, 5, 0, 8, true},
                                AttentionCase{kFloat32, 1, 2, 0, 5, 8, 8, false}}) {
            CAPTURE(c.HS);
            CAPTURE(c.T);
            AttentionInputs host = sample_inputs(c), gpu = to_gpu(host);
            AttentionResults cpu = run_on_cpu(c, host, 0.5);
            for (AttentionPath path : kAttentionPaths) {
                CAPTURE(attention_path_name(path));
                ScopedAttentionPath scoped(path);
                AttentionResults r;
                r.out = testing::to_gpu(full({c.B, c.NH, c.T, c.HSv}, NAN, TensorOptions(kFloat32)));
                r.lse = testing::to_gpu(full({c.B, c.NH, c.T}, NAN, TensorOptions(kFloat32)));
                attention_forward_on_path(r.out, r.lse, gpu.q, gpu.k, gpu.v, 0.5, c.causal);
                r.dq = testing::to_gpu(full(gpu.q.sizes(), NAN, TensorOptions(kFloat32)));
                r.dk = testing::to_gpu(full(gpu.k.sizes(), NAN, TensorOptions(kFloat32)));
                r.dv = testing::to_gpu(full(gpu.v.sizes(), NAN, TensorOptions(kFloat32)));
                attention_backward_on_path(r.dq, r.dk, r.dv, gpu.dout, r.out, r.lse, gpu.q, gpu.k, gpu.v, 0.5, c.causal);
                CHECK_GPU_CLOSE(r.out, cpu.out, out_tol(kFloat32));
                CHECK_GPU_CLOSE(r.lse, cpu.lse, out_tol(kFloat32));
                CHECK_GPU_CLOSE(r.dk, cpu.dk, grad_tol(kFloat32));
                CHECK_GPU_CLOSE(r.dv, cpu.dv, grad_tol(kFloat32));
                for (double x : host_values(r.dv)) REQUIRE(!std::isnan(x));
            }
        }
    }
    SUBCASE("HS = 512: the fused kernels report it, not compute it wrongly; the GEMM path computes it") {
        AttentionCase c{kFloat32, 1, 1, 4, 4, 512, 8, false};
        AttentionInputs gpu = to_gpu(sample_inputs(c));
        Tensor out = make_empty({1, 1, 4, 8}, kFloat32, kGpu), lse = make_empty({1, 1, 4}, kFloat32, kGpu);
        {
            ScopedAttentionPath fused(AttentionPath::kFused);
            CHECK_THROWS_AS(kernels::attention_forward(out, lse, gpu.q, gpu.k, gpu.v, 1.0, false), NotImplementedError);
        }
        check_case(c, sample_inputs(c), {AttentionPath::kGemm});
    }
}
