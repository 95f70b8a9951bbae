// gpt_train_test.cpp: the training-parity checks of the CUDA issue, end to end through models::GPT.
// The same model (same seed, same initial weights) trains on the CPU and on cuda:0 on the same
// batches, and every step's loss must agree:
//   - fp32, 50 AdamW steps with clipping: relative 1e-4 per step (the GEMMs sum in different orders;
//     cuBLAS runs fp32 GEMMs with fp32 compute, no TF32);
//   - fp16 autocast with GradScaler and an overflow forced at fixed steps: the same steps are
//     skipped and the scale follows the same sequence on both devices.
// Plus float64 gradcheck of the ops a GPT uses, run on the GPU. Without a GPU every case is skipped.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "autograd/gradcheck.hpp"
#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;
namespace F = ampgrad::nn::functional;

namespace {

models::GPTConfig small_config() {
    models::GPTConfig cfg;
    cfg.vocab_size = 64;     // V
    cfg.block_size = 32;     // T
    cfg.n_layer = 2;         // L
    cfg.n_head = 4;          // NH
    cfg.n_embd = 64;         // C
    return cfg;
}

// Batches drawn once on the host: (steps, B, T) token ids and next-token targets. Each row counts
// from a random start by a random stride of 1 to 3 (mod V), a rule the model can learn from its
// context, so the loss falls; uniformly random tokens would hold it at log V whatever the code did.
struct Batches {
    Tensor x, y;
};
Batches make_batches(int64_t steps, int64_t B, const models::GPTConfig& cfg) {
    manual_seed(1234);
    const std::vector<int64_t> start = randint(0, cfg.vocab_size, {steps * B}).to_vector<int64_t>();
    const std::vector<int64_t> stride = randint(1, 4, {steps * B}).to_vector<int64_t>();
    std::vector<int64_t> ids;
    for (size_t row = 0; row < start.size(); ++row)
        for (int64_t t = 0; t <= cfg.block_size; ++t) ids.push_back((start[row] + stride[row] * t) % cfg.vocab_size);
    Tensor tokens = tensor(ids, {steps, B, cfg.block_size + 1});                     // (steps,B,T+1) int64
    return {tokens.narrow(2, 0, cfg.block_size).contiguous(), tokens.narrow(2, 1, cfg.block_size).contiguous()};
}

// Two copies of one model: the same seed gives the same initial weights; one moves to the GPU.
struct ModelPair {
    models::GPT cpu_model, gpu_model;
    explicit ModelPair(const models::GPTConfig& cfg) : cpu_model(make(cfg)), gpu_model(make(cfg)) {
        gpu_model.to(kGpu);
    }
    static models::GPT make(const models::GPTConfig& cfg) {
        manual_seed(42);
        return models::GPT(cfg);
    }
};

}  // namespace

TEST_CASE("GPT fp32: 50 AdamW steps on cuda:0 match the CPU loss by loss" * skip_without_gpu()) {
    const models::GPTConfig cfg = small_config();
    ModelPair models(cfg);
    const Batches data = make_batches(50, 8, cfg);
    optim::AdamW opt_cpu(models.cpu_model.parameters(), optim::AdamWOptions(3e-3).weight_decay(0.1));
    optim::AdamW opt_gpu(models.gpu_model.parameters(), optim::AdamWOptions(3e-3).weight_decay(0.1));
    double worst = 0.0, first = 0.0, last = 0.0;
    for (int64_t s = 0; s < 50; ++s) {
        const Tensor x = data.x.select(0, s).contiguous(), y = data.y.select(0, s).contiguous();   // (B,T)
        Tensor loss_cpu = models.cpu_model.forward(x, y);
        Tensor loss_gpu = models.gpu_model.forward(to_gpu(x), to_gpu(y));
        opt_cpu.zero_grad();
        opt_gpu.zero_grad();
        loss_cpu.backward();
        loss_gpu.backward();
        nn::utils::clip_grad_norm_(models.cpu_model.parameters(), 1.0);
        nn::utils::clip_grad_norm_(models.gpu_model.parameters(), 1.0);
        opt_cpu.step();
        opt_gpu.step();
        const double want = loss_cpu.item<double>(), got = loss_gpu.item<double>();
        const double rel = std::abs(got - want) / std::abs(want);
        worst = std::max(worst, rel);
        (s == 0 ? first : last) = want;
        CAPTURE(s);
        CHECK(rel < 1e-4);
    }
    MESSAGE("loss " << first << " -> " << last << "; worst relative CPU/GPU difference " << worst);
    CHECK(last < 0.8 * first);                       // it trains
}

TEST_CASE("GPT fp16 autocast + GradScaler: forced overflows skip the same steps on cuda:0 as on the CPU" *
          skip_without_gpu()) {
    const models::GPTConfig cfg = small_config();
    ModelPair models(cfg);
    const Batches data = make_batches(12, 8, cfg);
    const std::vector<int64_t> overflow_steps = {3, 7, 8};
    struct Run {
        models::GPT* model;
        Device device;
        std::vector<bool> skipped;
        std::vector<double> scales, losses;
    };
    Run runs[2] = {{&models.cpu_model, kHost, {}, {}, {}}, {&models.gpu_model, kGpu, {}, {}, {}}};
    for (Run& run : runs) {
        optim::AdamW opt(run.model->parameters(), optim::AdamWOptions(1e-3));
        amp::GradScalerOptions scaler_options;
        scaler_options.init_scale = 1024.0;
        scaler_options.growth_interval = 4;
        amp::GradScaler scaler(scaler_options);
        for (int64_t s = 0; s < 12; ++s) {
            const Tensor x = copy_to(data.x.select(0, s), run.device), y = copy_to(data.y.select(0, s), run.device);
            Tensor loss;
            {
                amp::AutocastGuard autocast(run.device.type, kFloat16);
                loss = run.model->forward(x, y);
            }
            opt.zero_grad();
            scaler.scale(loss).backward();
            if (std::find(overflow_steps.begin(), overflow_steps.end(), s) != overflow_steps.end())
                {
                Tensor grad = run.model->parameters()[0].grad();
                grad.fill_(std::numeric_limits<double>::infinity());
            }
            run.skipped.push_back(scaler.step(opt).skipped());
            scaler.update();
            run.scales.push_back(scaler.get_scale());
            run.losses.push_back(loss.item<double>());
        }
    }
    CHECK(runs[0].skipped == runs[1].skipped);
    CHECK(runs[0].scales == runs[1].scales);
    for (int64_t s = 0; s < 12; ++s) {
        CAPTURE(s);
        const bool forced = std::find(overflow_steps.begin(), overflow_steps.end(), s) != overflow_steps.end();
        CHECK(runs[1].skipped[s] == forced);
        CHECK(runs[1].losses[s] == doctest::Approx(runs[0].losses[s]).epsilon(2e-2));   // f16 activations
    }
}

TEST_CASE("float64 gradcheck on cuda:0: the ops of a GPT block" * skip_without_gpu()) {
    auto gpu_f64 = [](const Shape& shape, uint64_t seed) {
        return to_gpu(sample(shape, kFloat64, seed)).requires_grad_();
    };
    const Tensor x = gpu_f64({2, 3, 8}, 1), w = gpu_f64({6, 8}, 2), b = gpu_f64({6}, 3);
    const Tensor ln_w = gpu_f64({8}, 4), ln_b = gpu_f64({8}, 5);
    CHECK(autograd::gradcheck([](const tensor_list& in) { return tensor_list{linear(in[0], in[1], in[2])}; },
                              {x, w, b}));
    CHECK(autograd::gradcheck([](const tensor_list& in) { return tensor_list{F::gelu(in[0], /*tanh_approximation=*/true)}; }, {x}));
    CHECK(autograd::gradcheck(
        [](const tensor_list& in) { return tensor_list{F::layer_norm(in[0], {8}, in[1], in[2], 1e-5)}; },
        {x, ln_w, ln_b}));
    CHECK(autograd::gradcheck([](const tensor_list& in) { return tensor_list{F::softmax(in[0], -1)}; }, {x}));
    CHECK(autograd::gradcheck([](const tensor_list& in) { return tensor_list{in[0].sum(Shape{1}), in[0].mean()}; },
                              {x}));
    const Tensor q = gpu_f64({2, 2, 5, 4}, 6), k = gpu_f64({2, 2, 5, 4}, 7), v = gpu_f64({2, 2, 5, 4}, 8);
    CHECK(autograd::gradcheck(
        [](const tensor_list& in) {
            return tensor_list{F::scaled_dot_product_attention(in[0], in[1], in[2], /*is_causal=*/true)};
        },
        {q, k, v}));
    const Tensor logits = gpu_f64({6, 5}, 9);
    const Tensor target = to_gpu(randint(0, 5, {6}, TensorOptions(kInt64)));
    CHECK(autograd::gradcheck(
        [&target](const tensor_list& in) { return tensor_list{F::cross_entropy(in[0], target)}; }, {logits}));
}

// The zero-sync step: the batch's upload from pinned memory, fp16 autocast, GradScaler with unscale_ and clip_grad_norm_, and the
// fused AdamW (which skips in its kernel) make no host synchronisation, counted by core/host_sync.hpp at every wait core and the
// CUDA backend make. Whether a step skipped is read afterwards, all at once.
TEST_CASE("GPT fp16 AMP step on cuda:0: zero host synchronisations per step" * skip_without_gpu()) {
    const models::GPTConfig cfg = small_config();
    ModelPair models(cfg);
    const Batches data = make_batches(4, 8, cfg);
    // The batches wait in pinned host memory, as a data loader's would, and each step uploads its own
    // with non_blocking copies (from pageable memory the driver would wait for the stream).
    std::vector<Tensor> xs, ys;
    for (int64_t s = 0; s < 4; ++s) {
        xs.push_back(data.x.select(0, s).contiguous().pin_memory());
        ys.push_back(data.y.select(0, s).contiguous().pin_memory());
    }
    optim::AdamW opt(models.gpu_model.parameters(), optim::AdamWOptions(1e-3));
    amp::GradScalerOptions options;
    options.init_scale = 1024.0;
    amp::GradScaler scaler(options);                    // defer_step_result unset: deferred on a GPU
    std::vector<amp::StepResult> results;
    for (int64_t s = 0; s < 4; ++s) {
        HostSyncCounter syncs;
        Tensor loss;
        {
            amp::AutocastGuard autocast(kCUDA, kFloat16);
            loss = models.gpu_model.forward(xs[s].to(kGpu, /*non_blocking=*/true), ys[s].to(kGpu, true));
        }
        opt.zero_grad();
        scaler.scale(loss).backward();
        scaler.unscale_(opt);                           // to clip, as a real loop does
        nn::utils::clip_grad_norm_(models.gpu_model.parameters(), 1.0);   // a device-side norm and coefficient
        results.push_back(scaler.step(opt));
        scaler.update();
        CAPTURE(s);
        CAPTURE(syncs.describe());
        CHECK(syncs.count() == 0);
    }
    CHECK(scaler.unread_step_results() == 4);
    for (const amp::StepResult& r : results) CHECK_FALSE(r.skipped());   // the reads happen here
    CHECK(scaler.unread_step_results() == 0);
}
