// device.hpp: where a tensor lives. Device("cpu"), Device("cuda:0"), or the shorthands kCPU / kCUDA.
// The device types come from one list (AMPGRAD_DEVICE_TYPES); tables indexed by device type
// (kernel slots, autocast state, allocators) are sized by kNumDeviceTypes.
// Not here: whether a device is actually usable; that is core/device_registry.hpp's question.
#pragma once
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

namespace ampgrad {

// X(enumerator, name used in "name:index" specs, autocast's default lower-precision dtype).
// Adding a device type starts here (docs/architecture.md, "How to add a device").
#define AMPGRAD_DEVICE_TYPES(X)      \
    X(kCPU, "cpu", kBFloat16)        \
    X(kCUDA, "cuda", kFloat16)

enum class DeviceType : uint8_t {
#define AMPGRAD_DEVICE_ENUM(e, name, autocast_dtype) e,
    AMPGRAD_DEVICE_TYPES(AMPGRAD_DEVICE_ENUM)
#undef AMPGRAD_DEVICE_ENUM
};
inline constexpr size_t kNumDeviceTypes = 0
#define AMPGRAD_DEVICE_COUNT(e, name, autocast_dtype) +1
    AMPGRAD_DEVICE_TYPES(AMPGRAD_DEVICE_COUNT);
#undef AMPGRAD_DEVICE_COUNT
inline constexpr DeviceType kCPU = DeviceType::kCPU;
inline constexpr DeviceType kCUDA = DeviceType::kCUDA;

// The position of a device type in per-device-type tables.
constexpr size_t device_type_index(DeviceType t) { return static_cast<size_t>(t); }

// A field read both ways: as a value (d.type == kCPU, the way ampgrad's code reads it) and as
// libtorch's accessor (d.type() == kCPU, d.index()). It converts to, and assigns from, its T.
template <typename T>
struct DeviceField {
    T value{};
    constexpr DeviceField() = default;
    constexpr DeviceField(T v) : value(v) {}                 // NOLINT: assigned from a plain T
    constexpr operator T() const { return value; }            // NOLINT: read as a plain T
    constexpr T operator()() const { return value; }          // libtorch's d.type(), d.index()
};

struct Device {
    DeviceField<DeviceType> type = DeviceType::kCPU;
    DeviceField<int> index = 0;             // ordinal on accelerators; always 0 for the CPU

    Device() = default;
    Device(DeviceType t, int i = 0) : type(t), index(t == DeviceType::kCPU ? 0 : i) {}  // NOLINT
    explicit Device(std::string_view spec);  // "cpu", "cuda", "cuda:1"; throws ValueError otherwise
    Device(const char* spec) : Device(std::string_view(spec)) {}  // NOLINT

    bool is_cpu() const { return type.value == DeviceType::kCPU; }
    bool is_cuda() const { return type.value == DeviceType::kCUDA; }
    std::string str() const;                // "cpu", "cuda:0"
    bool operator==(const Device& o) const { return type.value == o.type.value && index.value == o.index.value; }
    bool has_index() const { return !is_cpu(); }   // libtorch's: the CPU has no ordinal
};

std::string_view device_type_name(DeviceType t);
std::ostream& operator<<(std::ostream& os, const Device& d);   // "cpu", "cuda:0"
std::ostream& operator<<(std::ostream& os, DeviceType t);      // "cpu", "cuda"

}  // namespace ampgrad
