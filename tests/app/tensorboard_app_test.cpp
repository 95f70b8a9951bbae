// tensorboard_app_test.cpp: `ampgrad train --tensorboard DIR` read back with TensorBoard's own reader.
// tests/app/tensorboard_read.py does the reading and the comparisons (scalars against metrics.jsonl,
// histograms against the checkpoint's tensors, the text sample against what the program printed).
// The interpreter is $AMPGRAD_PYTHON, else the venv scripts/setup.sh made in the build folder (with
// tensorboard from PyPI), else python3; without tensorboard the test fails, saying so.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "tests/app/run_program.hpp"

using namespace ampgrad::testing;
namespace fs = std::filesystem;

namespace {

std::string test_python() {
    if (const char* py = std::getenv("AMPGRAD_PYTHON"); py && *py) return py;
    if (const char* build = std::getenv("AMPGRAD_BUILD_ROOT")) {
        fs::path venv = fs::path(build) / "python-venv" / "bin" / "python3";
        if (fs::exists(venv)) return venv.string();
    }
    return "python3";
}

// The text between the "----" lines under "sample (temperature ...):".
std::string printed_sample(const std::string& output) {
    const size_t head = output.find("sample (temperature");
    REQUIRE(head != std::string::npos);
    const size_t begin = output.find("----\n", head) + 5;
    const size_t end = output.find("\n----", begin);
    REQUIRE(end != std::string::npos);
    return output.substr(begin, end - begin);
}

std::string read_text(const fs::path& file) {
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

TEST_CASE("train --tensorboard: TensorBoard's reader returns the scalars, histograms and text sample") {
    const fs::path out = make_temp_dir("tensorboard_run");
    const fs::path tb = out / "tb";
    const int steps = 6, hist_every = 3;
    ProgramResult r = run_program({ampgrad_program(), "train", "--n-layer", "1", "--n-embd", "32", "--n-head", "2",
                                   "--block-size", "16", "--batch-size", "4", "--steps", std::to_string(steps),
                                   "--warmup", "2", "--eval-every", "3", "--eval-iters", "2", "--sample-tokens", "40",
                                   "--out", out.string(), "--tensorboard", tb.string(),
                                   "--tensorboard-hist-every", std::to_string(hist_every)});
    CAPTURE(r.output);
    REQUIRE(r.exit_code == 0);
    std::ofstream(out / "sample.txt") << printed_sample(r.output);
    const char* root = std::getenv("AMPGRAD_SOURCE_ROOT");
    REQUIRE_MESSAGE(root, "AMPGRAD_SOURCE_ROOT is not set (run through meson test)");
    const fs::path model = out / "checkpoints" / fmt::format("step-{:08d}", steps) / "model.safetensors";
    const fs::path log = out / "read.log";
    const std::string cmd = fmt::format("'{}' '{}/tests/app/tensorboard_read.py' '{}' '{}' '{}' '{}' {} > '{}' 2>&1",
                                        test_python(), root, tb.string(), (out / "metrics.jsonl").string(),
                                        model.string(), (out / "sample.txt").string(), hist_every, log.string());
    const int status = std::system(cmd.c_str());
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    const std::string read_log = read_text(log);
    CAPTURE(cmd);
    CAPTURE(read_log);
    REQUIRE_MESSAGE(code != 3, "the test python cannot import tensorboard: run scripts/setup.sh or set AMPGRAD_PYTHON");
    CHECK(code == 0);
    fs::remove_all(out);
}

TEST_CASE("train --tensorboard: a folder that cannot be made is a typed error naming it, before any step") {
    const fs::path out = make_temp_dir("tensorboard_bad");
    std::ofstream(out / "a_file") << "x";
    const std::string bad = (out / "a_file" / "tb").string();
    ProgramResult r = run_program({ampgrad_program(), "train", "--n-layer", "1", "--n-embd", "32", "--n-head", "2",
                                   "--block-size", "16", "--batch-size", "4", "--steps", "2", "--sample-tokens", "0",
                                   "--out", (out / "run").string(), "--tensorboard", bad});
    CAPTURE(r.output);
    CHECK(r.exit_code > 0);
    CHECK(r.signal == 0);
    CHECK(r.output.find("tensorboard: cannot create directory " + bad) != std::string::npos);
    CHECK_FALSE(fs::exists(out / "run" / "checkpoints"));
    fs::remove_all(out);
}
