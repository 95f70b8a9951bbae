// tokenizer.hpp: text <-> token ids. Three kinds:
//   byte: every byte is a token, V = 256; any text (any language, any encoding) round-trips.
//   char: the distinct characters (Unicode code points) of a text, sorted, are the vocabulary
//         (65 for Tiny Shakespeare): smaller V, so a small model learns faster.
//   bpe:  a byte-level BPE (data/bpe_tokenizer.hpp: GPT-2's, or one trained by `ampgrad tokenizer
//         train`); "<|endoftext|>" in the text is its special token.
//
//   data::Tokenizer tok = data::Tokenizer::chars_of(text);   // or Tokenizer::bytes(), Tokenizer::gpt2()
//   std::vector<int32_t> ids = tok.encode("To be");          // ValueError for an unknown character
//   std::string back = tok.decode(ids);
//   Tensor idx = tok.encode_tensor("To be");                 // (1,T) int64, as the models take ids
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tensor.hpp"
#include "data/bpe_tokenizer.hpp"

namespace ampgrad::data {

class Tokenizer {
public:
    enum class Kind { kByte, kChar, kBpe };

    static Tokenizer bytes();
    // The sorted distinct code points of `text` (valid UTF-8; IOError otherwise).
    static Tokenizer chars_of(std::string_view text);
    // A char tokenizer with exactly these code points, in this order (as saved in a checkpoint).
    static Tokenizer from_code_points(std::vector<uint32_t> code_points);
    // A byte-level BPE (shared: copies of this Tokenizer share the one vocabulary).
    static Tokenizer from_bpe(std::shared_ptr<const BpeTokenizer> bpe);
    // GPT-2's BPE, built into the library (BpeTokenizer::gpt2(), built once per process and shared).
    static Tokenizer gpt2();

    Kind kind() const { return kind_; }
    const char* kind_name() const { return kind_ == Kind::kByte ? "byte" : kind_ == Kind::kChar ? "char" : "bpe"; }
    int64_t vocab_size() const;
    const std::vector<uint32_t>& code_points() const { return code_points_; }   // char kind only
    const BpeTokenizer* bpe() const { return bpe_.get(); }                     // bpe kind only (else null)

    // ValueError naming the first character that is not in the vocabulary (char kind).
    std::vector<int32_t> encode(std::string_view text) const;
    // encode as the models take token ids: (1,T) int64 on `device`.
    Tensor encode_tensor(std::string_view text, Device device = Device(kCPU)) const;
    // IndexError for an id outside [0, V).
    std::string decode(const std::vector<int32_t>& ids) const;
    std::string decode_one(int64_t id) const;

private:
    Kind kind_ = Kind::kByte;
    std::vector<uint32_t> code_points_;                  // id -> code point
    std::unordered_map<uint32_t, int32_t> ids_;          // code point -> id
    std::shared_ptr<const BpeTokenizer> bpe_;            // bpe kind
};

// Token ids <-> the int64 tensors the models take: ids -> (1,T) int64 on `device`; a (T) or (1,T)
// integer tensor on any device -> its ids (ShapeError for another shape, ValueError for an id that
// does not fit int32).
Tensor token_tensor(const std::vector<int32_t>& ids, Device device = Device(kCPU));
std::vector<int32_t> token_ids(const Tensor& ids);

// UTF-8 helpers used by the tokenizer.
std::vector<uint32_t> utf8_code_points(std::string_view text);   // IOError on invalid UTF-8
std::string utf8_encode(uint32_t code_point);

}  // namespace ampgrad::data
