// generation.cpp: the generation loop (models/generation.hpp). Per step: the last position's
// logits (from the cache: prefill once, then one token; or, without it, the whole context again),
// the logits processors (models/logits_process.hpp), a greedy or sampled token per row, and the
// end-token bookkeeping of transformers' GenerationMixin._sample (finished rows emit the pad token;
// the loop ends when every row has finished).
#include "models/generation.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "models/logits_process.hpp"

namespace ampgrad::models {

void GenerationConfig::validate(int64_t vocab_size) const {
    auto fail = [](const std::string& what) { throw ValueError("GenerationConfig: " + what); };
    if (max_new_tokens < 0) fail(fmt::format("max_new_tokens must be >= 0, but is {}", max_new_tokens));
    if (do_sample && !(temperature > 0.0 && std::isfinite(temperature)))
        fail(fmt::format("temperature must be a finite number > 0 when sampling, but is {}", temperature));
    if (top_k && *top_k < 1) fail(fmt::format("top_k must be >= 1, but is {}", *top_k));
    if (top_p && !(*top_p >= 0.0 && *top_p <= 1.0)) fail(fmt::format("top_p must be in [0, 1], but is {}", *top_p));
    if (!(repetition_penalty > 0.0 && std::isfinite(repetition_penalty)))
        fail(fmt::format("repetition_penalty must be a finite number > 0, but is {}", repetition_penalty));
    for (auto [name, id] : {std::pair{"eos_token_id", eos_token_id}, {"pad_token_id", pad_token_id}})
        if (id && (*id < 0 || *id >= vocab_size))
            fail(fmt::format("{} {} is not a token id of the vocabulary of {}", name, *id, vocab_size));
    for (int64_t id : suppress_tokens)
        if (id < 0 || id >= vocab_size)
            fail(fmt::format("suppress_tokens holds {}, not a token id of the vocabulary of {}", id, vocab_size));
    if (static_cast<int64_t>(std::set<int64_t>(suppress_tokens.begin(), suppress_tokens.end()).size()) >= vocab_size)
        fail(fmt::format("suppress_tokens removes every one of the {} token ids", vocab_size));
}

namespace {

// The token ids so far, one growing row per batch entry, with 1 at real tokens (0: left padding).
struct Sequences {
    std::vector<std::vector<int64_t>> ids;
    std::vector<std::vector<int32_t>> real;
    bool padded = false;
    Device device{kCPU};

    int64_t batch() const { return static_cast<int64_t>(ids.size()); }
    int64_t length() const { return static_cast<int64_t>(ids.front().size()); }

    template <typename T>
    Tensor columns(const std::vector<std::vector<T>>& rows, int64_t from, int64_t count, DType dtype) const {
        std::vector<T> flat;
        flat.reserve(static_cast<size_t>(batch() * count));
        for (const auto& row : rows) flat.insert(flat.end(), row.begin() + from, row.begin() + from + count);
        return tensor(flat, {batch(), count}, TensorOptions(dtype == kBool ? kInt32 : dtype)).to(dtype).to(device);
    }
    Tensor ids_at(int64_t from, int64_t count) const { return columns(ids, from, count, kInt64); }   // (B,count)
    Tensor valid_at(int64_t from, int64_t count) const {                                            // (B,count)
        return padded ? columns(real, from, count, kBool) : Tensor();
    }
};

Sequences read_prompt(const Tensor& input_ids, const Tensor& attention_mask) {
    if (input_ids.dim() != 2 || input_ids.size(1) == 0 || is_floating(input_ids.dtype()))
        throw ShapeError(fmt::format("generate: input_ids must be (B,T0) token ids with B, T0 >= 1, but are {}",
                                     input_ids.describe()));
    if (attention_mask.defined() && attention_mask.sizes() != input_ids.sizes())
        throw ShapeError(fmt::format("generate: attention_mask must have input_ids' shape {}, but is {}",
                                     input_ids.shape_str(), attention_mask.describe()));
    const int64_t B = input_ids.size(0), T = input_ids.size(1);
    std::vector<int64_t> ids = input_ids.to(kInt64).to_vector<int64_t>();
    std::vector<int32_t> real = attention_mask.defined() ? attention_mask.to(kInt32).to_vector<int32_t>()
                                                         : std::vector<int32_t>(ids.size(), 1);
    for (int32_t& r : real) r = r != 0;
    Sequences s;
    s.device = input_ids.device();
    for (int64_t b = 0; b < B; ++b) {
        auto row = real.begin() + b * T;
        if (std::is_sorted(row, row + T) == false || row[T - 1] == 0)   // 0...0 1...1: left padding
            throw ValueError(fmt::format("generate: row {} of attention_mask is not left padding (zeros, then at "
                                         "least one 1)", b));
        s.padded = s.padded || row[0] == 0;
        s.ids.emplace_back(ids.begin() + b * T, ids.begin() + (b + 1) * T);
        s.real.emplace_back(row, row + T);
    }
    return s;
}

Tensor last_position(const Tensor& logits) { return logits.select(1, logits.size(1) - 1); }   // (B,T,V) -> (B,V)

// The logits (B,V) of the next token. With a cache it holds every token but the newest (fed now);
// a fresh cache is filled with the prompt, and a full one is refilled with the latest max_length
// tokens, so that past the context every step sees the window nanoGPT's crop gives it.
Tensor next_logits(const CausalLM& model, KVCache* cache, const Sequences& seq) {
    const int64_t n = seq.length(), B = seq.batch();
    if (cache == nullptr) {                                   // no cache: the whole (cropped) context again
        const int64_t w = std::min(n, model.max_positions());
        KVCache fresh = model.make_cache(B, w);
        return last_position(model.forward_cached(seq.ids_at(n - w, w), fresh, seq.valid_at(n - w, w)));
    }
    if (cache->length() == 0 || cache->length() == cache->max_length()) {   // prefill
        const int64_t w = std::min(n, cache->max_length());
        cache->reset();
        return last_position(model.forward_cached(seq.ids_at(n - w, w), *cache, seq.valid_at(n - w, w)));
    }
    return last_position(model.forward_cached(seq.ids_at(n - 1, 1), *cache, seq.valid_at(n - 1, 1)));
}

}  // namespace

Tensor process_logits(const Tensor& logits, const Tensor& ids, const Tensor& valid, const GenerationConfig& config) {
    Tensor scores = logits.to(kFloat32);                                          // (B,V)
    if (config.repetition_penalty != 1.0)
        scores = apply_repetition_penalty(scores, ids, valid, config.repetition_penalty);
    if (!config.suppress_tokens.empty()) scores = apply_suppress_tokens(scores, config.suppress_tokens);
    if (!config.do_sample) return scores;
    if (config.temperature != 1.0) scores = apply_temperature(scores, config.temperature);
    if (config.top_k) scores = apply_top_k(scores, *config.top_k);
    if (config.top_p && *config.top_p < 1.0) scores = apply_top_p(scores, *config.top_p);
    return scores;
}

std::vector<int64_t> select_next_tokens(const Tensor& scores, const GenerationConfig& config) {
    Tensor next = config.do_sample ? multinomial(F::softmax(scores, -1), 1, true) : argmax(scores, -1, true);
    return next.to_vector<int64_t>();                                             // (B)
}

Tensor generate(const CausalLM& model, const Tensor& input_ids, const Tensor& attention_mask,
                const GenerationConfig& config, const StepCallback& on_step) {
    config.validate(model.vocab_size());
    Sequences seq = read_prompt(input_ids, attention_mask);
    const int64_t B = seq.batch(), T0 = seq.length();
    if (T0 > model.max_positions())
        throw ValueError(fmt::format("generate: a prompt of {} tokens is longer than the model's {} positions", T0,
                                     model.max_positions()));
    NoGradGuard no_grad;
    if (config.seed) manual_seed(*config.seed);
    std::optional<KVCache> cache;
    if (config.use_cache && config.max_new_tokens > 0)
        cache.emplace(model.make_cache(B, std::min(model.max_positions(), T0 + config.max_new_tokens)));
    const int64_t pad = config.pad_token_id.value_or(config.eos_token_id.value_or(0));
    std::vector<bool> finished(static_cast<size_t>(B), false);
    for (int64_t step = 0; step < config.max_new_tokens; ++step) {
        Tensor logits = next_logits(model, cache ? &*cache : nullptr, seq);        // (B,V)
        const bool penalise = config.repetition_penalty != 1.0;
        Tensor scores = process_logits(logits, penalise ? seq.ids_at(0, seq.length()) : Tensor(),
                                       penalise ? seq.valid_at(0, seq.length()) : Tensor(), config);
        std::vector<int64_t> next = select_next_tokens(scores, config);
        for (int64_t b = 0; b < B; ++b) {
            const size_t r = static_cast<size_t>(b);
            if (finished[r]) next[r] = pad;
            else if (config.eos_token_id && next[r] == *config.eos_token_id) finished[r] = true;
            seq.ids[r].push_back(next[r]);
            seq.real[r].push_back(1);                                             // as transformers extends the mask
        }
        if (on_step) on_step(next);
        if (std::all_of(finished.begin(), finished.end(), [](bool f) { return f; })) break;
    }
    return seq.ids_at(0, seq.length());                                           // (B,T0+n)
}

std::pair<Tensor, Tensor> left_pad(const std::vector<std::vector<int64_t>>& prompts, int64_t pad_token_id) {
    if (prompts.empty()) throw ValueError("left_pad: no prompts");
    size_t longest = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
        if (prompts[i].empty()) throw ValueError(fmt::format("left_pad: prompt {} is empty", i));
        longest = std::max(longest, prompts[i].size());
    }
    std::vector<int64_t> ids;
    std::vector<int32_t> mask;
    for (const auto& p : prompts) {
        ids.insert(ids.end(), longest - p.size(), pad_token_id);
        ids.insert(ids.end(), p.begin(), p.end());
        mask.insert(mask.end(), longest - p.size(), 0);
        mask.insert(mask.end(), p.size(), 1);
    }
    const int64_t B = static_cast<int64_t>(prompts.size()), T = static_cast<int64_t>(longest);
    return {tensor(ids, {B, T}), tensor(mask, {B, T}).to(kBool)};
}

Tensor sample(const CausalLM& model, const Tensor& idx, int64_t max_new_tokens, double temperature,
              std::optional<int64_t> top_k, const std::function<void(int64_t)>& on_token, const std::string& who) {
    if (idx.dim() != 2 || idx.size(1) == 0)
        throw ShapeError(fmt::format("{}: the prompt must be (B,T0) token ids with T0 >= 1, but is {}", who,
                                     idx.describe()));
    GenerationConfig g;
    g.max_new_tokens = max_new_tokens;
    g.do_sample = temperature > 0.0;
    if (g.do_sample) g.temperature = temperature;
    g.top_k = top_k;
    const int64_t T0 = idx.size(1), keep = std::min(T0, model.max_positions());
    const Tensor window = keep < T0 ? idx.narrow(1, T0 - keep, keep) : idx;     // (B,<=T)
    StepCallback on_step;
    if (on_token) on_step = [&on_token](const std::vector<int64_t>& tokens) { on_token(tokens[0]); };
    nn::Module& module = as_module(const_cast<CausalLM&>(model));
    const bool was_training = module.is_training();
    module.eval();
    Tensor out;
    try {
        out = generate(model, window, Tensor(), g, on_step);                       // (B,keep+n)
    } catch (...) {
        module.train(was_training);
        throw;
    }
    module.train(was_training);
    if (keep < T0) out = cat({idx.narrow(1, 0, T0 - keep).to(out.dtype()).to(out.device()), out}, 1);
    return out;                                                                    // (B,T0+n)
}

}  // namespace ampgrad::models
