// pretrained_fixtures.hpp: what the `ampgrad` tests with Hugging Face folders share: the paths of
// the tiny fixture folders (tools/fixtures/hf_*.py), a run that must succeed, eval's JSON line, a
// short fine-tuning command line, and the largest difference between two models.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ampgrad/ampgrad.h"
#include "tests/app/run_program.hpp"

namespace ampgrad::testing {

inline std::string hf_fixture(const std::string& name) {
    return (std::filesystem::path(std::getenv("AMPGRAD_FIXTURES")) / "hf_gpt2" / name).string();
}

inline std::string llama_fixture(const std::string& name) {
    return (std::filesystem::path(std::getenv("AMPGRAD_FIXTURES")) / "hf_llama" / name).string();
}

inline ProgramResult run_ok(const std::vector<std::string>& args) {
    ProgramResult r = run_ampgrad(args);
    CAPTURE(r.output);
    REQUIRE(r.exit_code == 0);
    return r;
}

// The last line of `eval`'s output, parsed.
inline nlohmann::json eval_json(const ProgramResult& r) {
    const std::string out = r.output.substr(0, r.output.find_last_not_of('\n') + 1);
    return nlohmann::json::parse(out.substr(out.find_last_of('\n') + 1));
}

// A short fine-tuning run's flags from `dir` into `out`.
inline std::vector<std::string> fine_tune(const std::string& dir, const std::string& out, const std::string& steps) {
    return {"train", "--init-from", dir, "--tokenizer", "char", "--steps", steps, "--batch-size", "4", "--warmup",
            "0", "--eval-every", "0", "--eval-iters", "1", "--sample-tokens", "0", "--progress", "plain", "--out", out};
}

// The largest difference between two models' parameters (the same names).
inline double max_difference(const nn::Module& a, const nn::Module& b) {
    double worst = 0.0;
    nn::NamedTensors pb = b.state_dict();
    for (const auto& [name, t] : a.state_dict())
        worst = std::max(worst, (t.to(kFloat64) - pb[name].to(kFloat64)).abs().max().item<double>());
    return worst;
}

}  // namespace ampgrad::testing
