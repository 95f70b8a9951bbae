// corpus.cpp: a run's text and tokenizer (app/corpus.hpp).
#include "app/corpus.hpp"

#include <filesystem>

#include <fmt/format.h>

#include "core/error.hpp"
#include "data/text.hpp"

namespace ampgrad::app {

Corpus load_corpus(const RunConfig& cfg, const std::optional<data::Tokenizer>& saved) {
    Corpus c;
    std::string text;
    if (cfg.data_file.empty()) {
        text = std::string(data::tiny_shakespeare());
        c.source = "bundled Tiny Shakespeare";
    } else {
        text = data::read_text_file(cfg.data_file);
        c.source = cfg.data_file;
    }
    c.tokenizer = saved ? *saved : make_tokenizer(resolve_tokenizer(cfg.tokenizer, cfg.init_from), text);
    std::vector<int32_t> ids = c.tokenizer.encode(text);
    const size_t n_train = ids.size() * 9 / 10;
    c.train = std::make_shared<std::vector<int32_t>>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n_train));
    c.val = std::make_shared<std::vector<int32_t>>(ids.begin() + static_cast<std::ptrdiff_t>(n_train), ids.end());
    return c;
}

std::string resolve_tokenizer(const std::string& spec, const std::string& pretrained_dir) {
    if (spec != "auto") return spec;
    const std::filesystem::path dir(pretrained_dir);
    const bool has_bpe = !pretrained_dir.empty() && std::filesystem::exists(dir / "vocab.json") &&
                         std::filesystem::exists(dir / "merges.txt");
    return has_bpe ? "gpt2:" + pretrained_dir : "char";
}

data::Tokenizer make_tokenizer(const std::string& spec, std::string_view text) {
    if (spec == "byte") return data::Tokenizer::bytes();
    if (spec == "char") return data::Tokenizer::chars_of(text);
    if (spec == "gpt2") return data::Tokenizer::gpt2();   // GPT-2's BPE, built into the library
    if (spec.starts_with("gpt2:"))
        return data::Tokenizer::from_bpe(std::make_shared<data::BpeTokenizer>(data::BpeTokenizer::from_hf_dir(spec.substr(5))));
    if (spec.starts_with("tiktoken:"))
        return data::Tokenizer::from_bpe(std::make_shared<data::BpeTokenizer>(data::BpeTokenizer::from_tiktoken(spec.substr(9))));
    throw ValueError(fmt::format("--tokenizer: unknown value \"{}\"; expected auto, char, byte, gpt2, gpt2:DIR or tiktoken:FILE",
                                 spec));
}

// A BPE is saved whole (each id's byte-level spelling and the merges, as in vocab.json and
// merges.txt), so that a checkpoint samples and evaluates without the files it was trained with.
nlohmann::json tokenizer_to_json(const data::Tokenizer& t) {
    nlohmann::json j = {{"kind", t.kind_name()}, {"vocab_size", t.vocab_size()}};
    if (t.kind() == data::Tokenizer::Kind::kChar) j["code_points"] = t.code_points();
    if (t.kind() == data::Tokenizer::Kind::kBpe) {
        j["tokens"] = t.bpe()->token_strings();
        std::vector<std::string> merges;
        for (const auto& [left, right] : t.bpe()->merge_strings()) merges.push_back(left + " " + right);
        j["merges"] = merges;
    }
    return j;
}

data::Tokenizer tokenizer_from_json(const nlohmann::json& j) {
    const std::string kind = j.at("kind").get<std::string>();
    if (kind == "byte") return data::Tokenizer::bytes();
    if (kind == "char") return data::Tokenizer::from_code_points(j.at("code_points").get<std::vector<uint32_t>>());
    if (kind != "bpe") throw ValueError(fmt::format("checkpoint: unknown tokenizer kind \"{}\"", kind));
    std::vector<std::pair<std::string, std::string>> merges;
    for (const std::string& m : j.at("merges").get<std::vector<std::string>>()) {
        const size_t space = m.find(' ');
        if (space == std::string::npos) throw ValueError(fmt::format("checkpoint: the tokenizer merge \"{}\" has no space", m));
        merges.emplace_back(m.substr(0, space), m.substr(space + 1));
    }
    return data::Tokenizer::from_bpe(std::make_shared<data::BpeTokenizer>(
        data::BpeTokenizer::from_tokens(j.at("tokens").get<std::vector<std::string>>(), merges, "checkpoint tokenizer")));
}

}  // namespace ampgrad::app
