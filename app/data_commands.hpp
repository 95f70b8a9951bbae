// data_commands.hpp: `ampgrad data ...`: `data prepare`, a text corpus into llm.c token shards
// (data/prepare.hpp, docs/data.md). app/main.cpp parses the flags.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ampgrad::app {

struct DataPrepareOptions {
    std::vector<std::string> inputs;     // files and folders (a .jsonl file: a document per line)
    std::string tokenizer;               // gpt2, byte, char, DIR, gpt2:DIR, tiktoken:FILE
    std::string output;                  // the shards' folder
    std::string name;                    // the shards' name prefix (default: the output folder's name)
    int64_t shard_tokens = 100'000'000;  // tokens per shard (llm.c's fineweb.py)
    int64_t val_tokens = 0;              // > 0: the validation shard (shard 0) holds this many tokens
    int threads = 0;                     // 0: one per core
    bool overwrite = false;              // replace shards made from other inputs or settings
    std::string progress = "auto";       // auto (in place on a terminal), line, plain
};
int run_data_prepare(const DataPrepareOptions& o);

}  // namespace ampgrad::app
