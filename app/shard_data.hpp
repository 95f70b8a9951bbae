// shard_data.hpp: the text task on token shards (`ampgrad train --data DIR|GLOB`): llm.c-format
// shards (data/token_shards.hpp, written by `ampgrad data prepare` or llm.c's own scripts) read
// through memory maps by data::ShardLoader, instead of a text file tokenized into memory.
//
// The run's place in its data is one number, the training windows consumed so far (all ranks,
// all micro-batches): micro-batch k of rank r in a step reads the B/W windows from
//     position + (r * grad_accum + k) * (B / W)
// and the step moves the position by B * grad_accum. A checkpoint saves it (with the shard list,
// checked on --resume), so a resumed run reads the exact next windows, at any world size.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "app/run_config.hpp"
#include "data/shard_loader.hpp"
#include "data/tokenizer.hpp"

namespace ampgrad::app {

struct ShardData {
    std::unique_ptr<data::ShardLoader> train;   // shuffled per epoch from the run's seed
    std::unique_ptr<data::ShardLoader> val;     // in order
    std::string source;                         // for the banner: the folder, shards and tokens
    double check_seconds = 0.0;                 // the token check before training
};

// Whether the run's --data names token shards (a folder, a glob or a *.bin file).
bool uses_token_shards(const RunConfig& cfg);
// Where the validation shards are: --val-data, else the --data glob or file with its last "train"
// replaced by "val" (llm.c's names), else --data itself (its *_val_* shards).
std::string validation_spec(const RunConfig& cfg);
// The shards' tokenizer: --tokenizer when it is not "auto"; else the one recorded in the shard
// folder's meta.json (`ampgrad data prepare`); else GPT-2's BPE, as llm.c's shards are.
data::Tokenizer shard_tokenizer(const RunConfig& cfg);
// Lists the train and validation shards, checks every token of every shard against the model's
// vocabulary (FormatError naming the file and the offset, before any training; the training shards
// only when check_train_tokens: eval reads the validation shards alone), and maps them.
ShardData open_shard_data(const RunConfig& cfg, int64_t T, int64_t model_vocab, bool check_train_tokens = true);

}  // namespace ampgrad::app
