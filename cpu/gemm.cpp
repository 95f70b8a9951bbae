// gemm.cpp: batched GEMM on the CPU with Eigen: out[b] = alpha * op(a[b]) @ op(b[b]) + beta * out[b].
// f32/f64 multiply straight from the (strided) tensors through Eigen::Map; f16/bf16 are widened to
// f32 buffers, multiplied in f32 and rounded once on store. Not here: shape checks for users (the
// op layer, autograd/ops/matmul.cpp, does those; a bad call here is an internal error).
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

#include "core/fused_kernels.hpp"
#include "core/kernel_preconditions.hpp"
#include "core/kernels.hpp"
#include "core/scalar_math.hpp"
#include "core/threads.hpp"
#include "cpu/loops.hpp"
#include "cpu/vec_math.hpp"

namespace ampgrad::cpu {

namespace {

// Below this many multiply-adds per product, a batch runs one product per thread.
constexpr int64_t kSmallProduct = 128 * 128 * 128;
// Below this many multiply-adds in all, threads cost more than they save (Eigen uses 50000 per thread).
constexpr int64_t kMinParallelWork = 100000;

// A batch of stored matrices: element (b, i, j) lives at data[b*batch_stride + i*row_stride + j*col_stride].
template <typename T>
struct MatrixBatch {
    const T* data = nullptr;
    int64_t batch_stride = 0;           // 0: one matrix shared by the whole batch
    int64_t rows = 0, cols = 0;
    int64_t row_stride = 0, col_stride = 0;
};

template <typename T>
MatrixBatch<T> batch_of(const Tensor& t, const T* data) {
    const int64_t d = t.dim();
    int64_t batch_stride = d == 3 && t.size(0) > 1 ? t.stride(0) : 0;
    return {data, batch_stride, t.size(d - 2), t.size(d - 1), t.stride(d - 2), t.stride(d - 1)};
}

// Eigen can read a matrix in place when it is stored row-major or column-major with a leading
// dimension (size-1 dims may have any stride).
template <typename T>
bool is_row_major(const MatrixBatch<T>& m) {
    return (m.col_stride == 1 || m.cols == 1) && (m.row_stride >= m.cols || m.rows == 1);
}
template <typename T>
bool is_col_major(const MatrixBatch<T>& m) {
    return (m.row_stride == 1 || m.rows == 1) && (m.col_stride >= m.rows || m.cols == 1);
}

// Copy a batch into a dense row-major buffer of compute type C (the f16/bf16 widening, and the
// fallback for layouts Eigen cannot read, such as a stride-0 broadcast row).
template <typename C, typename T>
MatrixBatch<C> pack_batch(const MatrixBatch<T>& m, int64_t batch, std::vector<C>& buffer) {
    const int64_t n = m.batch_stride == 0 ? 1 : batch;
    buffer.resize(static_cast<size_t>(n * m.rows * m.cols));
    const int64_t grain_rows = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(m.cols, 1));
    parallel_for(n * m.rows, grain_rows, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            const T* src = m.data + (r / m.rows) * m.batch_stride + (r % m.rows) * m.row_stride;
            C* dst = buffer.data() + r * m.cols;
            for (int64_t j = 0; j < m.cols; ++j) dst[j] = static_cast<C>(src[j * m.col_stride]);
        }
    });
    return {buffer.data(), m.batch_stride == 0 ? 0 : m.rows * m.cols, m.rows, m.cols, m.cols, 1};
}

template <typename T>
using RowMajorMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0,
                               Eigen::OuterStride<>>;
template <typename T>
using ColMajorMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>, 0,
                               Eigen::OuterStride<>>;
template <typename T>
using OutMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

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

// The batched product in compute type T (float or double), a and b Eigen-readable.
template <typename T>
void gemm_batch(T* out, int64_t batch, int64_t m, int64_t n, const MatrixBatch<T>& a, bool trans_a,
                const MatrixBatch<T>& b, bool trans_b, T alpha, T beta) {
    const int64_t k = trans_a ? a.rows : a.cols;
    auto one = [&](int64_t i) {
        OutMap<T> c(out + i * m * n, m, n);
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

template <typename T>
MatrixBatch<T> readable_or_packed(const MatrixBatch<T>& m, int64_t batch, std::vector<T>& buffer) {
    return is_row_major(m) || is_col_major(m) ? m : pack_batch<T>(m, batch, buffer);
}

}  // namespace

void gemm(const Tensor& out, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
          double alpha, double beta) {
    AMPGRAD_CHECK(out.is_contiguous() && out.dim() >= 2 && out.dim() <= 3, "gemm: out is {}", out.describe());
    AMPGRAD_CHECK(a.dim() >= 2 && a.dim() <= 3 && b.dim() >= 2 && b.dim() <= 3, "gemm: a is {}, b is {}",
                  a.describe(), b.describe());
    AMPGRAD_CHECK(a.dtype() == out.dtype() && b.dtype() == out.dtype(), "gemm: dtypes differ: {} {} {}",
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
    if (out.numel() == 0) return;

    dispatch_float(out.dtype(), "gemm", [&](auto tag) {
        using T = decltype(tag);
        using C = compute_t<T>;
        auto ma = batch_of<T>(a, a.data_ptr<T>());
        auto mb = batch_of<T>(b, b.data_ptr<T>());
        std::vector<C> a_buf, b_buf;
        if constexpr (std::is_same_v<T, C>) {        // f32 / f64: multiply in place
            gemm_batch<C>(out.data_ptr<T>(), batch, m, n, readable_or_packed(ma, batch, a_buf), trans_a,
                          readable_or_packed(mb, batch, b_buf), trans_b, C(alpha), C(beta));
        } else {                                      // f16 / bf16: widen, multiply in f32, round once
            std::vector<C> c_buf(static_cast<size_t>(out.numel()));
            T* o = out.data_ptr<T>();
            if (beta != 0.0)
                for (size_t i = 0; i < c_buf.size(); ++i) c_buf[i] = static_cast<C>(o[i]);
            gemm_batch<C>(c_buf.data(), batch, m, n, pack_batch<C>(ma, batch, a_buf), trans_a,
                          pack_batch<C>(mb, batch, b_buf), trans_b, C(alpha), C(beta));
            parallel_for(out.numel(), kGrainSize, [&](int64_t begin, int64_t end) {
                for (int64_t i = begin; i < end; ++i) o[i] = static_cast<T>(c_buf[i]);
            });
        }
    });
}

// ---- GEMM with a bias (+ tanh-GELU) epilogue ----

namespace {

constexpr int64_t kEpilogueRows = 256;      // rows per block: the product of a block is still in cache

// One row of the epilogue in compute type C: row += bias; aux = row (pre-activation); row = gelu(row).
template <typename C, typename T>
void epilogue_row(C* row, int64_t n, const T* bias, bool gelu, T* aux) {
    if (bias)
        for (int64_t j = 0; j < n; ++j) row[j] += static_cast<C>(bias[j]);
    if (!gelu) return;
    if (aux)
        for (int64_t j = 0; j < n; ++j) aux[j] = static_cast<T>(row[j]);
    if constexpr (std::is_same_v<C, float>) gelu_tanh_inplace(row, n);
    else for (int64_t j = 0; j < n; ++j) row[j] = formulas::GeluTanh::value(row[j]);
}

// f32/f64: blocks of rows, each multiplied by Eigen (single-threaded inside the parallel region)
// and finished by the epilogue while it is in cache.
template <typename T>
void epilogue_in_place(T* out, int64_t m, int64_t n, const MatrixBatch<T>& a, bool trans_a, const MatrixBatch<T>& b,
                       bool trans_b, const T* bias, bool gelu, T* aux) {
    const int64_t k = trans_a ? a.rows : a.cols;
    const int64_t blocks = (m + kEpilogueRows - 1) / kEpilogueRows;
    with_map(a, 0, trans_a, [&](const auto& ma) {
        with_map(b, 0, trans_b, [&](const auto& mb) {
            auto block = [&](int64_t blk) {
                const int64_t r0 = blk * kEpilogueRows, rows = std::min(kEpilogueRows, m - r0);
                OutMap<T> c(out + r0 * n, rows, n);
                c.noalias() = ma.middleRows(r0, rows) * mb;
                for (int64_t r = r0; r < r0 + rows; ++r)
                    epilogue_row<T>(out + r * n, n, bias, gelu, aux ? aux + r * n : nullptr);
            };
            if (blocks == 1 || m * n * k < kMinParallelWork) {
                for (int64_t blk = 0; blk < blocks; ++blk) block(blk);
                return;
            }
#pragma omp parallel for schedule(static)
            for (int64_t blk = 0; blk < blocks; ++blk) block(blk);
        });
    });
}

// f16/bf16: operands widened once, the product in an f32 buffer, the epilogue fused into the
// rounding store.
template <typename T>
void epilogue_widened(T* out, int64_t m, int64_t n, const MatrixBatch<T>& a, bool trans_a, const MatrixBatch<T>& b,
                      bool trans_b, const T* bias, bool gelu, T* aux) {
    std::vector<float> a_buf, b_buf, c_buf(static_cast<size_t>(m * n));
    gemm_batch<float>(c_buf.data(), 1, m, n, pack_batch<float>(a, 1, a_buf), trans_a, pack_batch<float>(b, 1, b_buf),
                      trans_b, 1.0f, 0.0f);
    parallel_for(m, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            float* row = c_buf.data() + r * n;
            epilogue_row<float>(row, n, bias, gelu, aux ? aux + r * n : nullptr);
            for (int64_t j = 0; j < n; ++j) out[r * n + j] = static_cast<T>(row[j]);
        }
    });
}

}  // namespace

void gemm_epilogue(const Tensor& out, const Tensor& aux, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
                   const Tensor& bias, GemmEpilogue epilogue) {
    const bool gelu = epilogue == GemmEpilogue::kBiasGeluTanh;
    check_gemm_epilogue_shapes(out, aux, a, b, trans_a, trans_b, bias, gelu);
    if (out.numel() == 0) return;
    const int64_t m = out.size(0), n = out.size(1);                                   // out (M,N)
    dispatch_float(out.dtype(), "gemm_epilogue", [&](auto tag) {
        using T = decltype(tag);
        const T* bias_p = bias.defined() ? bias.data_ptr<T>() : nullptr;
        T* aux_p = aux.defined() ? aux.data_ptr<T>() : nullptr;
        auto ma = batch_of<T>(a, a.data_ptr<T>());
        auto mb = batch_of<T>(b, b.data_ptr<T>());
        if constexpr (std::is_same_v<T, compute_t<T>>) {
            std::vector<T> a_buf, b_buf;
            epilogue_in_place<T>(out.data_ptr<T>(), m, n, readable_or_packed(ma, 1, a_buf), trans_a,
                                 readable_or_packed(mb, 1, b_buf), trans_b, bias_p, gelu, aux_p);
        } else {
            epilogue_widened<T>(out.data_ptr<T>(), m, n, ma, trans_a, mb, trans_b, bias_p, gelu, aux_p);
        }
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::gemm, kCPU, gemm);
AMPGRAD_REGISTER_KERNEL(kernels::gemm_epilogue, kCPU, gemm_epilogue);

}  // namespace ampgrad::cpu
