// device.hpp: where a tensor lives. Device("cpu"), Device("cuda:0"), or the shorthands kCPU / kCUDA.
// Not here: whether CUDA is actually usable; that is the CUDA backend's question (cuda/).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace ampgrad {

enum class DeviceType : uint8_t { kCPU, kCUDA };
inline constexpr DeviceType kCPU = DeviceType::kCPU;
inline constexpr DeviceType kCUDA = DeviceType::kCUDA;

struct Device {
    DeviceType type = DeviceType::kCPU;
    int index = 0;                          // CUDA ordinal; always 0 for the CPU

    Device() = default;
    Device(DeviceType t, int i = 0) : type(t), index(t == DeviceType::kCPU ? 0 : i) {}  // NOLINT
    explicit Device(std::string_view spec);  // "cpu", "cuda", "cuda:1"; throws ValueError otherwise
    Device(const char* spec) : Device(std::string_view(spec)) {}  // NOLINT

    bool is_cpu() const { return type == DeviceType::kCPU; }
    bool is_cuda() const { return type == DeviceType::kCUDA; }
    std::string str() const;                // "cpu", "cuda:0"
    bool operator==(const Device& o) const { return type == o.type && index == o.index; }
};

std::string_view device_type_name(DeviceType t);

}  // namespace ampgrad
