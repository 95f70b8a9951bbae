// tree_reduce_test.cpp: dist/tree_reduce.hpp. PairwiseSum builds the complete binary tree over its
// leaves (checked against the sum written out by hand, and shown to differ from the running sum on
// values where the order matters); tree_all_reduce and tree_reduce_scatter (recursive halving over
// send_recv) over 2, 4 and 8 ranks of dist_worker give the bits of one process's tree over all the
// leaves, for every split of 8 leaves (tests/dist/tree_reduce_scenarios.cpp).
#include <doctest/doctest.h>

#include <cstring>

#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "dist/tree_reduce.hpp"
#include "spawn.hpp"

using namespace ampgrad;
using namespace ampgrad_test;

namespace {

float bits_of_sum(dist::PairwiseSum& s) { return s.result().item<float>(); }

}  // namespace

TEST_CASE("PairwiseSum: the complete binary tree over 8 leaves, not the running sum") {
    const std::vector<float> x = {1e8f, 1.0f, -1e8f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};   // tree 4, running sum 5
    dist::PairwiseSum s;
    for (float v : x) s.add(scalar_tensor(v, TensorOptions().dtype(kFloat32)));
    CHECK(s.count() == 8);
    const float tree = ((x[0] + x[1]) + (x[2] + x[3])) + ((x[4] + x[5]) + (x[6] + x[7]));
    float running = 0.0f;
    for (float v : x) running += v;
    const float got = bits_of_sum(s);
    CHECK(std::memcmp(&got, &tree, sizeof got) == 0);
    CHECK(tree != running);   // the values make the order visible
    CHECK(s.count() == 0);    // result() empties it
    CHECK_THROWS_AS(s.result(), InternalError);
}

TEST_CASE("tree_sum adds doubles in the same tree") {
    const std::vector<double> x = {1e17, 1.0, -1e17, 1.0};
    CHECK(dist::tree_sum(x) == (x[0] + x[1]) + (x[2] + x[3]));
    CHECK(dist::tree_sum({}) == 0.0);
}

TEST_CASE("check_tree_layout: powers of two only, naming the values") {
    CHECK_NOTHROW(dist::check_tree_layout(4, 2, "t"));
    CHECK_THROWS_WITH_AS(dist::check_tree_layout(3, 2, "t"), doctest::Contains("world size 3"), ValueError);
    CHECK_THROWS_WITH_AS(dist::check_tree_layout(2, 6, "t"), doctest::Contains("accumulation steps 6"), ValueError);
}

TEST_CASE("tree_all_reduce and tree_reduce_scatter: 2 x 4, 4 x 2 and 8 x 1 give one process's tree over 8 leaves") {
    for (auto [world, accum] : {std::pair{2, 4}, std::pair{4, 2}, std::pair{8, 1}, std::pair{2, 1}}) {
        CAPTURE(world);
        auto results = run_workers("tree", world, free_port(), all_ranks(world, {{"ACCUM", std::to_string(accum)}}),
                                   std::chrono::seconds(60));
        for (const RankResult& r : results) {
            CAPTURE(r.output);
            CHECK(r.exit_code == 0);
        }
    }
}
