// device_properties.hpp: what a device is (its name, its memory) and the peak arithmetic rate that
// model-FLOPs utilisation (MFU) divides by. A backend registers how to ask its devices at load time
// (cuda/backend.cu: the name from cudaGetDeviceProperties); the CPU answers from /proc/cpuinfo.
//
//   DeviceProperties p = device_properties(Device(kCUDA, 0));   // {"NVIDIA H100 80GB HBM3", 85e9}
//   std::optional<double> peak = peak_dense_bf16_flops(p.name);  // 989e12
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/device.hpp"

namespace ampgrad {

struct DeviceProperties {
    std::string name;                 // "NVIDIA H200", or the CPU's model name
    int64_t total_memory_bytes = 0;   // 0 where unknown
};

using DevicePropertiesQuery = DeviceProperties (*)(int index);
void register_device_properties(DeviceType type, DevicePropertiesQuery query);

// Throws DeviceError when the device cannot be used (core/device_registry.hpp's require_device).
DeviceProperties device_properties(Device device);

// The dense (no sparsity) bf16 tensor-core peak in FLOP/s of a GPU, looked up by the name CUDA
// reports, from NVIDIA's data sheets: H100 SXM and H200 989e12, H100 PCIe 756e12, H100 NVL 835e12,
// A100 312e12. nullopt for any other device (a CPU, an unlisted GPU): MFU is then not reported.
std::optional<double> peak_dense_bf16_flops(const std::string& device_name);

}  // namespace ampgrad
