// elementwise_test.cpp: the CPU binary_scalar kernel, called directly through the backend, for
// every floating dtype, op and operand order, on contiguous and strided input: the scalar is
// used in the compute type (f32 for f16/bf16) and the result is rounded once, on store.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"

using namespace ampgrad;

namespace {

double apply(BinaryOp op, double x, double s, bool scalar_first) {
    double l = scalar_first ? s : x, r = scalar_first ? x : s;
    switch (op) {
        case BinaryOp::kAdd: return l + r;
        case BinaryOp::kSub: return l - r;
        case BinaryOp::kMul: return l * r;
        default: return l / r;
    }
}

// The expected result: in f32 arithmetic for f32/f16/bf16 (f64 for f64), rounded to dt.
Tensor expected(BinaryOp op, const Tensor& a, double s, bool scalar_first) {
    std::vector<double> in = a.to(kFloat64).contiguous().to_vector<double>(), out;
    for (double x : in) {
        if (a.dtype() == kFloat64) out.push_back(apply(op, x, s, scalar_first));
        else out.push_back(static_cast<float>(apply(op, static_cast<float>(x), static_cast<float>(s), scalar_first)));
    }
    return tensor<double>(out, a.sizes()).to(a.dtype());
}

}  // namespace

TEST_CASE("cpu binary_scalar: every float dtype, op and order; scalar in the compute type") {
    manual_seed(3);
    Tensor base = randn({5, 7}, kFloat64) * 10.0;
    for (DType dt : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
        for (bool strided : {false, true}) {
            Tensor a = strided ? base.to(dt).transpose(0, 1) : base.to(dt);        // (7,5) strided or (5,7)
            for (BinaryOp op : {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kDiv}) {
                for (bool scalar_first : {false, true}) {
                    CAPTURE(dtype_name(dt));
                    CAPTURE(op_name(op));
                    CAPTURE(strided);
                    CAPTURE(scalar_first);
                    Tensor out = empty(a.sizes(), dt);
                    kernels::binary_scalar(op, out, a, 0.1, scalar_first);
                    CHECK(equal(out, expected(op, a, 0.1, scalar_first)));
                }
            }
        }
    }
}

// Integer pow is exact by squaring (as PyTorch's powi), not a trip through double: 3^39 is past 2^53,
// where double rounds; the result wraps as int64 wraps; negative exponents follow powi.
TEST_CASE("cpu binary pow on integers: exact past 2^53, wrapping, and powi's negative exponents") {
    const std::vector<int64_t> bases = {3, 2, -3, 7, 2, 1, -1, -1, 0, 5};
    const std::vector<int64_t> exponents = {39, 62, 3, 0, 64, -5, -3, -4, 0, -1};
    const std::vector<int64_t> want = {4052555153018976267LL, int64_t{1} << 62, -27, 1, 0, 1, -1, 1, 1, 0};
    Tensor a = tensor(bases, {10}), b = tensor(exponents, {10}), out = empty({10}, kInt64);
    kernels::binary(BinaryOp::kPow, out, a, b);
    CHECK(out.to_vector<int64_t>() == want);
    Tensor out32 = empty({2}, kInt32);
    kernels::binary(BinaryOp::kPow, out32, a.narrow(0, 2, 2).to(kInt32), b.narrow(0, 2, 2).to(kInt32));   // (-3)^3, 7^0
    CHECK(out32.to_vector<int32_t>() == std::vector<int32_t>{-27, 1});
}
