// scaled_mm_test.cpp: F::scaled_mm (autograd/ops/scaled_mm.cpp, cpu/scaled_mm.cpp) against a float64
// reference built from the decoded fp8 values: exact when the f32 accumulation is, else within the
// f32 accumulation bound; tensorwise and rowwise scales, bias, amax; and torch._scaled_mm's rules as
// typed errors naming the op and the facts.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "ampgrad/ampgrad.h"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;

namespace {

// A random (R,C) fp8 matrix, row-major, values of about `magnitude`.
Tensor random_fp8(int64_t rows, int64_t cols, DType dtype, double magnitude) {
    return (randn({rows, cols}) * magnitude).to(dtype);
}
// Small integers in [-4, 4]: every product and every partial sum of K <= 2^18 of them is exact in f32.
Tensor integer_fp8(int64_t rows, int64_t cols, DType dtype) {
    return (floor(rand({rows, cols}) * 9.0) - 4.0).to(dtype);
}

struct Reference {
    std::vector<double> value;      // (M,N): (a @ b) * scale_a * scale_b + bias, in f64
    std::vector<double> bound;      // (M,N): the f32 accumulation error bound of each element
};

// a (M,K), b (K,N) decoded exactly to f64; scales one element or (M,1) / (1,N).
Reference reference(const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b, const Tensor& bias) {
    const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
    const std::vector<double> av = a.to(kFloat64).contiguous().to_vector<double>();      // (M,K)
    const std::vector<double> bv = b.to(kFloat64).contiguous().to_vector<double>();      // (K,N)
    const std::vector<double> sa = scale_a.to(kFloat64).to_vector<double>();
    const std::vector<double> sb = scale_b.to(kFloat64).to_vector<double>();
    const std::vector<double> biasv = bias.defined() ? bias.to(kFloat64).to_vector<double>() : std::vector<double>(N, 0.0);
    Reference r{std::vector<double>(M * N), std::vector<double>(M * N)};
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            double acc = 0.0, magnitude = 0.0;
            for (int64_t k = 0; k < K; ++k) {
                acc += av[i * K + k] * bv[k * N + j];
                magnitude += std::fabs(av[i * K + k] * bv[k * N + j]);
            }
            const double scale = sa[sa.size() == 1 ? 0 : i] * sb[sb.size() == 1 ? 0 : j];
            r.value[i * N + j] = acc * scale + biasv[j];
            // K roundings of the f32 sum, the scale product, the scaling and the bias add
            r.bound[i * N + j] = (K + 3) * std::ldexp(1.0, -24) * (magnitude * std::fabs(scale) + std::fabs(biasv[j]));
        }
    return r;
}

// out within the reference's bound plus half an ulp of out's dtype.
void check_against(const Tensor& out, const Reference& r) {
    const std::vector<double> got = out.to(kFloat64).to_vector<double>();
    const double half_ulp = dtype_eps(out.dtype()) / 2;
    int wrong = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double tol = r.bound[i] * (1 + half_ulp) + half_ulp * std::fabs(r.value[i]) + 1e-30;
        if (std::fabs(got[i] - r.value[i]) > tol && ++wrong <= 5)
            FAIL_CHECK("element " << i << ": got " << got[i] << ", reference " << r.value[i] << " (tolerance " << tol << ")");
    }
    CHECK(wrong == 0);
}

Tensor scalar_f32(float v) { return full({}, v, TensorOptions(kFloat32)); }

// An fp8 tensor from a fixture's codes (i64), same shape.
Tensor fp8_from_codes(const Tensor& codes, DType dtype) {
    Tensor t = make_empty(codes.sizes(), dtype, Device(kCPU));
    const std::vector<int64_t> values = codes.to_vector<int64_t>();
    for (size_t i = 0; i < values.size(); ++i) static_cast<uint8_t*>(t.raw_data())[i] = static_cast<uint8_t>(values[i]);
    return t;
}
DType fp8_dtype_named(const std::string& name) { return name == "float8_e5m2" ? kFloat8_e5m2 : kFloat8_e4m3fn; }

}  // namespace

TEST_CASE("scaled_mm: tensorwise scales are exact when the f32 sums are, amax included") {
    manual_seed(38);
    const int64_t M = 5, K = 48, N = 32;
    for (auto [da, db] : {std::pair{kFloat8_e4m3fn, kFloat8_e4m3fn}, {kFloat8_e4m3fn, kFloat8_e5m2},
                          {kFloat8_e5m2, kFloat8_e4m3fn}}) {
        CAPTURE(dtype_name(da));
        CAPTURE(dtype_name(db));
        Tensor a = integer_fp8(M, K, da);                                               // (M,K) row-major
        Tensor b = integer_fp8(N, K, db).t();                                           // (K,N) column-major
        Tensor sa = scalar_f32(0.25f), sb = scalar_f32(8.0f);                           // powers of two: exact
        Tensor amax = zeros({});
        Tensor out = F::scaled_mm(a, b, sa, sb, kFloat32, {}, amax);                    // (M,N) f32
        CHECK(out.sizes() == Shape{M, N});
        CHECK(out.dtype() == kFloat32);
        const Reference r = reference(a, b, sa, sb, {});
        const std::vector<float> got = out.to_vector<float>();
        double max_abs = 0.0;
        int wrong = 0;
        for (size_t i = 0; i < got.size(); ++i) {
            wrong += static_cast<double>(got[i]) != r.value[i];
            max_abs = std::max(max_abs, std::fabs(r.value[i]));
        }
        CHECK(wrong == 0);
        CHECK(max_abs > 0.0);
        CHECK(amax.item<double>() == max_abs);
    }
}

TEST_CASE("scaled_mm: random values within the f32 accumulation bound, f32/f16/bf16 out, bias") {
    manual_seed(7);
    const int64_t M = 7, K = 64, N = 48;
    Tensor a = random_fp8(M, K, kFloat8_e4m3fn, 40.0);                                   // (M,K)
    Tensor b = random_fp8(N, K, kFloat8_e5m2, 0.01).t();                                 // (K,N)
    Tensor sa = scalar_f32(1.0f / 3), sb = scalar_f32(5.5f);
    check_against(F::scaled_mm(a, b, sa, sb, kFloat32), reference(a, b, sa, sb, {}));
    for (DType out_dtype : {kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(out_dtype));
        Tensor bias = randn({N}).to(out_dtype);                                          // (N)
        Tensor amax = zeros({1});
        Tensor out = F::scaled_mm(a, b, sa, sb, out_dtype, bias, amax);
        CHECK(out.dtype() == out_dtype);
        const Reference r = reference(a, b, sa, sb, bias);
        check_against(out, r);
        double stored_max = 0.0;                                                         // of out as stored
        for (float v : out.to(kFloat32).to_vector<float>()) stored_max = std::max(stored_max, static_cast<double>(std::fabs(v)));
        CHECK(amax.item<double>() == stored_max);
    }
}

TEST_CASE("scaled_mm: K = 0 gives the bias in every row; amax is NaN when the output holds a NaN") {
    Tensor a = random_fp8(3, 0, kFloat8_e4m3fn, 1.0), b = random_fp8(16, 0, kFloat8_e4m3fn, 1.0).t();   // (3,0), (0,16)
    Tensor bias = arange(16).to(kBFloat16) - 8.0, amax = zeros({});
    Tensor out = F::scaled_mm(a, b, scalar_f32(1.0f), scalar_f32(1.0f), kBFloat16, bias, amax);
    CHECK(equal(out, bias.unsqueeze(0).expand({3, 16})));
    CHECK(amax.item<float>() == 8.0f);
    std::vector<float> with_nan(16, 1.0f);
    with_nan[5] = std::nanf("");
    Tensor nan_bias = tensor(with_nan).to(kBFloat16);
    F::scaled_mm(a, b, scalar_f32(1.0f), scalar_f32(1.0f), kBFloat16, nan_bias, amax);
    CHECK(std::isnan(amax.item<float>()));
}

TEST_CASE("scaled_mm: rowwise scales (M,1) and (1,N) scale each row of a and column of b") {
    manual_seed(3);
    const int64_t M = 6, K = 32, N = 16;
    Tensor a = random_fp8(M, K, kFloat8_e4m3fn, 100.0);
    Tensor b = random_fp8(N, K, kFloat8_e4m3fn, 100.0).t();
    Tensor sa = rand({M, 1}) + 0.5, sb = rand({1, N}) * 0.01;                             // (M,1), (1,N) f32
    Tensor bias = randn({N}).to(kBFloat16);
    Tensor out = F::scaled_mm(a, b, sa, sb, kBFloat16, bias);                             // (M,N) bf16
    check_against(out, reference(a, b, sa, sb, bias));
    // the same product with scale_a folded into a's rows differs: the scales really are per row
    Tensor plain = F::scaled_mm(a, b, scalar_f32(1.0f), scalar_f32(1.0f), kFloat32);
    CHECK(std::fabs(out.to(kFloat32).to_vector<float>()[0] - plain.to_vector<float>()[0]) > 0.0f);
    CHECK_FALSE(out.requires_grad());                                                     // forward only
}

TEST_CASE("scaled_mm: agrees with PyTorch's torch._scaled_mm (CPU) within the f32 accumulation bound") {
    for (const char* name : {"scaled_mm_tensorwise_f32", "scaled_mm_tensorwise_bf16_bias", "scaled_mm_rowwise_bf16"}) {
        CAPTURE(name);
        ampgrad::testing::Fixture fx = ampgrad::testing::load_fixture(name);
        Tensor a = fp8_from_codes(fx.at("a_codes"), fp8_dtype_named(fx.params.at("a_dtype").get<std::string>()));      // (M,K)
        Tensor b = fp8_from_codes(fx.at("b_codes"), fp8_dtype_named(fx.params.at("b_dtype").get<std::string>())).t();  // (K,N)
        const Tensor& expected = fx.at("out");
        Tensor bias = fx.tensors.count("bias") ? fx.at("bias") : Tensor();
        Tensor out = F::scaled_mm(a, b, fx.at("scale_a"), fx.at("scale_b"), expected.dtype(), bias);
        CHECK(out.dtype() == expected.dtype());
        const Reference r = reference(a, b, fx.at("scale_a"), fx.at("scale_b"), bias);
        check_against(out, r);                                               // ours against the f64 reference
        // PyTorch's sum order may differ: each side is within the bound and one rounding of out's dtype
        const std::vector<double> got = out.to(kFloat64).to_vector<double>();
        const std::vector<double> want = expected.to(kFloat64).to_vector<double>();
        int wrong = 0;
        for (size_t i = 0; i < got.size(); ++i)
            wrong += std::fabs(got[i] - want[i]) > 2 * r.bound[i] + dtype_eps(out.dtype()) * std::fabs(r.value[i]) + 1e-30;
        CHECK(wrong == 0);
    }
}

TEST_CASE("scaled_mm: torch._scaled_mm's rules, as typed errors naming the op and the facts") {
    manual_seed(1);
    const int64_t M = 4, K = 32, N = 16;
    Tensor a = random_fp8(M, K, kFloat8_e4m3fn, 1.0), b = random_fp8(N, K, kFloat8_e4m3fn, 1.0).t();
    Tensor one = scalar_f32(1.0f);
    CHECK_NOTHROW(F::scaled_mm(a, b, one, one, kBFloat16));
    CHECK_THROWS_WITH_AS(F::scaled_mm(a.to(kFloat32), b, one, one), doctest::Contains("scaled_mm: a and b must be float8"),
                         DTypeError);
    Tensor a5 = random_fp8(M, K, kFloat8_e5m2, 1.0), b5 = random_fp8(N, K, kFloat8_e5m2, 1.0).t();
    CHECK_THROWS_WITH_AS(F::scaled_mm(a5, b5, one, one), doctest::Contains("two float8_e5m2 matrices"), DTypeError);
    CHECK_THROWS_WITH_AS(F::scaled_mm(a, b.contiguous(), one, one), doctest::Contains("b must be column-major"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(F::scaled_mm(random_fp8(K, M, kFloat8_e4m3fn, 1.0).t(), b, one, one),
                         doctest::Contains("a must be row-major"), ShapeError);
    CHECK_THROWS_WITH_AS(F::scaled_mm(random_fp8(M, 24, kFloat8_e4m3fn, 1.0), random_fp8(N, 24, kFloat8_e4m3fn, 1.0).t(),
                                      one, one), doctest::Contains("multiples of 16"), ShapeError);
    CHECK_THROWS_WITH_AS(F::scaled_mm(a, random_fp8(N, 2 * K, kFloat8_e4m3fn, 1.0).t(), one, one),
                         doctest::Contains("cannot be multiplied: a is (4,32)"), ShapeError);
    CHECK_THROWS_WITH_AS(F::scaled_mm(a.reshape({1, M, K}), b, one, one), doctest::Contains("must be 2-D"), ShapeError);
    CHECK_THROWS_WITH_AS(F::scaled_mm(a, b, ones({M, 1}), one, kBFloat16),
                         doctest::Contains("invalid scaling configuration"), ShapeError);
    CHECK_THROWS_WITH_AS(F::scaled_mm(a, b, ones({M, 2}), ones({1, N}), kBFloat16), doctest::Contains("scale_a must be (4,1)"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(F::scaled_mm(a, b, one.to(kFloat64), one), doctest::Contains("must be f32"), DTypeError);
    CHECK_THROWS_WITH_AS(F::scaled_mm(a, b, ones({M, 1}), ones({1, N}), kFloat32),
                         doctest::Contains("rowwise scaling supports only a bf16 output"), DTypeError);
    CHECK_THROWS_WITH_AS(F::scaled_mm(a, random_fp8(N, K, kFloat8_e5m2, 1.0).t(), ones({M, 1}), ones({1, N}), kBFloat16),
                         doctest::Contains("rowwise scaling needs float8_e4m3fn"), DTypeError);
    CHECK_THROWS_WITH_AS(F::scaled_mm(a, b, one, one, kFloat32, zeros({N})), doctest::Contains("bias is not supported"),
                         ValueError);
    CHECK_THROWS_WITH_AS(F::scaled_mm(a, b, one, one, kBFloat16, zeros({N}, TensorOptions(kFloat16))),
                         doctest::Contains("bias must have out_dtype bf16"), DTypeError);
    CHECK_THROWS_WITH_AS(F::scaled_mm(a, b, one, one, kBFloat16, zeros({N + 1}, TensorOptions(kBFloat16))),
                         doctest::Contains("bias must be (16)"), ShapeError);
    CHECK_THROWS_WITH_AS(F::scaled_mm(a, b, one, one, kFloat8_e4m3fn), doctest::Contains("out_dtype must be f32, f16 or bf16"),
                         DTypeError);
    CHECK_THROWS_WITH_AS(F::scaled_mm(a, b, one, one, kBFloat16, {}, zeros({}, TensorOptions(kFloat16))),
                         doctest::Contains("amax_out must be a one-element f32"), DTypeError);
}
