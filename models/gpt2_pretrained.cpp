// gpt2_pretrained.cpp: GPT-2's Hugging Face layout (transformers' modeling_gpt2.py,
// configuration_gpt2.py) mapped onto models::GPT, both ways.
//
//   Hugging Face (GPT2LMHeadModel)          shape       models::GPT (nanoGPT names)        shape
//   transformer.wte.weight                  (V,C)       transformer.wte.weight             (Vp,C): rows >= V zero
//   transformer.wpe.weight                  (T,C)       transformer.wpe.weight             (T,C)
//   transformer.h.N.attn.c_attn.weight      (C,3C)      transformer.h.N.attn.c_attn.weight (3C,C): transposed
//   transformer.h.N.attn.c_proj.weight      (C,C)       ... attn.c_proj.weight             (C,C):  transposed
//   transformer.h.N.mlp.c_fc.weight         (C,4C)      ... mlp.c_fc.weight                (4C,C): transposed
//   transformer.h.N.mlp.c_proj.weight       (4C,C)      ... mlp.c_proj.weight              (C,4C): transposed
//   biases, ln_1, ln_2, ln_f                            the same names and shapes
//   lm_head.weight (usually absent)                     tied to wte (skipped: transformers re-ties it too)
//   h.N.attn.bias, h.N.attn.masked_bias                 causal-mask buffers of old versions: skipped
//
// The attention and MLP projections are transformers' Conv1D, which stores its weight (in, out)
// and computes x @ W + b; nn::Linear stores (out, in). GPT2Model's files name the same tensors
// without the "transformer." prefix; both spellings load into both architectures.
#include <functional>
#include <optional>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "models/pretrained_registry.hpp"
#include "nn/init.hpp"

namespace ampgrad::models {

namespace {

constexpr const char* kLMHead = "GPT2LMHeadModel";
constexpr const char* kBase = "GPT2Model";
constexpr const char* kPrefix = "transformer.";

[[noreturn]] void bad_config(const std::string& source, const std::string& fact) {
    throw ValueError(fmt::format("GPT-2 config {}: {}", source, fact));
}

std::optional<int64_t> integer_key(const nlohmann::json& c, const char* key, const std::string& source) {
    if (!c.contains(key) || c[key].is_null()) return std::nullopt;
    if (!c[key].is_number_integer()) bad_config(source, fmt::format("\"{}\" is {}, not an integer", key, c[key].dump()));
    return c[key].get<int64_t>();
}

int64_t required_integer(const nlohmann::json& c, const char* key, const std::string& source) {
    const std::optional<int64_t> v = integer_key(c, key, source);
    if (!v) bad_config(source, fmt::format("the key \"{}\" is missing", key));
    return *v;
}

// A boolean key that must have the value ampgrad's GPT-2 implements (its default when absent).
void expect_bool(const nlohmann::json& c, const char* key, bool expected, const std::string& source) {
    if (!c.contains(key) || c[key].is_null()) return;
    if (!c[key].is_boolean() || c[key].get<bool>() != expected)
        bad_config(source, fmt::format("\"{}\" is {}; ampgrad's GPT-2 implements only {}", key, c[key].dump(), expected));
}

// ---- loading ----

using CopyFn = std::function<void(const Tensor&)>;

CopyFn copy_into(Tensor dst) {
    return [dst](const Tensor& stored) mutable { copy_(dst, stored); };
}
CopyFn copy_transposed(Tensor dst) {   // Conv1D (in,out) -> Linear (out,in)
    return [dst](const Tensor& stored) mutable { copy_(dst, stored.t()); };
}
CopyFn copy_token_embedding(Tensor wte, int64_t V) {   // (V,C) into the first V of Vp rows; the rest zero
    return [wte, V](const Tensor& stored) mutable {
        Tensor rows = wte.narrow(0, 0, V);                                   // (V,C)
        copy_(rows, stored);
        if (wte.size(0) > V) {
            Tensor padding = wte.narrow(0, V, wte.size(0) - V);              // (Vp-V,C)
            zero_(padding);
        }
    };
}

detail::WeightPlan gpt2_plan(const GPT& model) {
    const GPTConfig& g = model.config();
    const int64_t V = g.vocab_size, C = g.n_embd;
    detail::WeightPlan plan;
    plan.config_facts = fmt::format("vocab_size {}, n_positions {}, n_embd {}, n_layer {}", V, g.block_size, C, g.n_layer);
    auto& t = plan.targets;
    auto layer_norm = [&](const std::string& name, const nn::LayerNorm& ln) {
        t[name + ".weight"] = {{C}, copy_into(ln.weight)};
        t[name + ".bias"] = {{C}, copy_into(ln.bias)};
    };
    auto conv1d = [&](const std::string& name, const nn::Linear& linear, int64_t in, int64_t out) {
        t[name + ".weight"] = {{in, out}, copy_transposed(linear.weight)};   // stored (in,out)
        t[name + ".bias"] = {{out}, copy_into(linear.bias)};
    };
    t["wte.weight"] = {{V, C}, copy_token_embedding(model.wte->weight, V)};
    t["wpe.weight"] = {{g.block_size, C}, copy_into(model.wpe->weight)};
    for (size_t i = 0; i < model.num_blocks(); ++i) {
        const Block& b = *model.block(i);
        const std::string h = fmt::format("h.{}.", i);
        layer_norm(h + "ln_1", *b.ln_1);
        layer_norm(h + "ln_2", *b.ln_2);
        conv1d(h + "attn.c_attn", *b.attn->c_attn, C, 3 * C);
        conv1d(h + "attn.c_proj", *b.attn->c_proj, C, C);
        conv1d(h + "mlp.c_fc", *b.mlp->c_fc, C, 4 * C);
        conv1d(h + "mlp.c_proj", *b.mlp->c_proj, 4 * C, C);
    }
    layer_norm("ln_f", *model.ln_f);
    plan.canonical = [](const std::string& stored) -> std::optional<std::string> {
        if (stored == "lm_head.weight") return std::nullopt;                 // tied to wte
        std::string name = stored.starts_with(kPrefix) ? stored.substr(std::string(kPrefix).size()) : stored;
        if (name.starts_with("h.") && (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias")))
            return std::nullopt;                                             // causal-mask buffers
        return name;
    };
    return plan;
}

detail::PlannedModel build_gpt2(const nlohmann::json& config, const std::string& config_path,
                                const std::string& architecture, const PretrainedOptions& options) {
    GPTConfig g = gpt2_config_from_json(config, config_path);
    g.dropout = options.dropout;
    std::shared_ptr<GPT> model;
    {
        nn::init::SkipInitGuard allocate_only;                               // every parameter is loaded
        model = std::make_shared<GPT>(g);
    }
    if (options.dtype != kFloat32) model->to(options.dtype);
    detail::WeightPlan plan = gpt2_plan(*model);
    return {PretrainedModel{architecture, "gpt2", model}, std::move(plan)};
}

// ---- saving ----

nlohmann::json gpt2_config_json(const GPTConfig& g, const std::string& architecture, DType dtype) {
    nlohmann::json c = {
        {"architectures", {architecture}}, {"model_type", "gpt2"}, {"vocab_size", g.vocab_size},
        {"n_positions", g.block_size}, {"n_embd", g.n_embd}, {"n_layer", g.n_layer}, {"n_head", g.n_head},
        {"n_inner", nullptr}, {"activation_function", "gelu_new"}, {"layer_norm_epsilon", g.layer_norm_epsilon},
        {"resid_pdrop", g.dropout}, {"embd_pdrop", g.dropout}, {"attn_pdrop", g.dropout},
        {"initializer_range", 0.02}, {"scale_attn_weights", true}, {"scale_attn_by_inverse_layer_idx", false},
        {"reorder_and_upcast_attn", false}, {"add_cross_attention", false}, {"tie_word_embeddings", true},
        {"use_cache", true}, {"dtype", detail::hf_dtype_name(dtype)}};
    // GPT-2's <|endoftext|> (50256) begins and ends texts; another vocabulary has no such token here.
    const nlohmann::json endoftext = g.vocab_size == 50257 ? nlohmann::json(50256) : nlohmann::json(nullptr);
    c["bos_token_id"] = c["eos_token_id"] = endoftext;
    return c;
}

std::pair<nlohmann::json, nn::NamedTensors> gpt2_to_hf(const PretrainedModel& m) {
    const std::shared_ptr<GPT> model = m.gpt();
    const GPTConfig& g = model->config();
    const std::string prefix = m.architecture == kBase ? "" : kPrefix;
    NoGradGuard no_grad;
    nn::NamedTensors out;
    // Views (the transposes, wte's first V rows): io::save_safetensors makes each contiguous in turn,
    // so saving holds one tensor's copy at a time, not a second model.
    auto put = [&](const std::string& name, const Tensor& x) { out.insert(prefix + name, x.detach()); };
    auto put_conv1d = [&](const std::string& name, const nn::Linear& linear) {
        put(name + ".weight", linear.weight.detach().t());                 // (out,in) -> (in,out)
        put(name + ".bias", linear.bias);
    };
    auto put_layer_norm = [&](const std::string& name, const nn::LayerNorm& ln) {
        put(name + ".weight", ln.weight);
        put(name + ".bias", ln.bias);
    };
    put("wte.weight", model->wte->weight.detach().narrow(0, 0, g.vocab_size));   // (V,C): unpadded
    put("wpe.weight", model->wpe->weight);
    for (size_t i = 0; i < model->num_blocks(); ++i) {
        const Block& b = *model->block(i);
        const std::string h = fmt::format("h.{}.", i);
        put_layer_norm(h + "ln_1", *b.ln_1);
        put_conv1d(h + "attn.c_attn", *b.attn->c_attn);
        put_conv1d(h + "attn.c_proj", *b.attn->c_proj);
        put_layer_norm(h + "ln_2", *b.ln_2);
        put_conv1d(h + "mlp.c_fc", *b.mlp->c_fc);
        put_conv1d(h + "mlp.c_proj", *b.mlp->c_proj);
    }
    put_layer_norm("ln_f", *model->ln_f);
    const std::string architecture = m.architecture == kBase ? kBase : kLMHead;
    return {gpt2_config_json(g, architecture, model->wte->weight.dtype()), std::move(out)};
}

}  // namespace

GPTConfig gpt2_config_from_json(const nlohmann::json& c, const std::string& source) {
    GPTConfig g;
    g.vocab_size = required_integer(c, "vocab_size", source);
    std::optional<int64_t> positions = integer_key(c, "n_positions", source);
    if (!positions) positions = integer_key(c, "n_ctx", source);            // the oldest configs
    if (!positions) bad_config(source, "the key \"n_positions\" is missing");
    g.block_size = *positions;
    g.n_embd = required_integer(c, "n_embd", source);
    g.n_layer = required_integer(c, "n_layer", source);
    g.n_head = required_integer(c, "n_head", source);
    if (const std::optional<int64_t> inner = integer_key(c, "n_inner", source); inner && *inner != 4 * g.n_embd)
        bad_config(source, fmt::format("\"n_inner\" is {}; ampgrad's GPT-2 MLP is 4 * n_embd = {} wide", *inner,
                                       4 * g.n_embd));
    if (c.contains("layer_norm_epsilon")) {
        if (!c["layer_norm_epsilon"].is_number())
            bad_config(source, fmt::format("\"layer_norm_epsilon\" is {}, not a number", c["layer_norm_epsilon"].dump()));
        g.layer_norm_epsilon = c["layer_norm_epsilon"].get<double>();
    }
    const std::string act = c.value("activation_function", std::string("gelu_new"));
    if (act != "gelu_new" && act != "gelu_pytorch_tanh")
        bad_config(source, fmt::format("\"activation_function\" is \"{}\"; ampgrad's GPT-2 uses GELU's tanh "
                                       "approximation (\"gelu_new\" or \"gelu_pytorch_tanh\")", act));
    expect_bool(c, "scale_attn_weights", true, source);
    expect_bool(c, "scale_attn_by_inverse_layer_idx", false, source);
    expect_bool(c, "add_cross_attention", false, source);
    expect_bool(c, "tie_word_embeddings", true, source);
    try {
        g.validate();
    } catch (const ValueError& e) {
        bad_config(source, e.what());
    }
    return g;
}

namespace detail {

Architecture gpt2_architecture() {
    Architecture a;
    a.model_type = "gpt2";
    a.family = "gpt";
    a.architectures = {kLMHead, kBase};
    a.build = build_gpt2;
    a.describe = [](const nlohmann::json& config, const std::string& config_path, const std::string& architecture) {
        return PretrainedConfig{architecture, "gpt2", gpt2_config_from_json(config, config_path), std::nullopt, "gpt",
                                config};
    };
    a.saves = [](const PretrainedModel& m) {
        return std::dynamic_pointer_cast<GPT>(m.module) != nullptr && (m.model_type.empty() || m.model_type == "gpt2");
    };
    a.plan = [](const PretrainedModel& m) { return gpt2_plan(*m.gpt()); };
    a.to_hf = gpt2_to_hf;
    return a;
}

}  // namespace detail

}  // namespace ampgrad::models
