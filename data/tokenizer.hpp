// tokenizer.hpp: text <-> token ids. Two kinds:
//   byte: every byte is a token, V = 256; any text (any language, any encoding) round-trips.
//   char: the distinct characters (Unicode code points) of a text, sorted, are the vocabulary
//         (65 for Tiny Shakespeare): smaller V, so a small model learns faster.
//
//   data::Tokenizer tok = data::Tokenizer::chars_of(text);   // or Tokenizer::bytes()
//   std::vector<int32_t> ids = tok.encode("To be");          // ValueError for an unknown character
//   std::string back = tok.decode(ids);
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ampgrad::data {

class Tokenizer {
public:
    enum class Kind { kByte, kChar };

    static Tokenizer bytes();
    // The sorted distinct code points of `text` (valid UTF-8; IOError otherwise).
    static Tokenizer chars_of(std::string_view text);
    // A char tokenizer with exactly these code points, in this order (as saved in a checkpoint).
    static Tokenizer from_code_points(std::vector<uint32_t> code_points);

    Kind kind() const { return kind_; }
    const char* kind_name() const { return kind_ == Kind::kByte ? "byte" : "char"; }
    int64_t vocab_size() const { return kind_ == Kind::kByte ? 256 : static_cast<int64_t>(code_points_.size()); }
    const std::vector<uint32_t>& code_points() const { return code_points_; }   // char kind only

    // ValueError naming the first character that is not in the vocabulary.
    std::vector<int32_t> encode(std::string_view text) const;
    // IndexError for an id outside [0, V).
    std::string decode(const std::vector<int32_t>& ids) const;
    std::string decode_one(int64_t id) const;

private:
    Kind kind_ = Kind::kByte;
    std::vector<uint32_t> code_points_;                  // id -> code point
    std::unordered_map<uint32_t, int32_t> ids_;          // code point -> id
};

// UTF-8 helpers used by the tokenizer.
std::vector<uint32_t> utf8_code_points(std::string_view text);   // IOError on invalid UTF-8
std::string utf8_encode(uint32_t code_point);

}  // namespace ampgrad::data
