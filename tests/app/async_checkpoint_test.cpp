// async_checkpoint_test.cpp: `train --ckpt-async` (app/async_checkpoint.hpp):
//  - the AsyncCheckpointer writes the state as it was at save(), not as training changed it after
//    the fence (wait_for_copy), and a write before the fence is an InternalError naming the tensor;
//  - a failed background save surfaces as an IOError naming the step, at the next wait();
//  - the program's async checkpoints hold the same bytes as synchronous ones (all three files; fp32,
//    and fp8, whose amax histories the forward writes), with
//    the background copy held back past the next forward and backward (so only the fence before
//    the optimizer step keeps them equal), and it reports the time the step was blocked;
//  - SIGKILL in the middle of a background save leaves the previous checkpoint as `latest`, whole
//    and resumable (the injected fault of issue 36).
#include <doctest/doctest.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "app/async_checkpoint.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "io/safetensors.hpp"
#include "tests/app/run_program.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> train_flags(const std::string& out) {
    return {"train", "--n-layer", "2", "--n-embd", "32", "--n-head", "2", "--block-size", "16", "--batch-size", "4",
            "--steps", "12", "--warmup", "3", "--eval-every", "12", "--eval-iters", "2", "--sample-tokens", "0",
            "--ckpt-every", "4", "--out", out};
}

std::string latest_name(const std::string& out) {
    const std::string name = read_bytes(out + "/checkpoints/latest");
    return name.substr(0, name.find('\n'));
}

app::CheckpointContent content_at(int64_t step, const Tensor& weight, const Tensor& moment) {
    app::CheckpointContent c;
    c.step = step;
    c.model.insert("w", weight);
    c.optimizer.insert("exp_avg.w", moment);
    c.state = {{"step", step}};
    return c;
}

// AMPGRAD_TEST_DELAY_ASYNC_COPY_MS for the life of the object: the copier starts that much late.
struct DelayedCopy {
    explicit DelayedCopy(const char* ms) { ::setenv("AMPGRAD_TEST_DELAY_ASYNC_COPY_MS", ms, 1); }
    ~DelayedCopy() { ::unsetenv("AMPGRAD_TEST_DELAY_ASYNC_COPY_MS"); }
};

}  // namespace

TEST_CASE("--ckpt-async: the background save writes the state as it was at save(), then latest") {
    const std::string root = make_temp_dir("async_unit") + "/checkpoints";
    Tensor w = full({64, 64}, 1.0), m = full({64}, 2.0);
    const DelayedCopy delayed("50");   // the fence must wait for the copy
    app::AsyncCheckpointer saver;
    const double blocked = saver.save(content_at(3, w, m), root);
    CHECK(blocked >= 0.0);
    CHECK(saver.wait_for_copy() > 0.0);
    CHECK(saver.wait_for_copy() == 0.0);   // copied: the fence is open
    w.fill_(5.0);   // training goes on while the write runs
    m.fill_(6.0);
    saver.wait();
    CHECK(saver.last_saved() == root + "/step-00000003");
    CHECK(latest_name(fs::path(root).parent_path().string()) == "step-00000003");
    const io::SafetensorsFile model = io::load_safetensors(root + "/step-00000003/model.safetensors");
    CHECK(model.tensors.at("w").to_vector<float>() == std::vector<float>(64 * 64, 1.0f));
    const io::SafetensorsFile opt = io::load_safetensors(root + "/step-00000003/optimizer.safetensors");
    CHECK(opt.tensors.at("exp_avg.w").to_vector<float>() == std::vector<float>(64, 2.0f));
    // The next save waits for nothing in flight and replaces latest; keep=2 prunes the oldest.
    saver.save(content_at(4, w, m), root);
    saver.save(content_at(5, w, m), root);
    saver.wait();
    CHECK(latest_name(fs::path(root).parent_path().string()) == "step-00000005");
    CHECK_FALSE(fs::exists(root + "/step-00000003"));
    CHECK(io::load_safetensors(root + "/step-00000005/model.safetensors").tensors.at("w").to_vector<float>()[0] == 5.0f);
    fs::remove_all(fs::path(root).parent_path());
}

TEST_CASE("--ckpt-async: a write to the live state before the fence is an InternalError naming the tensor") {
    const std::string root = make_temp_dir("async_unfenced") + "/checkpoints";
    Tensor w = full({8, 8}, 1.0), m = full({8}, 2.0);
    const DelayedCopy delayed("100");
    app::AsyncCheckpointer saver;
    saver.save(content_at(3, w, m), root);
    w.fill_(5.0);   // no wait_for_copy() first: the copier has not copied yet
    CHECK_THROWS_WITH_AS(saver.wait(), doctest::Contains("\"w\" was written during the background copy of step 3"),
                         InternalError);
    CHECK_FALSE(fs::exists(root + "/step-00000003"));
    fs::remove_all(fs::path(root).parent_path());
}

TEST_CASE("--ckpt-async: a background save that fails is an IOError naming the step at the next wait") {
    const std::string dir = make_temp_dir("async_fail");
    const std::string root = dir + "/not_a_folder";
    std::ofstream(root) << "a file where the checkpoint folder should be";
    app::AsyncCheckpointer saver;
    saver.save(content_at(7, full({4}, 1.0), full({4}, 1.0)), root);
    CHECK_THROWS_WITH_AS(saver.wait(), doctest::Contains("--ckpt-async: the background save of step 7 under"), IOError);
    saver.wait();   // the failure is reported once
    fs::remove_all(dir);
}

namespace {

// Runs `train` with `extra` synchronously and with --ckpt-async, the async copier started 200 ms
// late (after the next step's forward and backward: only the fence before the optimizer step keeps
// the bytes equal), and compares the three files of step 8's checkpoint byte for byte. Returns the
// async run's folder (the caller removes it).
std::string check_async_bytes_equal_sync(const std::vector<std::string>& extra) {
    const std::string sync_out = make_temp_dir("ckpt_sync"), async_out = make_temp_dir("ckpt_async");
    ProgramResult sync_run = run_ampgrad(plus(train_flags(sync_out), extra));
    REQUIRE_MESSAGE(sync_run.exit_code == 0, sync_run.output);
    ProgramResult async_run = run_ampgrad(plus(plus(train_flags(async_out), extra), {"--ckpt-async"}),
                                          {"AMPGRAD_TEST_DELAY_ASYNC_COPY_MS=200"});
    REQUIRE_MESSAGE(async_run.exit_code == 0, async_run.output);
    CHECK(sync_run.output.find("2 checkpoint save(s) blocked the step") != std::string::npos);
    CHECK(sync_run.output.find("synchronous: the whole write") != std::string::npos);
    CHECK(async_run.output.find("2 checkpoint save(s) blocked the step") != std::string::npos);
    CHECK(async_run.output.find("ms in all at the fence before the next optimizer step") != std::string::npos);
    CHECK(latest_name(async_out) == "step-00000012");
    for (const char* file : {"model.safetensors", "optimizer.safetensors", "state.json"}) {   // step 4's was pruned (keep 2)
        CAPTURE(file);
        const std::string a = read_bytes(async_out + "/checkpoints/step-00000008/" + file);
        CHECK(!a.empty());
        CHECK(a == read_bytes(sync_out + "/checkpoints/step-00000008/" + file));
    }
    fs::remove_all(sync_out);
    return async_out;
}

}  // namespace

TEST_CASE("train --ckpt-async: the same checkpoint bytes as a synchronous save, and the blocked time reported") {
    fs::remove_all(check_async_bytes_equal_sync({}));
}

TEST_CASE("train --ckpt-async --prec fp8: the amax histories the forward writes are saved as at the step boundary") {
    const std::string async_out = check_async_bytes_equal_sync({"--prec", "fp8"});
    const io::SafetensorsFile opt = io::load_safetensors(async_out + "/checkpoints/step-00000008/optimizer.safetensors");
    int fp8_entries = 0;   // copied at the boundary (written_by_forward in app/async_checkpoint.cpp)
    for (const auto& [name, t] : opt.tensors) fp8_entries += name.rfind("fp8.", 0) == 0 ? 1 : 0;
    CHECK(fp8_entries > 0);
    fs::remove_all(async_out);
}

TEST_CASE("train --ckpt-async: SIGKILL in the middle of a background save leaves the previous checkpoint as latest") {
    const std::string out = make_temp_dir("async_kill");
    const std::vector<std::string> flags = plus(train_flags(out), {"--ckpt-async"});
    ProgramResult r = run_ampgrad(flags, {"AMPGRAD_TEST_STOP_IN_SAVE=8"}, /*kill=*/true);
    CAPTURE(r.output);
    REQUIRE(r.was_stopped);
    CHECK(r.signal == SIGKILL);
    CHECK(latest_name(out) == "step-00000004");
    ProgramResult ev = run_ampgrad({"eval", "--ckpt", out});
    CAPTURE(ev.output);
    CHECK(ev.exit_code == 0);
    CHECK(ev.output.find("\"step\":4") != std::string::npos);
    ProgramResult resumed = run_ampgrad(plus(flags, {"--resume", out}));
    CAPTURE(resumed.output);
    CHECK(resumed.exit_code == 0);
    CHECK(resumed.output.find("resumed from " + out + "/checkpoints/step-00000004 at step 4") != std::string::npos);
    CHECK(latest_name(out) == "step-00000012");
    fs::remove_all(out);
}
