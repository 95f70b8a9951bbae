// gemm.hpp: what the CPU GEMM files share (cpu/gemm.cpp: the gemm kernel and Eigen's product;
// cpu/gemm_epilogue.cpp: bias/GELU fused after the product; cpu/gemm_onednn.cpp: oneDNN's sgemm and
// bf16 matmul; cpu/gemm_select.cpp: which of them runs). A matrix batch is described by pointer and
// strides, as stored; the products read it in place when it is row- or column-major.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "cpu/gemm_select.hpp"
#include "core/tensor.hpp"
#include "cpu/loops.hpp"

namespace ampgrad::cpu {

// A batch of stored matrices: element (b, i, j) lives at data[b*batch_stride + i*row_stride + j*col_stride].
template <typename T>
struct MatrixBatch {
    const T* data = nullptr;
    int64_t batch_stride = 0;           // 0: one matrix shared by the whole batch
    int64_t rows = 0, cols = 0;
    int64_t row_stride = 0, col_stride = 0;
};

// Where the output out[b] (M,N) lives: row i of entry b starts at out + b*batch + i*row, each row
// dense. The zero default is the dense layout (batch M*N, row N); the attention GEMM path writes
// blocks of its scores and heads of a (B,T,NH,HS) tensor in place this way.
struct OutStrides {
    int64_t batch = 0, row = 0;
};
inline OutStrides resolved(OutStrides s, int64_t m, int64_t n) {
    return {s.batch != 0 ? s.batch : m * n, s.row != 0 ? s.row : n};
}

template <typename T>
MatrixBatch<T> batch_of(const Tensor& t, const T* data) {
    const int64_t d = t.dim();
    int64_t batch_stride = d == 3 && t.size(0) > 1 ? t.stride(0) : 0;
    return {data, batch_stride, t.size(d - 2), t.size(d - 1), t.stride(d - 2), t.stride(d - 1)};
}

// Readable in place: row-major or column-major with a leading dimension (size-1 dims may have any stride).
template <typename T>
bool is_row_major(const MatrixBatch<T>& m) {
    return (m.col_stride == 1 || m.cols == 1) && (m.row_stride >= m.cols || m.rows == 1);
}
template <typename T>
bool is_col_major(const MatrixBatch<T>& m) {
    return (m.row_stride == 1 || m.rows == 1) && (m.col_stride >= m.rows || m.cols == 1);
}

// Rows r0..r0+rows of op(m) (op = transpose when `trans`), still as stored.
template <typename T>
MatrixBatch<T> op_rows(const MatrixBatch<T>& m, bool trans, int64_t r0, int64_t rows) {
    MatrixBatch<T> out = m;
    if (trans) {
        out.data += r0 * m.col_stride;
        out.cols = rows;
    } else {
        out.data += r0 * m.row_stride;
        out.rows = rows;
    }
    return out;
}

// Copy a batch into a dense row-major buffer of compute type C (the f16/bf16 widening, and the
// fallback for layouts no library reads, such as a stride-0 broadcast row).
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
MatrixBatch<T> readable_or_packed(const MatrixBatch<T>& m, int64_t batch, std::vector<T>& buffer) {
    return is_row_major(m) || is_col_major(m) ? m : pack_batch<T>(m, batch, buffer);
}

// out[b] (M,N) (laid out as `os` says; dense by default) = alpha * op(a[b]) (M,K) @ op(b[b]) (K,N)
// + beta * out[b], for readable a and b. beta == 0 never reads out.
template <typename T>
void gemm_eigen(T* out, int64_t batch, int64_t m, int64_t n, const MatrixBatch<T>& a, bool trans_a,
                const MatrixBatch<T>& b, bool trans_b, T alpha, T beta, OutStrides os = {});

// The same product through oneDNN's dnnl_sgemm (cpu/gemm_onednn.cpp; only built with oneDNN).
void gemm_onednn_sgemm(float* out, int64_t batch, int64_t m, int64_t n, const MatrixBatch<float>& a, bool trans_a,
                       const MatrixBatch<float>& b, bool trans_b, float alpha, float beta, OutStrides os = {});

// out[b] (M,N) (as `os` says), of dtype out_dtype (bf16 or f32) = alpha * op(a) @ op(b) + beta * out
// with bf16 operands and f32 accumulation, through oneDNN's matmul primitive (readable a and b).
void gemm_onednn_bf16(void* out, DType out_dtype, int64_t batch, int64_t m, int64_t n,
                      const MatrixBatch<BFloat16>& a, bool trans_a, const MatrixBatch<BFloat16>& b, bool trans_b,
                      float alpha, float beta, OutStrides os = {});

// Whether oneDNN's bf16 matmul runs natively here (avx512_bf16 or newer, as oneDNN sees the CPU).
bool onednn_has_bf16();

// The f32 product through the library cpu_gemm_path(kFloat32) names (Eigen or oneDNN).
void gemm_f32(float* out, int64_t batch, int64_t m, int64_t n, const MatrixBatch<float>& a, bool trans_a,
              const MatrixBatch<float>& b, bool trans_b, float alpha, float beta, OutStrides os = {});

}  // namespace ampgrad::cpu
