// device.cpp: parsing and printing device specs, from the AMPGRAD_DEVICE_TYPES list.
#include <ostream>
#include "core/device.hpp"

#include <array>
#include <charconv>

#include "core/error.hpp"

namespace ampgrad {

namespace {
constexpr std::array<std::string_view, kNumDeviceTypes> kDeviceTypeNames = {
#define AMPGRAD_DEVICE_NAME(e, name, autocast_dtype) name,
    AMPGRAD_DEVICE_TYPES(AMPGRAD_DEVICE_NAME)
#undef AMPGRAD_DEVICE_NAME
};

std::string expected_specs() {
    std::string s;
    for (size_t i = 0; i < kDeviceTypeNames.size(); ++i) {
        std::string_view n = kDeviceTypeNames[i];
        if (i == 0) s += fmt::format("'{}'", n);
        else s += fmt::format("{}'{}' or '{}:N'", i + 1 == kDeviceTypeNames.size() ? " or " : ", ", n, n);
    }
    return s;
}
}  // namespace

Device::Device(std::string_view spec) {
    for (size_t t = 0; t < kDeviceTypeNames.size(); ++t) {
        std::string_view name = kDeviceTypeNames[t];
        if (!spec.starts_with(name)) continue;
        std::string_view rest = spec.substr(name.size());
        type = static_cast<DeviceType>(t);
        index = 0;
        if (rest.empty()) return;
        if (rest[0] == ':') {
            auto [p, ec] = std::from_chars(rest.data() + 1, rest.data() + rest.size(), index.value);
            const bool whole = ec == std::errc() && p == rest.data() + rest.size();
            if (whole && (type == DeviceType::kCPU ? index == 0 : index >= 0)) return;   // "cpu:0" as PyTorch
        }
    }
    throw ValueError(fmt::format("Device: cannot parse device spec '{}'; expected {}", spec, expected_specs()));
}

std::string Device::str() const {
    return is_cpu() ? std::string("cpu") : fmt::format("{}:{}", device_type_name(type), index.value);
}

std::string_view device_type_name(DeviceType t) { return kDeviceTypeNames[device_type_index(t)]; }

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }
std::ostream& operator<<(std::ostream& os, DeviceType t) { return os << device_type_name(t); }

}  // namespace ampgrad
