// fp8_recipe_test.cpp: the fp8 recipes (amp/fp8_recipe.cpp over autograd/ops/fp8_linear.cpp and
// nn::Linear) step by step against the PyTorch oracle (tools/fixtures/fp8_recipes.py: Transformer
// Engine's DelayedScaling and torchao's current scaling on torch._scaled_mm): a two-layer MLP over
// three SGD steps, each step's scales, amaxes, output and gradients; then the recipe's own duties:
// the autocast mode, first/last layers in bf16, the data-parallel reduction hook, provenance of
// saturated amaxes and collapsed scales, and the checkpoint round trip of the amax histories.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>

#include "ampgrad/ampgrad.h"
#include "models/gpt.hpp"
#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;

namespace {

struct Mlp : nn::Module {
    std::shared_ptr<nn::Linear> fc1, fc2;
    Mlp(int64_t in, int64_t hidden, int64_t out) : Module("Mlp") {
        fc1 = register_module("fc1", std::make_shared<nn::Linear>(in, hidden));
        fc2 = register_module("fc2", std::make_shared<nn::Linear>(hidden, out));
    }
    Tensor forward(const Tensor& x) const { return fc2->forward(relu(fc1->forward(x))); }   // (M,in) -> (M,out) bf16
};

// A recipe that gives every Linear an fp8 state (the MLP has only a first and a last one).
amp::Fp8Recipe every_layer_recipe(int64_t amax_history_len) {
    amp::Fp8Recipe recipe;
    recipe.keep_first_last_in_bf16 = false;
    recipe.amax_history_len = amax_history_len;
    return recipe;
}

// One forward (in the fp8 autocast mode) and backward of the MLP on x (16,16).
void fp8_forward_backward(const Mlp& mlp, const amp::Fp8Recipe& recipe, const Tensor& x) {
    Tensor y;
    {
        amp::AutocastGuard autocast(kCPU, recipe);
        y = mlp.forward(x);
    }
    sum(y.to(kFloat32)).backward();
}

std::shared_ptr<Mlp> mlp_from(const testing::Fixture& fx) {
    auto mlp = std::make_shared<Mlp>(16, 32, 16);
    NoGradGuard no_grad;
    mlp->fc1->weight.copy_(fx.at("w1"));
    mlp->fc1->bias.copy_(fx.at("b1"));
    mlp->fc2->weight.copy_(fx.at("w2"));
    mlp->fc2->bias.copy_(fx.at("b2"));
    return mlp;
}

// (layers,3): each layer's scales (or its history row 0, the amaxes of the running step).
Tensor stacked_scales(const amp::Fp8Training& fp8) {
    tensor_list rows;
    for (const auto& layer : fp8.layers()) rows.push_back(layer.state->scale.clone());
    return stack(rows);
}
Tensor stacked_amaxes(const amp::Fp8Training& fp8) {
    tensor_list rows;
    for (const auto& layer : fp8.layers()) rows.push_back(layer.amax_history.select(0, 0).clone());
    return stack(rows);
}

// Scales and amaxes: f32 values derived from amaxes of bf16 tensors; the two implementations sum
// in different orders, so a bf16 ulp (2^-8 relative) may separate an amax after the first step.
constexpr testing::Tolerance kScaleTol{0.0, 1.0 / 128};
// Outputs and gradients: bf16 results of f32 sums in another order, whose operands may sit one fp8
// code apart after such an ulp: two bf16 ulps of the largest element.
testing::Tolerance output_tol(const Tensor& expected) {
    return {2.0 / 128 * max(abs(expected.to(kFloat64))).item<double>(), 1.0 / 128};
}

// |a - b| / |b| over all elements (L2): the GPT block's comparison (see its test case).
double relative_l2(const Tensor& a, const Tensor& b) {
    const Tensor ad = a.to(kFloat64), bd = b.to(kFloat64);
    return norm(ad - bd).item<double>() / norm(bd).item<double>();
}

void step_by_step(const std::string& fixture, amp::Fp8Recipe recipe) {
    CAPTURE(fixture);
    const testing::Fixture fx = testing::load_fixture(fixture);
    auto mlp = mlp_from(fx);
    recipe.amax_history_len = static_cast<int64_t>(fx.param("amax_history_len"));
    recipe.keep_first_last_in_bf16 = false;
    amp::Fp8Training fp8(*mlp, recipe);
    REQUIRE(fp8.layer_names() == std::vector<std::string>{"fc1", "fc2"});
    const double lr = fx.param("lr");
    for (int t = 0; t < static_cast<int>(fx.param("steps")); ++t) {
        CAPTURE(t);
        const std::string s = std::to_string(t);
        CHECK_CLOSE(stacked_scales(fp8), fx.at("scale" + s), kScaleTol);         // the scales this step uses
        Tensor x = fx.at("x").clone().requires_grad_(true);                       // (16,16) f32
        Tensor y;
        {
            amp::AutocastGuard autocast(kCPU, fp8.recipe());
            y = mlp->forward(x);                                                  // (16,16) bf16
        }
        REQUIRE(y.dtype() == kBFloat16);
        sum(y.to(kFloat32) * fx.at("r" + s)).backward();
        CHECK_CLOSE(stacked_amaxes(fp8), fx.at("amax" + s), kScaleTol);
        CHECK_CLOSE(y, fx.at("y" + s), output_tol(fx.at("y" + s)));
        CHECK_CLOSE(x.grad(), fx.at("dx" + s), output_tol(fx.at("dx" + s)));
        CHECK_CLOSE(mlp->fc1->weight.grad(), fx.at("dw1_" + s), output_tol(fx.at("dw1_" + s)));
        CHECK_CLOSE(mlp->fc1->bias.grad(), fx.at("db1_" + s), output_tol(fx.at("db1_" + s)));
        CHECK_CLOSE(mlp->fc2->weight.grad(), fx.at("dw2_" + s), output_tol(fx.at("dw2_" + s)));
        CHECK_CLOSE(mlp->fc2->bias.grad(), fx.at("db2_" + s), output_tol(fx.at("db2_" + s)));
        {
            NoGradGuard no_grad;
            for (Tensor p : mlp->parameters()) p.copy_(p - p.grad() * lr);
        }
        mlp->zero_grad();
        fp8.update();
    }
    CHECK_CLOSE(stacked_scales(fp8), fx.at("final_scale"), kScaleTol);
    tensor_list histories;
    for (const auto& layer : fp8.layers()) histories.push_back(layer.amax_history);
    CHECK_CLOSE(stack(histories), fx.at("final_history"), kScaleTol);
}

}  // namespace

TEST_CASE("fp8 recipes match the PyTorch oracle step by step (two-layer MLP, three steps)") {
    SUBCASE("delayed scaling, amax_compute_algo max, margin 0") {
        step_by_step("fp8_recipe_mlp_delayed_max", amp::Fp8Recipe{Fp8Scaling::kDelayed, 0, 4, amp::Fp8AmaxAlgo::kMax});
    }
    SUBCASE("delayed scaling, most_recent, margin 1") {
        step_by_step("fp8_recipe_mlp_delayed_most_recent",
                     amp::Fp8Recipe{Fp8Scaling::kDelayed, 1, 4, amp::Fp8AmaxAlgo::kMostRecent});
    }
    SUBCASE("current scaling, tensorwise") { step_by_step("fp8_recipe_mlp_tensorwise", amp::Fp8Recipe{Fp8Scaling::kTensorwise}); }
    SUBCASE("current scaling, rowwise") { step_by_step("fp8_recipe_mlp_rowwise", amp::Fp8Recipe{Fp8Scaling::kRowwise}); }
}

// Step t of the GPT block starts from the oracle's weights, amax histories and scales at step t: one
// fp8 code that rounds the other way in step 0 would otherwise move the weights apart, and later steps
// would compare two different problems.
void start_step_from_oracle(models::Block& block, amp::Fp8Training& fp8, const testing::Fixture& fx, int t) {
    const std::string s = std::to_string(t);
    NoGradGuard no_grad;
    for (const auto& [name, p] : block.named_parameters()) Tensor(p).copy_(fx.at("p" + s + "." + name));
    nn::NamedTensors state;
    const std::vector<std::string> names = fp8.layer_names();
    for (size_t i = 0; i < names.size(); ++i) {
        state.insert("fp8." + names[i] + ".amax_history", fx.at("history" + s).select(0, static_cast<int64_t>(i)).clone());
        state.insert("fp8." + names[i] + ".scale", fx.at("scale" + s).select(0, static_cast<int64_t>(i)).clone());
    }
    fp8.load_state_tensors(state);
}

TEST_CASE("fp8 recipes match the PyTorch oracle step by step (one GPT block, three steps)") {
    for (auto [fixture, scaling] : {std::pair{"fp8_recipe_gpt_block_delayed", Fp8Scaling::kDelayed},
                                    std::pair{"fp8_recipe_gpt_block_tensorwise", Fp8Scaling::kTensorwise}}) {
        CAPTURE(std::string(fixture));
        const testing::Fixture fx = testing::load_fixture(fixture);
        models::GPTConfig cfg;
        cfg.n_embd = 16, cfg.n_head = 2, cfg.block_size = 16, cfg.n_layer = 1, cfg.vocab_size = 64;
        auto block = std::make_shared<models::Block>(cfg);
        amp::Fp8Recipe recipe = every_layer_recipe(static_cast<int64_t>(fx.param("amax_history_len")));
        recipe.scaling = scaling;
        amp::Fp8Training fp8(*block, recipe);
        REQUIRE(fp8.layer_names() == std::vector<std::string>{"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"});
        for (int t = 0; t < static_cast<int>(fx.param("steps")); ++t) {
            CAPTURE(t);
            const std::string s = std::to_string(t);
            start_step_from_oracle(*block, fp8, fx, t);
            Tensor x = fx.at("x").reshape({1, 16, 16}).clone().requires_grad_(true);   // (B,T,C) f32
            Tensor y;
            {
                amp::AutocastGuard autocast(kCPU, fp8.recipe());
                y = block->forward(x);                                                // (B,T,C) f32: the residual stream
            }
            sum(y * fx.at("r" + s).reshape({1, 16, 16})).backward();
            // The same state in, so the amaxes agree to f32 rounding and the output to the MLP's bit-level
            // tolerance; dx within 1% (L2): attention's f32 sums run in another order, so a few E5M2 codes
            // of grad_output (two mantissa bits: 12-25% apart) round the other way. c_attn's wgrad sums
            // 16 such products per element, so those flips weigh more there: 2.5% (seen: 1.2-1.7% at step 2).
            CHECK(relative_l2(stacked_amaxes(fp8), fx.at("amax" + s)) < 1e-6);
            CHECK_CLOSE(y.reshape({16, 16}), fx.at("y" + s), output_tol(fx.at("y" + s)));
            CHECK(relative_l2(x.grad().reshape({16, 16}), fx.at("dx" + s)) < 0.01);
            CHECK(relative_l2(block->attn->c_attn->weight.grad(), fx.at("dw_c_attn" + s)) < 0.025);
            {
                NoGradGuard no_grad;
                for (Tensor p : block->parameters()) p.copy_(p - p.grad() * fx.param("lr"));
            }
            block->zero_grad();
            fp8.update();
            if (t + 1 < static_cast<int>(fx.param("steps")))   // the update from the same amaxes gives the oracle's next scales
                CHECK(relative_l2(stacked_scales(fp8), fx.at("scale" + std::to_string(t + 1))) < 1e-6);
        }
        CHECK(relative_l2(stacked_scales(fp8), fx.at("final_scale")) < 1e-6);
    }
}

TEST_CASE("fp8 autocast: the flag nests, and a plain AutocastGuard inside turns it off") {
    CHECK_FALSE(fp8_autocast::enabled());
    {
        amp::AutocastGuard fp8(kCPU, amp::Fp8Recipe{});
        CHECK(fp8_autocast::enabled());
        CHECK(amp::get_autocast_dtype(kCPU) == kBFloat16);
        {
            amp::AutocastGuard plain(kCPU, kBFloat16);
            CHECK_FALSE(fp8_autocast::enabled());
        }
        CHECK(fp8_autocast::enabled());
    }
    CHECK_FALSE(fp8_autocast::enabled());
    amp::Fp8Recipe bad;
    bad.margin = -1;
    CHECK_THROWS_WITH_AS(amp::AutocastGuard(kCPU, bad), doctest::Contains("margin must be >= 0"), ValueError);
    CHECK_THROWS_WITH_AS(amp::parse_fp8_scaling("blockwise"), doctest::Contains("expected delayed, tensorwise or rowwise"),
                         ValueError);
}

TEST_CASE("fp8 recipe: the first and last Linear stay in bf16; sizes fp8 cannot take fall back to bf16") {
    nn::Sequential net;
    net.push_back(std::make_shared<nn::Linear>(16, 32));
    net.push_back(std::make_shared<nn::Linear>(32, 32));
    net.push_back(std::make_shared<nn::Linear>(32, 16));
    amp::Fp8Training fp8(net, amp::Fp8Recipe{});
    CHECK(fp8.layer_names() == std::vector<std::string>{"1"});
    auto middle = std::dynamic_pointer_cast<nn::Linear>(net.named_modules("", false)[1].second);
    REQUIRE(middle);
    REQUIRE(middle->fp8);
    Tensor x = randn({8, 32});                                                     // M = 8: not a multiple of 16
    Tensor fp8_y, bf16_y;
    {
        amp::AutocastGuard autocast(kCPU, fp8.recipe());
        fp8_y = middle->forward(x);
    }
    {
        amp::AutocastGuard autocast(kCPU, kBFloat16);
        bf16_y = middle->forward(x);
    }
    CHECK(testing::same_bytes(fp8_y, bf16_y));
    CHECK(fp8.layers()[0].amax_history.abs().sum().item<double>() == 0.0);         // it never ran in fp8
}

TEST_CASE("fp8 recipe: the reduction hook sees every layer's amaxes, and the scales follow its result") {
    Mlp mlp(16, 32, 16);
    const amp::Fp8Recipe recipe = every_layer_recipe(2);
    amp::Fp8Training fp8(mlp, recipe);
    fp8_forward_backward(mlp, recipe, randn({16, 16}));
    Shape seen;
    fp8.update([&](Tensor& amax) {                                                 // as all_reduce MAX would
        seen = amax.sizes();
        amax.fill_(4.0);
    });
    CHECK(seen == Shape{2, 3});
    const std::vector<float> scale = fp8.layers()[1].state->scale.to_vector<float>();
    CHECK(scale == std::vector<float>{112.0f, 112.0f, 14336.0f});                  // 448/4, 448/4, 57344/4
    // The history rolled: the reduced amax sits in the last row, row 0 is clear for the next step.
    CHECK(fp8.layers()[1].amax_history.to_vector<float>() == std::vector<float>{0, 0, 0, 4, 4, 4});
}

TEST_CASE("fp8 recipe: saturated amaxes and collapsed scales are reported by layer and role") {
    Mlp mlp(16, 32, 16);
    const amp::Fp8Recipe recipe = every_layer_recipe(1024);
    amp::Fp8Training fp8(mlp, recipe);
    fp8.layers()[0].state->scale.copy_(tensor(std::vector<float>{1000.0f, 1.0f, 1.0f}, {3}));   // too large for |x| ~ 3
    Tensor x = randn({16, 16}) * 3.0;
    fp8_forward_backward(mlp, recipe, x);
    fp8.update();
    std::vector<amp::Fp8Event> events = fp8.events();
    REQUIRE(events.size() == 1);
    CHECK(events[0].layer == "fc1");
    CHECK(events[0].role == Fp8Role::kInput);
    CHECK(events[0].saturated);
    CHECK(events[0].str().find("fp8: amax saturated in fc1 input") == 0);

    // A non-finite input: the scale collapses, the previous scale is kept.
    const Tensor before = fp8.layers()[0].state->scale.clone();
    Tensor bad = x.clone();
    bad.fill_(INFINITY);
    {
        amp::AutocastGuard autocast(kCPU, recipe);
        mlp.forward(bad);
    }
    fp8.update();
    events = fp8.events();
    REQUIRE(!events.empty());
    CHECK(events[0].layer == "fc1");
    CHECK(events[0].collapsed);
    CHECK(events[0].str().find("scale collapsed") != std::string::npos);
    CHECK(fp8.layers()[0].state->scale.to_vector<float>()[0] == before.to_vector<float>()[0]);
}

TEST_CASE("fp8 recipe: the amax histories and scales round-trip through state tensors") {
    Mlp mlp(16, 32, 16);
    amp::Fp8Recipe recipe = every_layer_recipe(3);
    amp::Fp8Training fp8(mlp, recipe);
    for (int step = 0; step < 2; ++step) {
        fp8_forward_backward(mlp, recipe, randn({16, 16}));
        fp8.update();
    }
    const nn::NamedTensors saved = fp8.state_tensors();
    CHECK(saved.keys() == std::vector<std::string>{"fp8.fc1.amax_history", "fp8.fc1.scale", "fp8.fc2.amax_history",
                                                   "fp8.fc2.scale"});
    Mlp other(16, 32, 16);
    amp::Fp8Training restored(other, recipe);
    restored.load_state_tensors(saved);
    for (size_t i = 0; i < 2; ++i) {
        CHECK(testing::same_bytes(restored.layers()[i].amax_history, fp8.layers()[i].amax_history));
        CHECK(testing::same_bytes(restored.layers()[i].state->scale, fp8.layers()[i].state->scale));
    }
    CHECK(restored.layers()[0].state->amax.data_ptr<float>() == restored.layers()[0].amax_history.data_ptr<float>());
    recipe.amax_history_len = 5;
    Mlp third(16, 32, 16);
    amp::Fp8Training longer(third, recipe);
    CHECK_THROWS_WITH_AS(longer.load_state_tensors(saved), doctest::Contains("amax_history_len differs"), ValueError);
    CHECK_THROWS_WITH_AS(longer.load_state_tensors(nn::NamedTensors{}), doctest::Contains("no entry \"fp8.fc1.amax_history\""),
                         ValueError);
    const nlohmann::json metrics = fp8.amax_json(2);
    CHECK(metrics.at("fc1").at("input").size() == 2);
    CHECK(metrics.at("fc2").at("scale").size() == 3);
}
