// shard_loader.hpp: training and validation batches from token shards (data/token_shards.hpp),
// read through memory maps, so that resident memory does not grow with the corpus.
//
// A shard of N tokens holds floor((N - 1) / T) windows of T + 1 tokens at starts 0, T, 2T, ...
// (x = window[:T], y = window[1:], as llm.c's dataloader.h reads B·T + 1 tokens). The windows of
// all shards form one stream per epoch; with shuffling, the order of the shards and the order of
// the windows inside each shard are permuted per epoch from the seed, as llm.c's dataloader does.
// The stream is addressed by one number, the global window index (epochs follow each other), so a
// run's place in its data is a single count that does not depend on the number of ranks:
//
//   data::ShardLoader loader(data::list_shards("data/shakespeare", "train"), /*T=*/64, /*seed=*/1337);
//   auto [x, y] = loader.batch_at(/*first_window=*/position + micro * B, B);   // (B,T), (B,T) int64
//
// The permutations are computed, not stored: a keyed Feistel network over the next power of four
// with cycle-walking is a bijection of [0, n) for any n, so window i of epoch e is found in O(1)
// memory and the shard order in O(shards).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.hpp"
#include "data/token_shards.hpp"

namespace ampgrad::data {

// A pseudo-random permutation of [0, n): index i -> its place. The same (seed, stream) always gives
// the same permutation. n >= 1 and i < n.
uint64_t permute_index(uint64_t i, uint64_t n, uint64_t seed, uint64_t stream);

class ShardLoader {
public:
    // Maps every shard (its header checked). ValueError when T < 1 or when no shard holds a window.
    ShardLoader(std::vector<std::string> shards, int64_t T, uint64_t seed, bool shuffle);

    int64_t block_size() const { return T_; }
    uint64_t windows_per_epoch() const { return windows_per_epoch_; }
    int64_t num_tokens() const { return num_tokens_; }
    size_t num_shards() const { return shards_.size(); }
    const std::vector<std::string>& shard_paths() const { return paths_; }

    // Where stream window `index` lies: (shard, first token).
    std::pair<size_t, int64_t> locate(uint64_t index) const;
    // Windows [first, first + B) of the stream: x and y, (B,T) int64 each.
    std::pair<Tensor, Tensor> batch_at(uint64_t first, int64_t B) const;

    // What a checkpoint records to find its place again (and to refuse other data): the shard
    // names and token counts, T, the seed and whether the order is shuffled.
    nlohmann::json describe() const;

private:
    std::vector<std::string> paths_;
    std::vector<std::unique_ptr<MappedShard>> shards_;
    std::vector<uint64_t> windows_;   // windows per shard
    int64_t T_;
    uint64_t seed_;
    bool shuffle_;
    uint64_t windows_per_epoch_ = 0;
    int64_t num_tokens_ = 0;
    mutable std::vector<size_t> order_;   // the shard order of epoch order_epoch_ (a cache: not thread-safe)
    mutable uint64_t order_epoch_ = 0;
};

// A checkpoint's describe() against this loader's: ValueError naming the first difference (a
// shard added, removed or changed, another T or seed), unless the difference is only the
// folder the shards are in.
void check_same_data(const nlohmann::json& saved, const nlohmann::json& now);

}  // namespace ampgrad::data
