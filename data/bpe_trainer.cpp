// bpe_trainer.cpp: byte-level BPE training by pair frequency (data/bpe_trainer.hpp).
#include "data/bpe_trainer.hpp"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "core/error.hpp"
#include "data/pretokenizer.hpp"

namespace ampgrad::data {

namespace {

struct Word {
    std::vector<int32_t> symbols;   // token ids
    int64_t count = 0;              // how often the pre-token occurs
};

uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(left) << 32) | static_cast<uint32_t>(right);
}

// How often each adjacent pair occurs, ordered most frequent first (then smallest pair), and
// which words hold it (a superset: entries go stale as words change, and are checked on use).
class PairCounts {
public:
    void add(uint64_t pair, int64_t delta, int32_t word) {
        int64_t& c = counts_[pair];
        if (c > 0) ranked_.erase({-c, pair});
        c += delta;
        if (c > 0) ranked_.insert({-c, pair});
        if (delta > 0) where_[pair].push_back(word);
    }
    void add_word(const Word& w, int32_t index, int64_t sign) {
        for (size_t i = 0; i + 1 < w.symbols.size(); ++i) add(pair_key(w.symbols[i], w.symbols[i + 1]), sign * w.count, index);
    }
    bool empty() const { return ranked_.empty(); }
    uint64_t best() const { return ranked_.begin()->second; }
    std::vector<int32_t> take_words(uint64_t pair) {
        std::vector<int32_t> words = std::move(where_[pair]);
        where_.erase(pair);
        std::sort(words.begin(), words.end());
        words.erase(std::unique(words.begin(), words.end()), words.end());
        return words;
    }

private:
    std::unordered_map<uint64_t, int64_t> counts_;
    std::set<std::pair<int64_t, uint64_t>> ranked_;   // (-count, pair)
    std::unordered_map<uint64_t, std::vector<int32_t>> where_;
};

// Every occurrence of (left, right) in `symbols`, left to right, becomes `merged`.
void merge_in_word(std::vector<int32_t>& symbols, int32_t left, int32_t right, int32_t merged) {
    size_t out = 0;
    for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
            symbols[out++] = merged;
            ++i;
        } else {
            symbols[out++] = symbols[i];
        }
    }
    symbols.resize(out);
}

// The distinct pre-tokens of `text` (documents split at <|endoftext|>) with their counts, sorted.
std::vector<std::pair<std::string_view, int64_t>> count_pretokens(std::string_view text) {
    std::unordered_map<std::string_view, int64_t> counts;
    for (size_t start = 0; start <= text.size();) {
        size_t stop = text.find(BpeTokenizer::kEndOfText, start);
        if (stop == std::string_view::npos) stop = text.size();
        for (size_t pos = start; pos < stop;) {
            const size_t end = gpt2_pretoken_end(text.substr(0, stop), pos);
            ++counts[text.substr(pos, end - pos)];
            pos = end;
        }
        start = stop + BpeTokenizer::kEndOfText.size();
    }
    std::vector<std::pair<std::string_view, int64_t>> sorted(counts.begin(), counts.end());
    std::sort(sorted.begin(), sorted.end());
    return sorted;
}

}  // namespace

BpeTokenizer train_bpe(std::string_view text, int64_t vocab_size) {
    if (vocab_size < 257 || vocab_size > INT32_MAX)
        throw ValueError(fmt::format("train_bpe: vocab_size {} must be in [257, 2^31): the 256 bytes, <|endoftext|>, "
                                     "then one token per merge", vocab_size));
    // ids 0..255: the bytes in GPT-2's order (by their byte-to-unicode code point)
    std::vector<int> bytes(256);
    for (int b = 0; b < 256; ++b) bytes[b] = b;
    std::sort(bytes.begin(), bytes.end(), [](int a, int b) { return gpt2_byte_to_unicode()[a] < gpt2_byte_to_unicode()[b]; });
    std::vector<std::string> tokens;
    std::unordered_map<std::string, int32_t> ids;
    int32_t byte_id[256];
    for (int b : bytes) {
        byte_id[b] = static_cast<int32_t>(tokens.size());
        ids.emplace(std::string(1, static_cast<char>(b)), byte_id[b]);
        tokens.emplace_back(1, static_cast<char>(b));
    }
    std::vector<Word> words;
    PairCounts pairs;
    for (const auto& [piece, count] : count_pretokens(text)) {
        Word w{{}, count};
        for (char c : piece) w.symbols.push_back(byte_id[static_cast<unsigned char>(c)]);
        words.push_back(std::move(w));
        pairs.add_word(words.back(), static_cast<int32_t>(words.size() - 1), +1);
    }
    std::vector<std::pair<std::string, std::string>> merges;
    while (static_cast<int64_t>(tokens.size()) < vocab_size - 1 && !pairs.empty()) {
        const uint64_t best = pairs.best();
        const auto left = static_cast<int32_t>(best >> 32), right = static_cast<int32_t>(best & 0xFFFFFFFF);
        // Two different pairs can spell the same bytes ("a"+"bc", "ab"+"c"): they share one id.
        const std::string merged = tokens[left] + tokens[right];
        auto [it, fresh] = ids.emplace(merged, static_cast<int32_t>(tokens.size()));
        if (fresh) tokens.push_back(merged);
        merges.emplace_back(gpt2_bytes_to_unicode(tokens[left]), gpt2_bytes_to_unicode(tokens[right]));
        for (int32_t index : pairs.take_words(best)) {
            Word& w = words[index];
            pairs.add_word(w, index, -1);
            merge_in_word(w.symbols, left, right, it->second);
            pairs.add_word(w, index, +1);
        }
    }
    tokens.emplace_back(BpeTokenizer::kEndOfText);
    std::vector<std::string> spellings;
    for (const std::string& t : tokens) spellings.push_back(gpt2_bytes_to_unicode(t));
    return BpeTokenizer::from_tokens(std::move(spellings), merges, "train_bpe");
}

}  // namespace ampgrad::data
