// shard_loader.cpp: batches from memory-mapped token shards (data/shard_loader.hpp).
#include "data/shard_loader.hpp"

#include <bit>
#include <filesystem>

#include <fmt/format.h>

#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "core/philox.hpp"
#include "core/profiler.hpp"

namespace ampgrad::data {

namespace {

constexpr int kFeistelRounds = 6;
constexpr uint64_t kShardOrderKey = 0x5348415244ULL;    // "SHARD": keys the shard order
constexpr uint64_t kWindowOrderKey = 0x57494E444FULL;   // "WINDO": keys the window order in a shard

// One pass of a balanced Feistel network over [0, 4^half): invertible whatever the round function.
uint64_t feistel(uint64_t x, int half, uint64_t seed, uint64_t stream) {
    const uint64_t mask = (uint64_t{1} << half) - 1;
    uint64_t left = x >> half, right = x & mask;
    for (uint64_t round = 0; round < kFeistelRounds; ++round) {
        const uint64_t f = Philox4x32::generate(seed, stream, (round << 32) | right)[0];
        const uint64_t next = left ^ (f & mask);
        left = right;
        right = next;
    }
    return (left << half) | right;
}

std::vector<size_t> shard_order(size_t shards, uint64_t epoch, uint64_t seed, bool shuffle) {
    std::vector<size_t> order(shards);
    for (size_t k = 0; k < shards; ++k)
        order[k] = shuffle ? static_cast<size_t>(permute_index(k, shards, seed ^ kShardOrderKey, epoch)) : k;
    return order;
}

}  // namespace

uint64_t permute_index(uint64_t i, uint64_t n, uint64_t seed, uint64_t stream) {
    if (n <= 1) return 0;
    const int bits = 64 - std::countl_zero(n - 1);   // 2^bits >= n
    const int half = (bits + 1) / 2;
    uint64_t x = i;
    do x = feistel(x, half, seed, stream);           // cycle-walking: leave [n, 4^half) again
    while (x >= n);
    return x;
}

ShardLoader::ShardLoader(std::vector<std::string> shards, int64_t T, uint64_t seed, bool shuffle)
    : paths_(std::move(shards)), T_(T), seed_(seed), shuffle_(shuffle) {
    if (T < 1) throw ValueError(fmt::format("ShardLoader: the window length T must be positive, but got {}", T));
    for (const std::string& p : paths_) {
        shards_.push_back(std::make_unique<MappedShard>(p));
        const int64_t n = shards_.back()->num_tokens();
        windows_.push_back(n > T ? static_cast<uint64_t>((n - 1) / T) : 0);
        windows_per_epoch_ += windows_.back();
        num_tokens_ += n;
    }
    if (windows_per_epoch_ == 0)
        throw ValueError(fmt::format("token shards: their {} tokens in {} shard(s) ({}) hold no window of block_size {} "
                                     "+ 1 tokens", num_tokens_, paths_.size(), paths_.empty() ? "" : paths_.front(), T));
}

std::pair<size_t, int64_t> ShardLoader::locate(uint64_t index) const {
    const uint64_t epoch = index / windows_per_epoch_;
    uint64_t j = index % windows_per_epoch_;
    if (epoch != order_epoch_ || order_.empty()) {   // the epoch's shard order, computed once per epoch
        order_ = shard_order(shards_.size(), epoch, seed_, shuffle_);
        order_epoch_ = epoch;
    }
    for (size_t s : order_) {
        if (j >= windows_[s]) {
            j -= windows_[s];
            continue;
        }
        const uint64_t w = shuffle_ ? permute_index(j, windows_[s], seed_ ^ kWindowOrderKey, (epoch << 32) | s) : j;
        return {s, static_cast<int64_t>(w) * T_};
    }
    throw InternalError("ShardLoader::locate: the window counts do not add up");
}

std::pair<Tensor, Tensor> ShardLoader::batch_at(uint64_t first, int64_t B) const {
    profiler::Span span("data", "ShardLoader.batch_at");
    if (B <= 0) throw ValueError(fmt::format("ShardLoader: batch size {} must be positive", B));
    // Through the allocator: a batch too large is an OutOfMemoryError, a shape past 64 bits a ShapeError.
    Tensor x = empty({B, T_}, TensorOptions().dtype(kInt64)), y = empty({B, T_}, TensorOptions().dtype(kInt64));   // (B,T)
    int64_t* xs = x.data_ptr<int64_t>();
    int64_t* ys = y.data_ptr<int64_t>();
    std::vector<int64_t> window(static_cast<size_t>(T_ + 1));
    for (int64_t b = 0; b < B; ++b) {
        const auto [shard, start] = locate(first + static_cast<uint64_t>(b));
        shards_[shard]->read(start, T_ + 1, window.data());
        std::copy(window.begin(), window.end() - 1, xs + b * T_);    // (T) inputs
        std::copy(window.begin() + 1, window.end(), ys + b * T_);    // (T) targets, shifted by one
    }
    return {x, y};
}

nlohmann::json ShardLoader::describe() const {
    nlohmann::json shards = nlohmann::json::array();
    for (size_t i = 0; i < paths_.size(); ++i)
        shards.push_back({{"name", std::filesystem::path(paths_[i]).filename().string()},
                          {"tokens", shards_[i]->num_tokens()}});
    return {{"shards", shards}, {"block_size", T_}, {"seed", seed_}, {"shuffle", shuffle_},
            {"windows_per_epoch", windows_per_epoch_}};
}

void check_same_data(const nlohmann::json& saved, const nlohmann::json& now) {
    for (const char* key : {"block_size", "seed", "shuffle"})
        if (saved.at(key) != now.at(key))
            throw ValueError(fmt::format("--resume: the run's data loader had {} {}, this one has {}", key,
                                         saved.at(key).dump(), now.at(key).dump()));
    const nlohmann::json &a = saved.at("shards"), &b = now.at("shards");
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
        if (i >= a.size() || i >= b.size())
            throw ValueError(fmt::format("--resume: the run was trained on {} shard(s), the data now has {} (shard {} is "
                                         "{})", a.size(), b.size(), i, i < a.size() ? "missing now" : "new"));
        if (a[i] != b[i])
            throw ValueError(fmt::format("--resume: shard {} was {} when the run was saved and is {} now; its place in the "
                                         "data would not be the same", i, a[i].dump(), b[i].dump()));
    }
}

}  // namespace ampgrad::data
