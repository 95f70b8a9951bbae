// export_hf.cpp: `ampgrad export --hf` (app/export_hf.hpp).
#include "app/export_hf.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "app/checkpoint.hpp"
#include "app/lora_run.hpp"
#include "app/trainer.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "models/pretrained.hpp"
#include "models/quantize_nf4.hpp"

namespace ampgrad::app {

namespace fs = std::filesystem;

namespace {

nlohmann::json read_json_or_null(const fs::path& path) {
    if (!fs::exists(path)) return nullptr;
    std::ifstream in(path);
    try {
        return nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        throw FormatError(fmt::format("{}: not valid JSON: {}", path.string(), e.what()));
    }
}

// The files a Hugging Face model folder holds (what an earlier export may have left).
bool model_folder_file(const std::string& name) {
    for (const char* known : {"config.json", "generation_config.json", "model.safetensors", "model.safetensors.index.json",
                              "vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json",
                              "special_tokens_map.json", "adapter_config.json", "adapter_model.safetensors"})
        if (name == known) return true;
    return name.starts_with("model-") && name.ends_with(".safetensors");   // a sharded save's pieces
}

// OUT must be new, empty, or a model folder (replaced whole); anything else there is refused.
void check_export_target(const fs::path& out) {
    if (!fs::exists(out)) return;
    if (!fs::is_directory(out)) throw ValueError(fmt::format("export --hf {}: it is a file, not a folder", out.string()));
    for (const auto& entry : fs::directory_iterator(out))
        if (!entry.is_regular_file() || !model_folder_file(entry.path().filename().string()))
            throw ValueError(fmt::format("export --hf {}: the folder holds {}, which is not a Hugging Face model's file; "
                                         "the export replaces the folder whole, so give a new or empty folder",
                                         out.string(), entry.path().filename().string()));
}

// tmp takes OUT's place (OUT, if any, is removed after the swap).
void replace_folder(const fs::path& tmp, const fs::path& out) {
    const fs::path old = out.parent_path() / fmt::format(".{}.old-{}", out.filename().string(), ::getpid());
    const bool had = fs::exists(out);
    if (had) fs::rename(out, old);
    fs::rename(tmp, out);
    if (had) fs::remove_all(old);
}

// "exported DIR (step N) to OUT: GPT2LMHeadModel, V=.., T=.., ..., float32 (byte tokenizer: ...)".
void print_export_summary(const ExportOptions& o, const Trainer& t, const models::PretrainedModel& model) {
    const LanguageModel& lm = t.model();
    const data::Tokenizer& tokenizer = t.corpus().tokenizer;
    const std::string shape = lm.causal_lm().saved_shape_text();   // the sizes as exported, not the run's T
    std::printf("exported %s (step %lld) to %s: %s, %s, %s (%s tokenizer: token ids are its ids%s)\n",
                resolve_checkpoint(o.checkpoint).c_str(), static_cast<long long>(t.step()), o.hf_out.c_str(),
                model.architecture.c_str(), shape.c_str(), std::string(dtype_name(lm.causal_lm().dtype())).c_str(),
                tokenizer.kind_name(), tokenizer.bpe() ? "; written as vocab.json, merges.txt, tokenizer.json" : "");
}

}  // namespace

void write_tokenizer_files(const data::BpeTokenizer& tok, const std::string& dir) {
    write_file_atomic((fs::path(dir) / "vocab.json").string(), tok.vocab_json());
    write_file_atomic((fs::path(dir) / "merges.txt").string(), tok.merges_txt());
    write_file_atomic((fs::path(dir) / "tokenizer.json").string(), tok.tokenizer_json());
}

nlohmann::json read_pretrained_files(const std::string& dir) {
    return {{"config.json", read_json_or_null(fs::path(dir) / "config.json")},
            {"generation_config.json", read_json_or_null(fs::path(dir) / "generation_config.json")}};
}

nlohmann::json merge_pretrained_config(nlohmann::json written, const nlohmann::json& original) {
    if (!original.is_object()) return written;
    if (original.contains("rope_parameters") && !original.contains("rope_theta") && written.contains("rope_theta")) {
        nlohmann::json rope = written.value("rope_scaling", nlohmann::json(nullptr));
        if (rope.is_null()) rope = {{"rope_type", "default"}};
        rope["rope_theta"] = written.at("rope_theta");
        written["rope_parameters"] = rope;
        written.erase("rope_theta");
        written.erase("rope_scaling");
    }
    for (const auto& [key, value] : original.items())
        if (!written.contains(key) && key != "dtype" && key != "torch_dtype") written[key] = value;
    return written;
}

int run_export(const ExportOptions& o) {
    std::unique_ptr<Trainer> t = Trainer::resume(resolve_checkpoint(o.checkpoint), std::nullopt, /*for_inference=*/true);
    const LanguageModel& lm = t->model();
    const fs::path out = fs::absolute(o.hf_out).lexically_normal();
    check_export_target(out);
    ampgrad::create_directories(out.parent_path().string(), "export");
    const fs::path tmp = out.parent_path() / fmt::format(".{}.export-{}", out.filename().string(), ::getpid());
    fs::remove_all(tmp);
    const models::PretrainedModel model = lm.pretrained_model();
    const bool lora_run = !t->config().lora.empty();
    try {
        if (lora_run && !o.merge_lora) {   // the adapter folder PEFT reads (docs/lora.md)
            export_lora_adapter(t->config(), *lm.causal_lm_ptr(), tmp.string());
            replace_folder(tmp, out);
            std::printf("exported %s (step %lld) to %s: the LoRA adapter (adapter_config.json, adapter_model.safetensors) "
                        "for the base %s\n", resolve_checkpoint(o.checkpoint).c_str(), static_cast<long long>(t->step()),
                        o.hf_out.c_str(), t->config().init_from.c_str());
            return 0;
        }
        if (lora_run && t->config().qlora) models::dequantize_base_nf4(*lm.module());   // merging needs dense weights
        if (lora_run) models::merge_lora(*lm.module());   // W += scale B A; save_pretrained leaves lora_A/B out
        models::save_pretrained(model, tmp.string());
        const nlohmann::json& original = t->config().pretrained_files;
        if (original.is_object()) {
            const nlohmann::json written = nlohmann::json::parse(std::ifstream(tmp / "config.json"));
            const nlohmann::json merged = merge_pretrained_config(written, original.value("config.json", nlohmann::json()));
            write_file_atomic((tmp / "config.json").string(), merged.dump(2) + "\n");
            const nlohmann::json generation = original.value("generation_config.json", nlohmann::json());
            if (!generation.is_null())
                write_file_atomic((tmp / "generation_config.json").string(), generation.dump(2) + "\n");
        }
        const data::Tokenizer& tokenizer = t->corpus().tokenizer;
        if (tokenizer.bpe() != nullptr) write_tokenizer_files(*tokenizer.bpe(), tmp.string());   // the folder is complete
        replace_folder(tmp, out);
    } catch (...) {
        std::error_code ignored;
        fs::remove_all(tmp, ignored);
        throw;
    }
    print_export_summary(o, *t, model);
    return 0;
}

}  // namespace ampgrad::app
