// linear_nf4_test.cpp: nn::Linear with an NF4 base weight (nn/linear.cpp's QLoRA part):
// quantize_nf4 takes `weight` out of the parameters, forward goes through F::nf4_linear and equals
// linear() with the dequantised weight, the bias still trains, dequantize() brings a dense weight back.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("Linear::quantize_nf4: the weight leaves the parameters and the forward dequantises it") {
    manual_seed(7);
    nn::Linear fc(64, 12);
    Tensor dense = fc.weight.detach().clone();
    CHECK(!fc.is_nf4());
    fc.quantize_nf4();
    REQUIRE(fc.is_nf4());
    CHECK(!fc.weight.defined());
    CHECK(fc.named_parameters().size() == 1);
    CHECK(fc.named_parameters().keys().front() == "bias");
    CHECK(!fc.state_dict().contains("weight"));
    CHECK(fc.nf4_weight().shape == Shape{12, 64});
    CHECK(fc.nf4_weight().block_size == 64);

    Tensor x = randn({3, 5, 64});
    Tensor y = fc.forward(x);                                                          // (3,5,12)
    CHECK(y.sizes() == Shape{3, 5, 12});
    CHECK_CLOSE(y, linear(x, dequantize_nf4(fc.nf4_weight(), kFloat32), fc.bias), tol_for(kFloat32, 64));
    CHECK_CLOSE(y, linear(x, dense, fc.bias), (Tolerance{0.2, 0.0}));                    // 4 bits: close, not equal
    y.sum().backward();
    CHECK(fc.bias.grad().defined());
    CHECK_CLOSE(fc.bias.grad(), full({12}, 15.0), tol_for(kFloat32));
    CHECK_THROWS_AS(fc.quantize_nf4(), ValueError);
}

TEST_CASE("Linear::dequantize gives back a dense weight parameter") {
    nn::Linear fc(64, 4, /*bias=*/false);
    fc.quantize_nf4(NF4Options{.block_size = 32, .double_quant = true});
    CHECK(fc.nf4_weight().double_quantized());
    CHECK(fc.parameters().empty());
    Tensor expected = dequantize_nf4(fc.nf4_weight(), kFloat32);
    fc.dequantize();
    CHECK(!fc.is_nf4());
    REQUIRE(fc.weight.defined());
    CHECK(fc.weight.requires_grad());
    CHECK(fc.named_parameters().keys().front() == "weight");
    CHECK_CLOSE(fc.weight, expected, (Tolerance{0.0, 0.0}));
    CHECK_THROWS_AS(fc.dequantize(), ValueError);
    CHECK_THROWS_AS(fc.nf4_weight(), ValueError);
}
