// shard_data.cpp: the text task on token shards (app/shard_data.hpp).
#include "app/shard_data.hpp"

#include <atomic>
#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "app/corpus.hpp"
#include "core/error.hpp"

namespace ampgrad::app {

namespace fs = std::filesystem;

namespace {

// The folder a shard spec lives in (the folder itself, or the glob's or file's parent).
fs::path shard_folder(const std::string& spec) {
    if (fs::is_directory(spec)) return spec;
    return fs::path(spec).parent_path().empty() ? fs::path(".") : fs::path(spec).parent_path();
}

// meta.json of `ampgrad data prepare`, or null when the folder has none (llm.c's shards).
nlohmann::json read_shard_meta(const std::string& spec) {
    const fs::path path = shard_folder(spec) / "meta.json";
    if (!fs::exists(path)) return nullptr;
    std::ifstream in(path);
    try {
        return nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        throw FormatError(fmt::format("token shards: {} is not valid JSON: {}", path.string(), e.what()));
    }
}

int64_t total_tokens(const data::ShardLoader& l) { return l.num_tokens(); }

}  // namespace

bool uses_token_shards(const RunConfig& cfg) {
    if (!cfg.data_format.empty()) return cfg.data_format == "shards";   // as the run found it (a checkpoint)
    return cfg.task == "text" && !cfg.data_file.empty() && data::names_token_shards(cfg.data_file);
}

std::string validation_spec(const RunConfig& cfg) {
    if (!cfg.val_data.empty()) return cfg.val_data;
    const std::string& spec = cfg.data_file;
    const size_t at = spec.rfind("train");
    if (!fs::is_directory(spec) && at != std::string::npos) return spec.substr(0, at) + "val" + spec.substr(at + 5);
    return spec;   // list_shards(spec, "val") keeps the *_val_* names
}

data::Tokenizer shard_tokenizer(const RunConfig& cfg) {
    if (cfg.tokenizer != "auto") {
        if (cfg.tokenizer == "char")
            throw ValueError("--tokenizer char: a char tokenizer is made from a text's characters, and token shards carry "
                             "no text; use the tokenizer the shards were prepared with (their meta.json names it)");
        return make_tokenizer(cfg.tokenizer, "");
    }
    const nlohmann::json meta = read_shard_meta(cfg.data_file);
    if (!meta.is_null() && meta.contains("tokenizer")) {
        const nlohmann::json& t = meta.at("tokenizer");
        if (t.contains("code_points") || t.contains("merges")) return tokenizer_from_json(t);   // saved whole
        if (t.contains("spec")) {   // gpt2, byte, gpt2:DIR, tiktoken:FILE, or a bare tokenizer folder
            const std::string spec = t.at("spec").get<std::string>();
            return make_tokenizer(fs::is_directory(spec) ? "gpt2:" + spec : spec, "");
        }
    }
    return make_tokenizer("gpt2", "");   // llm.c's shards are GPT-2 tokens
}

namespace {

// check_shard on every path, a few shards at a time on threads (a 10B-token corpus is 20 GB to read);
// the error reported is that of the first bad shard in the list's order, whatever the timing.
void check_all(const std::vector<std::string>& paths, int64_t model_vocab) {
    std::vector<std::exception_ptr> errors(paths.size());
    std::atomic<size_t> next{0};
    auto work = [&] {
        for (size_t i = next++; i < paths.size(); i = next++) {
            try {
                data::check_shard(paths[i], model_vocab);
            } catch (...) {
                errors[i] = std::current_exception();
            }
        }
    };
    const size_t n_threads = std::min<size_t>(paths.size(), std::max(1u, std::min(4u, std::thread::hardware_concurrency())));
    std::vector<std::thread> threads;
    for (size_t t = 1; t < n_threads; ++t) threads.emplace_back(work);
    work();
    for (std::thread& t : threads) t.join();
    for (const std::exception_ptr& e : errors)
        if (e) std::rethrow_exception(e);
}

}  // namespace

ShardData open_shard_data(const RunConfig& cfg, int64_t T, int64_t model_vocab, bool check_train_tokens) {
    const auto start = std::chrono::steady_clock::now();
    const std::vector<std::string> train = data::list_shards(cfg.data_file, "train");
    std::vector<std::string> val;
    try {
        val = data::list_shards(validation_spec(cfg), "val");
    } catch (const IOError& e) {
        throw IOError(fmt::format("{} (the validation split: give --val-data DIR|GLOB)", e.what()));
    }
    if (check_train_tokens) check_all(train, model_vocab);   // else MappedShard checks each header
    check_all(val, model_vocab);
    ShardData d;
    d.check_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    d.train = std::make_unique<data::ShardLoader>(train, T, cfg.seed, /*shuffle=*/true);
    d.val = std::make_unique<data::ShardLoader>(val, T, cfg.seed, /*shuffle=*/false);
    d.source = fmt::format("{} ({} train shard(s), {:.1f}M tokens; {} val shard(s), {:.2f}M tokens; {} checked in "
                           "{:.1f} s)", cfg.data_file, train.size(), static_cast<double>(total_tokens(*d.train)) / 1e6,
                           val.size(), static_cast<double>(total_tokens(*d.val)) / 1e6,
                           check_train_tokens ? "every token" : "the validation tokens", d.check_seconds);
    return d;
}

}  // namespace ampgrad::app
