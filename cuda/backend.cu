// backend.cu: device discovery (device_count, require_device), the vendor error helpers behind
// CUDA_CHECK/CUBLAS_CHECK, and the registration of the CUDA device with core's device registry.
// Without a GPU or driver, every request for cuda:N fails with a DeviceError that says why;
// nothing crashes. Kernels register themselves from their own files (copy.cu, gemm.cu, ...); a
// kernel with no CUDA implementation yet fails with the registry's NotImplementedError.
#include <string_view>
#include <vector>

#include "core/device_properties.hpp"
#include "core/device_registry.hpp"
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

int count_devices() { return query_devices().count; }

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

// The name and memory the driver reports (core/device_properties.hpp).
DeviceProperties cuda_device_properties(int index) {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    return {prop.name, static_cast<int64_t>(prop.totalGlobalMem)};
}

// ---- registration: core reaches CUDA devices only through these hooks ----

AMPGRAD_REGISTER_DEVICE(kCUDA,
                        (DeviceHooks{&count_devices, &require_device, &cuda_allocator, &cuda_pinned_host_allocator}));
[[maybe_unused]] static const bool properties_registered =
    (register_device_properties(kCUDA, &cuda_device_properties), true);

}  // namespace ampgrad::cuda
