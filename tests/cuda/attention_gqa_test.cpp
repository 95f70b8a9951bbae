// attention_gqa_test.cpp: both CUDA attention paths (cuda/attention.cu's fused kernels and the GEMM
// path, kernels/attention_gemm.cpp) with grouped key/value heads (k, v with NKV heads, NH a multiple of
// NKV) against cpu/attention.cpp's fused kernels: out, lse, dq, dk, dv in every float dtype, plain
// and causal, with more query rows and keys than one tile. Skipped without a GPU.
#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("cuda attention: grouped K/V match the CPU kernels" * skip_without_gpu()) {
    for (DType dtype : kFloatDTypes) {
        for (bool causal : {false, true}) {
            CAPTURE(dtype_name(dtype));
            CAPTURE(causal);
            Tensor q = sample({2, 8, 37, 16}, dtype, 111), k = sample({2, 2, 45, 16}, dtype, 112);
            Tensor v = sample({2, 2, 45, 16}, dtype, 113), dout = sample({2, 8, 37, 16}, dtype, 114);
            DType stat = dtype == kFloat64 ? kFloat64 : kFloat32;
            auto run = [&](Device device) {
                Tensor qd = copy_to(q, device), kd = copy_to(k, device), vd = copy_to(v, device);
                tensor_list r{make_empty(q.sizes(), dtype, device), make_empty({2, 8, 37}, stat, device),
                              make_empty(q.sizes(), dtype, device), make_empty(k.sizes(), dtype, device),
                              make_empty(v.sizes(), dtype, device)};
                attention_forward_on_path(r[0], r[1], qd, kd, vd, 0.25, causal);
                attention_backward_on_path(r[2], r[3], r[4], copy_to(dout, device), r[0], r[1], qd, kd, vd, 0.25, causal);
                return r;
            };
            tensor_list cpu;
            {
                ScopedAttentionPath fused(AttentionPath::kFused);
                cpu = run(kHost);
            }
            for (AttentionPath path : kAttentionPaths) {
                CAPTURE(attention_path_name(path));
                ScopedAttentionPath scoped(path);
                tensor_list gpu = run(kGpu);
                for (size_t i = 0; i < cpu.size(); ++i) {
                    CAPTURE(i);
                    const bool loose = i >= 3 || (i == 2 && path == AttentionPath::kGemm);   // dk, dv; dq when dS is rounded
                    CHECK_GPU_CLOSE(gpu[i], cpu[i], tol_for(i == 1 ? stat : dtype, loose ? 16.0 : 4.0));
                }
            }
        }
    }
}

// Refused on the host before any launch (kernels/kernel_preconditions.hpp): on the GPU a misfit would be
// an out-of-bounds access, or, for a dk of NH heads, heads left unwritten.
TEST_CASE("cuda attention: gradients shaped for the query heads are refused" * skip_without_gpu()) {
    for (AttentionPath path : kAttentionPaths) {
        CAPTURE(attention_path_name(path));
        ScopedAttentionPath scoped(path);
        Tensor q = to_gpu(sample({1, 4, 5, 8}, kFloat32, 115)), k = to_gpu(sample({1, 2, 6, 8}, kFloat32, 116));
        Tensor v = to_gpu(sample({1, 2, 6, 8}, kFloat32, 117)), dout = to_gpu(sample({1, 4, 5, 8}, kFloat32, 118));
        Tensor out = make_empty({1, 4, 5, 8}, kFloat32, kGpu), lse = make_empty({1, 4, 5}, kFloat32, kGpu);
        attention_forward_on_path(out, lse, q, k, v, 0.5, true);
        Tensor dk_nh = make_empty({1, 4, 6, 8}, kFloat32, kGpu);
        CHECK_THROWS(attention_backward_on_path(Tensor(), dk_nh, Tensor(), dout, out, lse, q, k, v, 0.5, true));
        CHECK_THROWS(attention_forward_on_path(out, lse, q, to_gpu(sample({1, 2, 7, 8}, kFloat32, 119)), v, 0.5, true));
        Tensor dk = make_empty(k.sizes(), kFloat32, kGpu);
        attention_backward_on_path(Tensor(), dk, Tensor(), dout, out, lse, q, k, v, 0.5, true);   // fits
        CHECK(host_values(dk).size() == 96);
    }
}
