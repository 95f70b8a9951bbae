// bpe_tokenizer.hpp: GPT-2's byte-level BPE (byte-pair encoding) tokenizer (docs/tokenizers.md).
// A text is split into pre-tokens (data/pretokenizer.hpp); each pre-token's bytes start as one
// token per byte, and adjacent pairs are merged, lowest merge rank first, until no pair in the
// merge table is left. Decoding concatenates the tokens' bytes, so decode(encode(s)) == s for
// ANY byte string s, invalid UTF-8 included.
//
//   data::BpeTokenizer gpt2 = data::BpeTokenizer::gpt2();   // built in; or from_tiktoken(path), from_hf_dir(dir)
//   std::vector<int32_t> ids = gpt2.encode("Hello world");                         // {15496, 995}
//   std::string text = gpt2.decode(ids);
//   gpt2.encode("a<|endoftext|>", /*allow_special=*/true);                          // {64, 50256}
//
// Files: Hugging Face's vocab.json (token -> id; tokens spelt in GPT-2's byte-to-unicode alphabet)
// and merges.txt ("#version: 0.2", then "left right" per line, by rank); or a tiktoken rank file
// ("base64(token bytes) rank" per line; the merges are rebuilt from the ranks and <|endoftext|>
// is added after the last rank). Bad files: IOError (unreadable) or FormatError naming the file
// and line.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ampgrad::data {

// GPT-2's byte-to-unicode map: byte b is spelt as this code point in vocab.json / merges.txt.
// Printable bytes ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) keep their own code point; the other
// 68 map, in increasing order, to U+0100, U+0101, ... (so a space is U+0120 'Ġ').
const std::array<uint32_t, 256>& gpt2_byte_to_unicode();
// The byte-level spelling of raw bytes (each byte mapped, then UTF-8 encoded).
std::string gpt2_bytes_to_unicode(std::string_view bytes);

// GPT-2's ranks as a tiktoken file (data/gpt2.tiktoken, 835,554 bytes, compiled into the library).
std::string_view gpt2_tiktoken_ranks();

class BpeTokenizer {
public:
    static constexpr std::string_view kEndOfText = "<|endoftext|>";

    // vocab.json + merges.txt in `dir` (Hugging Face's GPT-2 files).
    static BpeTokenizer from_hf_dir(const std::string& dir);
    static BpeTokenizer from_hf_files(const std::string& vocab_json_path, const std::string& merges_txt_path);
    // A tiktoken rank file (e.g. gpt2.tiktoken); <|endoftext|> gets the id after the last rank.
    static BpeTokenizer from_tiktoken(const std::string& path);
    // The same from the file's bytes; `source` names them in error messages.
    static BpeTokenizer from_tiktoken_text(std::string_view text, const std::string& source);
    // GPT-2's tokenizer (50,257 tokens, <|endoftext|> = 50256) from the ranks built into the library.
    static BpeTokenizer gpt2();
    // From each id's byte-level spelling and the merges in rank order (the form saved in an
    // ampgrad checkpoint). `source` names where they came from in error messages.
    static BpeTokenizer from_tokens(std::vector<std::string> tokens,
                                    const std::vector<std::pair<std::string, std::string>>& merges,
                                    const std::string& source);

    // The ids of `text`. With allow_special, each "<|endoftext|>" in the text is that one token;
    // without, it is plain text.
    std::vector<int32_t> encode(std::string_view text, bool allow_special = false) const;
    // Each text encoded on its own, as encode(text) (no special tokens), but with one word cache for
    // all of them, so that many short documents encode as fast as one long text: the ids go to the
    // end of `out`, and where each text's ids end in `out` to `ends`.
    void encode_each(std::span<const std::string_view> texts, std::vector<int32_t>& out, std::vector<size_t>& ends) const;
    // The bytes of `ids` (IndexError for an id outside [0, vocab_size())).
    std::string decode(std::span<const int32_t> ids) const;
    std::string_view token_bytes(int32_t id) const;   // IndexError outside [0, vocab_size())

    int64_t vocab_size() const { return static_cast<int64_t>(token_bytes_.size()); }
    int32_t eot_token() const { return eot_; }   // <|endoftext|>'s id, -1 when the vocabulary has none
    int64_t merge_count() const { return static_cast<int64_t>(merges_.size()); }

    // Each id's byte-level spelling, and the merges in rank order as pairs of spellings.
    std::vector<std::string> token_strings() const;
    std::vector<std::pair<std::string, std::string>> merge_strings() const;
    // The contents of vocab.json (ids in increasing order) and merges.txt, as Hugging Face writes them.
    std::string vocab_json() const;
    std::string merges_txt() const;
    // The same as one Hugging Face tokenizer.json (loads with tokenizers.Tokenizer.from_file).
    std::string tokenizer_json() const;

private:
    struct Merge {
        int32_t rank;
        int32_t id;   // the merged token
    };
    static uint64_t pair_key(int32_t left, int32_t right) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
    }
    // Sets the byte tokens, the merge table and <|endoftext|> from token_bytes_ and the merges.
    void index(const std::vector<std::pair<int32_t, int32_t>>& merges, const std::string& source);
    const Merge* find_merge(int32_t left, int32_t right) const;
    // A pre-token's bytes -> where its ids are in the output (first, count): repeated words are
    // copied, not encoded again.
    using WordCache = std::unordered_map<std::string_view, std::pair<size_t, size_t>>;
    void encode_ordinary(std::string_view text, std::vector<int32_t>& out, WordCache& cache) const;
    void encode_word(std::string_view word, std::vector<int32_t>& out) const;   // one pre-token

    std::vector<std::string> token_bytes_;                  // id -> raw bytes
    std::unordered_map<std::string, int32_t> ids_;          // raw bytes -> id
    std::array<int32_t, 256> byte_ids_{};                   // byte -> id of its one-byte token
    std::vector<std::pair<int32_t, int32_t>> merges_;       // rank -> (left id, right id)
    std::unordered_map<uint64_t, Merge> merge_table_;       // (left id, right id) -> rank, merged id
    int32_t eot_ = -1;
};

}  // namespace ampgrad::data
