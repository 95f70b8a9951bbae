// step_result_test.cpp: deferred step results (amp/step_result.hpp). With a fused optimizer and
// defer_step_result, GradScaler::step() and update() read nothing on the host (counted with
// HostSyncCounter: on a GPU each read would be a synchronisation), and the results, read later,
// say what an eager scaler says at once. The forced overflows make the pattern something to match.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "core/host_sync.hpp"
#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
using amp::OverflowRecord;

struct Run {
    Tensor w;
    std::vector<amp::StepResult> results;
    std::vector<int64_t> syncs_in_step_and_update;
    int64_t unread_after_loop = 0;
    std::vector<OverflowRecord> history;
};

// Six iterations of AdamW under a GradScaler; iterations 2 and 3 overflow. `read_early` reads each
// result between step() and update().
Run train(std::optional<bool> defer, bool fused = true, bool read_early = false) {
    manual_seed(9);
    Run run;
    run.w = randn({3, 4}).requires_grad_(true);
    run.w.set_name("fc.weight");
    Tensor x = randn({5, 4});
    optim::AdamW opt(std::vector<Tensor>{run.w}, optim::AdamWOptions(1e-2).fused(fused));
    amp::GradScalerOptions options;
    options.init_scale = 1024.0;
    options.growth_interval = 2;
    options.defer_step_result = defer;
    amp::GradScaler scaler(options);
    for (int it = 0; it < 6; ++it) {
        opt.zero_grad();
        const double poison = (it == 2 || it == 3) ? kInf : 1.0;
        scaler.scale(linear(x, run.w).pow(2.0).mean() * poison).backward();
        HostSyncCounter syncs;
        run.results.push_back(scaler.step(opt));
        const int64_t in_step = syncs.count();
        if (read_early) (void)run.results.back().skipped();
        syncs.reset();
        scaler.update();
        run.syncs_in_step_and_update.push_back(in_step + syncs.count());
    }
    run.unread_after_loop = scaler.unread_step_results();
    run.history = scaler.overflow_history();
    CHECK(scaler.consecutive_skips() == 0);
    CHECK(scaler.get_scale() == 1024.0);                  // 1024 -> 2048 (it 1) -> 1024 -> 512 -> 1024 (it 5)
    return run;
}

}  // namespace

TEST_CASE("deferred step results: step() and update() make no host read; the results match an eager scaler") {
    Run eager = train(false), deferred = train(true);
    for (int it = 0; it < 6; ++it) {
        CAPTURE(it);
        CHECK(deferred.syncs_in_step_and_update[it] == 0);
        CHECK(eager.syncs_in_step_and_update[it] > 0);     // the counter does see the eager read
        CHECK(eager.results[it].ready());
        CHECK(eager.results[it].skipped() == (it == 2 || it == 3));
    }
    CHECK(eager.unread_after_loop == 0);
    CHECK(deferred.unread_after_loop == 6);               // none read until overflow_history()
    for (int it = 0; it < 6; ++it) {
        CAPTURE(it);
        CHECK(deferred.results[it].ready());
        CHECK(deferred.results[it].skipped() == eager.results[it].skipped());
    }
    CHECK(equal(deferred.w, eager.w));                    // the kernel skipped by itself, bit for bit
    REQUIRE(eager.history.size() == 2);
    REQUIRE(deferred.history.size() == 2);
    for (size_t i = 0; i < 2; ++i) {
        CHECK(deferred.history[i].iteration == eager.history[i].iteration);
        CHECK(deferred.history[i].scale == eager.history[i].scale);
    }
    CHECK(eager.history[0].param == "fc.weight");
    CHECK(eager.history[0].nonfinite_count == 12);
    CHECK(deferred.history[0].param.find("read after update()") != std::string::npos);   // it could not look
    CHECK(eager.history[0].scale == 2048.0);
    CHECK(eager.history[1].scale == 1024.0);
}

TEST_CASE("deferred step results: read before update(), a skip names the parameter; unread ones are counted") {
    Run early = train(true, /*fused=*/true, /*read_early=*/true);
    REQUIRE(early.history.size() == 2);
    CHECK(early.history[0].param == "fc.weight");
    CHECK(early.history[0].nonfinite_count == 12);
    CHECK(early.results[2].reason().find("fc.weight") != std::string::npos);
    CHECK(early.results[1].reason().empty());
    REQUIRE(early.results[3].overflow() != nullptr);
    CHECK(early.results[3].overflow()->iteration == 3);

    manual_seed(2);
    Tensor w = randn({2, 2}).requires_grad_(true);
    optim::Adam opt(std::vector<Tensor>{w}, optim::AdamOptions(1e-2));
    amp::GradScalerOptions options;
    options.defer_step_result = true;
    amp::GradScaler scaler(options);
    for (int it = 0; it < 3; ++it) {
        opt.zero_grad();
        scaler.scale(w.sum()).backward();
        scaler.step(opt);
        scaler.update();
    }
    CHECK(scaler.unread_step_results() == 3);
    CHECK(scaler.consecutive_skips() == 0);               // reads them
    CHECK(scaler.unread_step_results() == 0);
}

TEST_CASE("deferred step results: an unfused optimizer still decides on the host") {
    Run unfused = train(true, /*fused=*/false);
    for (int it = 0; it < 6; ++it) {
        CAPTURE(it);
        CHECK(unfused.syncs_in_step_and_update[it] > 0);   // it must read found_inf to decide
        CHECK(unfused.results[it].ready());
        CHECK(unfused.results[it].skipped() == (it == 2 || it == 3));
    }
}
