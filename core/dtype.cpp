// dtype.cpp: type promotion (PyTorch's table restricted to our seven dtypes).
#include "core/dtype.hpp"

namespace ampgrad {

namespace {
int rank_of(DType t) {
    switch (t) {
        case DType::kBool: return 0;
        case DType::kInt32: return 1;
        case DType::kInt64: return 2;
        case DType::kFloat16: return 3;
        case DType::kBFloat16: return 3;
        case DType::kFloat32: return 4;
        case DType::kFloat64: return 5;
    }
    return 0;
}
}  // namespace

DType promote_types(DType a, DType b) {
    if (a == b) return a;
    if (is_reduced_float(a) && is_reduced_float(b)) return kFloat32;   // f16 + bf16 -> f32
    return rank_of(a) >= rank_of(b) ? a : b;
}

}  // namespace ampgrad
