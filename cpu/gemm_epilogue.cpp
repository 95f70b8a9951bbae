// gemm_epilogue.cpp: the CPU gemm_epilogue kernel, out (M,N) = op(a) (M,K) @ op(b) (K,N) + bias (N),
// optionally followed by tanh-GELU (then aux (M,N) keeps the pre-activation for the backward).
// The product runs on the path cpu_gemm_path(dtype) names (cpu/gemm.hpp); the epilogue is applied
// to blocks of rows while each block's product is still in cache (f32/f64), or while rounding the
// f32 product to f16/bf16. Shape checks: kernels/kernel_preconditions.hpp.
#include <cmath>
#include <vector>

#include "kernels/fused_kernels.hpp"
#include "kernels/kernel_preconditions.hpp"
#include "kernels/kernels.hpp"
#include "kernels/scalar_math.hpp"
#include "cpu/gemm.hpp"
#include "cpu/vec_math.hpp"

namespace ampgrad::cpu {

namespace {

constexpr int64_t kEpilogueRows = 256;       // rows per block: the product of a block is still in cache
constexpr int64_t kMinParallelWork = 100000;  // multiply-adds below which one thread does it all

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

// One block product out (rows,N) = op(a)[r0:r0+rows] @ op(b), f32 on the f32 path, f64 by Eigen.
template <typename T>
void block_product(T* out, int64_t r0, int64_t rows, int64_t n, const MatrixBatch<T>& a, bool trans_a,
                   const MatrixBatch<T>& b, bool trans_b) {
    const MatrixBatch<T> a_rows = op_rows(a, trans_a, r0, rows);
    if constexpr (std::is_same_v<T, float>) gemm_f32(out, 1, rows, n, a_rows, trans_a, b, trans_b, 1.0f, 0.0f);
    else gemm_eigen<T>(out, 1, rows, n, a_rows, trans_a, b, trans_b, T(1), T(0));
}

// f32/f64: blocks of rows, each multiplied (single-threaded inside the parallel region) and
// finished by the epilogue while it is in cache. Measured against one threaded product followed by
// one epilogue pass (docs/benchmarks.md, "CPU GEMM"): the same time within the noise of a loaded
// machine, so the fused form stays.
template <typename T>
void epilogue_in_place(T* out, int64_t m, int64_t n, const MatrixBatch<T>& a, bool trans_a, const MatrixBatch<T>& b,
                       bool trans_b, const T* bias, bool gelu, T* aux) {
    const int64_t k = trans_a ? a.rows : a.cols;
    const int64_t blocks = (m + kEpilogueRows - 1) / kEpilogueRows;
    auto block = [&](int64_t blk) {
        const int64_t r0 = blk * kEpilogueRows, rows = std::min(kEpilogueRows, m - r0);
        block_product<T>(out + r0 * n, r0, rows, n, a, trans_a, b, trans_b);
        for (int64_t r = r0; r < r0 + rows; ++r)
            epilogue_row<T>(out + r * n, n, bias, gelu, aux ? aux + r * n : nullptr);
    };
    if (blocks == 1 || m * n * k < kMinParallelWork) {
        for (int64_t blk = 0; blk < blocks; ++blk) block(blk);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) block(blk);
}

// f16/bf16: the product in an f32 buffer (bf16 through oneDNN's matmul where the path says so,
// else widened operands on the f32 path), the epilogue fused into the rounding store.
template <typename T>
void epilogue_rounded(T* out, int64_t m, int64_t n, const MatrixBatch<T>& a, bool trans_a, const MatrixBatch<T>& b,
                      bool trans_b, const T* bias, bool gelu, T* aux, GemmPath path) {
    std::vector<float> c_buf(static_cast<size_t>(m * n));
    if constexpr (std::is_same_v<T, BFloat16>) {
        if (path == GemmPath::kOneDnnMatmul) {
            std::vector<T> a_buf, b_buf;
            gemm_onednn_bf16(c_buf.data(), kFloat32, 1, m, n, readable_or_packed(a, 1, a_buf), trans_a,
                             readable_or_packed(b, 1, b_buf), trans_b, 1.0f, 0.0f);
        }
    }
    if (path != GemmPath::kOneDnnMatmul) {
        std::vector<float> a_buf, b_buf;
        gemm_f32(c_buf.data(), 1, m, n, pack_batch<float>(a, 1, a_buf), trans_a, pack_batch<float>(b, 1, b_buf),
                 trans_b, 1.0f, 0.0f);
    }
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
    const GemmPath path = cpu_gemm_path(out.dtype());
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
            epilogue_rounded<T>(out.data_ptr<T>(), m, n, ma, trans_a, mb, trans_b, bias_p, gelu, aux_p, path);
        }
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::gemm_epilogue, kCPU, gemm_epilogue);

}  // namespace ampgrad::cpu
