// bpe_tokenizer.cpp: GPT-2's byte map, the merge table and the encode / decode loops
// (data/bpe_tokenizer.hpp). The file formats are read and written in data/bpe_files.cpp.
#include "data/bpe_tokenizer.hpp"

#include <climits>
#include <queue>

#include "core/error.hpp"
#include "data/pretokenizer.hpp"
#include "data/tokenizer.hpp"

namespace ampgrad::data {

const std::array<uint32_t, 256>& gpt2_byte_to_unicode() {
    static const std::array<uint32_t, 256> table = [] {
        std::array<uint32_t, 256> t{};
        uint32_t next_unprintable = 0x100;
        for (uint32_t b = 0; b < 256; ++b) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            t[b] = printable ? b : next_unprintable++;
        }
        return t;
    }();
    return table;
}

std::string gpt2_bytes_to_unicode(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (char c : bytes) out += utf8_encode(gpt2_byte_to_unicode()[static_cast<unsigned char>(c)]);
    return out;
}

void BpeTokenizer::index(const std::vector<std::pair<int32_t, int32_t>>& merges, const std::string& source) {
    ids_.clear();
    ids_.reserve(token_bytes_.size());
    for (size_t id = 0; id < token_bytes_.size(); ++id)
        if (!ids_.emplace(token_bytes_[id], static_cast<int32_t>(id)).second)
            throw FormatError(fmt::format("{}: the token \"{}\" has two ids, {} and {}", source,
                                          gpt2_bytes_to_unicode(token_bytes_[id]), ids_[token_bytes_[id]], id));
    for (int b = 0; b < 256; ++b) {
        auto it = ids_.find(std::string(1, static_cast<char>(b)));
        if (it == ids_.end())
            throw FormatError(fmt::format("{}: the vocabulary has no token for the byte 0x{:02X} (\"{}\"): a byte-level "
                                          "vocabulary needs all 256", source, b, utf8_encode(gpt2_byte_to_unicode()[b])));
        byte_ids_[b] = it->second;
    }
    merges_.clear();
    merge_table_.clear();
    merge_table_.reserve(merges.size());
    for (const auto& [left, right] : merges) {
        auto it = ids_.find(token_bytes_[left] + token_bytes_[right]);
        if (it == ids_.end())
            throw FormatError(fmt::format("{}: the merge \"{} {}\" makes \"{}\", which is not in the vocabulary", source,
                                          gpt2_bytes_to_unicode(token_bytes_[left]),
                                          gpt2_bytes_to_unicode(token_bytes_[right]),
                                          gpt2_bytes_to_unicode(token_bytes_[left] + token_bytes_[right])));
        // A repeated pair keeps its first (lowest) rank, as in Hugging Face's loader.
        if (merge_table_.emplace(pair_key(left, right), Merge{static_cast<int32_t>(merges_.size()), it->second}).second)
            merges_.emplace_back(left, right);
    }
    auto eot = ids_.find(std::string(kEndOfText));
    eot_ = eot == ids_.end() ? -1 : eot->second;
}

const BpeTokenizer::Merge* BpeTokenizer::find_merge(int32_t left, int32_t right) const {
    auto it = merge_table_.find(pair_key(left, right));
    return it == merge_table_.end() ? nullptr : &it->second;
}

namespace {

constexpr size_t kShortWord = 48;   // bytes: up to here the quadratic scan beats the heap

}  // namespace

// One pre-token: its bytes as byte tokens, then the lowest-rank adjacent pair merged (the leftmost
// on a tie) until none is in the table. Short words scan all pairs each round; long ones (a run of
// 10,000 spaces) keep the candidate pairs in a heap, so no input is quadratic.
void BpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
    const size_t n = word.size();
    if (n <= kShortWord) {
        int32_t syms[kShortWord];
        size_t len = n;
        for (size_t i = 0; i < n; ++i) syms[i] = byte_ids_[static_cast<unsigned char>(word[i])];
        while (len > 1) {
            const Merge* best = nullptr;
            size_t at = 0;
            for (size_t i = 0; i + 1 < len; ++i) {
                const Merge* m = find_merge(syms[i], syms[i + 1]);
                if (m != nullptr && (best == nullptr || m->rank < best->rank)) best = m, at = i;
            }
            if (best == nullptr) break;
            syms[at] = best->id;
            for (size_t i = at + 1; i + 1 < len; ++i) syms[i] = syms[i + 1];
            --len;
        }
        out.insert(out.end(), syms, syms + len);
        return;
    }
    // Long word: a doubly linked list of symbols and a min-heap of (rank, left position).
    std::vector<int32_t> id(n), prev(n), next(n);
    for (size_t i = 0; i < n; ++i) {
        id[i] = byte_ids_[static_cast<unsigned char>(word[i])];
        prev[i] = static_cast<int32_t>(i) - 1;
        next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
    }
    using Candidate = std::pair<int32_t, int32_t>;   // (rank, left position): smallest first
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
    auto push = [&](int32_t left) {
        if (left < 0 || next[left] < 0) return;
        if (const Merge* m = find_merge(id[left], id[next[left]])) heap.emplace(m->rank, left);
    };
    for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
    while (!heap.empty()) {
        const auto [rank, left] = heap.top();
        heap.pop();
        if (id[left] < 0 || next[left] < 0) continue;                 // merged away
        const Merge* m = find_merge(id[left], id[next[left]]);
        if (m == nullptr || m->rank != rank) continue;                // stale: a neighbour changed
        const int32_t right = next[left];
        id[left] = m->id;
        id[right] = -1;
        next[left] = next[right];
        if (next[right] >= 0) prev[next[right]] = left;
        push(prev[left]);
        push(left);
    }
    for (int32_t i = 0; i >= 0; i = next[i]) out.push_back(id[i]);
}

// Pre-tokens repeat (" the", "\n"), so each distinct one is encoded once per call: a cache keyed
// by the pre-token's bytes (views into the text, which outlives the cache) holding where its ids
// are in `out` (which only grows while the cache lives).
void BpeTokenizer::encode_ordinary(std::string_view text, std::vector<int32_t>& out, WordCache& cache) const {
    for (size_t start = 0; start < text.size();) {
        const size_t end = gpt2_pretoken_end(text, start);
        const std::string_view word = text.substr(start, end - start);
        start = end;
        auto [it, fresh] = cache.try_emplace(word, out.size(), 0);
        if (!fresh) {
            const auto [first, count] = it->second;
            for (size_t i = 0; i < count; ++i) out.push_back(out[first + i]);
            continue;
        }
        encode_word(word, out);
        it->second.second = out.size() - it->second.first;
    }
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool allow_special) const {
    std::vector<int32_t> out;
    out.reserve(text.size() / 3);
    WordCache cache;
    if (!allow_special || eot_ < 0) {
        encode_ordinary(text, out, cache);
        return out;
    }
    for (size_t start = 0;;) {
        const size_t at = text.find(kEndOfText, start);
        encode_ordinary(text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start), out, cache);
        if (at == std::string_view::npos) break;
        out.push_back(eot_);
        start = at + kEndOfText.size();
    }
    return out;
}

void BpeTokenizer::encode_each(std::span<const std::string_view> texts, std::vector<int32_t>& out,
                               std::vector<size_t>& ends) const {
    WordCache cache;
    for (std::string_view text : texts) {
        encode_ordinary(text, out, cache);
        ends.push_back(out.size());
    }
}

std::string_view BpeTokenizer::token_bytes(int32_t id) const {
    if (id < 0 || id >= vocab_size())
        throw IndexError(fmt::format("BpeTokenizer: token id {} is outside the vocabulary [0, {})", id, vocab_size()));
    return token_bytes_[static_cast<size_t>(id)];
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
    std::string out;
    for (int32_t id : ids) out += token_bytes(id);
    return out;
}

}  // namespace ampgrad::data
