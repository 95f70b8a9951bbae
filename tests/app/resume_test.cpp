// resume_test.cpp: checkpoints of the `ampgrad` program, run as a child process:
//  - --resume continues bit-exactly: 2N steps straight and N steps + resume + N more end with the
//    same bytes in every weight, and the same per-step losses, in fp32, fp16 (GradScaler, with a
//    skipped step inside the second window) and fp16-master (DeepSpeed's scaler with hysteresis);
//  - SIGKILL in the middle of a save leaves the previous checkpoint loadable and resumable;
//  - a full disk during a save (a file-size limit) fails with a message and leaves no partial
//    checkpoint; a truncated or corrupt checkpoint, another preset's, or a too long prompt are refused.
#include <doctest/doctest.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/app/run_program.hpp"

using namespace ampgrad::testing;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> run_flags(const std::string& out, const std::string& prec) {
    return {"train", "--n-layer", "2", "--n-embd", "32", "--n-head", "2", "--block-size", "16", "--batch-size", "4",
            "--steps", "16", "--warmup", "3", "--eval-every", "8", "--eval-iters", "2", "--sample-tokens", "0",
            "--dropout", "0.1", "--prec", prec, "--init-scale", "1e6", "--scale-window", "3", "--hysteresis", "1",
            "--out", out};
}

// step -> the JSON record of every "train" line.

void check_resume_is_bit_exact(const std::string& prec) {
    CAPTURE(prec);
    const std::string straight = make_temp_dir("straight"), split = make_temp_dir("split");
    ProgramResult a = run_ampgrad(run_flags(straight, prec));
    REQUIRE_MESSAGE(a.exit_code == 0, a.output);
    ProgramResult b1 = run_ampgrad(plus(run_flags(split, prec), {"--until", "8"}));
    REQUIRE_MESSAGE(b1.exit_code == 0, b1.output);
    ProgramResult b2 = run_ampgrad(plus(run_flags(split, prec), {"--resume", split}));
    REQUIRE_MESSAGE(b2.exit_code == 0, b2.output);
    CHECK(b2.output.find("resumed from") != std::string::npos);
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
        CAPTURE(file);
        CHECK(read_bytes(fs::path(latest_dir(straight)) / file) == read_bytes(fs::path(latest_dir(split)) / file));
    }
    std::map<int64_t, nlohmann::json> ra = train_records(straight), rb = train_records(split);
    REQUIRE(ra.size() == 16);
    REQUIRE(rb.size() == 16);
    int skipped_in_second_half = 0;
    for (int64_t step = 1; step <= 16; ++step) {
        CAPTURE(step);
        CHECK(ra[step]["loss"].get<double>() == rb[step]["loss"].get<double>());
        CHECK(ra[step]["scale"].get<double>() == rb[step]["scale"].get<double>());
        CHECK(ra[step]["skipped"] == rb[step]["skipped"]);
        if (step > 8) skipped_in_second_half += ra[step]["skipped"].get<bool>();
    }
    if (prec != "fp32") CHECK(skipped_in_second_half > 0);
    fs::remove_all(straight);
    fs::remove_all(split);
}

}  // namespace

TEST_CASE("--resume is bit-exact in fp32") { check_resume_is_bit_exact("fp32"); }
TEST_CASE("--resume is bit-exact in fp16 with GradScaler, across a skipped step") { check_resume_is_bit_exact("fp16"); }
TEST_CASE("--resume is bit-exact with fp16 master weights and DeepSpeed's loss scaler") {
    check_resume_is_bit_exact("fp16-master");
}

// Issue 23: `--resume DIR --steps 12` on a run saved at --steps 6 used to print "6 steps ... trained to
// step 6" and train nothing. Now --steps extends the schedule (the cosine spans 12 steps from then on),
// and any other run flag whose value differs from the saved run's is refused by name.
TEST_CASE("--resume with run flags: --steps extends the schedule; another changed flag is refused, naming both values") {
    const std::string out = make_temp_dir("extend");
    const std::vector<std::string> run = {"train", "--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--block-size",
                                          "8", "--batch-size", "2", "--warmup", "2", "--lr", "0.002", "--min-lr",
                                          "0.0002", "--eval-iters", "1", "--sample-tokens", "0", "--out", out};
    ProgramResult first = run_ampgrad(plus(run, {"--steps", "6"}));
    REQUIRE_MESSAGE(first.exit_code == 0, first.output);
    ProgramResult more = run_ampgrad(plus(run, {"--steps", "12", "--resume", out}));
    REQUIRE_MESSAGE(more.exit_code == 0, more.output);
    CHECK(more.output.find("--steps 12: the schedule now spans 12 steps (saved: 6)") != std::string::npos);
    CHECK(more.output.find("trained to step 12") != std::string::npos);
    std::map<int64_t, nlohmann::json> records = train_records(out);
    CHECK(records.size() == 12);
    // The learning rate continues on the cosine over 12 steps: step 7 (it = 6) has r = (6 - 2) / (12 - 2).
    const double r = 4.0 / 10.0, want = 0.0002 + 0.5 * (1.0 + std::cos(3.141592653589793 * r)) * (0.002 - 0.0002);
    CHECK(records[7]["lr"].get<double>() == doctest::Approx(want).epsilon(1e-12));
    CHECK(records[12]["lr"].get<double>() > 0.0002);                    // still decaying, not at min_lr
    ProgramResult lr = run_ampgrad(plus(run, {"--steps", "12", "--lr", "0.003", "--resume", out}));
    CHECK(lr.exit_code == 1);
    CHECK_MESSAGE(lr.output.find("--lr 0.003: the run in ") != std::string::npos, lr.output);
    CHECK(lr.output.find("was saved with --lr 0.002") != std::string::npos);
    CHECK(lr.output.find("drop --lr, or start a new run without --resume") != std::string::npos);
    ProgramResult prec = run_ampgrad(plus(run, {"--steps", "12", "--prec", "bf16", "--resume", out}));
    CHECK(prec.exit_code == 1);
    CHECK_MESSAGE(prec.output.find("--prec bf16: the run in ") != std::string::npos, prec.output);
    CHECK(prec.output.find("saved with --prec fp32") != std::string::npos);
    ProgramResult shorter = run_ampgrad(plus(run, {"--steps", "3", "--resume", out}));
    CHECK(shorter.exit_code == 1);
    CHECK_MESSAGE(shorter.output.find("--steps 3: the run being resumed is already at step 12") != std::string::npos,
                  shorter.output);
    fs::remove_all(out);
}

TEST_CASE("SIGKILL in the middle of a save leaves the previous checkpoint loadable") {
    const std::string out = make_temp_dir("kill");
    std::vector<std::string> flags = plus(run_flags(out, "fp32"), {"--ckpt-every", "4"});
    ProgramResult r = run_ampgrad(flags, {"AMPGRAD_TEST_STOP_IN_SAVE=8"}, /*kill=*/true);
    CAPTURE(r.output);
    REQUIRE(r.was_stopped);
    CHECK(r.signal == SIGKILL);
    CHECK(latest_dir(out) == out + "/checkpoints/step-00000004");
    bool leftover = false;                                   // the killed save's temporary directory
    for (const auto& e : fs::directory_iterator(out + "/checkpoints")) leftover |= e.path().filename().string()[0] == '.';
    CHECK(leftover);
    ProgramResult ev = run_ampgrad({"eval", "--ckpt", out});
    CAPTURE(ev.output);
    CHECK(ev.exit_code == 0);
    CHECK(ev.output.find("\"step\":4") != std::string::npos);
    ProgramResult resumed = run_ampgrad(plus(flags, {"--resume", out}));
    CAPTURE(resumed.output);
    CHECK(resumed.exit_code == 0);
    CHECK(resumed.output.find("resumed from " + out + "/checkpoints/step-00000004 at step 4") != std::string::npos);
    CHECK(latest_dir(out) == out + "/checkpoints/step-00000016");
    for (const auto& e : fs::directory_iterator(out + "/checkpoints")) CHECK(e.path().filename().string()[0] != '.');
    fs::remove_all(out);
}

TEST_CASE("a full disk during a save: a message, a non-zero exit, the previous checkpoint intact") {
    const std::string out = make_temp_dir("full");
    std::vector<std::string> flags = run_flags(out, "fp32");
    REQUIRE(run_ampgrad(plus(flags, {"--until", "4"})).exit_code == 0);
    // The model file of this run is about 60 KiB; a 40 KiB limit fails the next save partway.
    std::vector<std::string> again = plus(flags, {"--resume", out, "--until", "8"});
    ProgramResult r = run_ampgrad_with_file_limit(again, 40);
    CAPTURE(r.output);
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("File too large") != std::string::npos);
    CHECK(latest_dir(out) == out + "/checkpoints/step-00000004");
    for (const auto& e : fs::directory_iterator(out + "/checkpoints")) CHECK(e.path().filename().string()[0] != '.');
    CHECK(run_ampgrad({"eval", "--ckpt", out}).exit_code == 0);
    fs::remove_all(out);
}

TEST_CASE("corrupt, truncated and foreign checkpoints, and too long prompts, are refused by name") {
    const std::string out = make_temp_dir("corrupt");
    REQUIRE(run_ampgrad(plus(run_flags(out, "fp32"), {"--until", "2"})).exit_code == 0);
    const std::string dir = latest_dir(out);
    ProgramResult other = run_ampgrad({"sample", "--ckpt", out, "--preset", "tiny"});
    CHECK(other.exit_code == 1);
    CHECK(other.output.find("was trained with preset \"nano\", not \"tiny\"") != std::string::npos);
    ProgramResult resume_other = run_ampgrad(plus(run_flags(out, "fp32"), {"--resume", out, "--preset", "small"}));
    CHECK(resume_other.exit_code == 1);
    CHECK(resume_other.output.find("not \"small\"") != std::string::npos);
    ProgramResult long_prompt = run_ampgrad({"sample", "--ckpt", out, "--prompt", std::string(40, 'a')});
    CHECK(long_prompt.exit_code == 1);
    CHECK(long_prompt.output.find("--prompt: 40 tokens is longer than the model's context of 16 tokens") !=
          std::string::npos);
    CHECK(run_ampgrad({"sample", "--ckpt", out, "--tokens", "20", "--prompt", "To be"}).exit_code == 0);
    // Truncate the model file: the loader names the file.
    const std::string model = read_bytes(fs::path(dir) / "model.safetensors");
    std::ofstream(fs::path(dir) / "model.safetensors", std::ios::binary) << model.substr(0, model.size() / 2);
    ProgramResult truncated = run_ampgrad({"eval", "--ckpt", out});
    CAPTURE(truncated.output);
    CHECK(truncated.exit_code == 1);
    CHECK(truncated.output.find("model.safetensors") != std::string::npos);
    std::ofstream(fs::path(dir) / "state.json") << "{\"format\": \"ampgrad-gpt-checkpoint\", \"step\": ";
    ProgramResult corrupt = run_ampgrad({"eval", "--ckpt", out});
    CAPTURE(corrupt.output);
    CHECK(corrupt.exit_code == 1);
    CHECK(corrupt.output.find("state.json: truncated or corrupt JSON") != std::string::npos);
    ProgramResult none = run_ampgrad({"eval", "--ckpt", out + "/nothing"});
    CHECK(none.exit_code == 1);
    CHECK(none.output.find("no checkpoint there") != std::string::npos);
    fs::remove_all(out);
}
