// generation.hpp: autoregressive text generation for any models::CausalLM (the GPT today), with
// a key/value cache (models/kv_cache.hpp) and Hugging Face-style sampling options. The prompt is
// run once (prefill); each later step feeds only the newest token, whose keys and values join the
// cache. Batched prompts of different lengths are left-padded (left_pad) with an attention mask;
// rows stop at the end token. docs/generation.md explains the loop; transformers'
// GenerationMixin (src/transformers/generation/utils.py) is the model for names and rules.
//
//   GenerationConfig g;  g.max_new_tokens = 100;  g.do_sample = true;  g.top_p = 0.9;  g.seed = 1;
//   Tensor out = models::generate(model, prompt, /*attention_mask=*/{}, g);   // (B,T0) -> (B,T0+n)
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models/causal_lm.hpp"
#include "nn/module.hpp"

namespace ampgrad::models {

struct GenerationConfig {
    int64_t max_new_tokens = 20;
    bool do_sample = false;                    // false: greedy (argmax); true: draw from the filtered softmax
    double temperature = 1.0;                  // > 0; sampling only
    std::optional<int64_t> top_k;              // keep the k most likely (sampling only)
    std::optional<double> top_p;               // nucleus: the most likely tokens of mass top_p (sampling only)
    double repetition_penalty = 1.0;           // > 0; 1 is off (applies to greedy too, as in transformers)
    std::vector<int64_t> suppress_tokens;      // never generated (greedy too), e.g. ids the tokenizer lacks
    std::optional<uint64_t> seed;              // manual_seed(seed) first: the same seed, the same tokens
    std::optional<int64_t> eos_token_id;       // a row that emits it is finished
    std::optional<int64_t> pad_token_id;       // what finished rows emit (default: eos_token_id)
    bool use_cache = true;                     // false: rerun the whole context for every token

    // ValueError naming the field for a value out of range (vocab_size bounds the token ids).
    void validate(int64_t vocab_size) const;
};

// Called after each step with the new tokens (B) (finished rows: the pad token).
using StepCallback = std::function<void(const std::vector<int64_t>& tokens)>;

// input_ids (B,T0) int64; attention_mask (B,T0) bool or integer, 1 at real tokens (undefined: all
// real). Padding must be on the left. Returns (B,T0+n) int64, n <= max_new_tokens (fewer when every
// row finished). No gradient is recorded. Beyond model.max_positions() tokens the context slides, as
// nanoGPT crops it: every step sees the latest max_positions tokens (with the cache, each such step
// refills it), so the cache and no-cache paths give the same tokens.
// ValueError for a prompt longer than max_positions() or a bad option.
Tensor generate(const CausalLM& model, const Tensor& input_ids, const Tensor& attention_mask,
                const GenerationConfig& config, const StepCallback& on_step = {});

// Prompts of different lengths as one left-padded batch: (input_ids (B,Tmax) int64, attention_mask
// (B,Tmax) bool). ValueError for no prompts or an empty one.
std::pair<Tensor, Tensor> left_pad(const std::vector<std::vector<int64_t>>& prompts, int64_t pad_token_id);

// The step's scores: logits (B,V) after the repetition penalty (over ids (B,L) where valid) and
// suppress_tokens, then, when sampling, temperature, top-k and top-p (transformers' order). (B,V) f32.
Tensor process_logits(const Tensor& logits, const Tensor& ids, const Tensor& valid, const GenerationConfig& config);

// The next token of each row of scores (B,V): argmax (greedy), or one draw from softmax(scores)
// with the default generator. (B) int64 on the host.
std::vector<int64_t> select_next_tokens(const Tensor& scores, const GenerationConfig& config);

// The member generate of every model in one line (GPT::generate, Llama::generate): generate() above
// with do_sample = temperature > 0 (temperature 0: greedy), top_k, no mask, and on_token seeing row
// 0's new tokens. A prompt longer than the context is cropped to its latest max_positions() tokens
// (the returned ids keep the whole prompt). The model is in eval mode meanwhile. idx (B,T0) ->
// (B,T0+max_new_tokens). `who` names the caller in the ShapeError for an empty or non-(B,T0) prompt.
Tensor sample(const CausalLM& model, const Tensor& idx, int64_t max_new_tokens, double temperature,
              std::optional<int64_t> top_k, const std::function<void(int64_t)>& on_token, const std::string& who);

}  // namespace ampgrad::models
