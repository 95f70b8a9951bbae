// device_properties.cpp: see device_properties.hpp. The table of queries is filled by the backends
// at load time, like core/device_registry.cpp's hooks.
#include "core/device_properties.hpp"

#include <array>
#include <fstream>
#include <utility>

#include "core/device_registry.hpp"

namespace ampgrad {

namespace {

constinit std::array<DevicePropertiesQuery, kNumDeviceTypes> g_queries{};

// "model name : AMD EPYC ..." from /proc/cpuinfo, or "cpu".
std::string cpu_model_name() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) != 0) continue;
        const size_t colon = line.find(':');
        if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
    }
    return "cpu";
}

}  // namespace

void register_device_properties(DeviceType type, DevicePropertiesQuery query) {
    g_queries[device_type_index(type)] = query;
}

DeviceProperties device_properties(Device device) {
    if (device.is_cpu()) return {cpu_model_name(), 0};
    require_device(device);
    DevicePropertiesQuery query = g_queries[device_type_index(device.type)];
    return query ? query(device.index) : DeviceProperties{device.str(), 0};
}

std::optional<double> peak_dense_bf16_flops(const std::string& device_name) {
    // Most specific names first: "H100 PCIe" and "H100 NVL" before plain "H100" (the SXM part).
    static const std::array<std::pair<const char*, double>, 5> kPeaks = {{
        {"H200", 989e12}, {"H100 PCIe", 756e12}, {"H100 NVL", 835e12}, {"H100", 989e12}, {"A100", 312e12}}};
    for (const auto& [key, flops] : kPeaks)
        if (device_name.find(key) != std::string::npos) return flops;
    return std::nullopt;
}

}  // namespace ampgrad
