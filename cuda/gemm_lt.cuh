// gemm_lt.cuh: the cuBLASLt side of cuda/gemm.cu: one column-major product with an epilogue
// (bias, GELU, GELU writing its input to an aux matrix), run by cublasLtMatmul with fp32 compute,
// a per-device, per-stream workspace from the backend allocator (kept for the process, as
// PyTorch keeps its cuBLAS workspaces) and the algorithm heuristic cached per shape, dtype,
// transposes, epilogue and pointer alignments. Implemented in cuda/gemm_lt.cu.
#pragma once
#include <cublasLt.h>

#include "cuda/loops.cuh"

namespace ampgrad::cuda {

// How one operand looks to cuBLAS: a pointer, whether cuBLAS must transpose it, its leading
// dimension and its batch stride (0 broadcasts one matrix over the batch).
struct MatrixArg {
    const void* ptr;
    cublasOperation_t op;
    int64_t ld;
    int64_t batch_stride;
};

// D = lhs @ rhs in cuBLAS's column-major terms: D is (m, n) with leading dimension m, lhs is
// op(m, k), rhs op(k, n). For our row-major out (M,N) = op(a) @ op(b): m = N, n = M, lhs is our
// b, rhs our a (see cuda/gemm.cu). bias has m entries (one per column of our out); aux, when
// set, is (m, n) with leading dimension m, like D.
struct LtProduct {
    int device = 0;
    DType dtype = kFloat32;           // f32, f16 or bf16 (every operand, bias and aux)
    int64_t m = 0, n = 0, k = 0;
    MatrixArg lhs{}, rhs{};
    void* d = nullptr;
    const void* bias = nullptr;
    void* aux = nullptr;
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
};

// The scratch memory of cuBLAS and cuBLASLt calls on `stream` of `device`: kGemmWorkspaceBytes,
// one block per stream (two streams never share one, since a workspace is scratch for the kernel
// in flight; calls on one stream run in order, so cuBLAS and cuBLASLt share it, as in PyTorch),
// taken from the backend allocator on first use and kept for the process.
constexpr size_t kGemmWorkspaceBytes = size_t(32) << 20;

// Largest power of two (at most 16) dividing the address: cuBLASLt's kernels load 16 bytes at a time,
// and its heuristic assumes 256-byte-aligned pointers unless the MIN_ALIGNMENT preferences say less.
inline int64_t alignment_of(const void* p) {
    auto a = reinterpret_cast<uintptr_t>(p);
    int64_t align = 16;
    while (align > 1 && a % static_cast<uintptr_t>(align) != 0) align /= 2;
    return align;
}
void* gemm_workspace(int device, cudaStream_t stream);

// Enqueues the product on the current stream and returns true, or returns false with nothing
// enqueued when cuBLASLt's heuristic offers no algorithm for it (the caller then takes a plainer
// route). Vendor errors throw DeviceError.
bool lt_matmul(const LtProduct& p);

}  // namespace ampgrad::cuda
