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
