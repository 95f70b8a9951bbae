// backend.cpp: picks the backend for a device. The CUDA side comes from cuda/ (real or stub,
// chosen at build time), which throws DeviceError when no GPU can be used. Allocators are found
// through their own registry (core/allocator.cpp).
#include "core/backend.hpp"

#include "core/error.hpp"

namespace ampgrad {

namespace cpu { class CpuBackend; Backend& cpu_backend_ref(); }
namespace cuda { Backend& cuda_backend(int device_index); }

Backend& backend_for(Device device) {
    if (device.is_cpu()) return cpu::cpu_backend_ref();
    return cuda::cuda_backend(device.index);
}

std::string_view op_name(UnaryOp op) {
    static constexpr std::string_view names[] = {"neg",  "exp",     "log",  "sqrt",      "rsqrt",     "abs",
                                                 "tanh", "sigmoid", "relu", "gelu_tanh", "gelu",      "silu",
                                                 "sign", "reciprocal", "square", "logical_not"};
    return names[static_cast<int>(op)];
}

std::string_view op_name(BinaryOp op) {
    static constexpr std::string_view names[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq",
                                                 "ne",  "lt",  "le",  "gt",  "ge",  "logical_and", "logical_or"};
    return names[static_cast<int>(op)];
}

}  // namespace ampgrad
