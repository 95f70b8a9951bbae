// shard_fixtures.hpp: token shards for tests/app, written by the test itself (data::ShardWriter):
// the bundled Tiny Shakespeare as bytes (the byte tokenizer's ids), in llm.c's layout and names.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ampgrad::testing {

// dir/<name>_val_000000.bin with the first val_tokens bytes of the text, then train shards of
// shard_tokens each (<name>_train_000001.bin, ...) up to total_tokens. Returns dir.
std::string write_text_shards(const std::string& dir, int64_t val_tokens, int64_t shard_tokens, int64_t total_tokens,
                              const std::string& name = "shakespeare");

// Every parameter of a checkpoint's model (plain or ZeRO, read consolidated), by name, as doubles.
std::vector<std::pair<std::string, std::vector<double>>> checkpoint_parameters(const std::string& out_or_dir);

// |a - b| over all parameters of two checkpoints (the same names, in the same order): the largest and
// the mean (infinite when the parameters do not match).
struct ParameterDifference {
    double max = 0.0, mean = 0.0;
};
ParameterDifference parameter_difference(const std::string& a, const std::string& b);

}  // namespace ampgrad::testing
