// pretokenizer.hpp: GPT-2's pre-tokenization, the split of a text into the pieces ("pre-tokens")
// that BPE then encodes one by one. GPT-2 defines it with this regular expression:
//
//     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// implemented here as a hand-written scanner over UTF-8 (no regex engine), alternative by
// alternative, with the Unicode classes of data/unicode_classes.hpp. Any byte string is split,
// invalid UTF-8 included (each invalid byte is an "other" character, like punctuation).
//
//   for (std::string_view piece : data::gpt2_pretokenize("Hello world!")) ...   // "Hello", " world", "!"
#pragma once
#include <cstddef>
#include <string_view>
#include <vector>

namespace ampgrad::data {

// The end (byte offset, > start) of the pre-token that starts at byte `start` < text.size().
size_t gpt2_pretoken_end(std::string_view text, size_t start);

// All the pre-tokens of `text`, in order; their concatenation is `text`.
std::vector<std::string_view> gpt2_pretokenize(std::string_view text);

}  // namespace ampgrad::data
