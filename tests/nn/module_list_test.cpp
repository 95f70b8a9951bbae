// module_list_test.cpp: nn::ModuleList (names, typed access, iteration, errors) and
// Module::named_modules (order, prefixes, shared submodules listed once).
#include <doctest/doctest.h>

#include "ampgrad/ampgrad.h"

using namespace ampgrad;

namespace {
struct Block : nn::Module {
    std::shared_ptr<nn::Linear> fc;
    std::shared_ptr<nn::LayerNorm> ln;
    Block() : Module("Block") {
        ln = register_module("ln", std::make_shared<nn::LayerNorm>(Shape{4}));
        fc = register_module("fc", std::make_shared<nn::Linear>(4, 4));
    }
    Tensor forward(const Tensor& x) { return x + fc->forward(ln->forward(x)); }
};
struct Net : nn::Module {
    std::shared_ptr<nn::ModuleList> h;
    Net(int n) : Module("Net") {
        h = register_module("h", std::make_shared<nn::ModuleList>());
        for (int i = 0; i < n; ++i) h->push_back(std::make_shared<Block>());
    }
};
}  // namespace

TEST_CASE("ModuleList names its modules by position and gives typed access") {
    auto net = std::make_shared<Net>(3);
    CHECK(net->h->size() == 3);
    auto names = net->named_parameters().keys();
    REQUIRE(names.size() == 12);
    CHECK(names[0] == "h.0.ln.weight");
    CHECK(names[2] == "h.0.fc.weight");
    CHECK(names[11] == "h.2.fc.bias");
    CHECK(net->h->at<Block>(1)->fc->weight.name() == "h.1.fc.weight");

    Tensor x = randn({2, 4});
    Tensor y = x;
    for (size_t i = 0; i < net->h->size(); ++i) y = net->h->at<Block>(i)->forward(y);
    int count = 0;
    for (const auto& m : *net->h) count += m->name() == "Block";
    CHECK(count == 3);
    CHECK(y.sizes() == Shape{2, 4});

    CHECK_THROWS_WITH_AS(net->h->ptr(3), doctest::Contains("index 3 is out of range for 3 modules"), IndexError);
    CHECK_THROWS_AS(net->h->at<nn::Linear>(0), ValueError);
    CHECK_THROWS_AS(net->h->push_back(nullptr), ValueError);
}

TEST_CASE("ModuleList from a list, extend, and state_dict round trip") {
    auto list = std::make_shared<nn::ModuleList>(std::make_shared<nn::Linear>(2, 3), std::make_shared<nn::Linear>(3, 1));
    list->extend({std::make_shared<nn::Linear>(1, 1)});
    CHECK(list->size() == 3);
    CHECK(list->state_dict().keys() ==
          std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "2.weight", "2.bias"});
    auto copy = std::make_shared<nn::ModuleList>(std::make_shared<nn::Linear>(2, 3), std::make_shared<nn::Linear>(3, 1),
                                                 std::make_shared<nn::Linear>(1, 1));
    copy->load_state_dict(list->state_dict());
    CHECK(equal(copy->at<nn::Linear>(1)->weight, list->at<nn::Linear>(1)->weight));
}

TEST_CASE("named_modules: self first, depth first in registration order, shared modules once") {
    auto net = std::make_shared<Net>(2);
    std::vector<std::string> names;
    for (const auto& [name, m] : net->named_modules()) names.push_back(name + ":" + m->name());
    CHECK(names == std::vector<std::string>{":Net", "h:ModuleList", "h.0:Block", "h.0.ln:LayerNorm", "h.0.fc:Linear",
                                            "h.1:Block", "h.1.ln:LayerNorm", "h.1.fc:Linear"});
    auto prefixed = net->named_modules("model", false);
    CHECK(prefixed.front().first == "model.h");
    CHECK(net->modules().size() == 8);

    auto shared = std::make_shared<nn::Linear>(2, 2);
    auto list = std::make_shared<nn::ModuleList>(shared, shared);
    CHECK(list->named_modules().size() == 2);                    // the list and the Linear, once ("0")
    CHECK(list->named_modules()[1].first == "0");

    nn::Linear on_stack(2, 2);
    CHECK_THROWS_AS(on_stack.named_modules(), ValueError);
    CHECK(on_stack.named_modules("", false).empty());
}
