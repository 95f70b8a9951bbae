// rms_norm_test.cpp: nn::RMSNorm as a module: its weight (ones, trained, in named_parameters), its
// forward against F::rms_norm (whose own checks are tests/autograd/ops/rms_norm_test.cpp), no weight
// without elementwise_affine, and bad construction.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("nn::RMSNorm holds a weight of ones and applies F::rms_norm") {
    nn::RMSNorm norm(Shape{8}, 1e-6);
    CHECK(norm.weight.sizes() == Shape{8});
    CHECK(norm.weight.requires_grad());
    CHECK(norm.weight.to_vector<float>() == std::vector<float>(8, 1.0f));
    CHECK(norm.named_parameters().size() == 1);
    manual_seed(31);
    Tensor x = randn({2, 3, 8});
    CHECK_CLOSE(norm.forward(x), F::rms_norm(x, {8}, {}, 1e-6), tol_for(kFloat32));
    nn::RMSNorm plain(Shape{8}, std::nullopt, false);
    CHECK_FALSE(plain.weight.defined());
    CHECK(plain.named_parameters().empty());
    CHECK_THROWS_AS(nn::RMSNorm(Shape{}), ValueError);
}

TEST_CASE("nn::RMSNorm under SkipInitGuard leaves its weight unfilled, as LayerNorm") {
    nn::RMSNorm eager(Shape{4});
    CHECK(eager.weight._version() > 0);                        // filled with ones
    nn::init::SkipInitGuard skip;
    nn::RMSNorm deferred(Shape{4});
    CHECK(deferred.weight._version() == 0);                    // written by a later load_state_dict
}
