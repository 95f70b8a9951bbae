// unicode_classes.hpp: the Unicode classes GPT-2's pre-tokenizer needs (\p{L}, \p{N}, \s) and a
// UTF-8 reader that never fails: a byte that does not start a valid UTF-8 sequence is one
// character of class kOther (docs/tokenizers.md, "Invalid UTF-8").
// The tables are generated (data/unicode_classes.cpp, by tools/unicode/gen_unicode_classes.py).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ampgrad::data {

enum class CharClass : uint8_t { kOther, kLetter, kNumber, kSpace };

namespace detail {
struct UnicodeRange {
    uint32_t first, last;   // inclusive
    CharClass cls;
};
extern const UnicodeRange kUnicodeRanges[];
extern const int kUnicodeRangeCount;
}  // namespace detail

// \p{L} -> kLetter, \p{N} -> kNumber, \s (White_Space) -> kSpace, anything else -> kOther.
CharClass char_class(uint32_t code_point);

// One character of a UTF-8 text: its code point, byte length and class. An invalid byte is a
// character of one byte, code point kInvalidCodePoint, class kOther.
struct Utf8Char {
    static constexpr uint32_t kInvalidCodePoint = 0xFFFFFFFF;
    uint32_t code_point;
    uint32_t length;        // bytes; 0 at the end of the text
    CharClass cls;
};

// The character starting at byte `pos` of `text` (length 0 when pos == text.size()). Valid means
// shortest form, not a surrogate, at most U+10FFFF (RFC 3629).
Utf8Char read_utf8_char(std::string_view text, size_t pos);

}  // namespace ampgrad::data
