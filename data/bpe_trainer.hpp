// bpe_trainer.hpp: learns a byte-level BPE vocabulary from a text (`ampgrad tokenizer train`).
// The text is pre-tokenized as GPT-2 does (data/pretokenizer.hpp; "<|endoftext|>" separates
// documents and is never split or learned). The vocabulary starts with the 256 bytes in GPT-2's
// order (ids 0..255, as in GPT-2's own vocab.json); then, repeatedly, the adjacent pair of tokens
// that occurs most often (counted over every pre-token, times its count) becomes a new token.
// Ties go to the pair with the smallest (left id, right id), so training is deterministic. It
// stops at vocab_size - 1 tokens, or earlier when no pair is left; "<|endoftext|>" is the last id.
//
//   data::BpeTokenizer tok = data::train_bpe(text, 1000);
//   write(dir / "vocab.json", tok.vocab_json()); write(dir / "merges.txt", tok.merges_txt());
#pragma once
#include <cstdint>
#include <string_view>

#include "data/bpe_tokenizer.hpp"

namespace ampgrad::data {

// ValueError when vocab_size < 257 (the 256 bytes and <|endoftext|>) or above 2^31 - 1.
BpeTokenizer train_bpe(std::string_view text, int64_t vocab_size);

}  // namespace ampgrad::data
