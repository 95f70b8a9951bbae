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

std::string kernel_span_args(std::string_view kernel, DeviceType device, const std::vector<Tensor>& operands) {
    std::string described;
    int64_t bytes = 0;
    for (const Tensor& t : operands) {
        if (!t.defined()) continue;
        described += described.empty() ? "" : ", ";
        described += profiler::json_string(t.describe());
        bytes += t.numel() * static_cast<int64_t>(t.element_size());
    }
    std::string args = fmt::format("{{\"device\": \"{}\", \"operands\": [{}], \"bytes\": {}", device_type_name(device),
                                   described, bytes);
    if (const int64_t flops = kernel_flops(kernel, operands); flops >= 0) args += fmt::format(", \"flops\": {}", flops);
    return args + "}";
}

namespace {
// K of op(a) (M,K) or its batch, from out (...,M,N) and a (...,M,K) or (...,K,M): the matrix a is M*K.
int64_t inner_dim(const Tensor& out, const Tensor& a) {
    const int64_t M = out.size(-2);
    return M == 0 ? 0 : a.size(-1) * a.size(-2) / M;
}
}  // namespace

int64_t kernel_flops(std::string_view kernel, const std::vector<Tensor>& ops) {
    auto ready = [&](size_t n) {
        if (ops.size() < n) return false;
        for (size_t i = 0; i < n; ++i)
            if (!ops[i].defined() && i != 1) return false;   // slot 1 may be gemm_epilogue's absent aux
        return true;
    };
    if (kernel == "gemm" && ready(3) && ops[0].dim() >= 2 && ops[1].dim() >= 2)   // out, a, b
        return 2 * ops[0].numel() * inner_dim(ops[0], ops[1]);
    if (kernel == "gemm_epilogue" && ready(4) && ops[0].dim() >= 2 && ops[2].dim() >= 2)   // out, aux, a, b
        return 2 * ops[0].numel() * inner_dim(ops[0], ops[2]);
    // q (B,NH,T,HS), k (B,NKV,S,HS), v (B,NKV,S,HSv): q k^T and P v; the backward recomputes P and
    // makes dP, dV, dQ, dK.
    auto attention = [&](size_t q, int64_t qk_products, int64_t pv_products) -> int64_t {
        if (ops.size() < q + 3 || ops[q].dim() != 4 || ops[q + 1].dim() != 4 || ops[q + 2].dim() != 4) return -1;
        const int64_t pairs = ops[q].size(0) * ops[q].size(1) * ops[q].size(2) * ops[q + 1].size(2);
        return 2 * pairs * (qk_products * ops[q].size(3) + pv_products * ops[q + 2].size(3));
    };
    if (kernel == "attention_forward") return attention(2, 1, 1);    // out, lse, q, k, v
    if (kernel == "attention_backward") return attention(6, 3, 2);   // dq, dk, dv, dout, out, lse, q, k, v
    return -1;
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
