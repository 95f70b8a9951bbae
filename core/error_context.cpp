// error_context.cpp: rethrow_with_context (core/error_context.hpp).
#include "core/error_context.hpp"

namespace ampgrad {

namespace {

// Throws E(message) when `e` is an E (listed most derived first, so the first match is the closest).
template <class E, class... Rest>
[[noreturn]] void throw_as(const Error& e, const std::string& message) {
    if (dynamic_cast<const E*>(&e) != nullptr) throw E(message);
    if constexpr (sizeof...(Rest) > 0) throw_as<Rest...>(e, message);
    throw Error(message);
}

}  // namespace

void rethrow_with_context(const Error& e, const std::string& context) {
    const std::string what = e.what();
    if (what.find(context) != std::string::npos) throw;   // already says where
    throw_as<OutOfMemoryError, NotImplementedError, LossScaleError, FormatError, ShapeError, DTypeError, DeviceError,
             ValueError, IndexError, AutogradError, AmpError, IOError, InternalError>(e, context + ": " + what);
}

}  // namespace ampgrad
