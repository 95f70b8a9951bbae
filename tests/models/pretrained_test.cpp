// pretrained_test.cpp: Hugging Face GPT-2 folders (models/pretrained.hpp) against transformers:
// the tiny folders and reference values tools/fixtures/hf_gpt2.py wrote with transformers 5.x
// (tests/fixtures/hf_gpt2/, hf_gpt2_reference.json). Logits, loss and every gradient of
// GPT2LMHeadModel, GPT2Model's hidden states, the sharded and f16 saves, dtype casts, and the
// round trip save_pretrained(from_pretrained(x)) == x tensor by tensor, byte for byte.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "ampgrad/ampgrad.h"
#include "support/check_close.hpp"
#include "support/fixtures.hpp"

using namespace ampgrad;
using ampgrad::testing::Tolerance;
namespace fs = std::filesystem;

namespace {

std::string hf_fixture(const std::string& name) {
    return (fs::path(std::getenv("AMPGRAD_FIXTURES")) / "hf_gpt2" / name).string();
}

fs::path scratch_dir() { return testing::scratch_dir("ampgrad_hf"); }

using testing::same_bytes;

// Every tensor of `expected` is in `actual` with the same dtype, shape and bytes, and nothing more.
void check_same_tensors(const std::string& actual_file, const std::string& expected_file) {
    io::SafetensorsFile actual = io::load_safetensors(actual_file), expected = io::load_safetensors(expected_file);
    CHECK(actual.tensors.size() == expected.tensors.size());
    for (const auto& [name, t] : expected.tensors) {
        CAPTURE(name);
        REQUIRE(actual.tensors.contains(name));
        CHECK(same_bytes(actual.tensors[name], t));
    }
}

// The parameters of two GPTs, name by name.
void check_same_parameters(const models::GPT& a, const models::GPT& b) {
    nn::NamedTensors pb = b.state_dict();
    for (const auto& [name, t] : a.state_dict()) {
        CAPTURE(name);
        CHECK(same_bytes(t, pb[name]));
    }
}

}  // namespace

TEST_CASE("from_pretrained: GPT2LMHeadModel's logits, loss and gradients match transformers in f32") {
    const testing::Fixture ref = testing::load_fixture("hf_gpt2_reference");
    models::PretrainedModel m = models::from_pretrained(hf_fixture("lm"));
    CHECK(m.architecture == "GPT2LMHeadModel");
    CHECK(m.model_type == "gpt2");
    std::shared_ptr<models::GPT> gpt = m.gpt();
    const models::GPTConfig& g = gpt->config();
    CHECK(g.vocab_size == 260);
    CHECK(g.padded_vocab_size() == 320);
    CHECK(g.block_size == 32);
    CHECK(g.layer_norm_epsilon == doctest::Approx(1e-5));
    gpt->eval();
    const Tensor idx = ref.at("idx"), targets = ref.at("targets");
    const Tolerance f32{1e-5, 1e-5};
    CHECK_CLOSE(gpt->forward(idx), ref.at("logits"), f32);                      // (B,T,V): the real vocabulary only
    Tensor loss = gpt->forward(idx, targets);
    CHECK_CLOSE(loss, ref.at("loss"), f32);
    loss.backward();
    // The padded rows hold zeros and, cut off before the softmax, get no gradient.
    const int64_t V = g.vocab_size, Vp = g.padded_vocab_size();
    CHECK(gpt->wte->weight.narrow(0, V, Vp - V).abs().max().item<double>() == 0.0);
    CHECK(gpt->wte->weight.grad().narrow(0, V, Vp - V).abs().max().item<double>() == 0.0);
    const Tolerance grad{1e-5, 1e-4};
    for (const auto& [name, p] : gpt->named_parameters()) {
        if (name == "lm_head.weight") continue;                                   // the same tensor as wte
        CAPTURE(name);
        Tensor dp = p.grad();
        if (name.ends_with("wte.weight")) dp = dp.narrow(0, 0, V);                // (V,C)
        const bool conv1d = name.ends_with(".weight") && (name.find(".c_") != std::string::npos);
        if (conv1d) dp = dp.t();                                                  // HF's (in,out)
        CHECK_CLOSE(dp, ref.at("grad." + name), grad);
    }
}

TEST_CASE("from_pretrained: GPT2Model (no prefix, no head) gives transformers' last_hidden_state") {
    const testing::Fixture ref = testing::load_fixture("hf_gpt2_reference");
    models::PretrainedModel m = models::from_pretrained(hf_fixture("base"));
    CHECK(m.architecture == "GPT2Model");
    NoGradGuard no_grad;
    m.gpt()->eval();
    CHECK_CLOSE(m.gpt()->hidden_states(ref.at("idx")), ref.at("hidden"), (Tolerance{1e-5, 1e-5}));
    // The same weights as GPT2LMHeadModel's file, under other names.
    check_same_parameters(*m.gpt(), *models::from_pretrained(hf_fixture("lm")).gpt());
}

TEST_CASE("from_pretrained: a sharded folder (model.safetensors.index.json) loads the same weights") {
    models::PretrainedModel sharded = models::from_pretrained(hf_fixture("sharded"));
    REQUIRE(fs::exists(hf_fixture("sharded") + "/model-00003-of-00003.safetensors"));
    check_same_parameters(*sharded.gpt(), *models::from_pretrained(hf_fixture("lm")).gpt());
}

TEST_CASE("from_pretrained: f16 and bf16: the file's dtype is cast to the one asked for") {
    std::shared_ptr<models::GPT> f32 = models::from_pretrained(hf_fixture("lm")).gpt();
    models::PretrainedOptions half;
    half.dtype = kFloat16;
    std::shared_ptr<models::GPT> f16 = models::from_pretrained(hf_fixture("f16"), half).gpt();
    std::shared_ptr<models::GPT> f16_from_f32 = models::from_pretrained(hf_fixture("lm"), half).gpt();
    std::shared_ptr<models::GPT> f32_from_f16 = models::from_pretrained(hf_fixture("f16")).gpt();
    models::PretrainedOptions brain;
    brain.dtype = kBFloat16;
    std::shared_ptr<models::GPT> bf16 = models::from_pretrained(hf_fixture("lm"), brain).gpt();
    nn::NamedTensors p16 = f16->state_dict(), p16b = f16_from_f32->state_dict(), p32b = f32_from_f16->state_dict(),
                     pbf = bf16->state_dict();
    for (const auto& [name, t] : f32->state_dict()) {
        CAPTURE(name);
        CHECK(p16[name].dtype() == kFloat16);
        CHECK(pbf[name].dtype() == kBFloat16);
        CHECK(same_bytes(p16[name], t.to(kFloat16)));        // transformers' .half() rounds as ampgrad does
        CHECK(same_bytes(p16b[name], t.to(kFloat16)));
        CHECK(same_bytes(p32b[name], t.to(kFloat16).to(kFloat32)));
        CHECK(same_bytes(pbf[name], t.to(kBFloat16)));
    }
    models::PretrainedOptions ints;
    ints.dtype = kInt64;
    CHECK_THROWS_WITH_AS(models::from_pretrained(hf_fixture("lm"), ints), doctest::Contains("not a floating dtype"),
                         ValueError);
}

TEST_CASE("save_pretrained: save(load(x)) holds x's tensors byte for byte, in Hugging Face's layout") {
    for (const char* name : {"lm", "base", "sharded"}) {
        CAPTURE(name);
        const fs::path out = scratch_dir();
        models::PretrainedModel m = models::from_pretrained(hf_fixture(name));
        models::save_pretrained(m, out.string());
        const std::string original = std::string(name) == "sharded" ? hf_fixture("lm") : hf_fixture(name);
        check_same_tensors((out / "model.safetensors").string(), original + "/model.safetensors");
        // config.json: the architecture and sizes it was loaded with; loading it again gives the same model.
        models::PretrainedModel again = models::from_pretrained(out.string());
        CHECK(again.architecture == m.architecture);
        CHECK(again.gpt()->config() == m.gpt()->config());
        CHECK_FALSE(fs::exists(out / "model.safetensors.index.json"));
        fs::remove_all(out);
    }
    // In f16, from the f16 folder.
    const fs::path out = scratch_dir();
    models::PretrainedOptions half;
    half.dtype = kFloat16;
    models::save_pretrained(models::from_pretrained(hf_fixture("f16"), half), out.string());
    check_same_tensors((out / "model.safetensors").string(), hf_fixture("f16") + "/model.safetensors");
    CHECK(nlohmann::json::parse(std::ifstream(out / "config.json")).at("dtype") == "float16");
    fs::remove_all(out);
}

TEST_CASE("save_pretrained: what ampgrad writes is still the folder transformers was checked to load") {
    // tests/fixtures/hf_gpt2/ampgrad_saved/ was written by tools/hf_resave and loaded by transformers'
    // GPT2LMHeadModel.from_pretrained in tools/fixtures/hf_gpt2.py, with the same logits.
    const fs::path out = scratch_dir();
    models::save_pretrained(models::from_pretrained(hf_fixture("lm")).gpt(), out.string());
    check_same_tensors((out / "model.safetensors").string(), hf_fixture("ampgrad_saved") + "/model.safetensors");
    nlohmann::json written = nlohmann::json::parse(std::ifstream(out / "config.json"));
    nlohmann::json checked = nlohmann::json::parse(std::ifstream(hf_fixture("ampgrad_saved") + "/config.json"));
    CHECK(written == checked);
    CHECK(written.at("architectures") == nlohmann::json::array({"GPT2LMHeadModel"}));
    CHECK(written.at("vocab_size") == 260);                                   // unpadded
    fs::remove_all(out);
}

TEST_CASE("save_pretrained: a model trained from ampgrad's own initialisation exports and reloads") {
    models::GPTConfig cfg = models::GPTConfig::preset("nano");
    cfg.vocab_size = 65;                                                      // padded to 128 inside
    manual_seed(3);
    auto gpt = std::make_shared<models::GPT>(cfg);
    const fs::path out = scratch_dir();
    models::save_pretrained(gpt, out.string());
    CHECK(io::read_safetensors_header((out / "model.safetensors").string()).tensors.size() == 4 + 12 * 3);
    std::shared_ptr<models::GPT> back = models::from_pretrained(out.string()).gpt();
    CHECK(back->config() == cfg);
    NoGradGuard no_grad;
    Tensor idx = randint(0, 65, {2, 7}, TensorOptions(kInt64));
    CHECK(same_bytes(back->forward(idx), gpt->forward(idx)));
    fs::remove_all(out);
}

TEST_CASE("load_pretrained_weights: into a GPT built with other training options; shapes must match") {
    models::GPTConfig cfg = models::read_gpt2_config(hf_fixture("lm"));
    CHECK(cfg.n_embd == 8);
    CHECK(cfg.n_layer == 2);
    cfg.dropout = 0.1;
    cfg.checkpoint_blocks = true;
    auto gpt = std::make_shared<models::GPT>(cfg);
    models::load_pretrained_weights(models::PretrainedModel{"GPT2LMHeadModel", "gpt2", gpt}, hf_fixture("sharded"));
    check_same_parameters(*gpt, *models::from_pretrained(hf_fixture("lm")).gpt());
    cfg.block_size = 16;                                                       // wpe is (32,8) in the file
    auto shorter = std::make_shared<models::GPT>(cfg);
    CHECK_THROWS_WITH_AS(models::load_pretrained_weights(models::PretrainedModel{"GPT2LMHeadModel", "gpt2", shorter},
                                                         hf_fixture("lm")),
                         doctest::Contains("\"transformer.wpe.weight\" has shape (32,8)"), ShapeError);
}

// One handle for any family (transformers' AutoModelForCausalLM): causal_lm() is the GPT-2 or the
// Llama as models::generate drives it, with no choice of accessor.
TEST_CASE("from_pretrained(...).causal_lm(): GPT-2 and Llama folders behind one interface") {
    const std::string root = std::getenv("AMPGRAD_FIXTURES");
    for (const std::string dir : {root + "/hf_gpt2/lm", root + "/hf_llama/llama"}) {
        CAPTURE(dir);
        const models::PretrainedModel m = models::from_pretrained(dir);
        std::shared_ptr<models::CausalLM> lm = m.causal_lm();
        REQUIRE(lm != nullptr);
        models::GenerationConfig g;
        g.max_new_tokens = 3;
        g.do_sample = false;
        const Tensor out = models::generate(*lm, tensor(std::vector<int64_t>{1, 2, 3}, {1, 3}), Tensor(), g);
        CHECK(out.sizes() == Shape{1, 6});
        CHECK(lm->vocab_size() == (m.model_type == "gpt2" ? m.gpt()->config().vocab_size : m.llama()->config().vocab_size));
    }
    CHECK_THROWS_WITH_AS(models::from_pretrained(root + "/hf_gpt2/base").causal_lm(), doctest::Contains("GPT2Model"),
                         ValueError);
}
