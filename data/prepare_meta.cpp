// prepare_meta.cpp: the tokenizer `ampgrad data prepare` encodes with, and what OUT/meta.json
// records (data/prepare.hpp): the settings a re-run must match, the shards done, and the decision
// to resume, to leave a complete folder alone, or to refuse.

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/error.hpp"
#include "data/prepare.hpp"
#include "data/sha256.hpp"
#include "data/text.hpp"

namespace ampgrad::data {

namespace fs = std::filesystem;

namespace {

PrepareTokenizer hf_dir_tokenizer(const std::string& spec, const std::string& dir) {
    const std::string vocab = (fs::path(dir) / "vocab.json").string(), merges = (fs::path(dir) / "merges.txt").string();
    auto bpe = std::make_shared<const BpeTokenizer>(BpeTokenizer::from_hf_files(vocab, merges));
    return {Tokenizer::from_bpe(std::move(bpe)), spec, {{vocab, sha256_file(vocab)}, {merges, sha256_file(merges)}}};
}

}  // namespace

std::vector<uint32_t> collect_code_points(const std::vector<InputFile>& files) {
    std::vector<bool> seen(0x110000, false);
    DocumentReader reader(files);
    for (TextPiece piece; reader.next(piece);) {
        if (const size_t bad = first_invalid_utf8(piece.text); bad != std::string::npos) {
            const std::string where = piece.line > 0 ? fmt::format("line {}, byte {} of its text", piece.line, piece.offset + bad)
                                                     : fmt::format("byte offset {}", piece.offset + bad);
            throw IOError(fmt::format("data prepare: {}: not UTF-8 text (or a NUL byte) at {}: the char tokenizer needs "
                                      "UTF-8; use --tokenizer byte or gpt2 for other bytes", piece.file->path, where));
        }
        for (uint32_t cp : utf8_code_points(piece.text)) seen[cp] = true;
    }
    std::vector<uint32_t> out;
    for (uint32_t cp = 0; cp < seen.size(); ++cp)
        if (seen[cp]) out.push_back(cp);
    if (out.empty()) throw ValueError("data prepare: --tokenizer char: the inputs hold no character (every document is empty)");
    return out;
}

PrepareTokenizer resolve_prepare_tokenizer(const std::string& spec, const std::vector<InputFile>& files) {
    if (spec == "gpt2") return {Tokenizer::gpt2(), spec, {{"gpt2.tiktoken (built in)", sha256_hex(gpt2_tiktoken_ranks())}}};
    if (spec == "byte") return {Tokenizer::bytes(), spec, {}};
    if (spec == "char") return {Tokenizer::from_code_points(collect_code_points(files)), spec, {}};
    if (spec.starts_with("gpt2:") && spec.size() > 5) return hf_dir_tokenizer(spec, spec.substr(5));
    if (spec.starts_with("tiktoken:") && spec.size() > 9) {
        const std::string path = spec.substr(9);
        auto bpe = std::make_shared<const BpeTokenizer>(BpeTokenizer::from_tiktoken(path));
        return {Tokenizer::from_bpe(std::move(bpe)), spec, {{path, sha256_file(path)}}};
    }
    if (fs::is_directory(spec)) return hf_dir_tokenizer(spec, spec);
    throw ValueError(fmt::format("data prepare: --tokenizer \"{}\": expected gpt2 (GPT-2's BPE, built in), byte, char, a "
                                 "folder with vocab.json and merges.txt (DIR or gpt2:DIR) or tiktoken:FILE{}", spec,
                                 spec.find_first_of("/:") != std::string::npos ? " (no such folder)" : ""));
}

nlohmann::json prepare_settings_json(const ShardPlan& plan, const std::vector<InputFile>& files,
                                     const PrepareTokenizer& tok) {
    nlohmann::json tokenizer = {{"spec", tok.spec}, {"kind", tok.tokenizer.kind_name()},
                                {"vocab_size", tok.tokenizer.vocab_size()}, {"files", nlohmann::json::array()}};
    tokenizer["eot_token"] = tok.eot_token() >= 0 ? nlohmann::json(tok.eot_token()) : nlohmann::json(nullptr);
    for (const auto& [file, sha] : tok.files) tokenizer["files"].push_back({{"path", file}, {"sha256", sha}});
    if (tok.tokenizer.kind() == Tokenizer::Kind::kChar) tokenizer["code_points"] = tok.tokenizer.code_points();
    nlohmann::json inputs = nlohmann::json::array();
    for (const InputFile& f : files)
        inputs.push_back({{"path", f.path}, {"bytes", f.bytes}, {"mtime_ns", f.mtime_ns}, {"jsonl", f.jsonl}});
    return {{"name", plan.name}, {"dtype", shard_dtype_name(plan.dtype)}, {"shard_tokens", plan.shard_tokens},
            {"val_tokens", plan.val_tokens}, {"tokenizer", tokenizer}, {"inputs", inputs}};
}

namespace {

// The names of the shard files of `name` in `dir` (NAME_val_NNNNNN.bin, NAME_train_NNNNNN.bin).
std::vector<std::string> existing_shards(const std::string& dir, const std::string& name) {
    const std::regex pattern(std::regex_replace(name, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") +
                             R"(_(val|train)_\d{6}\.bin)");
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file() && std::regex_match(e.path().filename().string(), pattern))
            out.push_back(e.path().filename().string());
    return out;
}

void remove_leftover_temporaries(const std::string& dir, const std::string& name) {
    for (const auto& e : fs::directory_iterator(dir)) {
        const std::string f = e.path().filename().string();
        if (f.find(".tmp-") != std::string::npos && (f.starts_with(name + "_") || f.starts_with("meta.json")))
            fs::remove(e.path());
    }
}

nlohmann::json read_meta(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    try {
        return nlohmann::json::parse(ss.str());
    } catch (const nlohmann::json::parse_error& e) {
        throw FormatError(fmt::format("data prepare: {} is not valid JSON ({}); pass --overwrite to start again", path, e.what()));
    }
}

bool same_settings(const nlohmann::json& meta, const nlohmann::json& settings) {
    if (!meta.is_object()) return false;
    for (const auto& [key, value] : settings.items())
        if (!meta.contains(key) || meta.at(key) != value) return false;
    return true;
}

// The first setting that differs, for the refusal's message.
std::string first_difference(const nlohmann::json& old_settings, const nlohmann::json& settings) {
    for (const auto& [key, value] : settings.items()) {
        const nlohmann::json old = old_settings.is_object() && old_settings.contains(key) ? old_settings.at(key) : nlohmann::json();
        if (old == value) continue;
        const std::string a = old.dump(), b = value.dump();
        if (a.size() + b.size() < 160) return fmt::format("{} was {}, now {}", key, a, b);
        return fmt::format("the {} changed (meta.json records the old)", key);
    }
    return "the settings changed";
}

}  // namespace

ResumePlan plan_resume(const ShardPlan& plan, const nlohmann::json& settings, bool overwrite) {
    remove_leftover_temporaries(plan.dir, plan.name);
    const std::string meta_path = (fs::path(plan.dir) / "meta.json").string();
    const std::vector<std::string> shards = existing_shards(plan.dir, plan.name);
    ResumePlan out;
    if (fs::exists(meta_path)) out.previous = read_meta(meta_path);
    const bool same = same_settings(out.previous, settings);
    if (!same && (!out.previous.is_null() || !shards.empty())) {
        if (!overwrite)
            throw ValueError(fmt::format(
                "data prepare: {} already holds {}; pass --overwrite to replace them, or choose another --output",
                plan.dir, out.previous.is_null()
                              ? fmt::format("{} shards named {}_* and no meta.json", shards.size(), plan.name)
                              : fmt::format("shards made from other inputs or settings ({})",
                                            first_difference(out.previous, settings))));
        for (const std::string& f : shards) fs::remove(fs::path(plan.dir) / f);
        fs::remove(meta_path);
        out.previous = nullptr;
        return out;
    }
    if (!same) return out;
    bool all_done = out.previous.value("status", "") == "complete";
    for (const nlohmann::json& s : out.previous.value("shards", nlohmann::json::array())) {
        ShardRecord r{s.at("index").get<int64_t>(), s.at("file").get<std::string>(), s.at("tokens").get<int64_t>(), true};
        bool ok = false;
        try {
            const ShardHeader h = read_shard_header((fs::path(plan.dir) / r.file).string());
            ok = s.value("done", false) && h.num_tokens == r.tokens && h.dtype == plan.dtype;
        } catch (const IOError&) {
        }
        all_done = all_done && ok;
        if (!ok) continue;
        out.keep.insert(r.index);
        out.kept.push_back(r);
    }
    out.complete = all_done;
    return out;
}

}  // namespace ampgrad::data
