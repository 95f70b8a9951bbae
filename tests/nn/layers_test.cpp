// layers_test.cpp: nn::Embedding, nn::LayerNorm and nn::Dropout as modules: PyTorch values and
// grads, default parameters, train/eval behaviour, bad arguments. (The functional ops they call
// have their own tests in tests/autograd/ops/.)
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("Embedding matches PyTorch forward and weight grad; default init is N(0,1)") {
    Fixture fx = load_fixture("nn_embedding");
    nn::Embedding wte(7, 4);
    nn::StateDict sd;
    sd.insert("weight", fx.at("weight"));
    wte.load_state_dict(sd);
    Tensor y = wte.forward(fx.at("x"));
    CHECK_CLOSE(y, fx.at("y"), tol_for(kFloat32));
    y.backward(fx.at("dy"));
    CHECK_CLOSE(wte.weight.grad(), fx.at("dweight"), tol_for(kFloat32));

    manual_seed(1);
    nn::Embedding big(100, 50);
    std::vector<float> w = big.weight.to_vector<float>();
    double mean = 0, var = 0;
    for (float v : w) mean += v / static_cast<double>(w.size());
    for (float v : w) var += (v - mean) * (v - mean) / static_cast<double>(w.size());
    CHECK(std::abs(mean) < 0.05);
    CHECK(var == doctest::Approx(1.0).epsilon(0.05));
}

TEST_CASE("Embedding with padding_idx: that row starts at zero and gets no gradient, as PyTorch") {
    Fixture fx = load_fixture("nn_embedding_padding");
    const auto pad = static_cast<int64_t>(fx.param("padding_idx"));      // -2: row 5 of 7
    nn::Embedding wte(7, 4, {}, pad);
    REQUIRE(wte.padding_idx.has_value());
    CHECK(*wte.padding_idx == 5);
    CHECK(wte.weight.narrow(0, 5, 1).to_vector<float>() == std::vector<float>(4, 0.0f));   // init zeroes it
    CHECK(wte.weight.narrow(0, 4, 1).abs().sum().item<double>() > 0.0);
    nn::StateDict sd;
    sd.insert("weight", fx.at("weight"));
    wte.load_state_dict(sd);
    Tensor y = wte.forward(fx.at("x"));                                   // (2,3) -> (2,3,4); x holds 5 three times
    CHECK_CLOSE(y, fx.at("y"), tol_for(kFloat32));
    y.backward(fx.at("dy"));
    CHECK_CLOSE(wte.weight.grad(), fx.at("dweight"), tol_for(kFloat32));
    CHECK(wte.weight.grad().narrow(0, 5, 1).abs().sum().item<double>() == 0.0);
    CHECK(wte.weight.grad().narrow(0, 3, 1).abs().sum().item<double>() > 0.0);
    CHECK_THROWS_AS(nn::Embedding(7, 4, {}, 7), ValueError);
    CHECK_THROWS_AS(nn::Embedding(7, 4, {}, -8), ValueError);
}

TEST_CASE("LayerNorm matches PyTorch with eps and affine parameters; defaults are ones and zeros") {
    Fixture fx = load_fixture("nn_layer_norm");
    nn::LayerNorm ln(Shape{6}, fx.param("eps"));
    CHECK(ln.weight.to_vector<float>() == std::vector<float>(6, 1.0f));
    CHECK(ln.bias.to_vector<float>() == std::vector<float>(6, 0.0f));
    nn::StateDict sd;
    sd.insert("weight", fx.at("weight"));
    sd.insert("bias", fx.at("bias"));
    ln.load_state_dict(sd);
    Tensor x = fx.at("x").clone().requires_grad_(true);
    Tensor y = ln.forward(x);
    CHECK_CLOSE(y, fx.at("y"), tol_for(kFloat32));
    y.backward(fx.at("dy"));
    CHECK_CLOSE(x.grad(), fx.at("dx"), tol_for(kFloat32));
    CHECK_CLOSE(ln.weight.grad(), fx.at("dweight"), tol_for(kFloat32));
    CHECK_CLOSE(ln.bias.grad(), fx.at("dbias"), tol_for(kFloat32));

    nn::LayerNorm plain(Shape{6}, 1e-5, /*elementwise_affine=*/false);
    CHECK(plain.parameters().empty());
    CHECK_THROWS_AS(nn::LayerNorm(Shape{}), ValueError);
}

TEST_CASE("Dropout is the identity in eval mode and zeroes/scales in training") {
    nn::Dropout drop(0.5);
    Tensor x = ones({1000});
    drop.eval();
    CHECK(drop.forward(x).is_same(x));
    drop.train();
    manual_seed(3);
    std::vector<float> y = drop.forward(x).to_vector<float>();
    int kept = 0;
    for (float v : y) {
        CHECK((v == 0.0f || v == 2.0f));
        kept += v != 0.0f;
    }
    CHECK(kept > 400);
    CHECK(kept < 600);
    CHECK_THROWS_WITH_AS(nn::Dropout(1.5), doctest::Contains("dropout probability has to be between 0 and 1, but got 1.5"),
                         ValueError);
}
