// nf4_test.cpp: quantize_nf4 / dequantize_nf4 and F::nf4_linear (autograd/ops/nf4.cpp, cpu/nf4.cpp)
// against bitsandbytes 0.50.2 on the CPU (tests/fixtures/nf4/*.json from tools/fixtures/nf4.py):
// codes, packed bytes, absmax and dequantised weights exactly; the double quantisation; the round
// trip's error bound; nf4_linear's float64 gradcheck, reference values (bnb.matmul_4bit), bf16/f16
// tolerances, its memory (no N x K tensor kept for the backward) and its typed errors.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ampgrad/ampgrad.h"
#include "kernels/nf4.hpp"
#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using ampgrad::testing::load_fixture;
using ampgrad::testing::tol_for;

namespace {

std::vector<int64_t> as_ints(const Tensor& t) { return t.to(kInt64).contiguous().to_vector<int64_t>(); }
std::vector<float> as_floats(const Tensor& t) { return t.to(kFloat32).contiguous().to_vector<float>(); }

// One code per element from the packed bytes (the first element in the high nibble).
std::vector<int64_t> unpacked_codes(const NF4Tensor& w) {
    const std::vector<int64_t> bytes = as_ints(w.codes);
    std::vector<int64_t> codes(static_cast<size_t>(w.numel()));
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = nf4::unpack(static_cast<uint8_t>(bytes[i / 2]), int64_t(i));
    return codes;
}

void check_matches_bitsandbytes(const std::string& name, DType input_dtype) {
    CAPTURE(name);
    const testing::Fixture fx = load_fixture("nf4/" + name);
    const NF4Tensor w4 = quantize_nf4(fx.at("w").to(input_dtype));
    CHECK(w4.shape == fx.at("w").sizes());
    CHECK(w4.dtype == input_dtype);
    CHECK(as_ints(w4.codes) == as_ints(fx.at("packed")));
    CHECK(unpacked_codes(w4) == as_ints(fx.at("codes")));
    CHECK(as_floats(w4.absmax) == as_floats(fx.at("absmax")));
    using DTypeTag = std::pair<DType, const char*>;
    for (const auto& [dtype, tag] : {DTypeTag{kFloat32, "f32"}, DTypeTag{kBFloat16, "bf16"}, DTypeTag{kFloat16, "f16"}}) {
        CAPTURE(tag);
        Tensor deq = dequantize_nf4(w4, dtype);
        CHECK(deq.dtype() == dtype);
        CHECK(deq.sizes() == w4.shape);
        CHECK(as_floats(deq) == as_floats(fx.at(std::string("dequantized_") + tag)));   // bit for bit
    }
}

}  // namespace

TEST_CASE("quantize_nf4 gives bitsandbytes' codes, packing, absmax and dequantised weights") {
    check_matches_bitsandbytes("quant_normal", kFloat32);
    check_matches_bitsandbytes("quant_special", kFloat32);   // ties, zeros, a zero block, 3e38, subnormals
    check_matches_bitsandbytes("quant_tail", kFloat32);      // 150 elements: a 22-element tail block
    check_matches_bitsandbytes("quant_bf16", kBFloat16);
}

TEST_CASE("quantize_nf4 with double quantisation: the absmax as 8-bit codes of the dynamic map") {
    const testing::Fixture fx = load_fixture("nf4/double_quant");
    const NF4Tensor w4 = quantize_nf4(fx.at("w"), NF4Options{.block_size = 64, .double_quant = true});
    REQUIRE(w4.double_quantized());
    CHECK(!w4.absmax.defined());
    CHECK(unpacked_codes(w4) == as_ints(fx.at("codes")));                     // the 4-bit codes are unchanged
    CHECK(std::fabs(w4.absmax_offset.item<float>() - fx.param("offset")) <= 2e-7 * fx.param("offset"));
    // The offset is a mean of f32 values, summed in another order than PyTorch's: it may differ by an
    // ulp, and so may what depends on it (bounds: a few ulps of the offset, about 1.3 here).
    CHECK_CLOSE(w4.absmax2, fx.at("absmax2"), (testing::Tolerance{0.0, 1e-6}));
    CHECK(as_ints(w4.absmax_codes) == as_ints(fx.at("absmax_codes")));        // bitsandbytes' default backend
    // bitsandbytes' CPU library searches its map differently (docs/nf4.md): it agrees on all 100 of
    // these codes, but not on every input, so one difference is allowed.
    const std::vector<int64_t> ours = as_ints(w4.absmax_codes), library = as_ints(fx.at("absmax_codes_cpu_library"));
    int64_t same = 0;
    for (size_t i = 0; i < ours.size(); ++i) same += ours[i] == library[i];
    CHECK(same >= 99);
    CHECK_CLOSE(nf4_absmax(w4), fx.at("absmax_dequantized"), (testing::Tolerance{1e-6, 0.0}));
    Tensor deq = dequantize_nf4(w4, kFloat32);                                 // level * those scales
    // against the CPU library's weights: equal but in the one block whose 8-bit scale code differs
    const std::vector<float> ours_w = as_floats(deq), library_w = as_floats(fx.at("dequantized_f32_cpu_library"));
    int64_t far = 0;
    for (size_t i = 0; i < ours_w.size(); ++i) far += std::fabs(ours_w[i] - library_w[i]) > 1e-6;
    CHECK(far <= 64);
}

TEST_CASE("NF4 round trip: each value within half the widest level gap times its block's absmax") {
    manual_seed(37);
    Tensor w = randn({33, 96}) * 0.02;                      // 3168 elements: 49 full blocks and a tail of 32
    for (bool double_quant : {false, true}) {
        CAPTURE(double_quant);
        const NF4Tensor w4 = quantize_nf4(w, NF4Options{.block_size = 64, .double_quant = double_quant});
        const std::vector<float> x = as_floats(w), y = as_floats(dequantize_nf4(w4, kFloat32));
        const std::vector<float> absmax = as_floats(quantize_nf4(w).absmax);
        const std::vector<float> stored = as_floats(nf4_absmax(w4));                      // 8-bit with double quant
        double widest_half_gap = 0.0;                                                    // levels 0 and 1: 0.152
        for (int code = 0; code < 15; ++code)
            widest_half_gap = std::max(widest_half_gap, (nf4::level(code + 1) - nf4::level(code)) / 2.0);
        double worst = 0.0;
        for (size_t i = 0; i < x.size(); ++i) {
            // |x - level * stored| <= |x - level * absmax| + |level| |absmax - stored|, with |level| <= 1
            const double bound = widest_half_gap * absmax[i / 64] + std::fabs(absmax[i / 64] - stored[i / 64]) + 1e-7;
            worst = std::max(worst, std::fabs(x[i] - y[i]) / bound);
        }
        CHECK(worst <= 1.0);
    }
}

TEST_CASE("NF4 memory: 0.5625 bytes per parameter at block 64, about 0.516 with double quantisation") {
    Tensor w = randn({256, 512});
    const NF4Tensor plain = quantize_nf4(w);
    CHECK(plain.nbytes() == 256 * 512 / 2 + 256 * 512 / 64 * 4);
    CHECK(static_cast<double>(plain.nbytes()) / w.numel() == doctest::Approx(0.5625));
    const NF4Tensor nested = quantize_nf4(w, NF4Options{.double_quant = true});
    CHECK(nested.nbytes() == 256 * 512 / 2 + 256 * 512 / 64 + 8 * 4 + 4);
    CHECK(static_cast<double>(nested.nbytes()) / w.numel() == doctest::Approx(0.5 + 1.0 / 64 + 36.0 / 131072));
}

TEST_CASE("nf4_linear matches bitsandbytes' matmul_4bit forward and backward") {
    const testing::Fixture fx = load_fixture("nf4/linear");
    const NF4Tensor w4 = quantize_nf4(fx.at("w"));
    Tensor x = fx.at("x").detach().requires_grad_(true);
    Tensor b = fx.at("b").detach().requires_grad_(true);
    Tensor y = F::nf4_linear(x, w4, b);
    CHECK_CLOSE(y, fx.at("y"), tol_for(kFloat32, 128));
    y.backward(fx.at("dy"));
    CHECK_CLOSE(x.grad(), fx.at("dx"), tol_for(kFloat32, 64));
    CHECK_CLOSE(b.grad(), fx.at("db"), tol_for(kFloat32, 16));
}

TEST_CASE("nf4_linear passes float64 gradcheck and gradgradcheck in x and the bias") {
    manual_seed(41);
    const NF4Tensor w4 = quantize_nf4(randn({6, 64}) * 0.1);
    Tensor x = randn({2, 3, 64}, TensorOptions(kFloat64)).requires_grad_(true);
    Tensor b = randn({6}, TensorOptions(kFloat64)).requires_grad_(true);
    auto f = [&](const tensor_list& in) { return tensor_list{F::nf4_linear(in[0], w4, in[1])}; };
    CHECK(autograd::gradcheck(f, {x, b}));
    CHECK(autograd::gradgradcheck(f, {x, b}));
}

TEST_CASE("nf4_linear in bf16 and f16 is the f32 result within the dtype's rounding") {
    manual_seed(43);
    const NF4Tensor w4 = quantize_nf4(randn({32, 128}) * 0.05);
    Tensor x32 = randn({4, 128});
    Tensor b32 = randn({32}) * 0.1;
    Tensor dy32 = randn({4, 32});
    for (DType dtype : {kBFloat16, kFloat16}) {
        CAPTURE(dtype_name(dtype));
        // the f32 reference from the same low-precision inputs and the weight as dequantised to dtype
        Tensor x = x32.to(dtype).detach().requires_grad_(true), b = b32.to(dtype).detach().requires_grad_(true);
        Tensor y = F::nf4_linear(x, w4, b);
        CHECK(y.dtype() == dtype);
        Tensor w_ref = dequantize_nf4(w4, dtype).to(kFloat32);
        Tensor y_ref = linear(x.detach().to(kFloat32), w_ref, b.detach().to(kFloat32));
        CHECK_CLOSE(y.to(kFloat32), y_ref, tol_for(dtype, 16));
        y.backward(dy32.to(dtype));
        CHECK(x.grad().dtype() == dtype);
        CHECK_CLOSE(x.grad().to(kFloat32), matmul(dy32.to(dtype).to(kFloat32), w_ref), tol_for(dtype, 16));
        CHECK_CLOSE(b.grad().to(kFloat32), sum(dy32.to(dtype).to(kFloat32), {0}), tol_for(dtype, 8));
    }
}

TEST_CASE("nf4_linear keeps no N x K weight between its forward and its backward") {
    const NF4Tensor w4 = quantize_nf4(randn({512, 512}));
    Tensor x = randn({2, 512}).requires_grad_(true);
    const int64_t before = memory_allocated(Device(kCPU));
    Tensor y = F::nf4_linear(x, w4);
    const int64_t held = memory_allocated(Device(kCPU)) - before;                // y and the graph
    CHECK(held < 512 * 512 * 4 / 16);                                            // far below a dense f32 weight
    y.sum().backward();
    CHECK(x.grad().sizes() == Shape{2, 512});
}

TEST_CASE("NF4 misuse is a typed error naming the op") {
    CHECK_THROWS_AS(quantize_nf4(ones({4, 4}, TensorOptions(kInt64))), DTypeError);
    CHECK_THROWS_AS(quantize_nf4(ones({4, 4}), NF4Options{.block_size = 63}), ValueError);
    const NF4Tensor w4 = quantize_nf4(randn({8, 64}));
    CHECK_THROWS_AS(dequantize_nf4(w4, kInt32), DTypeError);
    CHECK_THROWS_AS(F::nf4_linear(randn({2, 32}), w4), ShapeError);
    CHECK_THROWS_AS(F::nf4_linear(randn({2, 64}), w4, randn({7})), ShapeError);
    CHECK_THROWS_AS(F::nf4_linear(randn({2, 64}), NF4Tensor{}), ValueError);
    try {
        F::nf4_linear(randn({2, 32}), w4);
    } catch (const ShapeError& e) {
        CHECK(std::string(e.what()).find("nf4_linear") != std::string::npos);
        CHECK(std::string(e.what()).find("(8,64)") != std::string::npos);
    }
}
