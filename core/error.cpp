// error.cpp: the internal-invariant reporter behind AMPGRAD_CHECK.
#include "core/error.hpp"

namespace ampgrad {

void throw_internal(const char* expr, const std::string& msg, std::source_location loc) {
    throw InternalError(fmt::format("internal error at {}:{}: CHECK({}) failed: {}", loc.file_name(), loc.line(),
                                    expr, msg));
}

}  // namespace ampgrad
