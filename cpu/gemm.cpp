// gemm.cpp: the CPU gemm kernel, out[b] = alpha * op(a[b]) @ op(b[b]) + beta * out[b], and Eigen's
// product. Which library multiplies is cpu_gemm_path(dtype) (cpu/gemm_select.hpp, chosen in
// cpu/gemm_select.cpp): f64 always Eigen; f32 oneDNN's sgemm or Eigen, read in place from the
// (strided) tensors; bf16 oneDNN's matmul (no widening) where the CPU has avx512_bf16; f16, and
// bf16 elsewhere, widened to f32 buffers, multiplied by the f32 path and rounded once on store.
// f16/bf16 operands may also write an f32 out (not rounded): the attention GEMM path's scores.
// Not here: shape checks for users (the op layer, autograd/ops/matmul.cpp, does those; a bad call
// here is an internal error).
//
// Threads: Eigen's GEMM is OpenMP-threaded by itself, which suits one big product; a batch of
// small products is instead split over threads, one whole product per thread.
// Eigen 3.4's AVX PacketMath.h has an unused variable; its warning is not ours.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-variable"
#include <Eigen/Core>
#pragma GCC diagnostic pop
#include <cmath>
#include <vector>

#include "kernels/kernel_preconditions.hpp"
#include "kernels/kernels.hpp"
#include "core/threads.hpp"
#include "cpu/gemm.hpp"

namespace ampgrad::cpu {

namespace {

// Below this many multiply-adds per product, a batch runs one product per thread.
constexpr int64_t kSmallProduct = 128 * 128 * 128;
// Below this many multiply-adds in all, threads cost more than they save (Eigen uses 50000 per thread).
constexpr int64_t kMinParallelWork = 100000;

template <typename T>
using RowMajorMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0,
                               Eigen::OuterStride<>>;
template <typename T>
using ColMajorMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>, 0,
                               Eigen::OuterStride<>>;
template <typename T>
using OutMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0, Eigen::OuterStride<>>;

// c = alpha * op(a) @ op(b) + beta * c for one product; beta == 0 never reads c (it may be garbage).
template <typename T, typename MatA, typename MatB>
void product(OutMap<T>& c, const MatA& a, const MatB& b, T alpha, T beta) {
    if (beta == T(0)) {
        c.noalias() = alpha * (a * b);
    } else {
        if (beta != T(1)) c *= beta;
        c.noalias() += alpha * (a * b);
    }
}

// Calls fn(map) with matrix b of `m` as a row- or column-major Eigen map, transposed if `trans`.
template <typename T, typename Fn>
void with_map(const MatrixBatch<T>& m, int64_t b, bool trans, Fn&& fn) {
    const T* p = m.data + b * m.batch_stride;
    if (is_row_major(m)) {
        RowMajorMap<T> map(p, m.rows, m.cols, Eigen::OuterStride<>(std::max<int64_t>(m.row_stride, m.cols)));
        if (trans) fn(map.transpose()); else fn(map);
    } else {
        ColMajorMap<T> map(p, m.rows, m.cols, Eigen::OuterStride<>(std::max<int64_t>(m.col_stride, m.rows)));
        if (trans) fn(map.transpose()); else fn(map);
    }
}

}  // namespace

// The batched product in compute type T (float or double), a and b Eigen-readable.
template <typename T>
void gemm_eigen(T* out, int64_t batch, int64_t m, int64_t n, const MatrixBatch<T>& a, bool trans_a,
                const MatrixBatch<T>& b, bool trans_b, T alpha, T beta, OutStrides os) {
    const int64_t k = trans_a ? a.rows : a.cols;
    os = resolved(os, m, n);
    auto one = [&](int64_t i) {
        OutMap<T> c(out + i * os.batch, m, n, Eigen::OuterStride<>(std::max<int64_t>(os.row, n)));
        with_map(a, i, trans_a, [&](const auto& ma) {
            with_map(b, i, trans_b, [&](const auto& mb) { product(c, ma, mb, alpha, beta); });
        });
    };
    const bool split_batch = batch > 1 && batch * m * n * k >= kMinParallelWork &&
                             (m * n * k <= kSmallProduct || batch >= 4 * get_num_threads());
    if (!split_batch) {
        for (int64_t i = 0; i < batch; ++i) one(i);
        return;
    }
    // Inside a parallel region Eigen sees omp_get_num_threads() > 1 and runs single-threaded.
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < batch; ++i) one(i);
}
template void gemm_eigen<float>(float*, int64_t, int64_t, int64_t, const MatrixBatch<float>&, bool,
                                const MatrixBatch<float>&, bool, float, float, OutStrides);
template void gemm_eigen<double>(double*, int64_t, int64_t, int64_t, const MatrixBatch<double>&, bool,
                                 const MatrixBatch<double>&, bool, double, double, OutStrides);

namespace {

// f32 / f64: multiplied in place (f64 by Eigen, f32 by the f32 path).
template <typename T>
void gemm_in_place(T* out, int64_t batch, int64_t m, int64_t n, const MatrixBatch<T>& a, bool trans_a,
                   const MatrixBatch<T>& b, bool trans_b, T alpha, T beta, OutStrides os) {
    std::vector<T> a_buf, b_buf;
    const MatrixBatch<T> ra = readable_or_packed(a, batch, a_buf), rb = readable_or_packed(b, batch, b_buf);
    if constexpr (std::is_same_v<T, float>) gemm_f32(out, batch, m, n, ra, trans_a, rb, trans_b, alpha, beta, os);
    else gemm_eigen<T>(out, batch, m, n, ra, trans_a, rb, trans_b, alpha, beta, os);
}

// f16 / bf16 operands widened to f32 buffers and multiplied by the f32 path into an f32 out.
template <typename T>
void gemm_widened_f32_out(float* out, int64_t batch, int64_t m, int64_t n, const MatrixBatch<T>& a, bool trans_a,
                          const MatrixBatch<T>& b, bool trans_b, float alpha, float beta, OutStrides os = {}) {
    std::vector<float> a_buf, b_buf;
    gemm_f32(out, batch, m, n, pack_batch<float>(a, batch, a_buf), trans_a, pack_batch<float>(b, batch, b_buf),
             trans_b, alpha, beta, os);
}

// f16 / bf16 widened: the product in an f32 buffer, rounded once on store.
template <typename T>
void gemm_widened(T* out, int64_t batch, int64_t m, int64_t n, const MatrixBatch<T>& a, bool trans_a,
                  const MatrixBatch<T>& b, bool trans_b, float alpha, float beta, OutStrides os) {
    os = resolved(os, m, n);
    const int64_t rows = batch * m;
    auto out_row = [&](int64_t r) { return out + (r / m) * os.batch + (r % m) * os.row; };   // row r of (batch*m, n)
    std::vector<float> c_buf(static_cast<size_t>(rows * n));
    if (beta != 0.0f)
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j < n; ++j) c_buf[r * n + j] = static_cast<float>(out_row(r)[j]);
    gemm_widened_f32_out<T>(c_buf.data(), batch, m, n, a, trans_a, b, trans_b, alpha, beta);
    const int64_t grain_rows = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1));
    parallel_for(rows, grain_rows, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            T* dst = out_row(r);
            for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<T>(c_buf[r * n + j]);
        }
    });
}

// f16 / bf16 operands with an f32 out (the attention GEMM path's scores): nothing is rounded.
template <typename T>
void gemm_half_f32_out(float* out, int64_t batch, int64_t m, int64_t n, const MatrixBatch<T>& a, bool trans_a,
                       const MatrixBatch<T>& b, bool trans_b, float alpha, float beta, GemmPath path, OutStrides os) {
    if constexpr (std::is_same_v<T, BFloat16>) {
        if (path == GemmPath::kOneDnnMatmul) {
            std::vector<BFloat16> a_buf, b_buf;
            gemm_onednn_bf16(out, kFloat32, batch, m, n, readable_or_packed(a, batch, a_buf), trans_a,
                             readable_or_packed(b, batch, b_buf), trans_b, alpha, beta, os);
            return;
        }
    }
    gemm_widened_f32_out<T>(out, batch, m, n, a, trans_a, b, trans_b, alpha, beta, os);
}

// bf16 without widening: oneDNN's matmul reads the bf16 operands and accumulates in f32.
void gemm_bf16_native(BFloat16* out, int64_t batch, int64_t m, int64_t n, const MatrixBatch<BFloat16>& a,
                      bool trans_a, const MatrixBatch<BFloat16>& b, bool trans_b, float alpha, float beta,
                      OutStrides os) {
    std::vector<BFloat16> a_buf, b_buf;
    gemm_onednn_bf16(out, kBFloat16, batch, m, n, readable_or_packed(a, batch, a_buf), trans_a,
                     readable_or_packed(b, batch, b_buf), trans_b, alpha, beta, os);
}

void check_gemm_operands(const Tensor& out, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
    AMPGRAD_CHECK(out.dim() >= 2 && out.dim() <= 3 && gemm_out_rows_dense(out), "gemm: out is {}", out.describe());
    AMPGRAD_CHECK(a.dim() >= 2 && a.dim() <= 3 && b.dim() >= 2 && b.dim() <= 3, "gemm: a is {}, b is {}",
                  a.describe(), b.describe());
    const bool half_to_f32 = out.dtype() == kFloat32 && (a.dtype() == kFloat16 || a.dtype() == kBFloat16);
    AMPGRAD_CHECK(b.dtype() == a.dtype() && (a.dtype() == out.dtype() || half_to_f32), "gemm: dtypes differ: {} {} {}",
                  out.describe(), a.describe(), b.describe());
    const int64_t batch = out.dim() == 3 ? out.size(0) : 1;
    const int64_t m = out.size(-2), n = out.size(-1);
    const int64_t k = trans_a ? a.size(-2) : a.size(-1);
    AMPGRAD_CHECK((trans_a ? a.size(-1) : a.size(-2)) == m && (trans_b ? b.size(-1) : b.size(-2)) == k &&
                      (trans_b ? b.size(-2) : b.size(-1)) == n,
                  "gemm: out {} = a {} (trans {}) @ b {} (trans {})", out.describe(), a.describe(), trans_a,
                  b.describe(), trans_b);
    AMPGRAD_CHECK((a.dim() == 2 || a.size(0) == batch || a.size(0) == 1 || a.stride(0) == 0) &&
                      (b.dim() == 2 || b.size(0) == batch || b.size(0) == 1 || b.stride(0) == 0),
                  "gemm: batch of out {} vs a {}, b {}", out.describe(), a.describe(), b.describe());
}

}  // namespace

void gemm(const Tensor& out, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
          double alpha, double beta) {
    check_gemm_operands(out, a, b, trans_a, trans_b);
    if (out.numel() == 0) return;
    const int64_t batch = out.dim() == 3 ? out.size(0) : 1;
    const int64_t m = out.size(-2), n = out.size(-1);
    const OutStrides os{batch > 1 ? out.stride(0) : m * n, m > 1 ? out.stride(-2) : n};   // gemm_out_rows_dense checked
    const GemmPath path = cpu_gemm_path(a.dtype());
    dispatch_float(a.dtype(), "gemm", [&](auto tag) {
        using T = decltype(tag);
        using C = compute_t<T>;
        auto ma = batch_of<T>(a, a.data_ptr<T>());
        auto mb = batch_of<T>(b, b.data_ptr<T>());
        if constexpr (!std::is_same_v<T, C>) {
            if (out.dtype() == kFloat32) {
                gemm_half_f32_out<T>(out.data_ptr<float>(), batch, m, n, ma, trans_a, mb, trans_b, float(alpha),
                                     float(beta), path, os);
                return;
            }
        }
        T* o = out.data_ptr<T>();
        if constexpr (std::is_same_v<T, C>) {
            gemm_in_place<T>(o, batch, m, n, ma, trans_a, mb, trans_b, T(alpha), T(beta), os);
        } else if constexpr (std::is_same_v<T, BFloat16>) {
            if (path == GemmPath::kOneDnnMatmul)
                gemm_bf16_native(o, batch, m, n, ma, trans_a, mb, trans_b, float(alpha), float(beta), os);
            else
                gemm_widened<T>(o, batch, m, n, ma, trans_a, mb, trans_b, float(alpha), float(beta), os);
        } else {
            gemm_widened<T>(o, batch, m, n, ma, trans_a, mb, trans_b, float(alpha), float(beta), os);
        }
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::gemm, kCPU, gemm);

}  // namespace ampgrad::cpu
