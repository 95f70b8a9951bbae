// gemm.cu: batched GEMM through cuBLAS (kernels::gemm), and GEMM with a bias / bias+tanh-GELU
// epilogue through cuBLASLt (kernels::gemm_epilogue), the GPU twins of cpu/gemm.cpp.
// kernels::gemm: f32/f16/bf16 use cublasGemmStridedBatchedEx with fp32 compute (no TF32, like
// PyTorch's default; f16/bf16 operands may write an f32 out); f64 uses cublasDgemmStridedBatched.
// kernels::gemm_epilogue: cublasLtMatmul with fp32 compute (tensor cores for f16/bf16), its
// algorithm cached per shape (cuda/gemm_lt.cu).
// cuBLAS is column-major and we are row-major. A row-major (R,C) matrix is the column-major
// (C,R) matrix, its transpose, so we compute out^T = op(b)^T @ op(a)^T: cuBLAS's "A" is our b
// and its "B" is our a, with m = N, n = M.
#include <limits>
#include <mutex>
#include <vector>

#include "kernels/fused_kernels.hpp"
#include "kernels/kernel_preconditions.hpp"
#include "kernels/scalar_math.hpp"
#include "cuda/gemm_lt.cuh"

namespace ampgrad::cuda {

namespace {

// One cuBLAS handle per GPU, made on first use. A mutex serialises its use: the calls only
// enqueue work, so the lock is held for microseconds. Each call sets the handle's stream and that
// stream's workspace (gemm_workspace, cuda/gemm_lt.cuh), so kernels in flight on two streams never
// share scratch memory.
struct CublasHandle {
    std::mutex mutex;
    cublasHandle_t handle = nullptr;
};

CublasHandle& cublas_for(int index) {
    static std::vector<CublasHandle>* handles = new std::vector<CublasHandle>(static_cast<size_t>(count_devices()));
    CublasHandle& h = (*handles)[static_cast<size_t>(index)];
    std::lock_guard<std::mutex> lock(h.mutex);
    if (h.handle == nullptr) CUBLAS_CHECK(cublasCreate(&h.handle));
    return h;
}

// t is (B,R,C) or (R,C) and we want op(t) where op transposes if `trans`. A matrix is usable
// as-is if it is row-major (column stride 1) or column-major (row stride 1): the latter is the
// transpose of a row-major one, so it flips the operation instead of being copied.
// Returns false if t needs a contiguous copy first.
bool describe_matrix(const Tensor& t, bool trans, MatrixArg& arg) {
    int64_t d = t.dim();
    int64_t rows = t.size(d - 2), cols = t.size(d - 1);
    int64_t row_stride = t.stride(d - 2), col_stride = t.stride(d - 1);
    arg.ptr = t.raw_data();
    arg.batch_stride = d == 3 ? t.stride(0) : 0;
    if (col_stride == 1 && row_stride >= std::max<int64_t>(cols, 1)) {            // row-major
        arg.op = trans ? CUBLAS_OP_T : CUBLAS_OP_N;
        arg.ld = row_stride;
        return true;
    }
    if (row_stride == 1 && col_stride >= std::max<int64_t>(rows, 1)) {            // column-major
        arg.op = trans ? CUBLAS_OP_N : CUBLAS_OP_T;
        arg.ld = col_stride;
        return true;
    }
    return false;
}

cudaDataType_t cuda_data_type(DType dtype) {
    switch (dtype) {
        case kFloat32: return CUDA_R_32F;
        case kFloat16: return CUDA_R_16F;
        case kBFloat16: return CUDA_R_16BF;
        default: throw_bad_dtype("gemm", dtype, "f32, f64, f16 or bf16");
    }
}

int as_int(const char* what, int64_t v) {
    AMPGRAD_CHECK(v <= std::numeric_limits<int>::max(), "gemm: {} = {} exceeds cuBLAS's int range", what, v);
    return static_cast<int>(v);
}

// describe_matrix of t, or of a contiguous copy of t (kept alive in `holder`) when t's layout
// is not one cuBLAS can read.
MatrixArg cublas_operand(const Tensor& t, bool trans, Tensor& holder) {
    MatrixArg arg{};
    if (describe_matrix(t, trans, arg)) return arg;
    holder = make_empty(t.sizes(), t.dtype(), t.device());
    kernels::copy(holder, t);
    describe_matrix(holder, trans, arg);
    return arg;
}

// ---- launchers ----

// out (B,M,N) with dense rows (ldc and strideC from its strides); lhs is cuBLAS's A (our b), rhs its B (our a)
// operands of in_dtype (out's dtype, or f16/bf16 with an f32 out: cuBLAS's mixed-precision GemmEx)
void gemm_cublas(cublasHandle_t handle, const Tensor& out, DType in_dtype, const MatrixArg& lhs, const MatrixArg& rhs,
                 int64_t batch, int64_t M, int64_t N, int64_t K, double alpha, double beta) {
    int m = as_int("N", N), n = as_int("M", M), k = as_int("K", K);
    int lda = as_int("ld", std::max<int64_t>(lhs.ld, 1)), ldb = as_int("ld", std::max<int64_t>(rhs.ld, 1));
    const int64_t d = out.dim();
    const int64_t row_stride = M > 1 ? out.stride(d - 2) : N, entry_stride = batch > 1 ? out.stride(0) : M * N;
    int ldc = as_int("ld", std::max<int64_t>(row_stride, 1)), count = as_int("batch", batch);
    const cudaStream_t stream = current_stream();
    CUBLAS_CHECK(cublasSetStream(handle, stream));
    // After cublasSetStream (which resets it): this stream's own workspace, never another stream's.
    CUBLAS_CHECK(cublasSetWorkspace(handle, gemm_workspace(out.device().index, stream), kGemmWorkspaceBytes));
    if (out.dtype() == kFloat64) {
        CUBLAS_CHECK(cublasDgemmStridedBatched(handle, lhs.op, rhs.op, m, n, k, &alpha,
                                               static_cast<const double*>(lhs.ptr), lda, lhs.batch_stride,
                                               static_cast<const double*>(rhs.ptr), ldb, rhs.batch_stride, &beta,
                                               static_cast<double*>(out.raw_data()), ldc, entry_stride, count));
        return;
    }
    float alpha32 = static_cast<float>(alpha), beta32 = static_cast<float>(beta);
    const cudaDataType_t in_type = cuda_data_type(in_dtype), out_type = cuda_data_type(out.dtype());
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, lhs.op, rhs.op, m, n, k, &alpha32, lhs.ptr, in_type, lda,
                                            lhs.batch_stride, rhs.ptr, in_type, ldb, rhs.batch_stride, &beta32,
                                            out.raw_data(), out_type, ldc, entry_stride, count, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT));
}

// out = beta * out, for K == 0 (BLAS semantics: beta == 0 writes zeros even over NaN)
void scale_by_beta(const Tensor& out, double beta) {
    if (beta == 0.0) {
        kernels::fill(out, 0.0);
        return;
    }
    Tensor zero = make_empty({}, out.dtype(), out.device());
    kernels::fill(zero, 0.0);
    kernels::add_scaled(out, make_view(zero, out.sizes(), Shape(out.sizes().size(), 0), 0), out, beta);
}

}  // namespace

void gemm(const Tensor& out, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, double alpha,
          double beta) {
    const int index = out.device().index;
    require_on_device("gemm", index, {&out, &a, &b});
    AMPGRAD_CHECK(a.dim() == b.dim() && out.dim() == a.dim() && (a.dim() == 2 || a.dim() == 3),
                  "gemm: expected 2-d or 3-d operands, got a {}, b {}, out {}", a.describe(), b.describe(),
                  out.describe());
    const bool half_to_f32 = out.dtype() == kFloat32 && (a.dtype() == kFloat16 || a.dtype() == kBFloat16);
    AMPGRAD_CHECK(a.dtype() == b.dtype() && (a.dtype() == out.dtype() || half_to_f32),
                  "gemm: dtypes differ: a {}, b {}, out {}", a.describe(), b.describe(), out.describe());
    AMPGRAD_CHECK(gemm_out_rows_dense(out), "gemm: out must have dense rows, got {}", out.describe());
    int64_t d = a.dim();
    int64_t M = out.size(d - 2), N = out.size(d - 1), batch = d == 3 ? out.size(0) : 1;
    int64_t K = trans_a ? a.size(d - 2) : a.size(d - 1);
    AMPGRAD_CHECK((trans_a ? a.size(d - 1) : a.size(d - 2)) == M && (trans_b ? b.size(d - 2) : b.size(d - 1)) == N &&
                      (trans_b ? b.size(d - 1) : b.size(d - 2)) == K,
                  "gemm: shapes do not chain: a {} (trans {}), b {} (trans {}), out {}", a.describe(), trans_a,
                  b.describe(), trans_b, out.describe());
    AMPGRAD_CHECK(d == 2 || (a.size(0) == batch && b.size(0) == batch),
                  "gemm: batch sizes differ (expand with stride 0 to broadcast): a {}, b {}, out {}", a.describe(),
                  b.describe(), out.describe());
    if (out.numel() == 0) return;
    DeviceGuard guard(index);
    if (K == 0) {                                   // nothing to multiply: out = beta * out
        scale_by_beta(out, beta);
        return;
    }

    // op(a)^T and op(b)^T in cuBLAS terms; odd layouts are copied to contiguous first.
    Tensor a_mat, b_mat;
    MatrixArg rhs = cublas_operand(a, trans_a, a_mat), lhs = cublas_operand(b, trans_b, b_mat);
    CublasHandle& h = cublas_for(index);
    std::lock_guard<std::mutex> lock(h.mutex);
    gemm_cublas(h.handle, out, a.dtype(), lhs, rhs, batch, M, N, K, alpha, beta);
}

// ---- GEMM with a bias (+ tanh-GELU) epilogue ----
// Three routes, the first that applies:
//  1. cuBLASLt with the epilogue fused: BIAS, or GELU(_AUX)(_BIAS). cuBLASLt's GELU is the tanh
//     approximation (PyTorch's addmm-with-GELU uses this epilogue for gelu(approximate="tanh"),
//     aten/src/ATen/native/cuda/Blas.cpp) and GELU_AUX writes the pre-activation, bias included,
//     as cpu/gemm.cpp writes aux. Its aux leading dimension must be a multiple of 8, so the aux
//     variants are asked for only when N % 8 == 0.
//  2. cuBLASLt with the bias fused, writing the pre-activation (to aux when there is one), then
//     GELU as an elementwise pass with kernels/scalar_math.hpp's GeluTanh.
//  3. f64, or no cuBLASLt algorithm: cuBLAS's GEMM, then bias, aux and GELU as one pass.

namespace {

// out (M,N) = epilogue(src): pre = src + bias (bias null: src); aux = pre when aux is set;
// out = gelu ? gelu_tanh(pre) : pre. In the compute type, rounded once on store, as
// cpu/gemm.cpp's epilogue_row. src may be out or aux: element i is read before it is written.
template <typename T>
__global__ void epilogue_kernel(int64_t total, int64_t n, T* out, const T* src, const T* bias, T* aux, bool gelu) {
    using C = device_compute_t<T>;
    for (int64_t i = first_index(); i < total; i += grid_stride()) {
        C pre = load_compute(src[i]);
        if (bias) pre += load_compute(bias[i % n]);
        if (aux) aux[i] = store_compute<T>(pre);
        out[i] = store_compute<T>(gelu ? formulas::GeluTanh::value(pre) : pre);
    }
}

// Launches epilogue_kernel; bias and aux may be undefined.
void epilogue_pass(const Tensor& out, const Tensor& src, const Tensor& bias, const Tensor& aux, bool gelu) {
    dispatch_float(out.dtype(), "gemm_epilogue", [&](auto tag) {
        using T = decltype(tag);
        const int64_t total = out.numel();
        epilogue_kernel<T><<<grid_for(total), kBlockSize, 0, current_stream()>>>(
            total, out.size(1), device_ptr<T>(out), device_ptr<T>(src), bias.defined() ? device_ptr<T>(bias) : nullptr,
            aux.defined() ? device_ptr<T>(aux) : nullptr, gelu);
        CUDA_CHECK(cudaGetLastError());
    });
}

void check_epilogue_args(const Tensor& out, const Tensor& aux, const Tensor& a, const Tensor& b, bool trans_a,
                         bool trans_b, const Tensor& bias, bool gelu) {
    const int index = out.device().index;
    require_on_device("gemm_epilogue", index, {&out, &a, &b});
    if (bias.defined()) require_on_device("gemm_epilogue", index, {&bias});
    if (aux.defined()) require_on_device("gemm_epilogue", index, {&aux});
    check_gemm_epilogue_shapes(out, aux, a, b, trans_a, trans_b, bias, gelu);
}

cublasLtEpilogue_t lt_epilogue(bool bias, bool gelu, bool aux) {
    if (!gelu) return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    if (aux) return bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
}

// Routes 1 and 2 (see above); false when cuBLASLt offers neither.
bool epilogue_with_lt(const Tensor& out, const Tensor& aux, const MatrixArg& lhs, const MatrixArg& rhs, int64_t k,
                      const Tensor& bias, bool gelu) {
    LtProduct p;
    p.device = out.device().index;
    p.dtype = out.dtype();
    p.m = out.size(1);
    p.n = out.size(0);
    p.k = k;
    p.lhs = lhs;
    p.rhs = rhs;
    p.d = out.raw_data();
    p.bias = bias.defined() ? bias.raw_data() : nullptr;
    p.aux = aux.defined() ? aux.raw_data() : nullptr;
    if (!p.aux || p.m % 8 == 0) {                                  // 1: all fused
        p.epilogue = lt_epilogue(p.bias != nullptr, gelu, p.aux != nullptr);
        if (lt_matmul(p)) return true;
    }
    if (!gelu) return false;
    const Tensor& pre = aux.defined() ? aux : out;                 // 2: bias fused, GELU after
    p.d = pre.raw_data();
    p.aux = nullptr;
    p.epilogue = lt_epilogue(p.bias != nullptr, false, false);
    if (!lt_matmul(p)) return false;
    epilogue_pass(out, pre, Tensor(), Tensor(), true);
    return true;
}

}  // namespace

void gemm_epilogue(const Tensor& out, const Tensor& aux, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
                   const Tensor& bias, GemmEpilogue epilogue) {
    const bool gelu = epilogue == GemmEpilogue::kBiasGeluTanh;
    check_epilogue_args(out, aux, a, b, trans_a, trans_b, bias, gelu);
    if (out.numel() == 0) return;
    const int index = out.device().index;
    DeviceGuard guard(index);
    const int64_t M = out.size(0), N = out.size(1), K = trans_a ? a.size(0) : a.size(1);
    if (K == 0) {                                                   // the product is zeros
        kernels::fill(out, 0.0);
        epilogue_pass(out, out, bias, aux, gelu);
        return;
    }
    Tensor a_mat, b_mat;
    MatrixArg rhs = cublas_operand(a, trans_a, a_mat), lhs = cublas_operand(b, trans_b, b_mat);
    if (out.dtype() != kFloat64 && epilogue_with_lt(out, aux, lhs, rhs, K, bias, gelu)) return;
    {                                                               // 3: cuBLAS, then one pass
        CublasHandle& h = cublas_for(index);
        std::lock_guard<std::mutex> lock(h.mutex);
        gemm_cublas(h.handle, out, out.dtype(), lhs, rhs, 1, M, N, K, 1.0, 0.0);
    }
    epilogue_pass(out, out, bias, aux, gelu);
}

AMPGRAD_REGISTER_KERNEL(kernels::gemm, kCUDA, gemm);
AMPGRAD_REGISTER_KERNEL(kernels::gemm_epilogue, kCUDA, gemm_epilogue);

}  // namespace ampgrad::cuda
