// error.hpp: the three tiers of errors (each described below; docs/architecture.md shows the messages).
//   (a) user errors: typed exceptions naming the op and each operand's shape, dtype and device;
//   (b) internal invariants: AMPGRAD_CHECK(cond, fmt, ...) reporting file:line and the expression;
//   (c) vendor status codes: CUDA_CHECK and friends live in cuda/common.cuh.
// Every exception derives from ampgrad::Error (itself a std::runtime_error).
#pragma once
#include <fmt/format.h>
#include <stdexcept>
#include <string>
#include <version>
#if defined(__cpp_lib_source_location)
#include <source_location>
#endif

namespace ampgrad {

struct Error : std::runtime_error { using std::runtime_error::runtime_error; };
struct ShapeError : Error { using Error::Error; };          // incompatible shapes
struct DTypeError : Error { using Error::Error; };          // unsupported or mismatched dtype
struct DeviceError : Error { using Error::Error; };         // mismatched or unavailable device
struct OutOfMemoryError : DeviceError { using DeviceError::DeviceError; };  // a device allocation failed after the cache was released
// A kernel with no implementation for the device of its operands (an empty registry slot).
struct NotImplementedError : DeviceError { using DeviceError::DeviceError; };
struct ValueError : Error { using Error::Error; };          // bad scalar argument or option
struct IndexError : Error { using Error::Error; };          // out-of-range index or dim
struct AutogradError : Error { using Error::Error; };       // graph misuse: second backward, version mismatch...
struct AmpError : Error { using Error::Error; };            // scaler/autocast misuse
struct LossScaleError : AmpError { using AmpError::AmpError; };  // dynamic loss scale hit its minimum
struct IOError : Error { using Error::Error; };             // unreadable / unwritable files
struct FormatError : IOError { using IOError::IOError; };   // a file whose content breaks its format's rules
struct InternalError : Error { using Error::Error; };       // a broken invariant: a bug in ampgrad

// (Only the library's compilers need it: clang 14 with libstdc++ 12, which builds the fuzz target in
// tools/fuzz/ from the error types alone, has no std::source_location.)
#if defined(__cpp_lib_source_location)
[[noreturn]] void throw_internal(const char* expr, const std::string& msg, std::source_location loc);
#endif

}  // namespace ampgrad

// Internal invariant. Usage: AMPGRAD_CHECK(a.numel() == b.numel(), "copy of {} into {}", x, y);
#define AMPGRAD_CHECK(cond, ...)                                                         \
    do {                                                                                 \
        if (!(cond)) [[unlikely]]                                                        \
            ::ampgrad::throw_internal(#cond, ::fmt::format(__VA_ARGS__),                 \
                                      std::source_location::current());                  \
    } while (0)
