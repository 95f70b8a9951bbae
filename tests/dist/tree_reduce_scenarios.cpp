// tests/dist/tree_reduce_scenarios.cpp: the dist_worker scenario "tree" for tree_reduce_test.cpp. Every
// rank holds ACCUM leaves (global index g = rank * ACCUM + k; ACCUM from the environment) whose values
// make the association matter (1e8-sized terms that cancel, small ones that do not), adds them with
// PairwiseSum and tree_all_reduce, and compares the bits with one PairwiseSum over all N leaves, which
// every rank can compute alone; tree_reduce_scatter must give this rank's chunk of the same bits (257
// elements: the last chunk is padded with zeros). Exit 0 when they agree, 1 when not.
#include "autograd/ops/ops.hpp"
#include "dist/process_group.hpp"
#include "dist/tree_reduce.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace ampgrad;

namespace {

constexpr int64_t kElements = 257;   // odd: no bucket or vector width divides it

// Leaf g's values: large terms of alternating sign and small ones, f32.
Tensor leaf(int64_t g) {
    std::vector<float> v(kElements);
    for (int64_t i = 0; i < kElements; ++i)
        v[static_cast<size_t>(i)] = static_cast<float>((g % 2 == 0 ? 1e8 : -1e8) * ((i % 3) + 1) + 0.37 * (g + 1) * (i + 1));
    return tensor(v);
}

}  // namespace

int run_tree_reduce() {
    const char* accum_env = std::getenv("ACCUM");
    const int64_t accum = accum_env ? std::atoll(accum_env) : 1;
    const int rank = dist::rank(), world = dist::world_size();
    dist::PairwiseSum mine, everyone;
    for (int64_t k = 0; k < accum; ++k) mine.add(leaf(rank * accum + k));
    for (int64_t g = 0; g < world * accum; ++g) everyone.add(leaf(g));
    Tensor subtree = mine.result();
    Tensor got = dist::tree_all_reduce(subtree, dist::default_group());
    Tensor chunk = dist::tree_reduce_scatter(subtree, dist::default_group());      // (m)
    Tensor want = everyone.result();
    if (std::memcmp(got.data_ptr<float>(), want.data_ptr<float>(), sizeof(float) * kElements) != 0) {
        std::printf("FAIL tree: rank %d of %d, accum %lld: the tree sum differs from the one-process tree\n", rank, world,
                    static_cast<long long>(accum));
        return 1;
    }
    const int64_t m = (kElements + world - 1) / world, begin = rank * m;
    const int64_t real = std::max<int64_t>(0, std::min<int64_t>(m, kElements - begin));
    const bool padding_zero = real == m || chunk.narrow(0, real, m - real).abs().max().item<float>() == 0.0f;
    if (chunk.numel() != m || !padding_zero ||
        std::memcmp(chunk.data_ptr<float>(), want.data_ptr<float>() + begin, sizeof(float) * real) != 0) {
        std::printf("FAIL tree: rank %d of %d, accum %lld: tree_reduce_scatter's chunk is not the tree sum's\n", rank,
                    world, static_cast<long long>(accum));
        return 1;
    }
    return 0;
}
