// scaled_mm.cu: the FP8 scaled GEMM on cuBLASLt (the CPU twin, an exact emulation: cpu/scaled_mm.cpp;
// the rules on the operands: autograd/ops/scaled_mm.cpp). One cublasLtMatmul with fp32 compute:
//   - the layout is cuBLASLt's fp8 "TN": our row-major out (M,N) is column-major D (N,M) = op(A) @ B
//     with A = our column-major b (stored (K,N), transposed) and B = our row-major a (stored (K,M));
//   - scale_b and scale_a are A's and B's scale pointers: one f32 each (SCALAR_32F), or rowwise
//     vectors of N and M f32 (OUTER_VEC_32F), multiplying the f32 accumulator;
//   - the bias (N), in out's dtype, is the BIAS epilogue;
//   - amax, when asked, is amax_kernel over the stored out afterwards. cuBLASLt's AMAX_D is for fp8
//     outputs only (with fp8 inputs and a wider D it is unsupported: pytorch/pytorch#122821);
//   - K = 0 is zeros plus the bias, without cuBLASLt (as the CPU twin).
#include <mutex>
#include <vector>

#include "cuda/gemm_lt.cuh"

namespace ampgrad::cuda {

namespace {

// ---- kernels ----

// amax[0] = max |d[i]| over n stored values, NaN if any is NaN (the CPU twin's rule; amax zeroed
// first). |x| >= 0, and a positive NaN's bits exceed +inf's, so the bits order as unsigned ints.
template <typename T>
__global__ void amax_kernel(int64_t n, const T* d, float* amax) {
    float local = 0.0f;
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        const float magnitude = fabsf(static_cast<float>(load_compute(d[i])));
        if (local == local && !(local >= magnitude)) local = magnitude;   // a NaN, once seen, stays
    }
    atomicMax(reinterpret_cast<unsigned int*>(amax), __float_as_uint(local));
}

// ---- launchers ----

cudaDataType_t fp8_data_type(DType dtype) {
    switch (dtype) {
        case kFloat8_e4m3fn: return CUDA_R_8F_E4M3;
        case kFloat8_e5m2: return CUDA_R_8F_E5M2;
        default: throw_bad_dtype("scaled_mm", dtype, "float8_e4m3fn or float8_e5m2");
    }
}
cudaDataType_t out_data_type(DType dtype) {
    switch (dtype) {
        case kFloat32: return CUDA_R_32F;
        case kFloat16: return CUDA_R_16F;
        case kBFloat16: return CUDA_R_16BF;
        default: throw_bad_dtype("scaled_mm", dtype, "an f32, f16 or bf16 output");
    }
}

cublasLtHandle_t lt_handle(int device) {
    static std::mutex mutex;
    static auto* handles = new std::vector<cublasLtHandle_t>(static_cast<size_t>(count_devices()), nullptr);
    std::lock_guard<std::mutex> lock(mutex);
    cublasLtHandle_t& handle = (*handles)[static_cast<size_t>(device)];
    if (handle == nullptr) CUBLAS_CHECK(cublasLtCreate(&handle));
    return handle;
}

// The descriptors of one product, destroyed with it.
struct ScaledDescs {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    ~ScaledDescs() {
        if (d) cublasLtMatrixLayoutDestroy(d);
        if (b) cublasLtMatrixLayoutDestroy(b);
        if (a) cublasLtMatrixLayoutDestroy(a);
        if (op) cublasLtMatmulDescDestroy(op);
    }
};

template <typename V>
void set_attr(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attr, const V& value) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, attr, &value, sizeof(value)));
}

// The operands in cuBLASLt's column-major terms: m = N, n = M, k = K (see the top of the file).
void describe(ScaledDescs& s, const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& scale_a,
              const Tensor& scale_b, const Tensor& bias) {
    const uint64_t M = static_cast<uint64_t>(a.size(0)), K = static_cast<uint64_t>(a.size(1));
    const uint64_t N = static_cast<uint64_t>(b.size(1));
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&s.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    set_attr(s.op, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(CUBLAS_OP_T));
    set_attr(s.op, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(CUBLAS_OP_N));
    const bool rowwise = scale_a.numel() != 1 || scale_b.numel() != 1;
    const int32_t mode = rowwise ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F : CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    set_attr(s.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, mode);
    set_attr(s.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, mode);
    set_attr(s.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(scale_b.raw_data()));   // (N) or one
    set_attr(s.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(scale_a.raw_data()));   // (M) or one
    if (bias.defined()) {
        set_attr(s.op, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<uint32_t>(CUBLASLT_EPILOGUE_BIAS));
        set_attr(s.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias.raw_data()));
        set_attr(s.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(out_data_type(bias.dtype())));
    }
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&s.a, fp8_data_type(b.dtype()), K, N, K));   // b: (K,N) col-major, ld K
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&s.b, fp8_data_type(a.dtype()), K, M, K));   // a: (M,K) row-major, ld K
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&s.d, out_data_type(out.dtype()), N, M, N)); // out: (M,N) row-major
}

// The heuristic's first choice, or false when it has none for this combination. It is told the
// operands' real alignments: a view at an offset may be 16-byte aligned only.
bool choose_algo(cublasLtHandle_t handle, const ScaledDescs& s, const Tensor& out, const Tensor& a, const Tensor& b,
                 cublasLtMatmulAlgo_t* algo) {
    cublasLtMatmulPreference_t pref = nullptr;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t workspace = kGemmWorkspaceBytes;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                      sizeof(workspace)));
    auto set_alignment = [&](cublasLtMatmulPreferenceAttributes_t attr, const void* ptr) {
        const uint32_t bytes = static_cast<uint32_t>(alignment_of(ptr));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &bytes, sizeof(bytes)));
    };
    set_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, b.raw_data());   // cuBLASLt's A is our b
    set_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, a.raw_data());
    set_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, out.raw_data());
    set_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, out.raw_data());
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, s.op, s.a, s.b, s.d, s.d, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE ||
        (status == CUBLAS_STATUS_SUCCESS && found == 0))
        return false;
    CUBLAS_CHECK(status);
    *algo = result.algo;
    return true;
}

// One cublasLtMatmul; false (nothing enqueued) when cuBLASLt has no algorithm for it.
bool run_product(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b,
                 const Tensor& bias) {
    const int device = out.device().index;
    cublasLtHandle_t handle = lt_handle(device);
    ScaledDescs s;
    describe(s, out, a, b, scale_a, scale_b, bias);
    cublasLtMatmulAlgo_t algo;
    if (!choose_algo(handle, s, out, a, b, &algo)) return false;
    const cudaStream_t stream = current_stream();
    void* workspace = gemm_workspace(device, stream);
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasLtMatmul(handle, s.op, &alpha, b.raw_data(), s.a, a.raw_data(), s.b, &beta, out.raw_data(), s.d,
                                out.raw_data(), s.d, &algo, workspace, kGemmWorkspaceBytes, stream));
    return true;
}

NotImplementedError no_algorithm(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias) {
    return NotImplementedError(fmt::format("cuda scaled_mm: cuBLASLt offers no fp8 algorithm for a {}, b {}, out {}{} "
                                           "on this GPU (fp8 GEMMs need compute capability 8.9 or 9.0+)",
                                           a.describe(), b.describe(), out.describe(), bias.defined() ? ", with a bias" : ""));
}

void reduce_amax(const Tensor& out, const Tensor& amax) {
    const int64_t n = out.numel();
    CUDA_CHECK(cudaMemsetAsync(amax.raw_data(), 0, sizeof(float), current_stream()));
    if (n == 0) return;
    dispatch_float(out.dtype(), "scaled_mm", [&](auto tag) {
        using T = decltype(tag);
        amax_kernel<T><<<grid_for(n), kBlockSize, 0, current_stream()>>>(n, device_ptr<const T>(out),
                                                                         device_ptr<float>(amax));
        CUDA_CHECK(cudaGetLastError());
    });
}

void scaled_mm(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b,
               const Tensor& bias, const Tensor& amax) {
    const int index = out.device().index;
    require_on_device("scaled_mm", index, {&out, &a, &b, &scale_a, &scale_b});
    DeviceGuard guard(index);
    if (out.numel() == 0 || a.size(1) == 0) {                      // K = 0: zeros, plus the bias
        kernels::fill(out, 0.0);
        if (bias.defined() && out.numel() > 0)
            kernels::add_scaled(out, out, make_view(bias, out.sizes(), Shape{0, bias.stride(0)}, bias.storage_offset()),
                                1.0);   // bias (N) broadcast over the rows
    } else if (!run_product(out, a, b, scale_a, scale_b, bias)) {
        throw no_algorithm(out, a, b, bias);
    }
    if (amax.defined()) reduce_amax(out, amax);
}

}  // namespace

AMPGRAD_REGISTER_KERNEL(kernels::scaled_mm, kCUDA, scaled_mm);

}  // namespace ampgrad::cuda
