// kernel_registry.hpp: Kernel<Sig>, one dispatch table per kernel (PyTorch's DispatchStub idea).
// A kernel is a named object with one function-pointer slot per DeviceType. Backends fill their
// slot from the file that defines the implementation:
//
//     AMPGRAD_REGISTER_KERNEL(kernels::gemm, kCPU, gemm);        // cpu/gemm.cpp
//
// and callers invoke the object like a function: kernels::gemm(out, a, b, false, false, 1.0, 0.0).
// The call runs the slot of the device of its operands: the first Tensor argument (or element of
// a span of Tensors) that is not on the CPU, else the CPU. "Non-CPU wins" makes cross-device copy
// dispatch to the accelerator that can reach both memories, and hands a kernel whose operands are
// on mixed devices to the accelerator's implementation, which rejects them with a DeviceError
// instead of reading device memory from the host. An empty slot throws NotImplementedError:
// "kernel 'softmax' has no cuda implementation".
//
// Every Kernel has a constexpr constructor and is `constinit`, so the tables exist (all slots
// empty) before any static initializer runs: registrations in any order are safe.
#pragma once
#include <array>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/device.hpp"
#include "core/profiler.hpp"
#include "core/tensor.hpp"

namespace ampgrad {

namespace detail {
[[noreturn]] void throw_missing_kernel(std::string_view kernel, DeviceType device);

// Folds one argument into the dispatch device (`found` is the first non-CPU device seen).
template <class A>
void note_device(const A& arg, bool& found, DeviceType& device) {
    using T = std::remove_cvref_t<A>;
    if (found) return;
    if constexpr (std::is_same_v<T, Tensor>) {
        if (arg.defined() && !arg.device().is_cpu()) { found = true; device = arg.device().type; }
    } else if constexpr (std::is_same_v<T, std::span<Tensor>> || std::is_same_v<T, std::span<const Tensor>>) {
        for (const Tensor& t : arg) note_device(t, found, device);
    }
}

// The profiler's args for a kernel call: each Tensor operand as "(B,T,C) f32 cpu" (Tensor::describe),
// the bytes of its tensor operands and, for the GEMM and attention kernels, the FLOPs
// (kernel_flops). Operands are collected only while profiling.
template <class A>
void collect_operand(const A& arg, std::vector<Tensor>& out) {
    if constexpr (std::is_same_v<std::remove_cvref_t<A>, Tensor>) out.push_back(arg);   // undefined ones keep their slot
}
std::string kernel_span_args(std::string_view kernel, DeviceType device, const std::vector<Tensor>& operands);
// Multiply-adds x 2 of a GEMM or attention kernel call, from its operands in signature order; -1 for
// other kernels. Attention is counted over every (query, key) pair: a causal call does about half.
int64_t kernel_flops(std::string_view kernel, const std::vector<Tensor>& operands);
}  // namespace detail

// The part of a kernel that does not depend on its signature: its name and which slots are filled.
class KernelBase {
public:
    constexpr explicit KernelBase(std::string_view name) : name_(name) {}
    std::string_view name() const { return name_; }
    bool has(DeviceType device) const { return filled_[device_type_index(device)]; }

protected:
    std::string_view name_;
    std::array<bool, kNumDeviceTypes> filled_{};
};

template <class Sig>
class Kernel;

template <class R, class... Args>
class Kernel<R(Args...)> : public KernelBase {
public:
    using Fn = R (*)(Args...);

    constexpr explicit Kernel(std::string_view name) : KernelBase(name) {}
    Kernel(const Kernel&) = delete;
    Kernel& operator=(const Kernel&) = delete;

    // Fills the slot for `device` (a later registration replaces an earlier one).
    void register_impl(DeviceType device, Fn fn) {
        slots_[device_type_index(device)] = fn;
        filled_[device_type_index(device)] = fn != nullptr;
    }

    // The device this call would run on.
    static DeviceType dispatch_device(const Args&... args) {
        bool found = false;
        DeviceType device = DeviceType::kCPU;
        (detail::note_device(args, found, device), ...);
        return device;
    }

    // With the profiler on, the call is a "kernel" span named after the kernel, with its device and
    // operands (core/profiler.hpp); off, that costs one branch.
    R operator()(Args... args) const {
        DeviceType device = dispatch_device(args...);
        Fn fn = slots_[device_type_index(device)];
        if (fn == nullptr) [[unlikely]] detail::throw_missing_kernel(name_, device);
        profiler::Span span("kernel", name_, [&] {
            std::vector<Tensor> operands;
            (detail::collect_operand(args, operands), ...);
            return detail::kernel_span_args(name_, device, operands);
        });
        return fn(std::forward<Args>(args)...);
    }

private:
    std::array<Fn, kNumDeviceTypes> slots_{};
};

}  // namespace ampgrad

#define AMPGRAD_REGISTRY_CONCAT_(a, b) a##b
#define AMPGRAD_REGISTRY_CONCAT(a, b) AMPGRAD_REGISTRY_CONCAT_(a, b)

// At namespace scope in the file that defines `fn`: fill `kernel`'s slot for `device` at load time.
#define AMPGRAD_REGISTER_KERNEL(kernel, device, fn)                                            \
    [[maybe_unused]] static const bool AMPGRAD_REGISTRY_CONCAT(ampgrad_kernel_registered_, __COUNTER__) = \
        ((kernel).register_impl((device), (fn)), true)
