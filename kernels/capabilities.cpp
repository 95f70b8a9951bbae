// capabilities.cpp: the per-device capability table (kernels/capabilities.hpp) and the GEMM
// library preference. The slots are plain values set by static initializers of the backends before
// main(), and read afterwards.
#include "kernels/capabilities.hpp"

#include <array>
#include <atomic>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "core/error.hpp"

namespace ampgrad {

namespace {

struct Slot {
    BackendCapabilities capabilities;
    bool registered = false;
};

std::array<Slot, kNumDeviceTypes>& slots() {
    static std::array<Slot, kNumDeviceTypes> table;
    return table;
}

GemmLibrary library_from_environment() {
    const char* value = std::getenv("AMPGRAD_CPU_GEMM");
    const std::string_view v = value ? value : "";
    if (v.empty() || v == "best") return GemmLibrary::kBest;
    if (v == "eigen") return GemmLibrary::kReference;
    throw ValueError(fmt::format("AMPGRAD_CPU_GEMM: expected 'best' or 'eigen', got '{}'", v));
}

std::atomic<GemmLibrary>& library_slot() {
    static std::atomic<GemmLibrary> slot{library_from_environment()};
    return slot;
}

}  // namespace

void register_backend_capabilities(DeviceType device, const BackendCapabilities& capabilities) {
    Slot& slot = slots().at(device_type_index(device));
    slot.capabilities = capabilities;
    slot.registered = true;
}

bool has_backend_capabilities(DeviceType device) { return slots().at(device_type_index(device)).registered; }

const BackendCapabilities& backend_capabilities(DeviceType device) {
    const Slot& slot = slots().at(device_type_index(device));
    if (!slot.registered)
        throw NotImplementedError(fmt::format("backend_capabilities: no {} backend in this build", device_type_name(device)));
    return slot.capabilities;
}

std::string gemm_route(DeviceType device, DType dtype) {
    if (!is_floating(dtype))
        throw DTypeError(fmt::format("gemm_route: expected a floating dtype, got {}", dtype_name(dtype)));
    const BackendCapabilities& c = backend_capabilities(device);
    AMPGRAD_CHECK(c.gemm_route != nullptr, "gemm_route: the backend registered no GEMM route");
    return c.gemm_route(dtype);
}

void set_cpu_gemm_library(GemmLibrary library) { library_slot().store(library); }
GemmLibrary cpu_gemm_library() { return library_slot().load(); }

}  // namespace ampgrad
