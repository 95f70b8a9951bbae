// verify_runs_test.cpp: `ampgrad verify RUN_A RUN_B` (app/verify_runs.hpp): ulps along each dtype's
// line of values, a tensor's first differing element, and the command on real runs: a run against its
// own repeat (and at another thread count) is identical; a one-ulp difference planted in a checkpoint
// or in metrics.jsonl is named by step, tensor, element and ulps; a one-process run against a ZeRO
// run compares parameters, masters and optimizer states under one naming.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/verify_runs.hpp"
#include "autograd/ops/ops.hpp"
#include "io/safetensors.hpp"
#include "tests/app/run_program.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;
namespace fs = std::filesystem;

namespace {

uint64_t f32_ulps(float a, float b) { return app::ulps_between(&a, &b, kFloat32); }

// A 4-step nano GPT run with checkpoints at steps 2 and 4.
std::string train_tiny_run(const std::string& out, const std::string& threads, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"train", "--preset", "nano", "--steps", "4", "--ckpt-every", "2", "--eval-every", "100",
                                     "--sample-tokens", "0", "--batch-size", "4", "--progress", "plain", "--out", out};
    args.insert(args.end(), extra.begin(), extra.end());
    ProgramResult r = run_ampgrad(args, {"OMP_NUM_THREADS=" + threads});
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    return out;
}

// Moves one element of one tensor of a saved model file one float up the line of values.
void plant_one_ulp(const std::string& model_file, const std::string& tensor, int64_t flat_index) {
    io::SafetensorsFile f = io::load_safetensors(model_file);
    for (auto& [name, t] : f.tensors) {
        if (name != tensor) continue;
        float* value = t.data_ptr<float>() + flat_index;
        *value = std::nextafter(*value, *value >= 0 ? INFINITY : -INFINITY);
    }
    io::save_safetensors(model_file, f.tensors, f.metadata);
}

void replace_in_file(const std::string& path, const std::string& from, const std::string& to) {
    std::string text = read_bytes(path);
    const size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

}  // namespace

TEST_CASE("ulps_between counts representable values between two numbers of each dtype") {
    CHECK(f32_ulps(1.0f, 1.0f) == 0);
    CHECK(f32_ulps(1.0f, std::nextafter(1.0f, 2.0f)) == 1);
    CHECK(f32_ulps(1.0f, 2.0f) == (uint64_t{1} << 23));                   // one binade of 2^23 mantissas
    CHECK(f32_ulps(0.0f, -0.0f) == 0);                                    // equal values, different bits
    const float tiny = std::numeric_limits<float>::denorm_min();
    CHECK(f32_ulps(-tiny, tiny) == 2);                                    // across zero: -tiny, 0, tiny
    const double one = 1.0, next = std::nextafter(1.0, 2.0);
    CHECK(app::ulps_between(&one, &next, kFloat64) == 1);
    const uint16_t bf16_one = 0x3F80, bf16_next = 0x3F81, bf16_minus_one = 0xBF80;
    CHECK(app::ulps_between(&bf16_one, &bf16_next, kBFloat16) == 1);
    CHECK(app::ulps_between(&bf16_one, &bf16_minus_one, kBFloat16) == 2 * 0x3F80);
    const int64_t i3 = 3, i_minus_4 = -4;
    CHECK(app::ulps_between(&i3, &i_minus_4, kInt64) == 7);
}

TEST_CASE("compare_tensors: nothing for the same bits; else the first element, its ulps and the count") {
    Tensor a = ampgrad::arange(12, TensorOptions().dtype(kFloat32)).reshape({3, 4});
    CHECK_FALSE(app::compare_tensors("w", a, a.clone()).has_value());
    Tensor b = a.clone();
    b.data_ptr<float>()[6] = std::nextafter(6.0f, 7.0f);
    b.data_ptr<float>()[9] = 9.5f;
    auto d = app::compare_tensors("w", a, b);
    REQUIRE(d.has_value());
    CHECK(d->first_index == std::vector<int64_t>{1, 2});
    CHECK(d->ulps == 1);
    CHECK(d->a == 6.0);
    CHECK(d->elements_differing == 2);
    CHECK(d->max_ulps == f32_ulps(9.0f, 9.5f));
    Tensor minus_zero = ampgrad::zeros({1});
    minus_zero.data_ptr<float>()[0] = -0.0f;
    CHECK(app::compare_tensors("z", ampgrad::zeros({1}), minus_zero).has_value());   // bits, not values
    auto shape = app::compare_tensors("w", a, a.reshape({4, 3}));
    REQUIRE(shape.has_value());
    CHECK(shape->problem.find("(3, 4)") != std::string::npos);
    CHECK(shape->problem.find("(4, 3)") != std::string::npos);
}

TEST_CASE("ampgrad verify: a repeated run is identical, at 1 and 2 threads; a planted ulp is named") {
    const std::string dir = make_temp_dir("verify");
    const std::string a = train_tiny_run(dir + "/a", "1"), b = train_tiny_run(dir + "/b", "2");
    ProgramResult same = run_ampgrad({"verify", a, b});
    CHECK_MESSAGE(same.exit_code == 0, same.output);
    CHECK(same.output.find("step 4: 161 tensors identical") != std::string::npos);
    CHECK(same.output.find("records compared (steps 1..4): identical") != std::string::npos);

    SUBCASE("one ulp in one weight of the step-4 checkpoint") {
        plant_one_ulp(b + "/checkpoints/step-00000004/model.safetensors", "transformer.h.0.mlp.c_fc.weight", 2 * 96 + 5);
        ProgramResult r = run_ampgrad({"verify", a, b});
        CHECK_MESSAGE(r.exit_code == 1, r.output);
        CHECK(r.output.find("step 2: 161 tensors identical") != std::string::npos);
        CHECK_MESSAGE(r.output.find("step 4: DIFFERENT: 1 of 161 tensors differ; first "
                                    "param/transformer.h.0.mlp.c_fc.weight[2, 5]") != std::string::npos, r.output);
        CHECK(r.output.find("(1 ulp); 1 element differs, at most 1 ulp") != std::string::npos);
    }
    SUBCASE("one f32 ulp in the loss of step 3") {
        const std::string metrics = b + "/metrics.jsonl";
        std::istringstream lines(read_bytes(metrics));
        std::string line;
        for (int i = 0; i < 3; ++i) std::getline(lines, line);
        const double loss = nlohmann::json::parse(line)["loss"].get<double>();
        const float moved = std::nextafter(static_cast<float>(loss), 100.0f);
        replace_in_file(metrics, nlohmann::json(loss).dump(), nlohmann::json(static_cast<double>(moved)).dump());
        ProgramResult r = run_ampgrad({"verify", a, b});
        CHECK(r.exit_code == 1);
        CHECK_MESSAGE(r.output.find("metrics: DIFFERENT from step 3: train loss") != std::string::npos, r.output);
        CHECK(r.output.find("(1 f32 ulps)") != std::string::npos);
    }
}

TEST_CASE("ampgrad verify reads a ZeRO checkpoint under the same names as a one-process one") {
    const std::string dir = make_temp_dir("verify-zero");
    const std::string plain = train_tiny_run(dir + "/plain", "1"), zero = train_tiny_run(dir + "/zero", "1", {"--zero", "1"});
    const app::VerifyReport r = app::verify_runs(plain, zero);
    REQUIRE(r.checkpoints.size() == 2);
    // Every name of the one-process checkpoint is found in the ZeRO one (its f32 masters stand for
    // the plain run's weights), so the only differences are values, never "only in".
    CHECK(r.checkpoints[1].tensors_compared == 201);
    for (const auto& d : r.checkpoints[1].differences) CHECK_MESSAGE(d.problem.empty(), d.name, ": ", d.problem);
    const app::CanonicalState state = app::read_canonical_state(zero + "/checkpoints/step-00000004");
    CHECK(state.count("param/transformer.h.0.attn.c_attn.weight"));
    CHECK(state.count("master/transformer.h.0.attn.c_attn.weight"));
    CHECK(state.count("exp_avg_sq/lm_head.weight") == 0);          // tied: one parameter, wte's
    CHECK(state.at("step/transformer.wte.weight").item_double() == 4.0);

    ProgramResult missing = run_ampgrad({"verify", plain, dir + "/nothing-here"});
    CHECK(missing.exit_code == 2);
    CHECK(missing.output.find("nothing-here") != std::string::npos);
}
