// gemm.cu: batched GEMM through cuBLAS. f32/f16/bf16 use cublasGemmStridedBatchedEx with fp32
// compute (no TF32, like PyTorch's default); f64 uses cublasDgemmStridedBatched.
// cuBLAS is column-major and we are row-major. A row-major (R,C) matrix is the column-major
// (C,R) matrix, its transpose, so we compute out^T = op(b)^T @ op(a)^T: cuBLAS's "A" is our b
// and its "B" is our a, with m = N, n = M.
#include <limits>
#include <mutex>
#include <vector>

#include "cuda/loops.cuh"

namespace ampgrad::cuda {

namespace {

// One cuBLAS handle per GPU, made on first use. A mutex serialises its use: the calls only
// enqueue work, so the lock is held for microseconds.
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

// How one operand looks to cuBLAS: a pointer, whether cuBLAS must transpose it, its leading
// dimension and its batch stride (0 broadcasts one matrix over the batch).
struct MatrixArg {
    const void* ptr;
    cublasOperation_t op;
    int64_t ld;
    int64_t batch_stride;
};

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

// ---- launchers ----

// out (B,M,N) contiguous; lhs is cuBLAS's A (our b), rhs its B (our a)
void gemm_cublas(cublasHandle_t handle, const Tensor& out, const MatrixArg& lhs, const MatrixArg& rhs, int64_t batch,
                 int64_t M, int64_t N, int64_t K, double alpha, double beta) {
    int m = as_int("N", N), n = as_int("M", M), k = as_int("K", K);
    int lda = as_int("ld", std::max<int64_t>(lhs.ld, 1)), ldb = as_int("ld", std::max<int64_t>(rhs.ld, 1));
    int ldc = std::max(m, 1), count = as_int("batch", batch);
    CUBLAS_CHECK(cublasSetStream(handle, current_stream()));
    if (out.dtype() == kFloat64) {
        CUBLAS_CHECK(cublasDgemmStridedBatched(handle, lhs.op, rhs.op, m, n, k, &alpha,
                                               static_cast<const double*>(lhs.ptr), lda, lhs.batch_stride,
                                               static_cast<const double*>(rhs.ptr), ldb, rhs.batch_stride, &beta,
                                               static_cast<double*>(out.raw_data()), ldc, M * N, count));
        return;
    }
    float alpha32 = static_cast<float>(alpha), beta32 = static_cast<float>(beta);
    cudaDataType_t type = cuda_data_type(out.dtype());
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, lhs.op, rhs.op, m, n, k, &alpha32, lhs.ptr, type, lda,
                                            lhs.batch_stride, rhs.ptr, type, ldb, rhs.batch_stride, &beta32,
                                            out.raw_data(), type, ldc, M * N, count, CUBLAS_COMPUTE_32F,
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
    AMPGRAD_CHECK(a.dtype() == b.dtype() && a.dtype() == out.dtype(), "gemm: dtypes differ: a {}, b {}, out {}",
                  a.describe(), b.describe(), out.describe());
    AMPGRAD_CHECK(out.is_contiguous(), "gemm: out must be contiguous, got {}", out.describe());
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
    Tensor a_mat = a, b_mat = b;
    MatrixArg rhs{}, lhs{};
    if (!describe_matrix(a_mat, trans_a, rhs)) {
        a_mat = make_empty(a.sizes(), a.dtype(), a.device());
        kernels::copy(a_mat, a);
        describe_matrix(a_mat, trans_a, rhs);
    }
    if (!describe_matrix(b_mat, trans_b, lhs)) {
        b_mat = make_empty(b.sizes(), b.dtype(), b.device());
        kernels::copy(b_mat, b);
        describe_matrix(b_mat, trans_b, lhs);
    }
    CublasHandle& h = cublas_for(index);
    std::lock_guard<std::mutex> lock(h.mutex);
    gemm_cublas(h.handle, out, lhs, rhs, batch, M, N, K, alpha, beta);
}

AMPGRAD_REGISTER_KERNEL(kernels::gemm, kCUDA, gemm);

}  // namespace ampgrad::cuda
