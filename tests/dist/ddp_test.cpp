// tests/dist/ddp_test.cpp: DistributedDataParallel (dist/ddp.hpp) with real processes over
// loopback: each case starts N dist_worker ranks on a scenario of tests/dist/ddp_scenarios.cpp,
// in which every rank checks its DDP-trained parameters against single-process training on the
// concatenated batch after every step. Plus the bucket assignment, in this process.
#include "autograd/ops/ops.hpp"
#include "dist/reducer.hpp"
#include "spawn.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace ampgrad_test;

namespace {

// Runs a DDP scenario on n ranks: every rank passes and rebuilt its buckets once.
std::vector<RankResult> run_ddp(const std::string& scenario, int n) {
    auto results = run_passing(scenario, n);
    for (size_t r = 0; r < results.size(); ++r) {
        CAPTURE(scenario);
        CAPTURE(r);
        CHECK(line_after(results[r].output, "REBUILT") == "1");
    }
    return results;
}

}  // namespace

TEST_CASE("ddp: buckets follow the given order, split by size and by dtype") {
    using namespace ampgrad;
    std::vector<Tensor> params{zeros({10}), zeros({10}), zeros({3}, kFloat64), zeros({10}), zeros({10})};
    // 40-byte f32 parameters with a 64-byte cap: two per bucket; the f64 one has its own.
    auto buckets = dist::assign_buckets(params, {4, 3, 2, 1, 0}, 64);
    REQUIRE(buckets.size() == 3);
    CHECK(buckets[0] == std::vector<size_t>{4, 3});
    CHECK(buckets[1] == std::vector<size_t>{2});
    CHECK(buckets[2] == std::vector<size_t>{1, 0});
    CHECK(dist::assign_buckets(params, {0, 1, 2, 3, 4}, 1 << 20).size() == 2);   // one per dtype
}

TEST_CASE("ddp: equals single-process training on the concatenated batch, 1, 2 and 4 ranks") {
    for (int n : {1, 2, 4}) {
        CAPTURE(n);
        auto results = run_ddp("ddp", n);
        CHECK(line_after(results[0].output, "BUCKETS").find("][") == std::string::npos);   // 25 MB: one bucket
    }
}

TEST_CASE("ddp: tiny buckets are rebuilt from rank 0's order, the same on every rank, and launched during backward") {
    auto results = run_ddp("ddp_tiny", 2);
    std::string layout = line_after(results[0].output, "BUCKETS");
    CAPTURE(layout);
    CHECK(layout.find("][") != std::string::npos);                 // several buckets
    CHECK(line_after(results[1].output, "BUCKETS") == layout);
    CHECK(std::stoi(line_after(results[0].output, "EARLY")) >= 3);  // buckets reduced while backward ran
}

TEST_CASE("ddp: gradient accumulation with no_sync") {
    run_ddp("ddp_accum", 2);
}

TEST_CASE("ddp: unused parameters") {
    SUBCASE("find_unused_parameters = true: trains like one process, the unused weight keeps no gradient") {
        run_ddp("ddp_unused", 2);
    }
    SUBCASE("used by rank 0's samples only: the other ranks get the average all the same") {
        run_ddp("ddp_unused_rank", 2);
    }
    SUBCASE("without the option: a clear error naming the parameters") {
        auto results = run_workers("ddp_unused_error", 2, free_port(), all_ranks(2), std::chrono::seconds(60));
        for (const RankResult& r : results) {
            CAPTURE(r.output);
            CHECK(r.exit_code == 3);
            CHECK(contains(r.output, "did not receive a gradient in this backward: unused.weight, unused.bias"));
            CHECK(contains(r.output, "find_unused_parameters = true"));
        }
    }
}

TEST_CASE("ddp: checkpointed block whose Linear is also used outside it, tiny buckets") {
    for (const char* scenario : {"ddp_ckpt", "ddp_ckpt_reentrant"}) {
        // Reentrant: `mid` gets its gradient in two backward phases (the outer task, then the
        // checkpoint's nested one); its bucket must wait for both.
        auto results = run_ddp(scenario, 2);
        CHECK(std::stoi(line_after(results[0].output, "EARLY")) >= 1);
    }
}

TEST_CASE("ddp: a parameter that gets a gradient after its bucket was reduced is a clear error") {
    // The first iteration learns one accumulation per backward for `mid`; then reentrant
    // checkpointing is switched on and `mid` accumulates twice (PyTorch's "Expected to mark a
    // variable ready only once").
    auto results = run_workers("ddp_graph_change", 2, free_port(), all_ranks(2), std::chrono::seconds(60));
    for (const RankResult& r : results) {
        CAPTURE(r.output);
        CHECK(r.exit_code == 3);
        CHECK(contains(r.output, "Expected to mark a variable ready only once. Parameter 'mid.weight'"));
    }
}
