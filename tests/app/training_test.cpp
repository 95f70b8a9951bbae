// training_test.cpp: the training checks of the issue, kept short: the nano GPT drives the loss
// on the bundled text well below ln V in a fixed number of steps, and a small model learns
// 2-digit addition to >= 95% exact match on held-out problems. Both run in-process through the
// same Trainer as `ampgrad train`. Under AddressSanitizer (about 5x slower) they are skipped.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>

#include "app/trainer.hpp"
#include "tests/support/check_close.hpp"

using namespace ampgrad;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

TEST_CASE("nano on Tiny Shakespeare: the loss falls well below ln V in 50 steps" * doctest::skip(kSanitized)) {
    app::RunConfig cfg;
    cfg.preset = "nano";
    cfg.block_size = 32;
    cfg.steps = 50;                                        // val loss 2.79 here (2.66 after 100)
    cfg.warmup = 5;
    cfg.batch_size = 8;
    cfg.lr = 3e-3, cfg.min_lr = 3e-4;
    cfg.eval_iters = 4;
    app::Trainer t(cfg);
    const double ln_v = std::log(static_cast<double>(t.model().vocab_size()));   // 65 characters: 4.17
    const auto start = std::chrono::steady_clock::now();
    double first = 0;
    while (t.step() < cfg.steps) {
        app::TrainStats s = t.train_step();
        if (s.step == 1) first = s.loss;
    }
    app::EvalStats e = t.evaluate();
    MESSAGE("nano: loss " << first << " -> val " << e.val_loss << " (ln V = " << ln_v << ") in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s");
    CHECK(first == doctest::Approx(ln_v).epsilon(0.1));
    CHECK(e.val_loss < 0.72 * ln_v);                       // 3.0 nats: past a unigram model
}

// 500 steps of batch 128 with AdamW beta2 0.98 (the LR schedule spans exactly those 500 steps: a
// shorter schedule decays before the model has found the carry). Seen with `ampgrad train` and this
// configuration on a loaded 2-core machine: exact match 100%, 99.4% and 99.4% at step 500 for seeds
// 1337, 7 and 99 (95.6-100% already at step 300), in 10-30 s depending on the load. With 400 steps
// it ends at only 14.6%, so this is near the cheapest schedule that is reliably past 95%.
// The run is pinned to one thread: the trajectory depends on how reductions split across
// threads, and with 2 threads this seed ends at 94.2% (1 thread: 100%).
TEST_CASE("2-digit addition: >= 95% exact match on held-out problems" * doctest::skip(kSanitized)) {
    app::RunConfig cfg;
    cfg.task = "addition";
    cfg.digits = 2;
    cfg.preset = "nano";
    cfg.n_layer = 2, cfg.n_head = 4, cfg.n_embd = 64, cfg.block_size = 8;
    cfg.steps = 500;
    cfg.warmup = 30;
    cfg.batch_size = 128;
    cfg.lr = 3e-3, cfg.min_lr = 3e-4, cfg.weight_decay = 0.0, cfg.beta2 = 0.98;
    const int threads_before = get_num_threads();
    set_num_threads(1);
    app::Trainer t(cfg);
    const auto start = std::chrono::steady_clock::now();
    while (t.step() < cfg.steps) t.train_step();
    set_num_threads(threads_before);
    app::EvalStats e = t.evaluate();
    REQUIRE(e.exact_match.has_value());
    MESSAGE("addition: exact match " << 100.0 * *e.exact_match << "% after " << cfg.steps << " steps in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s");
    CHECK(*e.exact_match >= 0.95);
}
