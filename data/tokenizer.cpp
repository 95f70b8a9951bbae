// tokenizer.cpp: byte- and character-level tokenisation (data/tokenizer.hpp).
#include "data/tokenizer.hpp"

#include <algorithm>

#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "data/text.hpp"

namespace ampgrad::data {

std::vector<uint32_t> utf8_code_points(std::string_view text) {
    if (size_t bad = first_invalid_utf8(text); bad != std::string_view::npos)
        throw IOError(fmt::format("tokenizer: the text is not valid UTF-8 at byte offset {}", bad));
    std::vector<uint32_t> out;
    out.reserve(text.size());
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    for (size_t i = 0; i < text.size();) {
        const unsigned char c = s[i];
        const size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : 4;
        uint32_t cp = len == 1 ? c : c & (0x7F >> len);
        for (size_t j = 1; j < len; ++j) cp = (cp << 6) | (s[i + j] & 0x3F);
        out.push_back(cp);
        i += len;
    }
    return out;
}

std::string utf8_encode(uint32_t cp) {
    std::string s;
    if (cp < 0x80) {
        s += static_cast<char>(cp);
    } else if (cp < 0x800) {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        s += static_cast<char>(0xE0 | (cp >> 12));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        s += static_cast<char>(0xF0 | (cp >> 18));
        s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
}

Tokenizer Tokenizer::bytes() { return Tokenizer(); }

Tokenizer Tokenizer::chars_of(std::string_view text) {
    // One pass marking the code points seen, then the marks in order: linear in the text, where
    // sorting all of it was n log n. A four-byte sequence holds 21 bits.
    std::vector<bool> seen(uint32_t{1} << 21, false);
    for (uint32_t cp : utf8_code_points(text)) seen[cp] = true;
    std::vector<uint32_t> cps;
    for (uint32_t cp = 0; cp < seen.size(); ++cp)
        if (seen[cp]) cps.push_back(cp);
    return from_code_points(std::move(cps));
}

Tokenizer Tokenizer::from_code_points(std::vector<uint32_t> code_points) {
    if (code_points.empty()) throw ValueError("tokenizer: a character vocabulary cannot be empty");
    Tokenizer t;
    t.kind_ = Kind::kChar;
    t.code_points_ = std::move(code_points);
    for (size_t i = 0; i < t.code_points_.size(); ++i)
        if (!t.ids_.emplace(t.code_points_[i], static_cast<int32_t>(i)).second)
            throw ValueError(fmt::format("tokenizer: the character U+{:04X} appears twice in the vocabulary",
                                         t.code_points_[i]));
    return t;
}

Tokenizer Tokenizer::from_bpe(std::shared_ptr<const BpeTokenizer> bpe) {
    if (!bpe) throw ValueError("tokenizer: from_bpe needs a BpeTokenizer, got null");
    Tokenizer t;
    t.kind_ = Kind::kBpe;
    t.bpe_ = std::move(bpe);
    return t;
}

Tokenizer Tokenizer::gpt2() {
    static const std::shared_ptr<const BpeTokenizer> shared = std::make_shared<const BpeTokenizer>(BpeTokenizer::gpt2());
    return from_bpe(shared);
}

int64_t Tokenizer::vocab_size() const {
    if (kind_ == Kind::kBpe) return bpe_->vocab_size();
    return kind_ == Kind::kByte ? 256 : static_cast<int64_t>(code_points_.size());
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
    if (kind_ == Kind::kBpe) return bpe_->encode(text, /*allow_special=*/true);
    std::vector<int32_t> ids;
    if (kind_ == Kind::kByte) {
        for (char c : text) ids.push_back(static_cast<unsigned char>(c));
        return ids;
    }
    for (uint32_t cp : utf8_code_points(text)) {
        auto it = ids_.find(cp);
        if (it == ids_.end())
            throw ValueError(fmt::format("tokenizer: the character \"{}\" (U+{:04X}) is not in the vocabulary of {} "
                                         "characters", utf8_encode(cp), cp, code_points_.size()));
        ids.push_back(it->second);
    }
    return ids;
}

std::string Tokenizer::decode_one(int64_t id) const {
    if (id < 0 || id >= vocab_size())
        throw IndexError(fmt::format("tokenizer: token id {} is outside the vocabulary [0, {})", id, vocab_size()));
    if (kind_ == Kind::kByte) return std::string(1, static_cast<char>(id));
    if (kind_ == Kind::kBpe) return std::string(bpe_->token_bytes(static_cast<int32_t>(id)));
    return utf8_encode(code_points_[static_cast<size_t>(id)]);
}

Tensor Tokenizer::encode_tensor(std::string_view text, Device device) const {
    return token_tensor(encode(text), device);
}

Tensor token_tensor(const std::vector<int32_t>& ids, Device device) {
    const std::vector<int64_t> wide(ids.begin(), ids.end());
    return tensor(wide, {1, static_cast<int64_t>(wide.size())}).to(device);   // (1,T)
}

std::vector<int32_t> token_ids(const Tensor& ids) {
    const bool row = ids.dim() == 1 || (ids.dim() == 2 && ids.size(0) == 1);
    if (!row || is_floating(ids.dtype()))
        throw ShapeError(fmt::format("token_ids: expected (T) or (1,T) integer token ids, but got {}", ids.describe()));
    std::vector<int32_t> out;
    for (int64_t id : ids.to(Device(kCPU)).to(kInt64).contiguous().to_vector<int64_t>()) {
        if (id < INT32_MIN || id > INT32_MAX)
            throw ValueError(fmt::format("token_ids: the id {} does not fit a tokenizer's int32 ids", id));
        out.push_back(static_cast<int32_t>(id));
    }
    return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
    if (kind_ == Kind::kBpe) return bpe_->decode(ids);
    std::string out;
    for (int32_t id : ids) out += decode_one(id);
    return out;
}

}  // namespace ampgrad::data
