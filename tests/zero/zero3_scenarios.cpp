// tests/zero/zero3_scenarios.cpp: the stage-3 scenarios "zero3_tied" and "zero3_multi_input" (run by
// dist_worker through tests/zero/zero_scenarios.cpp).
// zero3_tied: parameters that no forward hook of theirs covers. The model has
// a parameter on the root module (used in the root's own forward, which has no hooks) and a weight
// tied between `in` (a Linear) and `back`, a module that registers the same tensor and uses it
// directly, as GPT's TiedLinear does. Both must stay whole ("persistent") from the first step on;
// every other parameter is released after each step; training matches single-process AdamW with
// clip_grad_norm_ over 4 steps (7-element buckets).
// zero3_multi_input: an attention block whose forward takes (x, cos, sin) and wraps it in the
// several-inputs with_forward_hooks, with a parameter of its own (gain): stage 3 gathers and releases
// it through the block's hooks, and training matches the unpartitioned run.
#include "autograd/engine.hpp"
#include "autograd/ops/ops.hpp"
#include "core/philox.hpp"
#include "nn/linear.hpp"
#include "nn/rotary_embedding.hpp"
#include "nn/utils/clip_grad.hpp"
#include "optim/adamw.hpp"
#include "tests/zero/expect.hpp"
#include "zero/engine.hpp"

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

using namespace ampgrad;
namespace dist = ampgrad::dist;

namespace {


struct TiedNet : nn::Module {
    std::shared_ptr<nn::Linear> in, mid, head;
    std::shared_ptr<nn::Module> back;   // registers in->weight (8,4)
    Tensor offset;                      // (8), the root's own parameter

    TiedNet() : Module("TiedNet") {
        TensorOptions o = TensorOptions().dtype(kFloat64);
        in = register_module("in", std::make_shared<nn::Linear>(4, 8, true, o));
        mid = register_module("mid", std::make_shared<nn::Linear>(8, 8, true, o));
        back = register_module("back", std::make_shared<nn::Module>("TiedBack"));
        back->register_parameter("weight", in->weight);
        head = register_module("head", std::make_shared<nn::Linear>(4, 3, true, o));
        offset = register_parameter("offset", randn({8}, kFloat64) * 0.1);
    }
    // (N,4) -> (N,3)
    Tensor forward(const Tensor& x) const {
        Tensor h = tanh(in->forward(x) + offset);   // (N,8)
        h = tanh(mid->forward(h));                  // (N,8)
        h = tanh(matmul(h, in->weight));            // (N,8) @ (8,4): the tied weight, no hooks
        return head->forward(h);
    }
};

Tensor mse3(const Tensor& out, const Tensor& target) {
    Tensor d = out - target;
    return (d * d).mean();
}

// Every parameter of `got` (gathered whole) against `want`'s, to 1e-10 relative.
void compare_params(const zero::ZeroEngine& engine, const nn::Module& got, const nn::Module& want, int step) {
    zero::GatheredParameters whole(engine.stage3());
    auto g = got.named_parameters(), w = want.named_parameters();
    for (const auto& [name, p] : w) {
        std::vector<double> a = g.at(name).to_vector<double>(), b = p.to_vector<double>();
        for (size_t i = 0; i < a.size(); ++i)
            if (!(std::abs(a[i] - b[i]) <= 1e-10 * (1 + std::abs(b[i])))) {
                EXPECT(false, "step %d: %s[%zu] is %.17g, single-process training has %.17g", step, name.c_str(), i,
                        a[i], b[i]);
                return;
            }
    }
}

// A one-head causal attention block with rotary q/k: forward(x, cos, sin), x (N,T,C), cos/sin (T,C).
struct RopeBlock : nn::Module {
    std::shared_ptr<nn::Linear> q, k, v, o;
    Tensor gain;                                       // (C): the block's own parameter
    int64_t inputs_seen = 0;                           // what the last multi-input pre-hook saw

    explicit RopeBlock(int64_t C) : Module("RopeBlock") {
        TensorOptions f64 = TensorOptions().dtype(kFloat64);
        q = register_module("q", std::make_shared<nn::Linear>(C, C, false, f64));
        k = register_module("k", std::make_shared<nn::Linear>(C, C, false, f64));
        v = register_module("v", std::make_shared<nn::Linear>(C, C, false, f64));
        o = register_module("o", std::make_shared<nn::Linear>(C, C, true, f64));
        gain = register_parameter("gain", ones({C}, kFloat64) + randn({C}, kFloat64) * 0.1);
    }
    Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin) const {
        return with_forward_hooks({x, cos, sin}, [&](const std::vector<Tensor>& in) {
            Tensor qr = F::apply_rotary_emb(q->forward(in[0]), in[1], in[2]);                 // (N,T,C)
            Tensor kr = F::apply_rotary_emb(k->forward(in[0]), in[1], in[2]);                 // (N,T,C)
            Tensor att = F::scaled_dot_product_attention(qr, kr, v->forward(in[0]), true);    // (N,T,C)
            return o->forward(att) * gain;                                                    // (N,T,C)
        });
    }
};

struct RopeNet : nn::Module {
    std::shared_ptr<nn::Linear> in, head;
    std::shared_ptr<RopeBlock> block;
    RopeNet() : Module("RopeNet") {
        TensorOptions f64 = TensorOptions().dtype(kFloat64);
        in = register_module("in", std::make_shared<nn::Linear>(4, 8, true, f64));
        block = register_module("block", std::make_shared<RopeBlock>(8));
        head = register_module("head", std::make_shared<nn::Linear>(8, 3, true, f64));
    }
    // (N,T,4) -> (N,T,3)
    Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin) const {
        Tensor h = in->forward(x);                                                            // (N,T,8)
        return head->forward(tanh(h + block->forward(h, cos, sin)));
    }
};

// (T,8) cos and sin tables of rotary angles t * theta^(-j/4), j = 0..3, each repeated (half-split)
std::pair<Tensor, Tensor> rope_tables(int64_t T) {
    Tensor t = arange(0.0, static_cast<double>(T), 1.0, TensorOptions(kFloat64)).view({T, 1});          // (T,1)
    Tensor inv = pow(100.0, arange(0.0, 4.0, 1.0, TensorOptions(kFloat64)) * -0.25).view({1, 4});      // (1,4)
    Tensor angle = t * inv;                                                                             // (T,4)
    angle = cat({angle, angle}, 1);                                                                     // (T,8)
    return {cos(angle), sin(angle)};
}

}  // namespace

int run_zero3_multi_input() {
    const int R = dist::rank(), W = dist::world_size();
    zero::ZeroConfig config;
    config.stage = 3;
    config.reduce_bucket_size = 7;
    config.gradient_clipping = 0.5;
    set_rng_state({3000, 0});
    auto ref = std::make_shared<RopeNet>();
    set_rng_state({3000 + 13 * static_cast<uint64_t>(R), 0});
    auto net = std::make_shared<RopeNet>();
    auto pre = net->block->register_forward_pre_hook(nn::ForwardPreHookInputs(
        [](nn::Module& m, const std::vector<Tensor>& in) {
            static_cast<RopeBlock&>(m).inputs_seen = static_cast<int64_t>(in.size());
            return std::vector<Tensor>();
        }));
    auto make = [](std::vector<Tensor> p) { return std::make_unique<optim::AdamW>(p, optim::AdamWOptions(0.05).weight_decay(0.1)); };
    zero::ZeroEngine engine(net, config, make);
    optim::AdamW ref_opt(ref->parameters(), optim::AdamWOptions(0.05).weight_decay(0.1));
    compare_params(engine, *net, *ref, -1);
    constexpr int64_t b = 2, T = 5;
    auto [cos_t, sin_t] = rope_tables(T);
    for (int step = 0; step < 4; ++step) {
        set_rng_state({static_cast<uint64_t>(80 + step), 0});
        Tensor x = randn({W * b, T, 4}, kFloat64), y = randn({W * b, T, 3}, kFloat64);
        mse3(ref->forward(x, cos_t, sin_t), y).backward();
        nn::utils::clip_grad_norm_(ref->parameters(), 0.5);
        ref_opt.step();
        ref_opt.zero_grad();
        engine.backward(mse3(net->forward(x.narrow(0, R * b, b), cos_t, sin_t), y.narrow(0, R * b, b)));
        engine.step();
        zero::Stage3& s3 = *engine.stage3();
        EXPECT(net->block->inputs_seen == 3, "the block's pre-hook saw %lld inputs, not 3",
                static_cast<long long>(net->block->inputs_seen));
        EXPECT(!s3.is_persistent(net->block->gain) && net->block->gain.numel() == 0,
                "step %d: the block's own parameter is %s, not released through its hooks", step,
                net->block->gain.shape_str().c_str());
        compare_params(engine, *net, *ref, step);
    }
    return ampgrad::testing::scenario_failures() ? 1 : 0;
}

int run_zero3_tied() {
    const int R = dist::rank(), W = dist::world_size();
    zero::ZeroConfig config;
    config.stage = 3;
    config.reduce_bucket_size = 7;
    config.gradient_clipping = 0.5;
    set_rng_state({2000, 0});
    auto ref = std::make_shared<TiedNet>();
    set_rng_state({2000 + 11 * static_cast<uint64_t>(R), 0});
    auto net = std::make_shared<TiedNet>();
    auto make = [](std::vector<Tensor> p) { return std::make_unique<optim::AdamW>(p, optim::AdamWOptions(0.05).weight_decay(0.1)); };
    zero::ZeroEngine engine(net, config, make);
    optim::AdamW ref_opt(ref->parameters(), optim::AdamWOptions(0.05).weight_decay(0.1));
    compare_params(engine, *net, *ref, -1);
    constexpr int64_t b = 4;
    for (int step = 0; step < 4; ++step) {
        set_rng_state({static_cast<uint64_t>(70 + step), 0});
        Tensor x = randn({W * b, 4}, kFloat64), y = randn({W * b, 3}, kFloat64);
        mse3(ref->forward(x), y).backward();
        nn::utils::clip_grad_norm_(ref->parameters(), 0.5);
        ref_opt.step();
        ref_opt.zero_grad();
        engine.backward(mse3(net->forward(x.narrow(0, R * b, b)), y.narrow(0, R * b, b)));
        engine.step();
        zero::Stage3& s3 = *engine.stage3();
        EXPECT(s3.is_persistent(net->in->weight) && net->in->weight.sizes() == Shape({8, 4}),
                "the tied weight is not persistent and whole: %s", net->in->weight.shape_str().c_str());
        EXPECT(s3.is_persistent(net->offset) && net->offset.numel() == 8, "the root's parameter is not whole");
        for (const Tensor& p : {net->in->bias, net->mid->weight, net->mid->bias, net->head->weight, net->head->bias})
            EXPECT(!s3.is_persistent(p) && p.numel() == 0, "step %d: %s is %s, not released", step, p.name().c_str(),
                    p.shape_str().c_str());
        compare_params(engine, *net, *ref, step);
    }
    zero::ModelStateBytes bytes = engine.model_state_bytes();
    std::printf("EPILOGUES %lld\nBYTES %lld %lld %lld\n", static_cast<long long>(engine.epilogues_run()),
                static_cast<long long>(bytes.params), static_cast<long long>(bytes.grads),
                static_cast<long long>(bytes.optimizer));
    return ampgrad::testing::scenario_failures() ? 1 : 0;
}
