// gemm_lt.cu: cublasLtMatmul for cuda/gemm.cu's epilogue GEMM (interface: cuda/gemm_lt.cuh).
// Per device: one cuBLASLt handle, one 32 MiB workspace per stream shared with cuda/gemm.cu's
// cuBLAS calls (gemm_workspace: taken from the backend allocator on first use and kept; two
// streams never share one, since a workspace is scratch for the kernel in flight), and a cache from the product's key to the algorithm the heuristic
// chose (or to "none", so an unsupported combination is asked about once). A mutex guards the
// per-device state; the calls only enqueue work, so it is held for microseconds.
#include <array>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "cuda/gemm_lt.cuh"

namespace ampgrad::cuda {

namespace {

// Everything the heuristic's answer depends on.
using LtKey = std::array<int64_t, 14>;

struct LtDevice {
    std::mutex mutex;
    cublasLtHandle_t handle = nullptr;
    std::mutex workspace_mutex;                   // guards workspaces (gemm.cu asks without `mutex`)
    std::map<cudaStream_t, void*> workspaces;
    std::map<LtKey, std::optional<cublasLtMatmulAlgo_t>> algos;
};

LtDevice& lt_device(int index) {
    static auto* devices = new std::vector<LtDevice>(static_cast<size_t>(count_devices()));
    return (*devices)[static_cast<size_t>(index)];
}

cudaDataType_t lt_data_type(DType dtype) {
    switch (dtype) {
        case kFloat32: return CUDA_R_32F;
        case kFloat16: return CUDA_R_16F;
        case kBFloat16: return CUDA_R_16BF;
        default: throw_bad_dtype("gemm_epilogue (cuBLASLt)", dtype, "f32, f16 or bf16");
    }
}

// The descriptors of one product, destroyed with it.
struct LtDescs {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    ~LtDescs() {
        if (d) cublasLtMatrixLayoutDestroy(d);
        if (b) cublasLtMatrixLayoutDestroy(b);
        if (a) cublasLtMatrixLayoutDestroy(a);
        if (op) cublasLtMatmulDescDestroy(op);
    }
};

template <typename V>
void set_desc(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attr, const V& value) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, attr, &value, sizeof(value)));
}

// A stored column-major matrix: op(stored) is (rows, cols) of the product, so a transposed
// operand is stored as (cols, rows).
void make_layout(cublasLtMatrixLayout_t* layout, cudaDataType_t type, const MatrixArg& arg, int64_t rows,
                 int64_t cols) {
    const bool t = arg.op != CUBLAS_OP_N;
    const uint64_t stored_rows = static_cast<uint64_t>(t ? cols : rows), stored_cols = static_cast<uint64_t>(t ? rows : cols);
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(layout, type, stored_rows, stored_cols, arg.ld));
}

void describe(LtDescs& s, const LtProduct& p) {
    const cudaDataType_t type = lt_data_type(p.dtype);
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&s.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    set_desc(s.op, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(p.lhs.op));
    set_desc(s.op, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(p.rhs.op));
    set_desc(s.op, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<uint32_t>(p.epilogue));
    if (p.bias) set_desc(s.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias);
    if (p.aux) {
        set_desc(s.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, p.aux);
        set_desc(s.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, p.m);
    }
    make_layout(&s.a, type, p.lhs, p.m, p.k);
    make_layout(&s.b, type, p.rhs, p.k, p.n);
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&s.d, type, static_cast<uint64_t>(p.m), static_cast<uint64_t>(p.n), p.m));
}

LtKey key_of(const LtProduct& p) {
    return {p.m, p.n, p.k, static_cast<int64_t>(p.dtype), static_cast<int64_t>(p.lhs.op), static_cast<int64_t>(p.rhs.op),
            p.lhs.ld, p.rhs.ld, static_cast<int64_t>(p.epilogue), alignment_of(p.lhs.ptr), alignment_of(p.rhs.ptr),
            alignment_of(p.d), p.bias ? alignment_of(p.bias) : 0, p.aux ? alignment_of(p.aux) : 0};
}

// The heuristic's first choice for this product, or none.
std::optional<cublasLtMatmulAlgo_t> choose_algo(cublasLtHandle_t handle, const LtDescs& s, const LtProduct& p) {
    cublasLtMatmulPreference_t pref = nullptr;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    auto set_pref = [&](cublasLtMatmulPreferenceAttributes_t attr, auto value) {
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
    };
    set_pref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(kGemmWorkspaceBytes));
    set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<uint32_t>(alignment_of(p.lhs.ptr)));
    set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<uint32_t>(alignment_of(p.rhs.ptr)));
    set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<uint32_t>(alignment_of(p.d)));
    set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<uint32_t>(alignment_of(p.d)));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, s.op, s.a, s.b, s.d, s.d, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found == 0)) return std::nullopt;
    CUBLAS_CHECK(status);
    return result.algo;
}

}  // namespace

// The workspace is allocated on the current stream, which is `stream` in every caller.
void* gemm_workspace(int device, cudaStream_t stream) {
    LtDevice& dev = lt_device(device);
    std::lock_guard<std::mutex> lock(dev.workspace_mutex);
    auto it = dev.workspaces.find(stream);
    if (it != dev.workspaces.end()) return it->second;
    Stream current = ::ampgrad::current_stream(Device(kCUDA, device));
    void* ws = cuda_allocator(device).allocate(kGemmWorkspaceBytes, current);
    dev.workspaces.emplace(stream, ws);
    return ws;
}

bool lt_matmul(const LtProduct& p) {
    LtDevice& dev = lt_device(p.device);
    std::lock_guard<std::mutex> lock(dev.mutex);
    if (dev.handle == nullptr) CUBLAS_CHECK(cublasLtCreate(&dev.handle));
    LtDescs s;
    describe(s, p);
    const LtKey key = key_of(p);
    auto it = dev.algos.find(key);
    if (it == dev.algos.end()) it = dev.algos.emplace(key, choose_algo(dev.handle, s, p)).first;
    if (!it->second) return false;
    const cudaStream_t stream = current_stream();
    void* ws = gemm_workspace(p.device, stream);
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasLtMatmul(dev.handle, s.op, &alpha, p.lhs.ptr, s.a, p.rhs.ptr, s.b, &beta, p.d, s.d, p.d, s.d,
                                &*it->second, ws, kGemmWorkspaceBytes, stream));
    return true;
}

}  // namespace ampgrad::cuda
