// kernels.cpp: the kernel objects declared in kernels/kernels.hpp and kernels/fused_kernels.hpp (their
// slots start empty and are filled by cpu/ and cuda/), the op names generated from the op lists,
// and coverage queries.
#include "kernels/kernels.hpp"

#include "kernels/fused_kernels.hpp"

#include <array>

#include "core/error.hpp"

namespace ampgrad {

namespace detail {
void throw_missing_kernel(std::string_view kernel, DeviceType device) {
    throw NotImplementedError(fmt::format("kernel '{}' has no {} implementation (see kernels::missing({}) for the "
                                          "kernels this device lacks)", kernel, device_type_name(device),
                                          device_type_name(device)));
}

std::string describe_operand(const Tensor& t) { return t.describe(); }

std::string kernel_span_args(DeviceType device, const std::string& operands) {
    return fmt::format("{{\"device\": \"{}\", \"operands\": [{}]}}", device_type_name(device), operands);
}
}  // namespace detail

namespace kernels {

#define AMPGRAD_DEFINE_KERNEL(name) constinit decltype(name) name{#name};
AMPGRAD_KERNELS(AMPGRAD_DEFINE_KERNEL)
AMPGRAD_FUSED_KERNELS(AMPGRAD_DEFINE_KERNEL)
#undef AMPGRAD_DEFINE_KERNEL

std::span<const KernelBase* const> all() {
#define AMPGRAD_KERNEL_ADDRESS(name) &name,
    static constexpr const KernelBase* kAll[] = {AMPGRAD_KERNELS(AMPGRAD_KERNEL_ADDRESS)
                                                     AMPGRAD_FUSED_KERNELS(AMPGRAD_KERNEL_ADDRESS)};
#undef AMPGRAD_KERNEL_ADDRESS
    return kAll;
}

std::vector<std::string_view> missing(DeviceType device) {
    std::vector<std::string_view> names;
    for (const KernelBase* k : all())
        if (!k->has(device)) names.push_back(k->name());
    return names;
}

}  // namespace kernels

// ---- op names, from the op lists ----

#define AMPGRAD_OP_NAME(e, name, formula) name,
std::string_view op_name(UnaryOp op) {
    static constexpr std::string_view names[] = {AMPGRAD_UNARY_OPS(AMPGRAD_OP_NAME)};
    return names[static_cast<size_t>(op)];
}

std::string_view op_name(BinaryOp op) {
    static constexpr std::string_view names[] = {AMPGRAD_ARITHMETIC_OPS(AMPGRAD_OP_NAME)
                                                     AMPGRAD_COMPARISON_OPS(AMPGRAD_OP_NAME)};
    return names[static_cast<size_t>(op)];
}

std::string_view op_name(ActivationGrad op) {
    static constexpr std::string_view names[] = {AMPGRAD_ACTIVATION_GRADS(AMPGRAD_OP_NAME)};
    return names[static_cast<size_t>(op)];
}

std::string_view op_name(ReduceOp op) {
    static constexpr std::string_view names[] = {AMPGRAD_REDUCE_OPS(AMPGRAD_OP_NAME)};
    return names[static_cast<size_t>(op)];
}
#undef AMPGRAD_OP_NAME

}  // namespace ampgrad
