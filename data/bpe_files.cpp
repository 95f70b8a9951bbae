// bpe_files.cpp: BpeTokenizer's files (data/bpe_tokenizer.hpp): Hugging Face's vocab.json and
// merges.txt, tiktoken's rank files, and the spellings saved in checkpoints. Every problem is an
// IOError (unreadable) or a FormatError naming the file and, where there is one, the line.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "data/bpe_tokenizer.hpp"
#include "data/unicode_classes.hpp"

namespace ampgrad::data {

namespace {

std::string read_file(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        throw IOError(fmt::format("BpeTokenizer: cannot read \"{}\": no such file", path));
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    if (!in) throw IOError(fmt::format("BpeTokenizer: cannot read \"{}\"", path));
    return ss.str();
}

// The 1-based line of byte offset `pos` in `text`.
size_t line_of(std::string_view text, size_t pos) {
    return 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(std::min(pos, text.size())), '\n'));
}

// The lines of `text` (a final newline ends the last line; it does not start an empty one).
std::vector<std::string_view> split_lines(std::string_view text) {
    std::vector<std::string_view> lines;
    for (size_t start = 0; start < text.size();) {
        size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        lines.push_back(text.substr(start, end - start));
        start = end + 1;
    }
    return lines;
}

// A byte-level spelling back to raw bytes; nullopt when a character is outside the 256 of the map.
std::optional<std::string> unicode_to_bytes(std::string_view spelling) {
    static const std::vector<int> inverse = [] {
        std::vector<int> inv(0x144, -1);
        for (int b = 0; b < 256; ++b) inv[gpt2_byte_to_unicode()[b]] = b;
        return inv;
    }();
    std::string bytes;
    for (size_t pos = 0; pos < spelling.size();) {
        const Utf8Char ch = read_utf8_char(spelling, pos);
        if (ch.code_point >= inverse.size() || inverse[ch.code_point] < 0) return std::nullopt;
        bytes += static_cast<char>(inverse[ch.code_point]);
        pos += ch.length;
    }
    return bytes;
}

int32_t decode_base64_char(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

// Standard base64 with '=' padding; nullopt when `s` is not that.
std::optional<std::string> decode_base64(std::string_view s) {
    if (s.empty() || s.size() % 4 != 0) return std::nullopt;
    const size_t pad = s.ends_with("==") ? 2 : s.ends_with('=') ? 1 : 0;
    std::string out;
    for (size_t i = 0; i < s.size(); i += 4) {
        uint32_t v = 0;
        for (size_t j = 0; j < 4; ++j) {
            const bool padding = i + j >= s.size() - pad;
            const int32_t d = padding ? 0 : decode_base64_char(s[i + j]);
            if (d < 0 || (padding && s[i + j] != '=')) return std::nullopt;
            v = (v << 6) | static_cast<uint32_t>(d);
        }
        const size_t keep = i + 4 == s.size() ? 3 - pad : 3;
        for (size_t j = 0; j < keep; ++j) out += static_cast<char>((v >> (16 - 8 * j)) & 0xFF);
    }
    return out;
}

}  // namespace

BpeTokenizer BpeTokenizer::from_tokens(std::vector<std::string> tokens,
                                       const std::vector<std::pair<std::string, std::string>>& merges,
                                       const std::string& source) {
    BpeTokenizer t;
    std::unordered_map<std::string, int32_t> by_spelling;
    for (size_t id = 0; id < tokens.size(); ++id) {
        std::optional<std::string> bytes = unicode_to_bytes(tokens[id]);
        if (!bytes)
            throw FormatError(fmt::format("{}: the token \"{}\" (id {}) has a character outside GPT-2's byte-level "
                                          "alphabet", source, tokens[id], id));
        t.token_bytes_.push_back(std::move(*bytes));
        by_spelling.emplace(tokens[id], static_cast<int32_t>(id));
    }
    std::vector<std::pair<int32_t, int32_t>> merge_ids;
    for (size_t rank = 0; rank < merges.size(); ++rank) {
        auto left = by_spelling.find(merges[rank].first), right = by_spelling.find(merges[rank].second);
        if (left == by_spelling.end() || right == by_spelling.end())
            throw FormatError(fmt::format("{}: merge {} \"{} {}\": the token \"{}\" is not in the vocabulary", source,
                                          rank, merges[rank].first, merges[rank].second,
                                          left == by_spelling.end() ? merges[rank].first : merges[rank].second));
        merge_ids.emplace_back(left->second, right->second);
    }
    t.index(merge_ids, source);
    return t;
}

BpeTokenizer BpeTokenizer::from_hf_dir(const std::string& dir) {
    const std::filesystem::path d(dir);
    return from_hf_files((d / "vocab.json").string(), (d / "merges.txt").string());
}

BpeTokenizer BpeTokenizer::from_hf_files(const std::string& vocab_path, const std::string& merges_path) {
    const std::string vocab_text = read_file(vocab_path);
    nlohmann::json vocab;
    try {
        vocab = nlohmann::json::parse(vocab_text);
    } catch (const nlohmann::json::parse_error& e) {
        throw FormatError(fmt::format("{}: line {}: not valid JSON ({})", vocab_path, line_of(vocab_text, e.byte - 1),
                                      e.what()));
    }
    if (!vocab.is_object() || vocab.empty())
        throw FormatError(fmt::format("{}: line 1: expected a JSON object mapping tokens to ids", vocab_path));
    std::vector<std::string> tokens(vocab.size());
    std::vector<bool> seen(vocab.size(), false);
    for (const auto& [token, value] : vocab.items()) {
        // (the line is looked up only for an error: a search per token would be quadratic)
        auto line = [&] { return line_of(vocab_text, vocab_text.find(nlohmann::json(token).dump())); };
        if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() >= static_cast<int64_t>(tokens.size()))
            throw FormatError(fmt::format("{}: line {}: the token \"{}\" has the id {}, not an integer in [0, {})",
                                          vocab_path, line(), token, value.dump(), tokens.size()));
        const size_t id = value.get<size_t>();
        if (seen[id]) throw FormatError(fmt::format("{}: line {}: the id {} is given twice", vocab_path, line(), id));
        seen[id] = true;
        tokens[id] = token;
    }
    const std::string merges_text = read_file(merges_path);
    std::vector<std::pair<std::string, std::string>> merges;
    const std::vector<std::string_view> lines = split_lines(merges_text);
    std::unordered_map<std::string, size_t> known;
    for (size_t id = 0; id < tokens.size(); ++id) known.emplace(tokens[id], id);
    for (size_t i = 0; i < lines.size(); ++i) {
        const std::string_view line = lines[i];
        if (line.starts_with("#version")) continue;
        const size_t space = line.find(' ');
        if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
            line.find(' ', space + 1) != std::string_view::npos)
            throw FormatError(fmt::format("{}: line {}: expected two tokens separated by one space, got \"{}\"",
                                          merges_path, i + 1, line));
        std::string left(line.substr(0, space)), right(line.substr(space + 1));
        for (const std::string& token : {left, right})
            if (!known.contains(token))
                throw FormatError(fmt::format("{}: line {}: the token \"{}\" is not in vocab.json", merges_path, i + 1, token));
        if (!known.contains(left + right))
            throw FormatError(fmt::format("{}: line {}: the merged token \"{}\" is not in vocab.json", merges_path, i + 1,
                                          left + right));
        merges.emplace_back(std::move(left), std::move(right));
    }
    return from_tokens(std::move(tokens), merges, vocab_path);
}

BpeTokenizer BpeTokenizer::from_tiktoken(const std::string& path) { return from_tiktoken_text(read_file(path), path); }

BpeTokenizer BpeTokenizer::gpt2() { return from_tiktoken_text(gpt2_tiktoken_ranks(), "gpt2.tiktoken (built in)"); }

BpeTokenizer BpeTokenizer::from_tiktoken_text(std::string_view text, const std::string& path) {
    const std::vector<std::string_view> lines = split_lines(text);
    BpeTokenizer t;
    t.token_bytes_.assign(lines.size(), std::string());
    std::vector<bool> seen(lines.size(), false);
    for (size_t i = 0; i < lines.size(); ++i) {
        const std::string_view line = lines[i];
        const size_t space = line.find(' ');
        std::optional<std::string> bytes = space == std::string_view::npos ? std::nullopt : decode_base64(line.substr(0, space));
        if (!bytes)
            throw FormatError(fmt::format("{}: line {}: expected \"<base64 token> <rank>\", got \"{}\"", path, i + 1,
                                          line.substr(0, 80)));
        const std::string rank_text(line.substr(space + 1));
        size_t used = 0;
        int64_t rank = -1;
        try {
            rank = std::stoll(rank_text, &used);
        } catch (const std::exception&) {
        }
        if (used != rank_text.size() || rank < 0 || rank >= static_cast<int64_t>(lines.size()) || seen[rank])
            throw FormatError(fmt::format("{}: line {}: the rank \"{}\" is not a new integer in [0, {})", path, i + 1,
                                          rank_text, lines.size()));
        seen[rank] = true;
        t.token_bytes_[rank] = std::move(*bytes);
    }
    // The merges, rebuilt in rank order: a token of two or more bytes is the merge of the two parts
    // that BPE with the lower ranks leaves of its bytes (a token that does not end in two parts is
    // never produced by encoding, and gets no merge).
    t.index({}, path);
    if (t.ids_.contains(std::string(kEndOfText)))
        throw FormatError(fmt::format("{}: {} is a rank, not a special token", path, kEndOfText));
    std::vector<std::pair<int32_t, int32_t>> merges;
    std::vector<int32_t> parts;
    for (size_t id = 0; id < t.token_bytes_.size(); ++id) {
        if (t.token_bytes_[id].size() < 2) continue;
        parts.clear();
        t.encode_word(t.token_bytes_[id], parts);
        if (parts.size() != 2) continue;
        merges.emplace_back(parts[0], parts[1]);
        t.merge_table_.emplace(pair_key(parts[0], parts[1]), Merge{static_cast<int32_t>(merges.size() - 1),
                                                                    static_cast<int32_t>(id)});
    }
    t.token_bytes_.emplace_back(kEndOfText);
    t.index(merges, path);
    return t;
}

std::vector<std::string> BpeTokenizer::token_strings() const {
    std::vector<std::string> out;
    out.reserve(token_bytes_.size());
    // "<|endoftext|>" is printable ASCII, so it is spelt as it reads, as in Hugging Face's vocab.json.
    for (const std::string& bytes : token_bytes_) out.push_back(gpt2_bytes_to_unicode(bytes));
    return out;
}

std::vector<std::pair<std::string, std::string>> BpeTokenizer::merge_strings() const {
    std::vector<std::pair<std::string, std::string>> out;
    out.reserve(merges_.size());
    for (const auto& [left, right] : merges_)
        out.emplace_back(gpt2_bytes_to_unicode(token_bytes_[left]), gpt2_bytes_to_unicode(token_bytes_[right]));
    return out;
}

std::string BpeTokenizer::vocab_json() const {
    const std::vector<std::string> tokens = token_strings();
    std::string out = "{";
    for (size_t id = 0; id < tokens.size(); ++id)
        out += fmt::format("{}{}:{}", id == 0 ? "" : ",", nlohmann::json(tokens[id]).dump(), id);
    return out + "}\n";
}

std::string BpeTokenizer::merges_txt() const {
    std::string out = "#version: 0.2\n";
    for (const auto& [left, right] : merge_strings()) out += left + " " + right + "\n";
    return out;
}

// Hugging Face's one-file form: the same vocabulary and merges, plus the pipeline that makes it
// GPT-2's (ByteLevel pre-tokenizer and decoder, no normalizer) and <|endoftext|> as a special token.
std::string BpeTokenizer::tokenizer_json() const {
    nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
    const std::vector<std::string> tokens = token_strings();
    for (size_t id = 0; id < tokens.size(); ++id) vocab[tokens[id]] = id;
    nlohmann::ordered_json merges = nlohmann::ordered_json::array();
    for (const auto& [left, right] : merge_strings()) merges.push_back(left + " " + right);
    nlohmann::ordered_json added = nlohmann::ordered_json::array();
    if (eot_ >= 0)
        added.push_back({{"id", eot_}, {"content", kEndOfText}, {"single_word", false}, {"lstrip", false},
                         {"rstrip", false}, {"normalized", true}, {"special", true}});
    const nlohmann::ordered_json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false},
                                               {"trim_offsets", true}, {"use_regex", true}};
    nlohmann::ordered_json j = {
        {"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added},
        {"normalizer", nullptr}, {"pre_tokenizer", byte_level}, {"post_processor", byte_level}, {"decoder", byte_level},
        {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
                   {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
                   {"ignore_merges", false}, {"vocab", vocab}, {"merges", merges}}}};
    return j.dump() + "\n";
}

}  // namespace ampgrad::data
