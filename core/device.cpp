// device.cpp: parsing and printing device specs.
#include "core/device.hpp"

#include <charconv>

#include "core/error.hpp"

namespace ampgrad {

Device::Device(std::string_view spec) {
    if (spec == "cpu") { type = DeviceType::kCPU; index = 0; return; }
    if (spec.starts_with("cuda")) {
        type = DeviceType::kCUDA;
        index = 0;
        std::string_view rest = spec.substr(4);
        if (rest.empty()) return;
        if (rest[0] == ':') {
            auto [p, ec] = std::from_chars(rest.data() + 1, rest.data() + rest.size(), index);
            if (ec == std::errc() && p == rest.data() + rest.size() && index >= 0) return;
        }
    }
    throw ValueError(fmt::format("Device: cannot parse device spec '{}'; expected 'cpu', 'cuda' or 'cuda:N'", spec));
}

std::string Device::str() const {
    return is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", index);
}

std::string_view device_type_name(DeviceType t) { return t == DeviceType::kCPU ? "cpu" : "cuda"; }

}  // namespace ampgrad
