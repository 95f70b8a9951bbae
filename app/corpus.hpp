// corpus.hpp: the text a run trains on and its tokenizer: the one place a --tokenizer value becomes
// a tokenizer (train, sample, eval, --init-from, token shards), a text file read and split, and the
// tokenizer's form in a checkpoint's state.json.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/run_config.hpp"
#include "data/tokenizer.hpp"

namespace ampgrad::app {

// The training text and its tokenizer, split 90% / 10% into train and validation tokens (a text
// file); with token shards (app/shard_data.hpp) train and val are null and the shards serve.
struct Corpus {
    data::Tokenizer tokenizer;
    std::shared_ptr<const std::vector<int32_t>> train, val;
    std::string source;   // "bundled Tiny Shakespeare", the file's path, or the shards
};
// Reads --data (or the bundled text) and builds the tokenizer --tokenizer names, or the saved one.
Corpus load_corpus(const RunConfig& cfg, const std::optional<data::Tokenizer>& saved = std::nullopt);

// The one place a --tokenizer value becomes a tokenizer (train, sample, eval, --init-from): byte,
// char (the characters of `text`), gpt2:DIR (vocab.json + merges.txt) or tiktoken:FILE (a rank file).
data::Tokenizer make_tokenizer(const std::string& spec, std::string_view text);
// --tokenizer auto: gpt2:DIR when pretrained_dir (--init-from, --hf) holds vocab.json and
// merges.txt, else char; any other value is returned as it is.
std::string resolve_tokenizer(const std::string& spec, const std::string& pretrained_dir);
// The tokenizer of a run: char (from the text or as saved), byte, bpe (saved whole), or the
// addition task's.
nlohmann::json tokenizer_to_json(const data::Tokenizer& t);
data::Tokenizer tokenizer_from_json(const nlohmann::json& j);

}  // namespace ampgrad::app
