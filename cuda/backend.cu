// backend.cu: device discovery (is_available, device_count), the per-GPU CudaBackend objects,
// the vendor error helpers behind CUDA_CHECK/CUBLAS_CHECK, and the kernels that are not written
// yet (they throw DeviceError naming themselves). Without a GPU or driver, every request for
// cuda:N fails with a DeviceError that says why; nothing crashes.
#include <string_view>
#include <vector>

#include "core/cuda_info.hpp"
#include "cuda/backend_cuda.hpp"
#include "cuda/common.cuh"

namespace ampgrad::cuda {

// ---- vendor errors ----

namespace {
// "../cuda/gemm.cu" (as the build directory sees it) -> "cuda/gemm.cu"
std::string_view source_path(std::string_view file) {
    while (file.starts_with("../") || file.starts_with("./")) file.remove_prefix(file.find('/') + 1);
    return file;
}
}  // namespace

void throw_cuda_error(cudaError_t status, const char* expr, const char* file, int line) {
    cudaGetLastError();                       // clear a non-sticky error so the next call can proceed
    throw DeviceError(fmt::format("CUDA error at {}:{}: {}: {} ({})", source_path(file), line, expr,
                                  cudaGetErrorString(status), cudaGetErrorName(status)));
}

void throw_cublas_error(cublasStatus_t status, const char* expr, const char* file, int line) {
    throw DeviceError(fmt::format("cuBLAS error at {}:{}: {}: {} ({})", source_path(file), line, expr,
                                  cublasGetStatusString(status), cublasGetStatusName(status)));
}

void throw_bad_dtype(const char* kernel, DType dtype, const char* expected) {
    throw DTypeError(fmt::format("cuda {}: unsupported dtype {}; expected {}", kernel, dtype_name(dtype), expected));
}

// ---- discovery ----

namespace {
struct DeviceQuery {
    int count = 0;
    cudaError_t status = cudaSuccess;        // of cudaGetDeviceCount: NoDevice, InsufficientDriver, ...
};

// Asked once: the answer cannot change while the process runs.
const DeviceQuery& query_devices() {
    static const DeviceQuery query = [] {
        DeviceQuery q;
        q.status = cudaGetDeviceCount(&q.count);
        if (q.status != cudaSuccess) {
            cudaGetLastError();               // leave no sticky error behind
            q.count = 0;
        }
        return q;
    }();
    return query;
}
}  // namespace

int device_count() { return query_devices().count; }
bool is_available() { return device_count() > 0; }

void require_device(int index) {
    const DeviceQuery& q = query_devices();
    if (q.count == 0) {
        std::string why = q.status != cudaSuccess ? cudaGetErrorString(q.status) : "0 devices";
        throw DeviceError(fmt::format("cuda:{}: no CUDA device is available (cudaGetDeviceCount: {}); run on a machine "
                                      "with an NVIDIA GPU or use Device(kCPU)", index, why));
    }
    if (index < 0 || index >= q.count)
        throw DeviceError(fmt::format("cuda:{}: device index out of range ({} device{})", index, q.count,
                                      q.count == 1 ? "" : "s"));
}

void require_on_device(const char* kernel, int index, std::initializer_list<const Tensor*> ts) {
    for (const Tensor* t : ts) {
        if (t->defined() && !(t->device().is_cuda() && t->device().index == index))
            throw DeviceError(fmt::format("cuda {}: operand {} is not on cuda:{}; move it with .to(device)", kernel,
                                          t->describe(), index));
    }
}

DeviceGuard::DeviceGuard(int index) {
    CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != index) CUDA_CHECK(cudaSetDevice(index));
}

DeviceGuard::~DeviceGuard() {
    int now = -1;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);   // no throw here
}

Backend& cuda_backend(int index) {
    require_device(index);
    // One backend per GPU, made on first use and never destroyed (tensors may outlive statics).
    static std::vector<CudaBackend*>* backends = [] {
        auto* v = new std::vector<CudaBackend*>();
        for (int i = 0; i < device_count(); ++i) v->push_back(new CudaBackend(i));
        return v;
    }();
    return *(*backends)[static_cast<size_t>(index)];
}

// ---- kernels still to come (the full backend arrives in a later issue) ----

namespace {
[[noreturn]] void not_implemented(const char* kernel) {
    throw DeviceError(fmt::format("cuda: {} is not implemented yet in the CUDA backend", kernel));
}
}  // namespace

void CudaBackend::reduce(ReduceOp, const Tensor&, const Tensor&, std::span<const int64_t>) {
    not_implemented("reduce");
}
void CudaBackend::max_with_indices(const Tensor&, const Tensor&, const Tensor&, int64_t) {
    not_implemented("max_with_indices");
}
void CudaBackend::softmax(const Tensor&, const Tensor&, bool) { not_implemented("softmax"); }
void CudaBackend::softmax_backward(const Tensor&, const Tensor&, const Tensor&, bool) {
    not_implemented("softmax_backward");
}
void CudaBackend::layer_norm(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                             double) {
    not_implemented("layer_norm");
}
void CudaBackend::layer_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                      const Tensor&, const Tensor&, const Tensor&) {
    not_implemented("layer_norm_backward");
}
void CudaBackend::embedding(const Tensor&, const Tensor&, const Tensor&) { not_implemented("embedding"); }
void CudaBackend::embedding_backward(const Tensor&, const Tensor&, const Tensor&) {
    not_implemented("embedding_backward");
}
void CudaBackend::cross_entropy(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t) {
    not_implemented("cross_entropy");
}
void CudaBackend::cross_entropy_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                         int64_t) {
    not_implemented("cross_entropy_backward");
}

}  // namespace ampgrad::cuda
