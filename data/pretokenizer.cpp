// pretokenizer.cpp: GPT-2's pre-tokenization regex as a scanner (data/pretokenizer.hpp), and the
// class lookup and UTF-8 reader it runs on (data/unicode_classes.hpp).
#include "data/pretokenizer.hpp"

#include <algorithm>
#include <array>

#include "data/unicode_classes.hpp"

namespace ampgrad::data {

namespace {

// ASCII answered from a table (most text), the rest by binary search over the generated ranges.
constexpr std::array<CharClass, 128> ascii_classes() {
    std::array<CharClass, 128> t{};
    for (int c = 0; c < 128; ++c) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) t[c] = CharClass::kLetter;
        else if (c >= '0' && c <= '9') t[c] = CharClass::kNumber;
        else if (c == ' ' || (c >= 0x09 && c <= 0x0D)) t[c] = CharClass::kSpace;
        else t[c] = CharClass::kOther;
    }
    return t;
}
constexpr std::array<CharClass, 128> kAsciiClasses = ascii_classes();

}  // namespace

CharClass char_class(uint32_t cp) {
    if (cp < 128) return kAsciiClasses[cp];
    const detail::UnicodeRange* first = detail::kUnicodeRanges;
    const detail::UnicodeRange* last = first + detail::kUnicodeRangeCount;
    const detail::UnicodeRange* it =
        std::upper_bound(first, last, cp, [](uint32_t v, const detail::UnicodeRange& r) { return v < r.first; });
    if (it == first) return CharClass::kOther;
    --it;
    return cp <= it->last ? it->cls : CharClass::kOther;
}

Utf8Char read_utf8_char(std::string_view text, size_t pos) {
    if (pos >= text.size()) return {0, 0, CharClass::kOther};
    const auto* s = reinterpret_cast<const unsigned char*>(text.data()) + pos;
    const size_t left = text.size() - pos;
    const unsigned char c = s[0];
    if (c < 0x80) return {c, 1, kAsciiClasses[c]};
    const Utf8Char invalid{Utf8Char::kInvalidCodePoint, 1, CharClass::kOther};
    uint32_t length = 0, cp = 0, min_cp = 0;
    if (c >= 0xC2 && c <= 0xDF) length = 2, cp = c & 0x1F, min_cp = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) length = 3, cp = c & 0x0F, min_cp = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) length = 4, cp = c & 0x07, min_cp = 0x10000;
    else return invalid;   // a continuation byte, 0xC0/0xC1 (always overlong) or 0xF5..0xFF
    if (left < length) return invalid;
    for (uint32_t i = 1; i < length; ++i) {
        if ((s[i] & 0xC0) != 0x80) return invalid;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return invalid;
    return {cp, length, char_class(cp)};
}

namespace {

// 's|'t|'re|'ve|'m|'ll|'d at `start` (which holds an apostrophe): the match's length, or 0.
size_t contraction_length(std::string_view text, size_t start) {
    const size_t left = text.size() - start;
    if (left >= 2) {
        const char a = text[start + 1];
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
        if (left >= 3) {
            const char b = text[start + 2];
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
        }
    }
    return 0;
}

// The end of the run of characters of class `cls` that starts at `pos`.
size_t run_end(std::string_view text, size_t pos, CharClass cls) {
    while (pos < text.size()) {
        const Utf8Char ch = read_utf8_char(text, pos);
        if (ch.cls != cls) break;
        pos += ch.length;
    }
    return pos;
}

}  // namespace

size_t gpt2_pretoken_end(std::string_view text, size_t start) {
    const Utf8Char first = read_utf8_char(text, start);
    // 's|'t|'re|'ve|'m|'ll|'d
    if (first.code_point == '\'')
        if (size_t n = contraction_length(text, start); n > 0) return start + n;
    //  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+  : an optional space, then a run of one class
    if (first.cls != CharClass::kSpace) return run_end(text, start + first.length, first.cls);
    if (first.code_point == ' ') {
        const Utf8Char next = read_utf8_char(text, start + 1);
        if (next.length > 0 && next.cls != CharClass::kSpace) return run_end(text, start + 1 + next.length, next.cls);
    }
    // \s+(?!\S) | \s+ : a whitespace run; before a non-space character its last character is left
    // out (it begins the next pre-token, " word"), unless the run is that one character.
    size_t pos = start, last_char_start = start;
    while (pos < text.size()) {
        const Utf8Char ch = read_utf8_char(text, pos);
        if (ch.cls != CharClass::kSpace) break;
        last_char_start = pos;
        pos += ch.length;
    }
    if (pos == text.size() || last_char_start == start) return pos;
    return last_char_start;
}

std::vector<std::string_view> gpt2_pretokenize(std::string_view text) {
    std::vector<std::string_view> pieces;
    for (size_t start = 0; start < text.size();) {
        const size_t end = gpt2_pretoken_end(text, start);
        pieces.push_back(text.substr(start, end - start));
        start = end;
    }
    return pieces;
}

}  // namespace ampgrad::data
