// hellaswag.hpp: multiple-choice examples in HellaSwag's layout (the jsonl files of rowanz/hellaswag,
// as karpathy/llm.c's dev/data/hellaswag.py reads them) and their rendering to token ids. One JSON
// object a line:
//
//   {"ctx": "A man is sitting on a roof. he", "endings": ["is using wrap to ...", "...", "...", "..."],
//    "label": 3, "ctx_a": ..., "ctx_b": ..., "ind": ..., "activity_label": ..., "split": ..., ...}
//
// Only ctx, endings (exactly 4 strings) and label (0..3) are read; the other fields are ignored.
// Candidate i is encode(ctx) + encode(" " + endings[i]) (the space as llm.c and lm-eval put it); the
// four rows are padded with id 0 into one (4,T) batch, with a mask that is 1 on each row's ending
// tokens. A row longer than the model's context keeps its last tokens (left truncation).
// app/hellaswag_eval.hpp scores the batches with a model (docs/data.md).
//
//   std::vector<data::HellaswagExample> ex = data::read_hellaswag("hellaswag_val.jsonl");
//   data::HellaswagBatch b = data::render_hellaswag(ex[0], tokenizer, /*max_tokens=*/1024);
//   b.ids, b.mask   // (4,T) each, row-major
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "data/tokenizer.hpp"

namespace ampgrad::data {

constexpr int kHellaswagEndings = 4;   // the layout has exactly four candidates per example

struct HellaswagExample {
    std::string ctx;
    std::array<std::string, kHellaswagEndings> endings;
    int label = 0;          // the index of the right ending, 0..3
    int64_t line = 0;       // 1-based line of the file it was read from
};

// A line that breaks the layout: not a JSON object, a missing or mistyped field, endings not exactly
// four strings, a label outside 0..3, an empty ctx. what() reads "FILE:LINE: <the problem>".
struct HellaswagFormatError : FormatError {
    HellaswagFormatError(const std::string& file, int64_t line, const std::string& problem);
    std::string file;
    int64_t line;
};

// Every example of a jsonl file, in order; blank lines are skipped. IOError when the file cannot be
// read (data::read_text_file's checks: missing, empty, binary), FormatError when it holds only blank
// lines, HellaswagFormatError naming the file and the line of the first malformed line.
std::vector<HellaswagExample> read_hellaswag(const std::string& path);
// The same for text already in memory; `file` is the name the errors give.
std::vector<HellaswagExample> parse_hellaswag(std::string_view text, const std::string& file);

// One example as the model reads it.
struct HellaswagBatch {
    int64_t T = 0;                                         // the longest row (after truncation)
    std::vector<int32_t> ids;                              // (4,T), padded with 0 after each row's end
    std::vector<uint8_t> mask;                             // (4,T): 1 at the ending's tokens, else 0
    std::array<int64_t, kHellaswagEndings> lengths{};      // each row's tokens before the padding
    std::array<int64_t, kHellaswagEndings> truncated{};    // tokens dropped from each row's front
    std::array<int64_t, kHellaswagEndings> ending_chars{}; // code points of each ending (no leading space)
    int label = 0;
    int64_t line = 0;                                      // the example's line in its file
};

// Renders ex with tok for a model whose context is max_tokens (>= 2; ValueError otherwise). A row
// longer than max_tokens keeps its last max_tokens tokens: the context loses its beginning first, and
// only an ending longer than the whole context loses its own first tokens. The tokenizer's errors
// (a char tokenizer meeting a character it lacks) come through as ValueError naming the line.
HellaswagBatch render_hellaswag(const HellaswagExample& ex, const Tokenizer& tok, int64_t max_tokens);

}  // namespace ampgrad::data
