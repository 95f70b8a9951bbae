// module_test.cpp: nn::Module's tree: registration, dotted names (and tensor names), traversal
// order, tied weights, train/eval, to(dtype), zero_grad, state_dict/load_state_dict errors.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

// A leaf with one parameter and one buffer.
struct Scale : nn::Module {
    Tensor gain, count;
    explicit Scale(int64_t n) : Module("Scale") {
        gain = register_parameter("gain", ones({n}));
        count = register_buffer("count", zeros({1}, TensorOptions(kInt64)));
    }
};

struct Block : nn::Module {
    std::shared_ptr<nn::Linear> fc1, fc2;
    std::shared_ptr<Scale> scale;
    Block() : Module("Block") {
        fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 3));
        scale = register_module("scale", std::make_shared<Scale>(3));
        fc2 = register_module("fc2", std::make_shared<nn::Linear>(3, 2, false));
    }
};

struct Net : nn::Module {
    Tensor temperature;
    std::shared_ptr<Block> block;
    Net() : Module("Net") {
        temperature = register_parameter("temperature", ones({}));
        block = register_module("block", std::make_shared<Block>());
    }
};

}  // namespace

TEST_CASE("named_parameters lists own parameters first, then children depth first, with dotted names") {
    auto net = std::make_shared<Net>();
    std::vector<std::string> expected = {"temperature", "block.fc1.weight", "block.fc1.bias", "block.scale.gain",
                                         "block.fc2.weight"};
    CHECK(net->named_parameters().keys() == expected);
    CHECK(net->parameters().size() == 5);
    CHECK(net->parameters(false).size() == 1);
    CHECK(net->block->named_parameters().keys() ==
          std::vector<std::string>{"fc1.weight", "fc1.bias", "scale.gain", "fc2.weight"});
    CHECK(net->named_buffers().keys() == std::vector<std::string>{"block.scale.count"});
    CHECK(net->children().size() == 1);
    CHECK(net->block->named_children()[1].first == "scale");
    // The tensors themselves carry their full dotted name (the AMP scaler reports it on overflow).
    CHECK(net->block->fc1->weight.name() == "block.fc1.weight");
    CHECK(net->temperature.name() == "temperature");
    CHECK(net->named_parameters().at("block.fc1.weight").is_same(net->block->fc1->weight));
    for (const Tensor& p : net->parameters()) CHECK(p.requires_grad());
    for (const auto& item : net->named_parameters()) CHECK(item.value().name() == item.key());   // libtorch style
    CHECK(net->block->named_children()[1].key() == "scale");
    std::vector<std::string> module_names;
    for (const auto& item : net->named_modules()) {                               // libtorch's item.key()/value()
        module_names.push_back(item.key());
        CHECK(item.value() != nullptr);
    }
    CHECK(module_names == std::vector<std::string>{"", "block", "block.fc1", "block.scale", "block.fc2"});
    for (const auto& [name, module] : net->named_modules()) CHECK(module != nullptr);   // still a pair
}

TEST_CASE("a parameter shared by two modules (tied weights) is listed once but saved under both keys") {
    struct Tied : nn::Module {
        std::shared_ptr<nn::Embedding> wte;
        Tensor head_weight;
        Tied() : Module("Tied") {
            wte = register_module("wte", std::make_shared<nn::Embedding>(5, 3));
            head_weight = register_parameter("head_weight", wte->weight);   // the same tensor
        }
    };
    auto m = std::make_shared<Tied>();
    CHECK(m->named_parameters().keys() == std::vector<std::string>{"head_weight"});
    CHECK(m->state_dict().keys() == std::vector<std::string>{"head_weight", "wte.weight"});
    CHECK(m->wte->weight.name() == "wte.weight");          // a tied tensor keeps its first name
}

TEST_CASE("register_* rejects bad names, duplicates and non-leaf parameters") {
    nn::Module m("Custom");
    m.register_parameter("w", zeros({2}));
    CHECK_THROWS_WITH_AS(m.register_parameter("w", zeros({2})), doctest::Contains("attribute \"w\" already exists"),
                         ValueError);
    CHECK_THROWS_WITH_AS(m.register_buffer("a.b", zeros({2})), doctest::Contains("contain no \".\""), ValueError);
    Tensor leaf = zeros({2}).requires_grad_(true);
    CHECK_THROWS_WITH_AS(m.register_parameter("v", leaf * 2.0), doctest::Contains("non-leaf"), ValueError);
    Tensor frozen = m.register_parameter("frozen", zeros({2}), false);
    CHECK(!frozen.requires_grad());
}

TEST_CASE("train/eval propagate to every submodule") {
    auto net = std::make_shared<Net>();
    CHECK(net->block->fc1->is_training());
    net->eval();
    CHECK(!net->is_training());
    CHECK(!net->block->scale->is_training());
    net->train();
    CHECK(net->block->fc2->is_training());
}

TEST_CASE("to(dtype) converts floating parameters in place: identity, requires_grad, name and grad kept") {
    auto net = std::make_shared<Net>();
    Tensor w = net->block->fc1->weight;
    std::vector<float> before = w.to_vector<float>();
    w.set_grad(ones(w.sizes()));
    net->to(kFloat64);
    CHECK(w.dtype() == kFloat64);                          // the handle held outside sees the new data
    CHECK(net->block->fc1->weight.is_same(w));
    CHECK(w.requires_grad());
    CHECK(w.name() == "block.fc1.weight");
    CHECK(w.grad().dtype() == kFloat64);
    std::vector<double> after = w.to_vector<double>();
    for (size_t i = 0; i < before.size(); ++i) CHECK(after[i] == static_cast<double>(before[i]));
    CHECK(net->block->scale->count.dtype() == kInt64);     // integer buffers are left alone
    CHECK_THROWS_AS(net->to(kInt32), DTypeError);
}

TEST_CASE("zero_grad drops or zeroes every parameter's grad") {
    auto net = std::make_shared<Net>();
    for (const Tensor& p : net->parameters()) p.set_grad(ones(p.sizes()));
    net->zero_grad(false);
    for (const Tensor& p : net->parameters()) CHECK(p.grad().abs().sum().item<float>() == 0.0f);
    net->zero_grad();
    for (const Tensor& p : net->parameters()) CHECK(!p.grad().defined());
}

TEST_CASE("state_dict holds parameters then buffers per module; load_state_dict copies values in place") {
    auto a = std::make_shared<Net>(), b = std::make_shared<Net>();
    nn::StateDict sd = a->state_dict();
    CHECK(sd.keys() == std::vector<std::string>{"temperature", "block.fc1.weight", "block.fc1.bias", "block.scale.gain",
                                                "block.scale.count", "block.fc2.weight"});
    CHECK(!sd.at("block.fc1.weight").requires_grad());
    Tensor w = b->block->fc1->weight;
    b->load_state_dict(sd);
    CHECK(w.is_same(b->block->fc1->weight));
    CHECK(equal(w, a->block->fc1->weight));
    CHECK(w.requires_grad());
}

TEST_CASE("load_state_dict names missing and unexpected keys and shape mismatches with both shapes") {
    auto net = std::make_shared<Net>();
    nn::StateDict sd = net->state_dict();
    nn::StateDict partial;
    for (const auto& [key, t] : sd)
        if (key != "block.fc1.bias") partial.insert(key, t);
    partial.insert("block.extra", zeros({1}));
    CHECK_THROWS_WITH_AS(net->load_state_dict(partial),
                         doctest::Contains("Missing key(s) in state_dict: \"block.fc1.bias\"."), ValueError);
    CHECK_THROWS_WITH_AS(net->load_state_dict(partial),
                         doctest::Contains("Unexpected key(s) in state_dict: \"block.extra\"."), ValueError);
    net->load_state_dict(partial, /*strict=*/false);       // loads what matches

    nn::StateDict wrong;
    for (const auto& [key, t] : sd) wrong.insert(key, key == "block.fc1.weight" ? zeros({4, 3}) : t);
    CHECK_THROWS_WITH_AS(net->load_state_dict(wrong, false),
                         doctest::Contains("size mismatch for block.fc1.weight: copying a param with shape (4,3) from "
                                           "checkpoint, the shape in current model is (3,4)."),
                         ShapeError);
}

TEST_CASE("an optimizer built before to(kFloat64) still holds and updates the converted parameters") {
    auto fc = std::make_shared<nn::Linear>(2, 1);
    optim::SGD opt(fc->parameters(), optim::SGDOptions(0.5));
    fc->to(kFloat64);
    Tensor x = ones({1, 2}, TensorOptions(kFloat64));
    fc->forward(x).sum().backward();                       // d/dw = x = 1, d/db = 1
    std::vector<double> w0 = fc->weight.to_vector<double>();
    double b0 = fc->bias.item<double>();
    opt.step();
    CHECK(fc->weight.to_vector<double>()[0] == doctest::Approx(w0[0] - 0.5));
    CHECK(fc->bias.item<double>() == doctest::Approx(b0 - 0.5));
}

TEST_CASE("module: forward pre- and post-hooks run around forward in registration order; remove() takes one out") {
    auto fc = std::make_shared<nn::Linear>(3, 2);
    nn::Sequential seq;
    seq.push_back(fc);
    std::vector<std::string> log;
    auto pre = fc->register_forward_pre_hook([&](nn::Module& m, const Tensor& in) {
        log.push_back("pre " + m.name());
        return in * 2.0;                                        // replaces the input
    });
    auto post = fc->register_forward_hook([&](nn::Module&, const Tensor& in, const Tensor&) {
        log.push_back("post " + std::to_string(in.to_vector<float>()[0]));   // sees the replaced input
        return Tensor();                                        // keeps the output
    });
    auto outer = seq.register_forward_hook([&](nn::Module& m, const Tensor&, const Tensor& out) {
        log.push_back("outer " + m.name());
        return out + 1.0;
    });
    Tensor x = ones({1, 3});
    Tensor y = seq.forward(x);
    CHECK(log == std::vector<std::string>{"pre Linear", "post 2.000000", "outer Sequential"});
    Tensor want = linear(x * 2.0, fc->weight, fc->bias) + 1.0;
    CHECK(equal(y, want));
    pre.remove();
    outer.remove();
    pre.remove();                                               // twice is harmless
    log.clear();
    fc->forward(x);
    CHECK(log == std::vector<std::string>{"post 1.000000"});
    log.clear();
    post.remove();
    CHECK_FALSE(fc->has_forward_hooks());
    CHECK(equal(seq.forward(x), linear(x, fc->weight, fc->bias)));
    CHECK(log.empty());
}

namespace {
// A module whose forward takes two tensors: a * scale + b.
struct TwoInputs : nn::Module {
    Tensor scale;
    TwoInputs() : Module("TwoInputs") { scale = register_parameter("scale", full({3}, 2.0)); }
    Tensor forward(const Tensor& a, const Tensor& b) const {
        return with_forward_hooks({a, b}, [&](const std::vector<Tensor>& in) { return in[0] * scale + in[1]; });
    }
};
}  // namespace

TEST_CASE("module: hooks of a several-input forward see every input; one-tensor hooks see the first, in order") {
    TwoInputs m;
    std::vector<std::string> log;
    auto all = m.register_forward_pre_hook(nn::ForwardPreHookInputs(
        [&](nn::Module&, const std::vector<Tensor>& in) {
            log.push_back("pre all " + std::to_string(in.size()));
            return std::vector<Tensor>{in[0], in[1] * 10.0};             // replaces the second input
        }));
    auto first = m.register_forward_pre_hook([&](nn::Module&, const Tensor& in) {
        log.push_back("pre first " + std::to_string(in.to_vector<float>()[0]));
        return Tensor();                                                  // keeps the inputs
    });
    auto post = m.register_forward_hook(nn::ForwardHookInputs(
        [&](nn::Module&, const std::vector<Tensor>& in, const Tensor& out) {
            log.push_back("post " + std::to_string(in[1].to_vector<float>()[0]));   // the replaced input
            return out + 1.0;
        }));
    Tensor a = full({3}, 1.0), b = full({3}, 0.5);
    Tensor y = m.forward(a, b);
    CHECK(log == std::vector<std::string>{"pre all 2", "pre first 1.000000", "post 5.000000"});
    CHECK(y.to_vector<float>() == std::vector<float>{8, 8, 8});          // 1 * 2 + 5 + 1
    all.remove();
    post.remove();
    log.clear();
    CHECK(m.forward(a, b).to_vector<float>() == std::vector<float>{2.5, 2.5, 2.5});
    CHECK(log == std::vector<std::string>{"pre first 1.000000"});
    first.remove();
    CHECK_FALSE(m.has_forward_hooks());
    CHECK_THROWS_AS(m.register_forward_hook(nn::ForwardHookInputs()), ValueError);
}

TEST_CASE("module: hooks that return nothing (PyTorch's `return None`) only look") {
    auto fc = std::make_shared<nn::Linear>(3, 2);
    int pre_calls = 0, post_calls = 0, inputs_calls = 0;
    Tensor seen_output;
    fc->register_forward_pre_hook([&](nn::Module&, const Tensor&) { ++pre_calls; });
    fc->register_forward_hook([&](nn::Module&, const Tensor&, const Tensor& out) {
        ++post_calls;
        seen_output = out;
    });
    fc->register_forward_pre_hook([&](nn::Module&, const std::vector<Tensor>& xs) { inputs_calls += int(xs.size()); });
    Tensor x = ones({1, 3});
    Tensor y = fc->forward(x);
    CHECK(pre_calls == 1);
    CHECK(post_calls == 1);
    CHECK(inputs_calls == 1);
    CHECK(equal(y, linear(x, fc->weight, fc->bias)));            // unchanged
    CHECK(seen_output.is_same(y));
}
