// elementwise_test.cpp: cuda/elementwise.cu against cpu/elementwise.cpp for unary, binary,
// add_scaled, where, clamp and activation_backward, in every dtype each kernel accepts.
// Float math may differ in the last bits (CUDA's libm, FMA contraction), so floating results are
// compared within tol_for(dtype); integer, bool, comparison, where and clamp results are exact.
#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

// Every op of kernels/kernels.hpp's lists, so a new op is compared on the GPU without editing this file.
#define AMPGRAD_UNARY(e, name, formula) UnaryOp::e,
#define AMPGRAD_BINARY(e, name, formula) BinaryOp::e,
#define AMPGRAD_GRAD(e, name, formula) ActivationGrad::e,
constexpr UnaryOp kAllUnaryOps[] = {AMPGRAD_UNARY_OPS(AMPGRAD_UNARY)};
constexpr BinaryOp kArithmeticOps[] = {AMPGRAD_ARITHMETIC_OPS(AMPGRAD_BINARY)};
constexpr BinaryOp kCompareOps[] = {AMPGRAD_COMPARISON_OPS(AMPGRAD_BINARY)};
constexpr ActivationGrad kActivationGrads[] = {AMPGRAD_ACTIVATION_GRADS(AMPGRAD_GRAD)};
#undef AMPGRAD_UNARY
#undef AMPGRAD_BINARY
#undef AMPGRAD_GRAD

// The float unary ops: all but logical_not (which writes bool; tested below).
std::vector<UnaryOp> float_unary_ops() {
    std::vector<UnaryOp> ops;
    for (UnaryOp op : kAllUnaryOps)
        if (op != UnaryOp::kLogicalNot) ops.push_back(op);
    return ops;
}
const std::vector<UnaryOp> kFloatUnaryOps = float_unary_ops();

// Strictly positive inputs (log/sqrt/rsqrt/reciprocal, pow bases, divisors): |x| + shift, in x's dtype.
Tensor positive(const Tensor& x, double shift = 0.25) {
    Tensor out = make_empty(x.sizes(), x.dtype(), kHost);
    kernels::unary(UnaryOp::kAbs, out, x);
    Tensor shift_t = make_view(full({}, shift, TensorOptions(x.dtype())), x.sizes(), Shape(x.dim(), 0), 0);
    kernels::add_scaled(out, out, shift_t, 1.0);
    return out;
}

bool needs_positive(UnaryOp op) {
    return op == UnaryOp::kLog || op == UnaryOp::kSqrt || op == UnaryOp::kRsqrt || op == UnaryOp::kReciprocal;
}

}  // namespace

TEST_CASE("cuda unary: every float op matches the CPU in f32, f64, f16, bf16" * skip_without_gpu()) {
    for (DType dtype : kFloatDTypes) {
        Tensor x = sample({7, 9}, dtype, 21);
        for (UnaryOp op : kFloatUnaryOps) {
            CAPTURE(dtype_name(dtype));
            CAPTURE(op_name(op));
            Tensor in = needs_positive(op) ? positive(x) : x;
            Tensor expected = make_empty(in.sizes(), dtype, kHost);
            kernels::unary(op, expected, in);
            Tensor out = make_empty(in.sizes(), dtype, kGpu);
            kernels::unary(op, out, to_gpu(in));
            CHECK_GPU_CLOSE(out, expected, tol_for(dtype));
        }
    }
}

TEST_CASE("cuda unary: strided input, integer ops and logical_not" * skip_without_gpu()) {
    Tensor x = sample({6, 5}, kFloat32, 22);
    Tensor xt_gpu = make_view(to_gpu(x), {5, 6}, {1, 5}, 0);                  // transposed view
    Tensor expected = make_empty({5, 6}, kFloat32, kHost);
    kernels::unary(UnaryOp::kExp, expected, make_view(x, {5, 6}, {1, 5}, 0));
    Tensor out = make_empty({5, 6}, kFloat32, kGpu);
    kernels::unary(UnaryOp::kExp, out, xt_gpu);
    CHECK_GPU_CLOSE(out, expected, tol_for(kFloat32));

    for (DType dtype : {kInt64, kInt32}) {
        Tensor xi = sample({4, 5}, dtype, 23);
        for (UnaryOp op : {UnaryOp::kNeg, UnaryOp::kAbs, UnaryOp::kSquare, UnaryOp::kSign}) {
            CAPTURE(op_name(op));
            Tensor e = make_empty(xi.sizes(), dtype, kHost);
            kernels::unary(op, e, xi);
            Tensor o = make_empty(xi.sizes(), dtype, kGpu);
            kernels::unary(op, o, to_gpu(xi));
            CHECK_EXACT(o, e);
        }
    }
    for (DType dtype : kAllDTypes) {
        CAPTURE(dtype_name(dtype));
        Tensor xa = sample({3, 4}, dtype, 24);
        Tensor e = make_empty(xa.sizes(), kBool, kHost);
        kernels::unary(UnaryOp::kLogicalNot, e, xa);
        Tensor o = make_empty(xa.sizes(), kBool, kGpu);
        kernels::unary(UnaryOp::kLogicalNot, o, to_gpu(xa));
        CHECK_EXACT(o, e);
    }
}

TEST_CASE("cuda unary: unsupported dtypes throw DTypeError as on the CPU" * skip_without_gpu()) {
    Tensor xi = to_gpu(sample({3}, kInt32, 25));
    Tensor oi = make_empty({3}, kInt32, kGpu);
    CHECK_THROWS_WITH_AS(kernels::unary(UnaryOp::kExp, oi, xi),
                         doctest::Contains("exp: not supported for integer tensor"), DTypeError);
    Tensor xb = to_gpu(sample({3}, kBool, 26));
    CHECK_THROWS_AS(kernels::unary(UnaryOp::kNeg, make_empty({3}, kBool, kGpu), xb), DTypeError);
}

TEST_CASE("cuda binary: arithmetic matches the CPU, with a broadcast operand" * skip_without_gpu()) {
    for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32}) {
        Tensor a = sample({5, 6}, dtype, 31);
        Tensor b_row = sample({6}, dtype, 32);
        if (!is_floating(dtype)) b_row = positive(b_row, 1.0);             // integer division by 0 traps
        for (BinaryOp op : kArithmeticOps) {
            CAPTURE(dtype_name(dtype));
            CAPTURE(op_name(op));
            Tensor lhs = op == BinaryOp::kPow ? positive(a) : a;
            if (op == BinaryOp::kPow && !is_floating(dtype)) lhs = copy_to(sample({5, 6}, kInt64, 33), kHost, dtype);
            Tensor rhs = op == BinaryOp::kDiv && is_floating(dtype) ? positive(b_row) : b_row;
            if (op == BinaryOp::kPow && !is_floating(dtype)) rhs = copy_to(full({6}, 2.0), kHost, dtype);
            Tensor rhs_cpu = make_view(rhs, {5, 6}, {0, 1}, 0);               // (6) broadcast to (5,6)
            Tensor rhs_gpu = make_view(to_gpu(rhs), {5, 6}, {0, 1}, 0);
            Tensor expected = make_empty({5, 6}, dtype, kHost);
            kernels::binary(op, expected, lhs, rhs_cpu);
            Tensor out = make_empty({5, 6}, dtype, kGpu);
            kernels::binary(op, out, to_gpu(lhs), rhs_gpu);
            if (is_floating(dtype)) CHECK_GPU_CLOSE(out, expected, tol_for(dtype));
            else CHECK_EXACT(out, expected);
        }
    }
}

TEST_CASE("cuda binary: comparisons and logic write bool and match the CPU exactly" * skip_without_gpu()) {
    for (DType dtype : kAllDTypes) {
        Tensor a = sample({4, 7}, dtype, 41);
        Tensor b = sample({4, 7}, dtype, 43);
        kernels::copy(make_view(b, {7}, {1}, 0), make_view(a, {7}, {1}, 0));  // row 0: equal values
        for (BinaryOp op : kCompareOps) {
            CAPTURE(dtype_name(dtype));
            CAPTURE(op_name(op));
            Tensor expected = make_empty(a.sizes(), kBool, kHost);
            kernels::binary(op, expected, a, b);
            Tensor out = make_empty(a.sizes(), kBool, kGpu);
            kernels::binary(op, out, to_gpu(a), to_gpu(b));
            CHECK_EXACT(out, expected);
        }
    }
    Tensor bools = to_gpu(sample({3}, kBool, 42));
    CHECK_THROWS_AS(kernels::binary(BinaryOp::kAdd, make_empty({3}, kBool, kGpu), bools, bools), DTypeError);
}

TEST_CASE("cuda add_scaled: out = a + alpha * b in every dtype" * skip_without_gpu()) {
    for (DType dtype : kAllDTypes) {
        CAPTURE(dtype_name(dtype));
        Tensor a = sample({8, 3}, dtype, 51), b = sample({8, 3}, dtype, 52);
        double alpha = is_floating(dtype) ? -0.375 : 2.0;
        Tensor expected = make_empty(a.sizes(), dtype, kHost);
        kernels::add_scaled(expected, a, b, alpha);
        Tensor out = make_empty(a.sizes(), dtype, kGpu);
        kernels::add_scaled(out, to_gpu(a), to_gpu(b), alpha);
        if (is_floating(dtype)) CHECK_GPU_CLOSE(out, expected, tol_for(dtype));
        else CHECK_EXACT(out, expected);
    }
}

TEST_CASE("cuda where: selects exactly, with a broadcast condition and a scalar operand" * skip_without_gpu()) {
    for (DType dtype : kAllDTypes) {
        CAPTURE(dtype_name(dtype));
        Tensor cond = sample({5}, kBool, 61);
        Tensor a = sample({3, 5}, dtype, 62);
        Tensor b = sample({}, dtype, 63);
        Tensor cond_cpu = make_view(cond, {3, 5}, {0, 1}, 0), b_cpu = make_view(b, {3, 5}, {0, 0}, 0);
        Tensor cond_gpu = make_view(to_gpu(cond), {3, 5}, {0, 1}, 0), b_gpu = make_view(to_gpu(b), {3, 5}, {0, 0}, 0);
        Tensor expected = make_empty({3, 5}, dtype, kHost);
        kernels::where(expected, cond_cpu, a, b_cpu);
        Tensor out = make_empty({3, 5}, dtype, kGpu);
        kernels::where(out, cond_gpu, to_gpu(a), b_gpu);
        CHECK_EXACT(out, expected);
    }
}

TEST_CASE("cuda clamp: lower, upper and both bounds; NaN stays NaN; a missing bound keeps +-inf" * skip_without_gpu()) {
    using Bounds = std::pair<std::optional<double>, std::optional<double>>;
    for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32}) {
        Tensor x = sample({4, 6}, dtype, 71);
        if (is_floating(dtype)) {
            kernels::fill(make_view(x, {2}, {7}, 0), NAN);
            kernels::fill(make_view(x, {2}, {11}, 1), INFINITY);
            kernels::fill(make_view(x, {2}, {11}, 3), -INFINITY);
        }
        for (Bounds bounds : {Bounds{-0.5, 0.75}, Bounds{-1.0, std::nullopt}, Bounds{std::nullopt, 2.0}}) {
            CAPTURE(dtype_name(dtype));
            Tensor expected = make_empty(x.sizes(), dtype, kHost);
            kernels::clamp(expected, x, bounds.first, bounds.second);
            Tensor out = make_empty(x.sizes(), dtype, kGpu);
            kernels::clamp(out, to_gpu(x), bounds.first, bounds.second);
            CHECK_EXACT(out, expected);
        }
    }
}

// A bound just above a half-way point of f16/bf16 rounds through float on both sides (c10's
// Half(double) does): 1 + 2^-11 + 2^-40 is 1.0 in f16 that way, 1.0009765625 rounded once.
TEST_CASE("cuda clamp: f16/bf16 bounds round through float, as on the CPU" * skip_without_gpu()) {
    const double above_half_way_f16 = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
    const double above_half_way_bf16 = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
    for (auto [dtype, bound] : {std::pair{kFloat16, above_half_way_f16}, std::pair{kBFloat16, above_half_way_bf16}}) {
        CAPTURE(dtype_name(dtype));
        Tensor x = copy_to(full({8}, 3.0), kHost, dtype);                     // every element above the bound
        Tensor expected = make_empty(x.sizes(), dtype, kHost), out = make_empty(x.sizes(), dtype, kGpu);
        kernels::clamp(expected, x, std::nullopt, bound);
        kernels::clamp(out, to_gpu(x), std::nullopt, bound);
        CHECK(host_values(expected)[0] == 1.0);
        CHECK_EXACT(out, expected);
    }
}

TEST_CASE("cuda activation_backward: dx = dy * f'(x) for every activation" * skip_without_gpu()) {
    for (DType dtype : kFloatDTypes) {
        Tensor x = sample({6, 7}, dtype, 81), dy = sample({6, 7}, dtype, 82);
        for (ActivationGrad op : kActivationGrads) {
            CAPTURE(dtype_name(dtype));
            CAPTURE(op_name(op));
            Tensor expected = make_empty(x.sizes(), dtype, kHost);
            kernels::activation_backward(op, expected, x, dy);
            Tensor dx = make_empty(x.sizes(), dtype, kGpu);
            kernels::activation_backward(op, dx, to_gpu(x), to_gpu(dy));
            CHECK_GPU_CLOSE(dx, expected, tol_for(dtype));
        }
    }
}

// The vectorised path (contiguous, 16-byte aligned) and its scalar tail, against the scalar path: a
// length that is not a multiple of the vector width, and the same data one element off alignment.
TEST_CASE("cuda unary/binary: 16-byte vectorised loads, their tail and misaligned views match the CPU" *
          skip_without_gpu()) {
    for (DType dtype : kFloatDTypes) {
        CAPTURE(dtype_name(dtype));
        Tensor a = sample({1001}, dtype, 41), b = positive(sample({1001}, dtype, 42));
        Tensor a_gpu = to_gpu(a), b_gpu = to_gpu(b);
        for (int64_t offset : {0, 1}) {                                  // 1: not 16-byte aligned
            CAPTURE(offset);
            const int64_t n = 1001 - offset;
            Tensor ha = a.narrow(0, offset, n), hb = b.narrow(0, offset, n);
            Tensor ga = a_gpu.narrow(0, offset, n), gb = b_gpu.narrow(0, offset, n);
            Tensor expected = make_empty({n}, dtype, kHost), out = make_empty({n}, dtype, kGpu);
            kernels::unary(UnaryOp::kTanh, expected, ha);
            kernels::unary(UnaryOp::kTanh, out, ga);
            CHECK_GPU_CLOSE(out, expected, tol_for(dtype));
            kernels::binary(BinaryOp::kDiv, expected, ha, hb);
            kernels::binary(BinaryOp::kDiv, out, ga, gb);
            CHECK_GPU_CLOSE(out, expected, tol_for(dtype));
        }
    }
}
