// prepare.hpp: `ampgrad data prepare`: a text corpus into token shards in llm.c's format
// (docs/data.md). The documents are streamed (data/documents.hpp), encoded on every core in input
// order (data/parallel_encoder.hpp: [eot] + document, as llm.c's dev/data/fineweb.py) and cut into
// shards (data/shard_filler.hpp: NAME_val_000000.bin, NAME_train_000001.bin, ...), each written
// atomically. OUT/meta.json (written atomically after each shard) records the tokenizer, the
// inputs, the settings and the shards done.
//
// Re-running into the same folder with the same inputs and settings keeps the shards meta.json
// lists as done whose header count still matches, re-tokenizes from the start and writes only the
// others (a complete folder is left as it is); other inputs or settings are refused (ValueError)
// unless `overwrite`, which removes the old shards first. Leftover temporary files are removed.
//
//   auto files = data::list_input_files({"corpus/"});
//   auto tok = data::resolve_prepare_tokenizer("gpt2", files);
//   data::PrepareResult r = data::prepare_token_shards({.inputs = {"corpus/"}, .output = "shards"}, files, tok, nullptr);
#pragma once
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/documents.hpp"
#include "data/shard_filler.hpp"
#include "data/tokenizer.hpp"

namespace ampgrad::data {

// The tokenizer and what meta.json records of it.
struct PrepareTokenizer {
    Tokenizer tokenizer;
    std::string spec;                                          // as given on the command line
    std::vector<std::pair<std::string, std::string>> files;    // (file, sha256) it was built from
    int64_t eot_token() const { return tokenizer.bpe() ? tokenizer.bpe()->eot_token() : -1; }
};

// spec: gpt2 (GPT-2's BPE, built in), byte, char (the inputs' characters: a first pass reads them
// all), DIR or gpt2:DIR (vocab.json + merges.txt), tiktoken:FILE. ValueError for another spec,
// IOError naming the file and offset for input that is not UTF-8 (char).
PrepareTokenizer resolve_prepare_tokenizer(const std::string& spec, const std::vector<InputFile>& files);

// The sorted distinct code points of every document's text (IOError naming the file, and the line
// of a .jsonl, at the first invalid UTF-8).
std::vector<uint32_t> collect_code_points(const std::vector<InputFile>& files);

struct PrepareOptions {
    std::vector<std::string> inputs;         // as given (files and folders: the output may not be in one)
    std::string output;                      // the folder (created if needed)
    std::string name;                        // shard name prefix; "": the output folder's base name
    int64_t shard_tokens = 100'000'000;      // tokens per shard (fineweb.py's shard_size)
    int64_t val_tokens = 0;                  // > 0: the validation shard holds this many tokens
    int threads = 0;                         // encoding threads; 0: one per core
    bool overwrite = false;                  // replace shards made from other inputs or settings
    size_t piece_bytes = size_t{1} << 20;    // bytes of text per encoding job
};

struct PrepareProgress {
    int64_t input_bytes = 0, total_input_bytes = 0;   // encoded and written / all
    int64_t tokens = 0, documents = 0, shards = 0;
    double seconds = 0;
};
using PrepareProgressFn = std::function<void(const PrepareProgress&)>;

struct PrepareResult {
    std::string meta_path;
    std::vector<ShardRecord> shards;
    int64_t tokens = 0, documents = 0, input_bytes = 0, kept_shards = 0;
    bool up_to_date = false;   // the folder was already complete: nothing was done
    int threads = 0;
    double seconds = 0;
};

// Runs the whole preparation; `progress` (may be empty) is called on the calling thread after each
// job's tokens are written.
PrepareResult prepare_token_shards(const PrepareOptions& options, const std::vector<InputFile>& files,
                                   const PrepareTokenizer& tokenizer, const PrepareProgressFn& progress);

// ---- meta.json (data/prepare_meta.cpp) ----

// The settings a re-run must match: name, dtype, shard_tokens, val_tokens, tokenizer, inputs.
nlohmann::json prepare_settings_json(const ShardPlan& plan, const std::vector<InputFile>& files,
                                     const PrepareTokenizer& tokenizer);

// What is already in the output folder, and what to keep of it.
struct ResumePlan {
    std::set<int64_t> keep;              // shard indices complete on disk
    std::vector<ShardRecord> kept;       // their records
    bool complete = false;               // meta.json says complete and every shard checks out
    nlohmann::json previous;             // the old meta.json (null when none)
};
// Removes leftover temporary files, then compares OUT/meta.json with `settings` (see above).
ResumePlan plan_resume(const ShardPlan& plan, const nlohmann::json& settings, bool overwrite);

}  // namespace ampgrad::data
