// amp_examples_test.cpp: runs every examples/amp/ recipe (their run() functions, compiled in here
// without their main()) and asserts what each one claims to show; then runs the built binaries.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#define AMPGRAD_EXAMPLE_NO_MAIN
#include "examples/amp/clip_after_unscale.cpp"
#include "examples/amp/custom_function.cpp"
#include "examples/amp/grad_accumulation.cpp"
#include "examples/amp/gradient_penalty.cpp"
#include "examples/amp/master_weights.cpp"
#include "examples/amp/multiple_models.cpp"
#include "examples/amp/overflow_fp16.cpp"
#include "examples/amp/typical_loop.cpp"

namespace ex = amp_examples;
using ampgrad::kBFloat16;
using ampgrad::kFloat32;

TEST_CASE("example typical_loop: f16 autocast + GradScaler trains without skipping") {
    std::ostringstream out;
    auto r = ex::typical_loop::run(out, 40);
    CHECK(r.last_loss < 0.5 * r.first_loss);
    CHECK(r.skipped == 0);
    CHECK(r.final_scale == 65536.0);
    CHECK(out.str().find("step 0  loss") != std::string::npos);
}

TEST_CASE("example clip_after_unscale: clipping sees the unscaled norm") {
    std::ostringstream out;
    auto r = ex::clip_after_unscale::run(out, 5, 0.5);
    CHECK(r.scaled_norm == doctest::Approx(r.true_norm * 65536.0).epsilon(1e-3));
    CHECK(r.true_norm > r.max_norm);                                   // so clipping did something
    CHECK(r.clipped_norm == doctest::Approx(r.max_norm).epsilon(1e-3));
}

TEST_CASE("example grad_accumulation: accumulated grads match the full batch; one update per effective batch") {
    std::ostringstream out;
    auto r = ex::grad_accumulation::run(out, 6, 4, 16);
    CHECK(r.max_rel_diff < 1e-2);                                      // f16 forward, different GEMM splits
    CHECK(r.optimizer_steps == 6);
    CHECK(r.scaler_updates == 6);
    CHECK(r.last_loss < r.first_loss);
}

TEST_CASE("example gradient_penalty: the penalty from scaled grads matches plain f32") {
    std::ostringstream out;
    auto r = ex::gradient_penalty::run(out, 10);
    CHECK(r.penalty_amp == doctest::Approx(r.penalty_f32).epsilon(2e-2));
    CHECK(r.skipped == 0);
    CHECK(r.last_loss < r.first_loss);
}

TEST_CASE("example multiple_models: two optimizers, one update() per iteration") {
    std::ostringstream out;
    auto r = ex::multiple_models::run(out, 20);
    CHECK(r.scaler_updates == r.iterations);
    CHECK(r.last_loss0 < r.first_loss0);
    CHECK(r.last_loss1 < r.first_loss1);
}

TEST_CASE("example overflow_fp16: skipped steps, the scale backs off, parameters bit-identical") {
    std::ostringstream out;
    auto r = ex::overflow_fp16::run(out, 120);
    CHECK(r.skipped_a >= 2);                                           // 2^24 is far too high
    CHECK(r.trace[0].skipped);
    CHECK(r.trace[1].scale == r.trace[0].scale / 2);                   // backoff
    bool grew = false;
    for (size_t i = 1; i < r.trace.size(); ++i) grew = grew || r.trace[i].scale > r.trace[i - 1].scale;
    CHECK(grew);                                                       // and growth after clean steps
    CHECK(r.params_identical_on_skip);
    CHECK(r.last_loss < r.first_loss);
    REQUIRE(r.skipped_b >= 2);
    CHECK(r.events_b[0].find("but hysteresis is 2. Reducing hysteresis to 1") != std::string::npos);
    CHECK(r.events_b[1].find("reducing to") != std::string::npos);
}

TEST_CASE("example master_weights: f16 params with f32 masters train like f32 and resume exactly") {
    std::ostringstream out;
    auto r = ex::master_weights::run(out, 40);
    CHECK(r.f16_last < 0.5 * r.f16_first);
    CHECK(r.f16_last == doctest::Approx(r.f32_last).epsilon(0.25));
    CHECK(r.resume_exact);
}

TEST_CASE("example custom_function: cast_inputs=f32 forces f32; custom_bwd keeps the backward in bf16") {
    std::ostringstream out;
    auto r = ex::custom_function::run(out, 30);
    CHECK(r.matmul_out == kBFloat16);
    CHECK(r.logsoftmax_out == kFloat32);
    CHECK(r.w_grad == kFloat32);
    CHECK(r.last_loss < 0.7 * r.first_loss);
}

TEST_CASE("example binaries run and exit 0") {
    const char* root = std::getenv("AMPGRAD_BUILD_ROOT");
    if (!root) return;                                                 // run outside meson test: skip
    for (std::string name : {"typical_loop", "clip_after_unscale", "grad_accumulation", "gradient_penalty",
                             "multiple_models", "overflow_fp16", "master_weights", "custom_function"}) {
        CAPTURE(name);
        std::filesystem::path bin = std::filesystem::path(root) / "examples" / ("amp_" + name);
        if (!std::filesystem::exists(bin)) continue;                   // not built in this configuration
        std::string cmd = bin.string() + " > /dev/null 2>&1";
        CHECK(std::system(cmd.c_str()) == 0);
    }
}

TEST_CASE("tool amp_policy prints the table and explains a decision") {
    const char* root = std::getenv("AMPGRAD_BUILD_ROOT");
    if (!root) return;
    std::filesystem::path bin = std::filesystem::path(root) / "tools" / "amp_policy";
    if (!std::filesystem::exists(bin)) return;
    auto run = [](const std::string& cmd) {
        std::string text;
        FILE* p = popen(cmd.c_str(), "r");
        REQUIRE(p);
        char buf[512];
        while (fgets(buf, sizeof buf, p)) text += buf;
        CHECK(pclose(p) == 0);
        return text;
    };
    std::string table = run(bin.string());
    CHECK(table.find("lower_precision:") != std::string::npos);
    CHECK(table.find("binary_cross_entropy") != std::string::npos);
    std::string why = run(bin.string() + " explain matmul f32 f64");
    CHECK(why.find("input 0: f32 cpu -> bf16") != std::string::npos);
    CHECK(why.find("f64 and integers never") != std::string::npos);
    std::string trace = run(bin.string() + " trace");
    CHECK(trace.find("layer_norm: policy fp32") != std::string::npos);
}
