// shard_filler.hpp: a stream of tokens cut into llm.c-named shards (data/token_shards.hpp's
// ShardWriter writes each one atomically). As llm.c's dev/data/fineweb.py: shard 0 is the
// validation split, NAME_val_000000.bin, the others NAME_train_000001.bin, NAME_train_000002.bin...;
// every shard holds `shard_tokens` tokens but the last, and a document may straddle two shards.
// With val_tokens > 0 the validation shard holds the first val_tokens tokens instead.
//
// Shards listed in `keep` (complete on disk from an interrupted run with the same settings) are
// counted but not written again.
//
//   data::ShardFiller filler(plan, /*keep=*/{}, [](const data::ShardRecord& s) { ... });
//   filler.append(tokens);  ...;  filler.finish();   // the last, partial shard
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "data/token_shards.hpp"

namespace ampgrad::data {

struct ShardPlan {
    std::string dir;                // the output folder (exists)
    std::string name;               // the file names' prefix
    ShardDtype dtype = ShardDtype::kUint16;
    int64_t shard_tokens = 100'000'000;   // fineweb.py's shard_size
    int64_t val_tokens = 0;               // > 0: the size of shard 0 (the validation split)
};

// ValueError for shard sizes outside [1, INT32_MAX] (the header's count is an int32), val_tokens < 0.
void check_shard_plan(const ShardPlan& plan);

// "NAME_val_000000.bin" for index 0, "NAME_train_00000I.bin" for the others.
std::string shard_file_name(const std::string& name, int64_t index);
// "val" or "train".
const char* shard_split(int64_t index);

struct ShardRecord {
    int64_t index = 0;
    std::string file;    // the file name, in the plan's folder
    int64_t tokens = 0;
    bool kept = false;   // already on disk from an earlier run
};

class ShardFiller {
public:
    ShardFiller(ShardPlan plan, std::set<int64_t> keep, std::function<void(const ShardRecord&)> on_shard_done);
    void append(std::span<const int32_t> tokens);
    // Closes the last shard (when it has tokens). The filler takes no tokens after this.
    void finish();

    int64_t total_tokens() const { return total_tokens_; }
    const std::vector<ShardRecord>& shards() const { return done_; }   // the shards closed so far

private:
    int64_t capacity(int64_t index) const;
    void close_current();

    ShardPlan plan_;
    std::set<int64_t> keep_;
    std::function<void(const ShardRecord&)> on_shard_done_;
    std::unique_ptr<ShardWriter> writer_;   // null while the current shard is a kept one
    int64_t index_ = 0, in_current_ = 0, total_tokens_ = 0;
    bool finished_ = false;
    std::vector<ShardRecord> done_;
};

}  // namespace ampgrad::data
