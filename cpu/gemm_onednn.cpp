// gemm_onednn.cpp: the CPU GEMM through oneDNN (Debian's libdnnl-dev, 2.6), built only when Meson
// finds it. f32: dnnl_sgemm (row-major BLAS-style, JIT kernels picked by CPU features, AVX-512 where
// present). bf16: the matmul primitive with bf16 operands and f32 accumulation, its output bf16 or
// f32; one primitive per layout, created once and kept (oneDNN's creation costs far more than a
// small product). oneDNN threads with OpenMP (libgomp, the runtime ampgrad's kernels use): it takes
// omp_get_max_threads(), which set_num_threads sets; inside ampgrad's own parallel regions nesting
// is off, so there each call runs on its calling thread. In the deterministic mode, f32 products run
// in row tiles fixed by the shape, one single-threaded call each (sgemm_fixed_tiles).
#include <dnnl.h>

#include <array>
#include <bit>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>

#include "core/determinism.hpp"
#include "core/error.hpp"
#include "core/threads.hpp"
#include "cpu/gemm.hpp"

namespace ampgrad::cpu {

namespace {

constexpr int64_t kSmallProduct = 128 * 128 * 128;   // below: a batch runs one product per thread
constexpr int64_t kMinParallelWork = 100000;

// A readable matrix as a row-major one: `trans` flips when it is stored column-major.
template <typename T>
struct RowMajorView {
    const T* data;
    int64_t ld;
    bool trans;
};
template <typename T>
RowMajorView<T> row_major_view(const MatrixBatch<T>& m, int64_t b, bool trans) {
    const T* p = m.data + b * m.batch_stride;
    if (is_row_major(m)) return {p, std::max<int64_t>({m.row_stride, m.cols, 1}), trans};
    return {p, std::max<int64_t>({m.col_stride, m.rows, 1}), !trans};
}

// out[b] (M,N) = beta * out[b], the whole product when K == 0 (libraries differ on what K == 0 means).
template <typename T>
void scale_only(T* out, int64_t batch, int64_t m, int64_t n, OutStrides os, float beta) {
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t i = 0; i < m; ++i) {
            T* row = out + b * os.batch + i * os.row;
            for (int64_t j = 0; j < n; ++j)
                row[j] = beta == 0.0f ? T(0.0f) : static_cast<T>(beta * static_cast<float>(row[j]));
        }
}

void check_status(dnnl_status_t status, const char* what) {
    AMPGRAD_CHECK(status == dnnl_success, "gemm (onednn): {} failed with status {}", what, static_cast<int>(status));
}

// Rows of out per tile in the deterministic mode: a function of the shape alone (at most ~32 tiles,
// at least 64 rows, so that re-packing op(b) per tile costs little).
int64_t deterministic_tile_rows(int64_t m) { return std::max<int64_t>(64, (m + 31) / 32); }

// The deterministic mode (core/determinism.hpp): dnnl_sgemm may split K across threads, so its sums
// depend on the thread count. Instead, out's rows are cut into tiles fixed by the shape, and each
// tile is one single-threaded dnnl_sgemm with the whole K (inside this parallel region nesting is
// off, and oneDNN runs a call made in one on its calling thread): every element's sum is the same
// whatever the number of threads. Returns the first failing status.
dnnl_status_t sgemm_fixed_tiles(float* out, OutStrides os, int64_t batch, int64_t m, int64_t n, int64_t k,
                                const MatrixBatch<float>& a, bool trans_a, const MatrixBatch<float>& b, bool trans_b,
                                float alpha, float beta) {
    const int64_t rows = deterministic_tile_rows(m), tiles = (m + rows - 1) / rows;
    int failed = dnnl_success;
#pragma omp parallel for schedule(static)
    for (int64_t job = 0; job < batch * tiles; ++job) {
        const int64_t i = job / tiles, r0 = (job % tiles) * rows, mt = std::min(rows, m - r0);
        const RowMajorView<float> va = row_major_view(a, i, trans_a), vb = row_major_view(b, i, trans_b);
        const float* a_rows = va.trans ? va.data + r0 : va.data + r0 * va.ld;   // rows r0.. of op(a)
        const dnnl_status_t status = dnnl_sgemm(va.trans ? 'T' : 'N', vb.trans ? 'T' : 'N', mt, n, k, alpha, a_rows,
                                                va.ld, vb.data, vb.ld, beta, out + i * os.batch + r0 * os.row, os.row);
        if (status != dnnl_success) {
#pragma omp atomic write
            failed = status;
        }
    }
    return static_cast<dnnl_status_t>(failed);
}

}  // namespace

void gemm_onednn_sgemm(float* out, int64_t batch, int64_t m, int64_t n, const MatrixBatch<float>& a, bool trans_a,
                       const MatrixBatch<float>& b, bool trans_b, float alpha, float beta, OutStrides os) {
    const int64_t k = trans_a ? a.rows : a.cols;
    os = resolved(os, m, n);
    if (k == 0) return scale_only(out, batch, m, n, os, beta);
    if (deterministic())
        return check_status(sgemm_fixed_tiles(out, os, batch, m, n, k, a, trans_a, b, trans_b, alpha, beta),
                            "dnnl_sgemm");
    auto one = [&](int64_t i) {
        const RowMajorView<float> va = row_major_view(a, i, trans_a), vb = row_major_view(b, i, trans_b);
        return dnnl_sgemm(va.trans ? 'T' : 'N', vb.trans ? 'T' : 'N', m, n, k, alpha, va.data, va.ld, vb.data, vb.ld,
                          beta, out + i * os.batch, os.row);
    };
    const bool split_batch = batch > 1 && batch * m * n * k >= kMinParallelWork &&
                             (m * n * k <= kSmallProduct || batch >= 4 * get_num_threads());
    int failed = dnnl_success;           // a status, not an exception: nothing may throw out of a parallel loop
    if (!split_batch) {
        for (int64_t i = 0; i < batch && failed == dnnl_success; ++i) failed = one(i);
    } else {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < batch; ++i) {
            const dnnl_status_t status = one(i);
            if (status != dnnl_success) {
#pragma omp atomic write
                failed = status;
            }
        }
    }
    check_status(static_cast<dnnl_status_t>(failed), "dnnl_sgemm");
}

namespace {

// A (batch, rows, cols) operand's dims and strides as oneDNN reads them, op() applied; strides of
// size-1 dims made plain so oneDNN still recognises a row- or column-major layout.
struct OperandLayout {
    dnnl::memory::dims dims, strides;
};
template <typename T>
OperandLayout operand_layout(const MatrixBatch<T>& m, bool trans, int64_t batch) {
    int64_t rows = m.rows, cols = m.cols, rs = m.row_stride, cs = m.col_stride;
    if (is_row_major(m)) { cs = 1; rs = std::max<int64_t>(rs, cols); if (rows == 1) rs = cols; }
    else { rs = 1; cs = std::max<int64_t>(cs, rows); if (cols == 1) cs = rows; }
    if (trans) { std::swap(rows, cols); std::swap(rs, cs); }
    const int64_t nb = m.batch_stride == 0 ? 1 : batch;
    const int64_t bs = m.batch_stride == 0 ? rows * cols : m.batch_stride;
    return {{nb, rows, cols}, {bs, rs, cs}};
}

using MatmulKey = std::array<int64_t, 18>;

const dnnl::engine& cpu_engine() {
    static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    return engine;
}

// The matmul primitive for one layout, created on first use and kept. Shapes that keep changing
// (sampling with a growing context) would grow the cache without end, so it is emptied at kMaxCached.
constexpr size_t kMaxCached = 512;
dnnl::matmul matmul_for(const OperandLayout& la, const OperandLayout& lb, int64_t batch, int64_t m, int64_t n,
                        OutStrides os, DType out_dtype, float alpha, float beta) {
    static std::mutex mutex;
    static std::map<MatmulKey, dnnl::matmul> cache;
    MatmulKey key{la.dims[0], la.strides[0], la.strides[1], la.strides[2], lb.dims[0], lb.strides[0],
                  lb.strides[1], lb.strides[2], batch, m, n, la.dims[2], static_cast<int64_t>(out_dtype),
                  std::bit_cast<int32_t>(alpha), std::bit_cast<int32_t>(beta), os.batch, os.row, 0};
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
    if (cache.size() >= kMaxCached) cache.clear();
    using dt = dnnl::memory::data_type;
    dnnl::memory::desc src(la.dims, dt::bf16, la.strides), weights(lb.dims, dt::bf16, lb.strides);
    dnnl::memory::desc dst({batch, m, n}, out_dtype == kFloat32 ? dt::f32 : dt::bf16, dnnl::memory::dims{os.batch, os.row, 1});
    dnnl::primitive_attr attr;
    if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
    if (beta != 0.0f) {
        dnnl::post_ops ops;
        ops.append_sum(beta);
        attr.set_post_ops(ops);
    }
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, weights, dst), attr, cpu_engine());
    return cache.emplace(key, dnnl::matmul(pd)).first->second;
}

// One row or one column read with a stride other than 1 (e.g. every other element of a row), copied
// densely first. Passed as a 1 x N "column-major" matrix with a leading dimension of 2, oneDNN's bf16
// matmul with K = 1 combined the neighbouring elements into the product (an inf in the other operand
// came out NaN, 0 * inf); the f32 sgemm path reads such a layout correctly. A vector is cheap to copy.
template <typename T>
MatrixBatch<T> dense_if_strided_vector(const MatrixBatch<T>& m, int64_t batch, std::vector<T>& buffer) {
    const bool strided_row = m.rows == 1 && m.cols > 1 && m.col_stride != 1;
    const bool strided_column = m.cols == 1 && m.rows > 1 && m.row_stride != 1;
    return strided_row || strided_column ? pack_batch<T>(m, batch, buffer) : m;
}

}  // namespace

void gemm_onednn_bf16(void* out, DType out_dtype, int64_t batch, int64_t m, int64_t n, const MatrixBatch<BFloat16>& a,
                      bool trans_a, const MatrixBatch<BFloat16>& b, bool trans_b, float alpha, float beta,
                      OutStrides os) {
    AMPGRAD_CHECK(out_dtype == kFloat32 || out_dtype == kBFloat16, "gemm (onednn): output dtype {}",
                  dtype_name(out_dtype));
    const int64_t k = trans_a ? a.rows : a.cols;
    os = resolved(os, m, n);
    if (k == 0) {
        if (out_dtype == kFloat32) scale_only(static_cast<float*>(out), batch, m, n, os, beta);
        else scale_only(static_cast<BFloat16*>(out), batch, m, n, os, beta);
        return;
    }
    if (batch > 1 && a.batch_stride == 0 && b.batch_stride == 0) {
        // Both operands shared by the whole batch (expanded): oneDNN's matmul refuses a destination
        // batch that neither input has, so each entry is its own product (beta may differ per entry).
        const size_t entry_bytes = static_cast<size_t>(os.batch) * (out_dtype == kFloat32 ? 4 : 2);
        for (int64_t i = 0; i < batch; ++i)
            gemm_onednn_bf16(static_cast<char*>(out) + static_cast<size_t>(i) * entry_bytes, out_dtype, 1, m, n, a,
                             trans_a, b, trans_b, alpha, beta, {m * n, os.row});
        return;
    }
    std::vector<BFloat16> a_buffer, b_buffer;
    const MatrixBatch<BFloat16> pa = dense_if_strided_vector(a, batch, a_buffer);
    const MatrixBatch<BFloat16> pb = dense_if_strided_vector(b, batch, b_buffer);
    const OperandLayout la = operand_layout(pa, trans_a, batch), lb = operand_layout(pb, trans_b, batch);
    dnnl::matmul matmul = matmul_for(la, lb, batch, m, n, os, out_dtype, alpha, beta);
    using dt = dnnl::memory::data_type;
    const dnnl::engine& engine = cpu_engine();
    dnnl::memory src({la.dims, dt::bf16, la.strides}, engine, const_cast<BFloat16*>(pa.data));
    dnnl::memory weights({lb.dims, dt::bf16, lb.strides}, engine, const_cast<BFloat16*>(pb.data));
    dnnl::memory dst({{batch, m, n}, out_dtype == kFloat32 ? dt::f32 : dt::bf16, dnnl::memory::dims{os.batch, os.row, 1}},
                     engine, out);
    thread_local dnnl::stream stream(engine);   // one per thread: creating one per call cost more than a small product
    matmul.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
    stream.wait();
}

// Asked on every bf16 product (cpu_gemm_path), answered once: oneDNN fixes its ISA at its first use.
bool onednn_has_bf16() {
    static const bool has_bf16 = [] {
        const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
        const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
        return (isa & bf16) == bf16;
    }();
    return has_bf16;
}

}  // namespace ampgrad::cpu
