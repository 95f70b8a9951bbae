// pretrained_errors_test.cpp: bad Hugging Face folders given to models::from_pretrained. Each case
// copies a tiny fixture folder (tests/fixtures/hf_gpt2/), breaks one thing, and checks the error's
// type and that its message names the file and the tensor (or key) at fault. Also: the spellings
// transformers accepts (no "transformer." prefix, the attn.bias buffers, a stored lm_head) load.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "ampgrad/ampgrad.h"
#include "support/corrupt_inputs.hpp"

using namespace ampgrad;
namespace fs = std::filesystem;

namespace {

// A scratch copy of the fixture folder `name`, removed at the end of the case.
struct FolderCopy {
    fs::path dir;
    explicit FolderCopy(const std::string& name, const std::string& family = "hf_gpt2") {
        static int n = 0;
        dir = fs::temp_directory_path() / fmt::format("ampgrad_hf_bad_{}_{}", ::getpid(), n++);
        fs::copy(fs::path(std::getenv("AMPGRAD_FIXTURES")) / family / name, dir, fs::copy_options::recursive);
    }
    ~FolderCopy() { fs::remove_all(dir); }
    std::string file(const std::string& f) const { return (dir / f).string(); }

    nlohmann::json config() const { return nlohmann::json::parse(std::ifstream(dir / "config.json")); }
    void set_config(const nlohmann::json& c) const { std::ofstream(dir / "config.json") << c.dump(2); }
    // Rewrites model.safetensors after `edit` changed its tensors.
    void edit_weights(const std::function<void(nn::NamedTensors&)>& edit) const {
        nn::NamedTensors t = io::load_safetensors(file("model.safetensors")).tensors;
        edit(t);
        io::save_safetensors(file("model.safetensors"), t, {{"format", "pt"}});
    }
};

// The NamedTensors without `skip`, and with `extra` added.
nn::NamedTensors without(const nn::NamedTensors& in, const std::string& skip) {
    nn::NamedTensors out;
    for (const auto& [name, t] : in)
        if (name != skip) out.insert(name, t);
    return out;
}

#define CHECK_LOAD_THROWS(dir, type, ...)                                                             \
    do {                                                                                              \
        for (const std::string& fact : std::vector<std::string>{__VA_ARGS__}) {                       \
            CAPTURE(fact);                                                                            \
            CHECK_THROWS_WITH_AS(models::from_pretrained(dir), doctest::Contains(fact.c_str()), type); \
        }                                                                                             \
    } while (0)

}  // namespace

TEST_CASE("from_pretrained: a missing tensor is a ValueError naming the file and the tensor") {
    FolderCopy f("lm");
    f.edit_weights([](nn::NamedTensors& t) { t = without(t, "transformer.h.1.mlp.c_fc.bias"); });
    CHECK_LOAD_THROWS(f.dir.string(), ValueError, f.file("model.safetensors"), "missing tensor \"h.1.mlp.c_fc.bias\"",
                      "config.json");
}

TEST_CASE("from_pretrained: a tensor of the wrong shape is a ShapeError naming the file, the tensor and both shapes") {
    FolderCopy f("lm");
    f.edit_weights([](nn::NamedTensors& t) {
        t = without(t, "transformer.h.0.attn.c_attn.weight");
        t.insert("transformer.h.0.attn.c_attn.weight", zeros({24, 8}));         // Linear's (out,in), not Conv1D's
    });
    CHECK_LOAD_THROWS(f.dir.string(), ShapeError, f.file("model.safetensors"), "\"transformer.h.0.attn.c_attn.weight\"",
                      "has shape (24,8)", "implies (8,24)");
}

TEST_CASE("from_pretrained: an unknown architecture or model_type is a ValueError naming it and the known ones") {
    FolderCopy f("lm");
    nlohmann::json c = f.config();
    c["architectures"] = {"BertForMaskedLM"};
    c["model_type"] = "bert";
    f.set_config(c);
    CHECK_LOAD_THROWS(f.dir.string(), ValueError, f.file("config.json"), "unknown architecture BertForMaskedLM",
                      "GPT2LMHeadModel, GPT2Model");
    c.erase("architectures");
    f.set_config(c);
    CHECK_LOAD_THROWS(f.dir.string(), ValueError, f.file("config.json"), "unknown model_type \"bert\"");
    c["architectures"] = {"GPT2LMHeadModel"};                                  // a GPT-2 name, another type
    f.set_config(c);
    CHECK_LOAD_THROWS(f.dir.string(), ValueError, "\"model_type\" is \"bert\"");
    c["model_type"] = "gpt2";
    c["activation_function"] = "relu";
    f.set_config(c);
    CHECK_LOAD_THROWS(f.dir.string(), ValueError, f.file("config.json"), "\"activation_function\" is \"relu\"");
}

TEST_CASE("from_pretrained: config.json contradicting the weights names config.json, the file and the tensor") {
    FolderCopy f("lm");
    const nlohmann::json good = f.config();
    nlohmann::json c = good;
    c["n_embd"] = 16;                                                          // the weights are 8 wide
    f.set_config(c);
    CHECK_LOAD_THROWS(f.dir.string(), ShapeError, f.file("model.safetensors"), f.file("config.json"), "n_embd 16",
                      "\"transformer.");
    c = good;
    c["vocab_size"] = 300;
    f.set_config(c);
    CHECK_LOAD_THROWS(f.dir.string(), ShapeError, "\"transformer.wte.weight\" has shape (260,8)", "vocab_size 300");
    c = good;
    c["n_layer"] = 1;                                                          // the file has two blocks
    f.set_config(c);
    CHECK_LOAD_THROWS(f.dir.string(), ValueError, f.file("model.safetensors"), "unexpected tensor \"transformer.h.1.",
                      "n_layer 1");
    c = good;
    c["n_layer"] = 3;
    f.set_config(c);
    CHECK_LOAD_THROWS(f.dir.string(), ValueError, "missing tensor \"h.2.", "n_layer 3");
}

TEST_CASE("from_pretrained: a truncated shard is a FormatError naming the shard") {
    FolderCopy f("sharded");
    const std::string shard = f.file("model-00002-of-00003.safetensors");
    fs::resize_file(shard, fs::file_size(shard) - 100);
    CHECK_LOAD_THROWS(f.dir.string(), FormatError, shard);
}

TEST_CASE("from_pretrained: an index naming a missing shard is an IOError naming the index, the shard and a tensor") {
    FolderCopy f("sharded");
    fs::remove(f.file("model-00003-of-00003.safetensors"));
    CHECK_LOAD_THROWS(f.dir.string(), IOError, f.file("model.safetensors.index.json"),
                      f.file("model-00003-of-00003.safetensors"), "maps tensor \"transformer.");
}

TEST_CASE("from_pretrained: an index disagreeing with its shards names the index, the shard and the tensor") {
    FolderCopy f("sharded");
    nlohmann::json index = nlohmann::json::parse(std::ifstream(f.dir / "model.safetensors.index.json"));
    index["weight_map"]["transformer.extra.weight"] = "model-00001-of-00003.safetensors";
    std::ofstream(f.dir / "model.safetensors.index.json") << index.dump();
    CHECK_LOAD_THROWS(f.dir.string(), ValueError, f.file("model.safetensors.index.json"), "\"transformer.extra.weight\"",
                      f.file("model-00001-of-00003.safetensors"));
}

TEST_CASE("from_pretrained: corrupt JSON (config.json, the index) is a FormatError naming the file") {
    FolderCopy f("sharded");
    const std::string index = f.file("model.safetensors.index.json");
    fs::resize_file(index, fs::file_size(index) / 2);
    CHECK_LOAD_THROWS(f.dir.string(), FormatError, index, "not valid JSON");
    std::ofstream(f.dir / "config.json") << "{\"model_type\": \"gpt2\", ";
    CHECK_LOAD_THROWS(f.dir.string(), FormatError, f.file("config.json"), "not valid JSON");
    fs::remove(f.dir / "config.json");
    CHECK_LOAD_THROWS(f.dir.string(), IOError, f.file("config.json"), "cannot open");
    FolderCopy g("lm");
    fs::remove(g.dir / "model.safetensors");
    CHECK_LOAD_THROWS(g.dir.string(), IOError, "no model.safetensors and no model.safetensors.index.json");
}

TEST_CASE("from_pretrained: every corruption of config.json or of the weights is an ampgrad::Error naming the file") {
    // Each value of config.json retyped or dropped, and the weights truncated, overwritten and padded:
    // GPT-2, Llama and Qwen2 folders. A config with absurd sizes is refused before the model is built.
    for (const auto& [family, name] : std::vector<std::pair<std::string, std::string>>{
             {"hf_gpt2", "lm"}, {"hf_llama", "llama"}, {"hf_qwen2", "qwen2"}}) {
        CAPTURE(family);
        FolderCopy f(name, family);
        auto load = [&] { models::from_pretrained(f.dir.string()); };
        const std::string config = f.file("config.json"), weights = f.file("model.safetensors");
        CHECK(testing::check_file_corruptions(config, testing::json_corruptions(testing::read_whole_file(config)), load,
                                              "config.json") > 20);
        CHECK(testing::check_file_corruptions(weights, testing::byte_corruptions(testing::read_whole_file(weights)), load,
                                              "model.safetensors") > 20);
    }
}

TEST_CASE("from_pretrained: a config.json far larger than its weights is refused before the model is built") {
    FolderCopy f("lm");
    nlohmann::json c = f.config();
    c["n_layer"] = int64_t{1} << 36;   // 2^36 blocks of 8 channels: within the size limit, not in an 18 KB file
    f.set_config(c);
    CHECK_LOAD_THROWS(f.dir.string(), ValueError, f.file("config.json"), "the config does not belong to these weights");
    // The same for a caller that reads the config and builds the model itself (ampgrad's --init-from and --hf).
    CHECK_THROWS_WITH_AS(models::read_pretrained_config(f.dir.string()),
                         doctest::Contains("the config does not belong to these weights"), ValueError);
    c["n_layer"] = int64_t{1} << 62;   // past any model: refused by GPTConfig::validate
    f.set_config(c);
    CHECK_LOAD_THROWS(f.dir.string(), ValueError, "a corrupt or mistyped size");
}

TEST_CASE("from_pretrained: the Hub's spellings load: no prefix, attn.bias buffers, a stored lm_head") {
    FolderCopy f("lm");
    f.edit_weights([](nn::NamedTensors& t) {
        nn::NamedTensors out;
        for (const auto& [name, x] : t) out.insert(name.substr(std::string("transformer.").size()), x);   // "h.0..."
        for (int i = 0; i < 2; ++i) {
            out.insert(fmt::format("h.{}.attn.bias", i), ones({1, 1, 32, 32}));
            out.insert(fmt::format("h.{}.attn.masked_bias", i), full({}, -1e4));
        }
        out.insert("lm_head.weight", t["transformer.wte.weight"].clone());
        t = out;
    });
    models::PretrainedModel hub = models::from_pretrained(f.dir.string());
    models::PretrainedModel saved = models::from_pretrained(
        (fs::path(std::getenv("AMPGRAD_FIXTURES")) / "hf_gpt2" / "lm").string());
    nn::NamedTensors a = hub.gpt()->state_dict(), b = saved.gpt()->state_dict();
    for (const auto& [name, t] : a) {
        CAPTURE(name);
        CHECK(equal(t, b[name]));
    }
    // Both spellings of one tensor: stored twice.
    f.edit_weights([](nn::NamedTensors& t) { t.insert("transformer.ln_f.bias", t["ln_f.bias"].clone()); });
    CHECK_LOAD_THROWS(f.dir.string(), ValueError, "\"transformer.ln_f.bias\"", "stored twice");
}

TEST_CASE("save_pretrained: a module with no Hugging Face layout is a ValueError") {
    models::PretrainedModel m{"BertModel", "bert", std::make_shared<nn::Linear>(2, 3)};
    CHECK_THROWS_WITH_AS(models::save_pretrained(m, (fs::temp_directory_path() / "never").string()),
                         doctest::Contains("no Hugging Face layout for a BertModel"), ValueError);
    CHECK_THROWS_WITH_AS(m.gpt(), doctest::Contains("not a GPT-2"), ValueError);
}
