// dtype.cpp: type promotion (PyTorch's table restricted to our ten dtypes), and the dtype
// error every kernel's dispatch throws (core/dispatch.hpp).
#include <ostream>
#include "core/dispatch.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"

namespace ampgrad {

namespace {
int rank_of(DType t) {
    switch (t) {
        case DType::kBool: return 0;
        case DType::kUInt8: return 1;
        case DType::kInt32: return 2;
        case DType::kInt64: return 3;
        case DType::kFloat16: return 4;
        case DType::kBFloat16: return 4;
        case DType::kFloat32: return 5;
        case DType::kFloat64: return 6;
        case DType::kFloat8_e4m3fn: case DType::kFloat8_e5m2: return 7;   // never compared: see promote_types
    }
    return 0;
}
}  // namespace

DType promote_types(DType a, DType b) {
    if (a == b) return a;
    if (is_float8(a) || is_float8(b))
        throw DTypeError(fmt::format("promote_types: promotion of {} with {} is not supported (as in PyTorch); "
                                     "cast the fp8 operand first", dtype_name(a), dtype_name(b)));
    if (is_reduced_float(a) && is_reduced_float(b)) return kFloat32;   // f16 + bf16 -> f32
    return rank_of(a) >= rank_of(b) ? a : b;
}

void throw_bad_dtype(const char* prefix, const char* kernel, DType dtype, const char* expected) {
    throw DTypeError(fmt::format("{}{}: unsupported dtype {}; expected {}", prefix, kernel, dtype_name(dtype), expected));
}

std::string_view scalar_type_name(DType t) {
    switch (t) {
        case DType::kFloat32: return "Float";
        case DType::kFloat16: return "Half";
        case DType::kBFloat16: return "BFloat16";
        case DType::kFloat64: return "Double";
        case DType::kInt64: return "Long";
        case DType::kInt32: return "Int";
        case DType::kBool: return "Bool";
        case DType::kFloat8_e4m3fn: return "Float8_e4m3fn";
        case DType::kFloat8_e5m2: return "Float8_e5m2";
        case DType::kUInt8: return "Byte";
    }
    return "?";
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << scalar_type_name(t); }

}  // namespace ampgrad
