// tests/zero/zero_scenarios.cpp: ZeRO engine scenarios run by dist_worker (one rank each;
// tests/zero/zero_test.cpp starts them). "zero<S>_<variant>", S = 0, 1, 2 or 3. Each rank trains a small
// f64 MLP with the engine on its shard of every global batch and, alone, a reference copy with
// AdamW and clip_grad_norm_ on the whole batch; after every step both must hold the same
// parameters. Variants:
//   plain            reduce_bucket_size 7 elements (a bucket per parameter piece or two)
//   accum            gradient_accumulation_steps 2 (engine.backward divides by 2)
//   fabb             accumulation in the order F_A, F_B, B_A, B_B: both gradients count
//   ckpt, ckpt_reentrant   `mid` used inside a checkpoint and again after it
//   frozen, frozen_reentrant   the same with mid.weight frozen (requires_grad false, in both
//                    models): under stage 3 it is partitioned too, and a probe on `mid` checks
//                    that the recompute inside backward sees it whole (never shape [0])
//   outgrad          a plain out.backward(grad) on the (N,3) output, no engine.backward
//   fwdbwd           a backward called inside a forward: ignored by the hooks, no epilogue
//   fp16, fp16acc    float16 model (fp16acc: data_types.grad_accum_dtype "fp16", 2-byte
//                    gradient partitions): one clean step; then an inf placed in the LAST rank's
//                    gradient partition: every rank skips, parameters bit-identical, scale halved; and
//                    an unscaled loss.backward() is the clear error
//   tied             stage 3 only, tests/zero/zero3_scenarios.cpp: a root parameter and a tied weight
// Stage 3 also checks after every step that each parameter is released (shape [0]), and that the
// gathers after the first step were prefetched by the recorded order.
// Every backward must run the epilogue exactly once. Prints "EPILOGUES n", "BYTES p g o". The
// worker's argument may list several, comma-separated: they run in turn in one process group.
#include "autograd/checkpoint.hpp"
#include "autograd/engine.hpp"
#include "autograd/ops/ops.hpp"
#include "core/philox.hpp"
#include "nn/linear.hpp"
#include "nn/utils/clip_grad.hpp"
#include "optim/adamw.hpp"
#include "optim/lr_scheduler.hpp"
#include "tests/zero/expect.hpp"
#include "zero/engine.hpp"
#include "zero/stage3.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <memory>
#include <string>

using namespace ampgrad;
namespace dist = ampgrad::dist;

namespace {

constexpr int64_t kLocalBatch = 4;

struct Net : nn::Module {
    std::shared_ptr<nn::Linear> in, mid, head;
    int checkpoint_mode = 0;   // 0 none, 1 non-reentrant, 2 reentrant
    bool backward_in_forward = false;

    explicit Net(DType dt) : Module("Net") {
        TensorOptions o = TensorOptions().dtype(dt);
        in = register_module("in", std::make_shared<nn::Linear>(4, 8, true, o));
        mid = register_module("mid", std::make_shared<nn::Linear>(8, 8, true, o));
        head = register_module("head", std::make_shared<nn::Linear>(8, 3, true, o));
    }
    // (N,4) -> (N,3)
    Tensor forward(const Tensor& x) const {
        if (backward_in_forward) {   // a tiled loss would do this: its own backward, inside forward
            autograd::ForwardRegionGuard region;
            (in->weight * 2.0).sum().backward();
        }
        Tensor h = tanh(in->forward(x));   // (N,8)
        auto block = [this](const tensor_list& t) { return tensor_list{tanh(mid->forward(t[0]))}; };
        if (checkpoint_mode == 0) h = block({h})[0];
        else h = checkpoint(block, {h}, CheckpointOptions{.use_reentrant = checkpoint_mode == 2})[0];
        h = tanh(mid->forward(h));
        return head->forward(h);
    }
};

Tensor mse(const Tensor& out, const Tensor& target) {
    Tensor d = out - target;
    return (d * d).mean();
}

void compare(const zero::ZeroEngine& engine, const Net& got_net, const Net& ref, const std::string& when, double tol) {
    zero::GatheredParameters whole(engine.stage3());   // stage 3: gathered for the comparison
    auto got = got_net.named_parameters(), want = ref.named_parameters();
    for (const auto& [name, p] : want) {
        std::vector<double> a = got.at(name).to(kFloat64).to_vector<double>(), b = p.to(kFloat64).to_vector<double>();
        for (size_t i = 0; i < a.size(); ++i) {
            if (!(std::abs(a[i] - b[i]) <= tol * (1 + std::abs(b[i])))) {
                std::printf("FAIL %s: %s[%zu] is %.17g, single-process training has %.17g\n", when.c_str(), name.c_str(),
                            i, a[i], b[i]);
                ++ampgrad::testing::scenario_failures();
                return;
            }
        }
    }
}

std::unique_ptr<optim::Optimizer> adamw(std::vector<Tensor> params) {
    return std::make_unique<optim::AdamW>(params, optim::AdamWOptions(0.05).weight_decay(0.1));
}

void print_bytes(const zero::ZeroEngine& engine) {
    zero::ModelStateBytes b = engine.model_state_bytes();
    std::printf("EPILOGUES %lld\nBYTES %lld %lld %lld\n", static_cast<long long>(engine.epilogues_run()),
                static_cast<long long>(b.params), static_cast<long long>(b.grads), static_cast<long long>(b.optimizer));
}

int run_fp16(int stage, bool grad_accum_fp16);

}  // namespace

int run_zero3_tied();          // tests/zero/zero3_scenarios.cpp
int run_zero3_multi_input();   // tests/zero/zero3_scenarios.cpp

namespace {

int run_one(const std::string& scenario) {
    const int R = dist::rank(), W = dist::world_size();
    const int stage = scenario[4] - '0';
    const std::string variant = scenario.substr(6);
    if (scenario == "zero3_tied") return run_zero3_tied();
    if (scenario == "zero3_multi_input") return run_zero3_multi_input();
    if (variant == "fp16" || variant == "fp16acc") return run_fp16(stage, variant == "fp16acc");
    zero::ZeroConfig config;
    config.stage = stage;
    config.reduce_bucket_size = 7;
    config.gradient_clipping = 0.5;
    config.gradient_accumulation_steps = variant == "accum" ? 2 : 1;
    const int micro = static_cast<int>(config.gradient_accumulation_steps);

    set_rng_state({1000, 0});
    auto ref = std::make_shared<Net>(kFloat64);
    set_rng_state({1000 + 7 * static_cast<uint64_t>(R), 0});   // other ranks start elsewhere, until the broadcast
    auto net = std::make_shared<Net>(kFloat64);
    const bool frozen = variant.rfind("frozen", 0) == 0;
    if (frozen) {
        ref->mid->weight.requires_grad_(false);
        net->mid->weight.requires_grad_(false);
    }
    zero::ZeroEngine engine(net, config, adamw);
    compare(engine, *net, *ref, "after construction", 0);
    net->checkpoint_mode = variant == "ckpt" || variant == "frozen" ? 1
                           : variant == "ckpt_reentrant" || variant == "frozen_reentrant" ? 2 : 0;
    // After the engine's hooks: every forward of `mid` inside a backward (a recompute) must see
    // its parameters whole.
    int64_t recomputes = 0;
    autograd::ScopedHook probe = net->mid->register_forward_hook([&](nn::Module&, const Tensor&, const Tensor&) {
        if (autograd::current_graph_task_depth() == 0) return Tensor();
        ++recomputes;
        EXPECT(net->mid->weight.sizes() == Shape({8, 8}) && net->mid->bias.sizes() == Shape({8}),
               "a recompute released mid's parameters: weight %s", net->mid->weight.shape_str().c_str());
        return Tensor();
    });
    std::vector<Tensor> ref_trainable;
    for (const Tensor& p : ref->parameters())
        if (p.requires_grad()) ref_trainable.push_back(p);
    optim::AdamW ref_opt(ref_trainable, optim::AdamWOptions(0.05).weight_decay(0.1));

    int64_t backwards = 0;
    for (int step = 0; step < 4; ++step) {
        set_rng_state({static_cast<uint64_t>(50 + step), 0});
        Tensor x = randn({micro * W * kLocalBatch, 4}, kFloat64), y = randn({micro * W * kLocalBatch, 3}, kFloat64);
        std::vector<Tensor> early;   // fabb: every micro-batch's forward before the first backward
        for (int k = 0; variant == "fabb" && k < micro; ++k)
            early.push_back(net->forward(x.narrow(0, (k * W + R) * kLocalBatch, kLocalBatch)));
        for (int k = 0; k < micro; ++k) {
            Tensor xk = x.narrow(0, k * W * kLocalBatch, W * kLocalBatch), yk = y.narrow(0, k * W * kLocalBatch, W * kLocalBatch);
            (mse(ref->forward(xk), yk) * (1.0 / micro)).backward();
            Tensor xr = xk.narrow(0, R * kLocalBatch, kLocalBatch), yr = yk.narrow(0, R * kLocalBatch, kLocalBatch);
            if (variant == "fabb") {
                engine.backward(mse(early[static_cast<size_t>(k)], yr));
            } else if (variant == "fwdbwd") {
                net->backward_in_forward = true;
                Tensor out = net->forward(xr);
                EXPECT(engine.epilogues_run() == backwards, "a backward inside forward ran the epilogue");
                EXPECT(net->in->weight.grad().defined(), "the hook took a gradient from a backward inside forward");
                net->in->weight.set_grad(Tensor());
                engine.backward(mse(out, yr));
            } else if (variant == "outgrad") {
                Tensor out = net->forward(xr);   // (b,3): d mse / d out = 2 (out - y) / numel
                Tensor grad = (out.detach() - yr) * (2.0 / static_cast<double>(out.numel()));
                out.backward(grad);
            } else {
                engine.backward(mse(net->forward(xr), yr));
            }
            ++backwards;
            EXPECT(engine.epilogues_run() == backwards, "epilogues %lld after %lld backwards",
                   static_cast<long long>(engine.epilogues_run()), static_cast<long long>(backwards));
            for (const Tensor& p : net->parameters()) EXPECT(!p.grad().defined(), "a .grad left after the epilogue");
            EXPECT(engine.is_gradient_accumulation_boundary() == (k + 1 == micro), "boundary at micro %d", k);
            engine.step();
        }
        nn::utils::clip_grad_norm_(ref_trainable, 0.5);
        ref_opt.step();
        ref_opt.zero_grad();
        if (stage == 3)
            for (const auto& [name, p] : net->named_parameters())
                EXPECT(p.numel() == 0, "stage 3: %s is %s after step %d, not released", name.c_str(),
                       p.shape_str().c_str(), step);
        compare(engine, *net, *ref, "step " + std::to_string(step), 1e-10);
    }
    if (stage == 3) {
        // Steps 2..4 follow the recorded order: their gathers are launched ahead of the modules.
        EXPECT(engine.stage3()->prefetched() > 0, "stage 3: nothing was prefetched");
        std::printf("GATHERS %lld PREFETCHED %lld\n", static_cast<long long>(engine.stage3()->gathers()),
                    static_cast<long long>(engine.stage3()->prefetched()));
    }
    if (net->checkpoint_mode != 0) EXPECT(recomputes > 0, "no recompute of mid was seen");
    EXPECT(engine.global_steps() == 4 && engine.skipped_steps() == 0, "steps %lld skipped %lld",
           static_cast<long long>(engine.global_steps()), static_cast<long long>(engine.skipped_steps()));
    print_bytes(engine);
    return ampgrad::testing::scenario_failures() ? 1 : 0;
}

std::vector<Tensor> snapshot(const zero::ZeroEngine& engine, const nn::Module& m) {
    zero::GatheredParameters whole(engine.stage3());
    std::vector<Tensor> out;
    for (const Tensor& p : m.parameters()) out.push_back(p.detach().clone());
    return out;
}

bool bit_equal(const Tensor& a, const Tensor& b) {
    Tensor x = a.contiguous(), y = b.contiguous();
    return x.numel() == y.numel() && x.dtype() == y.dtype() &&
           std::memcmp(x.raw_data(), y.raw_data(), static_cast<size_t>(x.numel()) * x.element_size()) == 0;
}

int run_fp16(int stage, bool grad_accum_fp16) {
    const int R = dist::rank(), W = dist::world_size();
    zero::ZeroConfig config = zero::parse_config(fmt::format(R"({{
        "train_micro_batch_size_per_gpu": 4, "gradient_clipping": 0,
        "zero_optimization": {{ "stage": {}, "reduce_bucket_size": 16 }},
        "data_types": {{ "grad_accum_dtype": "{}" }},
        "fp16": {{ "enabled": true, "initial_scale_power": 8, "hysteresis": 1, "loss_scale_window": 100 }} }})", stage,
        grad_accum_fp16 ? "fp16" : "fp32"));
    set_rng_state({7, 0});
    auto net = std::make_shared<Net>(kFloat16);
    // The scheduler halves the lr on every applied step, and must not move on a skipped one.
    zero::ZeroEngine engine(net, config, adamw, nullptr, [](optim::Optimizer& o) {
        return std::make_unique<optim::StepLR>(o, optim::StepLROptions{.step_size = 1, .gamma = 0.5});
    });
    auto lr = [&] { return engine.optimizer().param_groups()[0].lr(); };
    set_rng_state({static_cast<uint64_t>(90 + R), 0});
    Tensor x = randn({kLocalBatch, 4}).to(kFloat16), y = randn({kLocalBatch, 3}).to(kFloat16);
    engine.backward(mse(net->forward(x), y));
    engine.step();
    EXPECT(engine.was_step_applied() && engine.loss_scale() == 256, "first step: applied %d, scale %g",
           engine.was_step_applied(), engine.loss_scale());
    // The overflow sits in the last rank's partition only; every rank must skip.
    std::vector<Tensor> before = snapshot(engine, *net);
    Tensor exp_avg = engine.optimizer().state(engine.optimizer().param_groups()[0].params[0]).at("exp_avg").clone();
    engine.backward(mse(net->forward(x), y));
    if (R == W - 1) engine.grad_partition().narrow(0, 0, 1).fill_(INFINITY);
    engine.step();
    EXPECT(!engine.was_step_applied() && engine.skipped_steps() == 1, "rank %d did not skip", R);
    EXPECT(engine.loss_scale() == 128, "scale %g after the overflow, expected 128", engine.loss_scale());
    EXPECT(lr() == 0.025, "lr %g after one applied and one skipped step, expected 0.025", lr());
    std::vector<Tensor> after = snapshot(engine, *net);
    for (size_t i = 0; i < before.size(); ++i) EXPECT(bit_equal(before[i], after[i]), "parameter %zu changed", i);
    EXPECT(bit_equal(exp_avg, engine.optimizer().state(engine.optimizer().param_groups()[0].params[0]).at("exp_avg")),
           "optimizer state changed on a skipped step");
    // Every rank holds the same parameters, bit for bit: gather rank 0's and compare.
    for (Tensor& p : after) {
        Tensor mine = p.reshape({-1}).contiguous(), all = zeros({W * p.numel()}, TensorOptions().dtype(kFloat16));
        dist::all_gather(all, mine);
        for (int r = 0; r < W; ++r) EXPECT(bit_equal(all.narrow(0, r * p.numel(), p.numel()), mine), "rank %d differs", r);
    }
    // scale(loss).backward() is the same as engine.backward(loss); a bare backward is an error.
    engine.scale(mse(net->forward(x), y)).backward();
    engine.step();
    EXPECT(engine.was_step_applied(), "scale(loss).backward() step not applied");
    EXPECT(lr() == 0.0125 && engine.global_steps() == 3, "lr %g, global steps %lld", lr(),
           static_cast<long long>(engine.global_steps()));
    try {
        mse(net->forward(x), y).backward();
        EXPECT(false, "an unscaled fp16 backward did not throw");
    } catch (const AutogradError& e) {
        EXPECT(std::strstr(e.what(), "Loss scaling is required") != nullptr, "message: %s", e.what());
    }
    print_bytes(engine);
    return ampgrad::testing::scenario_failures() ? 1 : 0;
}

}  // namespace

// A comma-separated list of scenarios, run one after another in this process (one rendezvous).
int run_zero(const std::string& scenarios) {
    int rc = 0;
    for (size_t at = 0; at <= scenarios.size();) {
        size_t end = scenarios.find(',', at);
        if (end == std::string::npos) end = scenarios.size();
        std::string one = scenarios.substr(at, end - at);
        std::printf("SCENARIO %s\n", one.c_str());
        rc = std::max(rc, run_one(one));
        at = end + 1;
    }
    return rc;
}
