// corrupt_checkpoint_test.cpp: every corruption of an ampgrad checkpoint is refused with an
// ampgrad::Error naming the checkpoint, by Trainer::resume (what `train --resume`, `sample --ckpt`,
// `eval --ckpt` and `export --ckpt` call): state.json's values retyped (a string for a number, an
// array for an object, 2^62 for a size) or dropped, and model.safetensors and optimizer.safetensors
// truncated, overwritten and padded. A corruption the files cannot show (a flipped bit in a weight,
// a learning rate changed to another valid number) may load; nothing may escape as another
// exception, crash, hang or (under CI's sanitizers) read out of bounds.
#include <doctest/doctest.h>

#include <filesystem>

#include "app/checkpoint.hpp"
#include "app/trainer.hpp"
#include "tests/app/run_program.hpp"
#include "tests/support/corrupt_inputs.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;
namespace fs = std::filesystem;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kStatePaths = 25;   // under AddressSanitizer (5x slower): the first 25 of state.json's values
#else
constexpr size_t kStatePaths = 60;
#endif

app::RunConfig tiny_run() {
    app::RunConfig c;
    c.n_layer = 1, c.n_embd = 16, c.n_head = 2, c.block_size = 8;
    c.batch_size = 2, c.steps = 2, c.warmup = 1, c.eval_every = 0, c.eval_iters = 1;
    return c;
}

// Resumed for training and loaded for inference (sample, eval, export).
void resume_both_ways(const std::string& dir) {
    app::Trainer::resume(dir, std::nullopt, /*for_inference=*/false);
    app::Trainer::resume(dir, std::nullopt, /*for_inference=*/true);
}

}  // namespace

TEST_CASE("every corruption of a checkpoint's state.json or weights is an ampgrad::Error naming the checkpoint") {
    const std::string root = make_temp_dir("corrupt_checkpoint");
    app::Trainer t(tiny_run());
    t.train_step();
    const std::string dir = app::save_checkpoint(t, root);
    const std::string name = fs::path(dir).filename().string();   // "step-00000001"
    auto load = [&] { resume_both_ways(dir); };
    load();
    const std::string state = dir + "/state.json";
    CHECK(check_file_corruptions(state, json_corruptions(read_whole_file(state), kStatePaths), load, name) > 100);
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
        CAPTURE(file);
        const std::string path = dir + "/" + file;
        CHECK(check_file_corruptions(path, byte_corruptions(read_whole_file(path), 24), load, name) > 20);
    }
    load();   // restored: the checkpoint loads again
    fs::remove_all(root);
}
