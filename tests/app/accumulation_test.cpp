// accumulation_test.cpp: gradient accumulation (--grad-accum, --total-batch-size; app/trainer.hpp):
// N micro-batches of B give the gradient and the step of one batch of N·B, in every precision
// (in process: the gradients after one step and the weights after three), data parallel (DDP's
// no_sync on the first N-1 micro-batches) and under the ZeRO engine at stages 0-3 (its GAS), as
// two-process runs of the `ampgrad` program whose checkpoints are compared. The tolerances are the
// compute dtype's: fp32 sums in another order (f32 rounding); bf16 and f16 autocast round each
// micro-batch's weight gradient to the dtype before the f32 accumulation, so they differ by that.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ampgrad_config.h"
#include "app/trainer.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "tests/app/run_program.hpp"
#include "tests/app/shard_fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;   // under AddressSanitizer (about 5x slower) the 2-process matrix is cut
#else
constexpr bool kSanitized = false;
#endif

namespace {

app::RunConfig tiny_run(const std::string& prec, int64_t batch, int64_t accum) {
    app::RunConfig c;
    c.n_layer = 1, c.n_embd = 32, c.n_head = 2, c.block_size = 16;
    c.batch_size = batch, c.grad_accum = accum;
    c.steps = 3, c.warmup = 1, c.lr = 1e-3, c.min_lr = 1e-4;
    c.eval_every = 0, c.eval_iters = 1;
    c.prec = prec;
    c.init_scale = 1024;   // no overflow in these steps
    return c;
}

// Every parameter's gradient (as f64, divided by the loss scale for fp16-master's scaled f16
// gradients) after the first step, and every parameter after all steps.
struct Trajectory {
    std::vector<std::vector<double>> grads, params;
    std::vector<double> losses;
};

Trajectory run(const app::RunConfig& cfg) {
    app::Trainer t(cfg);
    Trajectory out;
    while (t.step() < cfg.steps) {
        const app::TrainStats s = t.train_step();
        out.losses.push_back(s.loss);
        if (s.step != 1) continue;
        for (const auto& [name, p] : t.model().module()->named_parameters())
            out.grads.push_back((p.grad().to(kFloat64) / s.scale).contiguous().to_vector<double>());
    }
    for (const auto& [name, p] : t.model().module()->named_parameters())
        out.params.push_back(p.detach().to(kFloat64).contiguous().to_vector<double>());
    return out;
}

// max |a - b| over all elements relative to max |a|, and the mean |a - b|.
std::pair<double, double> difference(const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b) {
    double diff = 0.0, scale = 0.0, sum = 0.0, count = 0.0;
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        REQUIRE(a[i].size() == b[i].size());
        for (size_t k = 0; k < a[i].size(); ++k) {
            diff = std::max(diff, std::abs(a[i][k] - b[i][k]));
            scale = std::max(scale, std::abs(a[i][k]));
            sum += std::abs(a[i][k] - b[i][k]);
            count += 1.0;
        }
    }
    return {diff / scale, sum / count};
}

}  // namespace

// The gradients after the first step are compared element by element, relative to the largest: f32
// rounding in fp32; in bf16/f16 autocast two units of the dtype's rounding (2^-8, 2^-11), since each
// micro-batch's weight gradient is rounded to it. The weights after three AdamW steps (lr 1e-3) are
// compared by their mean difference: Adam's first steps move every weight by about lr whatever the
// gradient's size, so a gradient near zero that rounding flips moves its weight the other way (up to
// 2 lr), and only the mean says whether the steps as a whole agree.
TEST_CASE("--grad-accum: 4 micro-batches of 2 equal one batch of 8, in every precision") {
    // (precision, gradient tolerance relative to the largest, mean weight difference after 3 steps)
    const std::vector<std::tuple<std::string, double, double>> modes = {
        {"fp32", 1e-6, 1e-7}, {"bf16", 2.0 / 256, 2e-5}, {"fp16", 2.0 / 2048, 2e-5}, {"fp16-master", 2.0 / 2048, 2e-5}};
    for (const auto& [prec, grad_tol, param_tol] : modes) {
        CAPTURE(prec);
        const Trajectory one = run(tiny_run(prec, 8, 1)), four = run(tiny_run(prec, 2, 4));
        REQUIRE(one.losses.size() == 3);
        for (size_t i = 0; i < 3; ++i) CHECK(four.losses[i] == doctest::Approx(one.losses[i]).epsilon(1e-5));
        const auto [g, g_mean] = difference(one.grads, four.grads);
        const auto [p, p_mean] = difference(one.params, four.params);
        MESSAGE(prec << ": gradients differ by " << g << " of their largest; weights after 3 steps by " << p_mean
                     << " on average (" << p << " of the largest weight at most)");
        CHECK(g < grad_tol);
        CHECK(p_mean < param_tol);
        if (prec == "fp32") CHECK(p < 1e-5);   // no sign flips at f32 rounding
    }
}

TEST_CASE("--total-batch-size derives --grad-accum, and refuses a total that does not divide") {
    app::RunConfig c = tiny_run("fp32", 4, 1);
    c.total_batch_size = 4 * 16 * 3;
    c.resolve_accumulation(16);
    CHECK(c.grad_accum == 3);
    app::RunConfig bad = tiny_run("fp32", 4, 1);
    bad.total_batch_size = 100;
    CHECK_THROWS_WITH_AS(bad.resolve_accumulation(16), doctest::Contains("--batch-size 4 x block size 16 = 64"), ValueError);
    app::RunConfig both = tiny_run("fp32", 4, 2);
    both.total_batch_size = 4 * 16 * 3;
    CHECK_THROWS_WITH_AS(both.resolve_accumulation(16), doctest::Contains("--grad-accum 2 disagrees"), ValueError);
    app::RunConfig zero_accum = tiny_run("fp32", 4, 0);
    CHECK_THROWS_WITH_AS(zero_accum.validate(), doctest::Contains("--grad-accum"), ValueError);
}

namespace {

// ampgrad-run --nproc-per-node 2 ampgrad train (data parallel, or --zero STAGE) for 2 steps.
ProgramResult launch_two(const std::string& out, int64_t batch, int64_t accum, const std::string& zero,
                         const std::string& prec) {
    std::vector<std::string> argv = {ampgrad_run_program(), "--nproc-per-node", "2", "--master-port",
                                     std::to_string(free_port()), ampgrad_program(), "train", "--n-layer", "1",
                                     "--n-embd", "32", "--n-head", "2", "--block-size", "16", "--batch-size",
                                     std::to_string(batch), "--grad-accum", std::to_string(accum), "--steps", "2",
                                     "--warmup", "1", "--lr", "1e-3", "--eval-every", "0", "--eval-iters", "1",
                                     "--sample-tokens", "0", "--prec", prec, "--progress", "plain", "--out", out};
    if (!zero.empty()) argv.insert(argv.end(), {"--zero", zero});
    return run_program(argv, {"OMP_NUM_THREADS=1"});
}

// metrics.jsonl's grad_norm of every step.
std::vector<double> grad_norms(const std::string& out) {
    std::vector<double> norms;
    std::ifstream in(out + "/metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
        const nlohmann::json j = nlohmann::json::parse(line);
        if (j["kind"] == "train") norms.push_back(j["grad_norm"].get<double>());
    }
    return norms;
}

}  // namespace

TEST_CASE("--grad-accum on 2 processes: data parallel (no_sync) and ZeRO 0-3 step as the whole batch does" *
          doctest::skip(!AMPGRAD_WITH_GLOO)) {
    for (const std::string zero : {"", "0", "1", "2", "3"}) {
        for (const std::string prec : {"fp32", "bf16"}) {
            CAPTURE(zero);
            CAPTURE(prec);
            if (zero == "1" && prec == "bf16") continue;   // one bf16 ZeRO stage of each family is enough time
            if (kSanitized && (prec == "bf16" || zero == "0" || zero == "1")) continue;   // DDP, ZeRO 2 and 3 in fp32
            const std::string a = make_temp_dir("accum_whole"), b = make_temp_dir("accum_micro");
            const ProgramResult whole = launch_two(a, 8, 1, zero, prec), micro = launch_two(b, 4, 2, zero, prec);
            REQUIRE_MESSAGE(whole.exit_code == 0, whole.output);
            REQUIRE_MESSAGE(micro.exit_code == 0, micro.output);
            CHECK(micro.output.find("2 micro-steps of 4 sequences: 128 tokens per step") != std::string::npos);
            const ParameterDifference d = parameter_difference(a, b);
            MESSAGE("zero '" << zero << "' " << prec << ": weights after 2 steps differ by " << d.max << " at most, "
                             << d.mean << " on average");
            // Adam's step hardly depends on the gradient's scale, the gradient norm does: a missing 1/N shows here.
            const std::vector<double> na = grad_norms(a), nb = grad_norms(b);
            REQUIRE(na.size() == 2);
            REQUIRE(nb.size() == 2);
            for (size_t i = 0; i < 2; ++i) CHECK(nb[i] == doctest::Approx(na[i]).epsilon(prec == "fp32" ? 1e-5 : 1e-2));
            if (prec == "fp32") CHECK(d.max < 1e-5);   // lr 1e-3: an Adam step moves a weight by about 1e-3
            CHECK(d.mean < (prec == "fp32" ? 1e-7 : 2e-5));   // bf16: see the in-process case above
        }
    }
}
