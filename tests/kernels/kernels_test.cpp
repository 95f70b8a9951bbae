// kernels_test.cpp: kernels/kernel_registry.hpp and kernels/kernels.hpp: every kernel has a CPU
// implementation, an empty slot throws a NotImplementedError naming the kernel and the device,
// dispatch follows the operands' device, and the op lists generate the names.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>

#include "ampgrad_config.h"
#include "tests/support/check_close.hpp"

using namespace ampgrad;

TEST_CASE("every kernel in AMPGRAD_KERNELS has a CPU implementation") {
    CHECK(kernels::all().size() >= 24);
    std::set<std::string_view> names;
    for (const KernelBase* k : kernels::all()) {
        CAPTURE(k->name());
        CHECK(k->has(kCPU));
        CHECK(names.insert(k->name()).second);                 // each kernel is listed once
    }
    CHECK(kernels::missing(kCPU).empty());
    CHECK(kernels::gemm.name() == "gemm");
    CHECK(kernels::non_finite_check_and_unscale.name() == "non_finite_check_and_unscale");
}

TEST_CASE("an empty slot throws NotImplementedError naming the kernel and the device") {
    static constinit Kernel<void(const Tensor& out, double value)> lonely{"lonely_kernel"};
    Tensor t = zeros({2});
    CHECK_FALSE(lonely.has(kCPU));
    CHECK_THROWS_WITH_AS(lonely(t, 1.0), doctest::Contains("kernel 'lonely_kernel' has no cpu implementation"),
                         NotImplementedError);
    CHECK_THROWS_AS(lonely(t, 1.0), DeviceError);               // a NotImplementedError is a DeviceError

    lonely.register_impl(kCPU, [](const Tensor& out, double value) { kernels::fill(out, value); });
    CHECK(lonely.has(kCPU));
    CHECK_FALSE(lonely.has(kCUDA));
    lonely(t, 3.0);
    CHECK(t.to_vector<float>() == std::vector<float>{3.0f, 3.0f});
}

TEST_CASE("dispatch: the first operand not on the CPU, else the CPU") {
    using CopyKernel = decltype(kernels::copy);
    Tensor a = zeros({2}), b = ones({2});
    CHECK(CopyKernel::dispatch_device(a, b) == kCPU);
    CHECK(CopyKernel::dispatch_device(Tensor(), a) == kCPU);      // undefined operands are skipped
    using AmpKernel = decltype(kernels::non_finite_check_and_unscale);
    std::vector<Tensor> grads{zeros({3})};
    CHECK(AmpKernel::dispatch_device(std::span<Tensor>(grads), a, b) == kCPU);
    std::vector<Tensor> none;
    CHECK(AmpKernel::dispatch_device(std::span<Tensor>(none), a, b) == kCPU);
}

TEST_CASE("cuda: a CUDA build implements every kernel, fused entries included") {
    std::vector<std::string_view> missing = kernels::missing(kCUDA);
#if AMPGRAD_WITH_CUDA
    for (std::string_view name : {"copy", "fill", "unary", "binary", "gemm", "random_uniform", "update_scale",
                                  "reduce", "max_with_indices", "softmax", "softmax_backward", "layer_norm",
                                  "layer_norm_backward", "embedding", "embedding_backward", "cross_entropy",
                                  "cross_entropy_backward"})
        CHECK(std::find(missing.begin(), missing.end(), name) == missing.end());
    for (std::string_view name : {"gemm_epilogue", "attention_forward", "attention_backward", "sgd_step",
                                  "adam_step"})                                      // fused entries
        CHECK(std::find(missing.begin(), missing.end(), name) == missing.end());
    for (std::string_view name : missing) FAIL_CHECK("no CUDA implementation: " << std::string(name));
    CHECK(missing.empty());                                                         // full coverage
#else
    CHECK(missing.size() == kernels::all().size());                                 // no CUDA backend at all
#endif
}

TEST_CASE("op names come from the op lists") {
    CHECK(op_name(UnaryOp::kNeg) == "neg");
    CHECK(op_name(UnaryOp::kGeluErf) == "gelu");
    CHECK(op_name(UnaryOp::kLogicalNot) == "logical_not");
    CHECK(op_name(BinaryOp::kAdd) == "add");
    CHECK(op_name(BinaryOp::kMinimum) == "minimum");
    CHECK(op_name(BinaryOp::kEq) == "eq");
    CHECK(op_name(BinaryOp::kLogicalOr) == "logical_or");
    CHECK(op_name(ActivationGrad::kGeluTanh) == "gelu_tanh");
    CHECK(op_name(ReduceOp::kSumSquares) == "sum_squares");
    CHECK_FALSE(is_comparison(BinaryOp::kMinimum));
    CHECK(is_comparison(BinaryOp::kEq));
    CHECK(is_comparison(BinaryOp::kLogicalOr));
}

TEST_CASE("the device registry answers for the CPU and names what is missing") {
    CHECK(device_count(kCPU) == 1);
    CHECK(is_available(kCPU));
    CHECK_NOTHROW(require_device(Device(kCPU)));
    CHECK(&allocator_for(Device(kCPU)) == &allocator_for(Device("cpu")));
    CHECK(device_type_name(kCUDA) == "cuda");
    CHECK(Device("cuda:3").str() == "cuda:3");
    CHECK_THROWS_AS(Device("cpu:1"), ValueError);
}
