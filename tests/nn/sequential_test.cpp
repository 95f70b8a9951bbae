// sequential_test.cpp: nn::Sequential / nn::Functional, and a small network (Embedding, LayerNorm,
// Sequential of Linear/ReLU/Dropout/Linear, bias-free head) checked against PyTorch end to end:
// state_dict keys in torch's order, eval-mode output, every parameter grad.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

struct Net : nn::Module {
    std::shared_ptr<nn::Embedding> embed;
    std::shared_ptr<nn::LayerNorm> ln;
    std::shared_ptr<nn::Sequential> body;
    std::shared_ptr<nn::Linear> head;
    Net() : Module("Net") {
        embed = register_module("embed", std::make_shared<nn::Embedding>(10, 6));
        ln = register_module("ln", std::make_shared<nn::LayerNorm>(Shape{6}));
        body = register_module("body", std::make_shared<nn::Sequential>(
                                           std::make_shared<nn::Linear>(6, 8),
                                           std::make_shared<nn::Functional>([](const Tensor& x) { return relu(x); }),
                                           std::make_shared<nn::Dropout>(0.1), std::make_shared<nn::Linear>(8, 3)));
        head = register_module("head", std::make_shared<nn::Linear>(3, 2, false));
    }
    Tensor forward(const Tensor& idx) { return head->forward(body->forward(ln->forward(embed->forward(idx)))); }
};

}  // namespace

TEST_CASE("Sequential names its modules by position and chains forward") {
    manual_seed(0);
    nn::Sequential seq;
    seq.push_back(std::make_shared<nn::Linear>(4, 8));
    seq.push_back(std::make_shared<nn::Functional>([](const Tensor& x) { return x * 2.0; }));
    seq.push_back(std::make_shared<nn::Linear>(8, 2));
    CHECK(seq.size() == 3);
    CHECK(seq.named_parameters().keys() == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
    CHECK(seq.at<nn::Linear>(2)->weight.name() == "2.weight");
    CHECK(seq[1]->name() == "Functional");
    Tensor x = randn({5, 4});
    auto l0 = seq.at<nn::Linear>(0), l2 = seq.at<nn::Linear>(2);
    CHECK_CLOSE(seq.forward(x), l2->forward(l0->forward(x) * 2.0), tol_for(kFloat32));
    CHECK_THROWS_AS(seq.ptr(3), IndexError);
    CHECK_THROWS_WITH_AS(seq.at<nn::Linear>(1), doctest::Contains("module 1 is a Functional"), ValueError);
}

TEST_CASE("a small network matches PyTorch: state_dict keys, eval output and parameter grads") {
    Fixture fx = load_fixture("nn_net");
    auto net = std::make_shared<Net>();
    std::vector<std::string> keys = fx.params.at("keys").get<std::vector<std::string>>();
    CHECK(net->state_dict().keys() == keys);
    CHECK(net->named_parameters().keys() == fx.params.at("param_keys").get<std::vector<std::string>>());
    nn::StateDict sd;
    for (const std::string& k : keys) sd.insert(k, fx.at("sd." + k));
    net->load_state_dict(sd);
    net->eval();
    Tensor y = net->forward(fx.at("idx"));
    CHECK_CLOSE(y, fx.at("y"), tol_for(kFloat32));
    y.backward(fx.at("dy"));
    for (const auto& [name, p] : net->named_parameters()) {
        CAPTURE(name);
        CHECK(p.name() == name);
        CHECK_CLOSE(p.grad(), fx.at("grad." + name), tol_for(kFloat32));
    }
}

TEST_CASE("a network trains: SGD with clip_grad_norm_ lowers an MSE loss") {
    manual_seed(1);
    nn::Sequential net(std::make_shared<nn::Linear>(3, 16), std::make_shared<nn::Functional>([](const Tensor& x) {
                           return tanh(x);
                       }),
                       std::make_shared<nn::Linear>(16, 1));
    Tensor x = randn({32, 3});
    Tensor target = sum(x * x, {1}, true);                     // (32,1)
    optim::AdamW opt(net.parameters(), optim::AdamWOptions(0.05));
    double first = 0, last = 0;
    for (int step = 0; step < 60; ++step) {
        opt.zero_grad();
        Tensor loss = F::mse_loss(net.forward(x), target);
        loss.backward();
        nn::utils::clip_grad_norm_(net.parameters(), 1.0);
        opt.step();
        (step == 0 ? first : last) = loss.item<double>();
    }
    CHECK(last < 0.3 * first);
}

TEST_CASE("activation modules (nn::ReLU, GELU, Tanh, Sigmoid, SiLU) are their ops, parameter-free, in a Sequential") {
    manual_seed(2);
    Tensor x = randn({3, 5}, TensorOptions().requires_grad(true));               // (B,5)
    CHECK(equal(nn::ReLU().forward(x), relu(x)));
    CHECK(equal(nn::GELU().forward(x), gelu(x)));
    CHECK(equal(nn::GELU("tanh").forward(x), gelu(x, "tanh")));
    CHECK_FALSE(equal(nn::GELU("tanh").forward(x), gelu(x)));
    CHECK(equal(nn::Tanh().forward(x), tanh(x)));
    CHECK(equal(nn::Sigmoid().forward(x), sigmoid(x)));
    CHECK(equal(nn::SiLU().forward(x), silu(x)));
    CHECK_THROWS_WITH_AS(nn::GELU("fast"), doctest::Contains("approximate must be \"none\" or \"tanh\""), ValueError);
    auto mlp = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(5, 4), std::make_shared<nn::ReLU>(),
                                                std::make_shared<nn::Linear>(4, 2));
    CHECK(mlp->named_parameters().keys() == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
    Tensor y = mlp->forward(x);                                                    // (3,2)
    CHECK(equal(y, mlp->at<nn::Linear>(2)->forward(relu(mlp->at<nn::Linear>(0)->forward(x)))));
    y.sum().backward();
    CHECK(x.grad().sizes() == Shape{3, 5});
}
