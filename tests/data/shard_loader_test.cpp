// shard_loader_test.cpp: data::ShardLoader (data/shard_loader.hpp): the permutation is a bijection
// for any size, every window of every shard is read exactly once per epoch and epochs differ, the
// windows hold the right tokens (x and y shifted by one), ranks and micro-batches that split a
// step read exactly the windows one process reads, and a checkpoint's description refuses other data.
#include <doctest/doctest.h>

#include <filesystem>
#include <set>
#include <unistd.h>

#include <fmt/format.h>

#include "core/error.hpp"
#include "data/shard_loader.hpp"
#include "data/token_shards.hpp"

using namespace ampgrad;
namespace fs = std::filesystem;

namespace {

// A fresh folder with shards of the given token counts; token i of shard s is (s * 1000 + i) % 60000.
std::vector<std::string> write_shards(const std::string& tag, const std::vector<int64_t>& counts) {
    const fs::path dir = fs::temp_directory_path() / fmt::format("ampgrad_loader_{}_{}", tag, ::getpid());
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::vector<std::string> paths;
    for (size_t s = 0; s < counts.size(); ++s) {
        const std::string path = (dir / fmt::format("t_train_{:06d}.bin", s + 1)).string();
        data::ShardWriter w(path, data::ShardDtype::kUint16);
        std::vector<int32_t> ids(static_cast<size_t>(counts[s]));
        for (int64_t i = 0; i < counts[s]; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>((s * 1000 + i) % 60000);
        w.append(ids);
        w.finish();
        paths.push_back(path);
    }
    return paths;
}

}  // namespace

TEST_CASE("permute_index is a bijection of [0, n) for every n, keyed by seed and stream") {
    for (uint64_t n : {1u, 2u, 3u, 5u, 16u, 17u, 100u, 1000u, 4097u}) {
        CAPTURE(n);
        std::set<uint64_t> seen;
        for (uint64_t i = 0; i < n; ++i) {
            const uint64_t p = data::permute_index(i, n, 1337, 0);
            CHECK(p < n);
            seen.insert(p);
        }
        CHECK(seen.size() == n);
    }
    int moved_by_seed = 0, moved_by_stream = 0;
    for (uint64_t i = 0; i < 1000; ++i) {
        moved_by_seed += data::permute_index(i, 1000, 1, 0) != data::permute_index(i, 1000, 2, 0);
        moved_by_stream += data::permute_index(i, 1000, 1, 0) != data::permute_index(i, 1000, 1, 1);
        CHECK(data::permute_index(i, 1000, 1, 0) == data::permute_index(i, 1000, 1, 0));
    }
    CHECK(moved_by_seed > 900);
    CHECK(moved_by_stream > 900);
}

TEST_CASE("ShardLoader: each window once per epoch, shuffled differently each epoch, with the right tokens") {
    const int64_t T = 8;
    const std::vector<std::string> paths = write_shards("epoch", {81, 40, 9, 5, 57});   // 10 + 4 + 1 + 0 + 7 windows
    data::ShardLoader loader(paths, T, 42, /*shuffle=*/true);
    REQUIRE(loader.windows_per_epoch() == 22);
    std::vector<std::pair<size_t, int64_t>> epoch0, epoch1;
    for (uint64_t i = 0; i < 22; ++i) epoch0.push_back(loader.locate(i));
    for (uint64_t i = 22; i < 44; ++i) epoch1.push_back(loader.locate(i));
    const std::set<std::pair<size_t, int64_t>> set0(epoch0.begin(), epoch0.end()), set1(epoch1.begin(), epoch1.end());
    CHECK(set0.size() == 22);
    CHECK(set0 == set1);
    CHECK(epoch0 != epoch1);
    for (const auto& [shard, start] : set0) CHECK(start % T == 0);

    auto [x, y] = loader.batch_at(5, 3);   // (3,T) each
    REQUIRE(x.sizes() == std::vector<int64_t>{3, T});
    const std::vector<int64_t> xs = x.to_vector<int64_t>(), ys = y.to_vector<int64_t>();
    for (int64_t b = 0; b < 3; ++b) {
        const auto [shard, start] = loader.locate(5 + static_cast<uint64_t>(b));
        for (int64_t t = 0; t < T; ++t) {
            CHECK(xs[static_cast<size_t>(b * T + t)] == static_cast<int64_t>((shard * 1000 + start + t) % 60000));
            CHECK(ys[static_cast<size_t>(b * T + t)] == static_cast<int64_t>((shard * 1000 + start + t + 1) % 60000));
        }
    }
    data::ShardLoader in_order(paths, T, 42, /*shuffle=*/false);
    CHECK(in_order.locate(0) == std::pair<size_t, int64_t>{0, 0});
    CHECK(in_order.locate(10) == std::pair<size_t, int64_t>{1, 0});
    CHECK(in_order.locate(15) == std::pair<size_t, int64_t>{4, 0});   // the 5-token shard holds no window
    CHECK(in_order.locate(22) == std::pair<size_t, int64_t>{0, 0});   // the next epoch
}

TEST_CASE("ShardLoader: ranks and micro-batches that split a step read exactly one process's windows") {
    const std::vector<std::string> paths = write_shards("ranks", {300, 200});
    data::ShardLoader loader(paths, 4, 7, true);
    const int64_t B = 8;   // sequences per micro-step, all ranks together
    const uint64_t position = 30;
    const std::vector<int64_t> whole = loader.batch_at(position, B * 2).first.to_vector<int64_t>();   // 1 rank, accum 2
    for (int world : {2, 4}) {
        std::vector<int64_t> joined;
        for (int r = 0; r < world; ++r)
            for (int64_t k = 0; k < 2; ++k) {   // app/shard_data.hpp: position + (r * accum + k) * (B / W)
                const int64_t share = B / world;
                const auto part = loader.batch_at(position + static_cast<uint64_t>((r * 2 + k) * share), share);
                const std::vector<int64_t> v = part.first.to_vector<int64_t>();
                joined.insert(joined.end(), v.begin(), v.end());
            }
        CHECK(joined == whole);
    }
}

TEST_CASE("ShardLoader: bad arguments, and a checkpoint's description against other data") {
    const std::vector<std::string> paths = write_shards("bad", {50, 60});
    CHECK_THROWS_AS(data::ShardLoader(paths, 0, 1, true), ValueError);
    CHECK_THROWS_WITH_AS(data::ShardLoader({paths[0]}, 64, 1, true), doctest::Contains("no window of block_size 64"),
                         ValueError);
    data::ShardLoader a(paths, 4, 1, true), b({paths[0]}, 4, 1, true), c(paths, 8, 1, true);
    CHECK_NOTHROW(data::check_same_data(a.describe(), a.describe()));
    CHECK_THROWS_WITH_AS(data::check_same_data(a.describe(), b.describe()), doctest::Contains("2 shard(s)"), ValueError);
    CHECK_THROWS_WITH_AS(data::check_same_data(a.describe(), c.describe()), doctest::Contains("block_size"), ValueError);
    CHECK_THROWS_AS(a.batch_at(0, 0), ValueError);
}

TEST_CASE("MappedShard: reads widen to int64 and stay inside the shard") {
    const std::vector<std::string> paths = write_shards("mapped", {20});
    data::MappedShard s(paths[0]);
    std::vector<int64_t> out(5);
    s.read(15, 5, out.data());
    CHECK(out == std::vector<int64_t>{15, 16, 17, 18, 19});
    CHECK_THROWS_AS(s.read(16, 5, out.data()), IndexError);
}
