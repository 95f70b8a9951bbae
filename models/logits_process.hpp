// logits_process.hpp: the filters applied to a step's next-token logits before a token is drawn,
// with the names and rules of transformers' generation/logits_process.py: the repetition penalty
// (RepetitionPenaltyLogitsProcessor), suppressed tokens (SuppressTokensLogitsProcessor), temperature (TemperatureLogitsWarper), top-k
// (TopKLogitsWarper) and top-p / nucleus (TopPLogitsWarper). Each maps scores (B,V) to new scores
// (B,V) in f32, removed tokens set to -inf; they run on the host (a row is one vocabulary, once per
// generated token), as autograd/ops/sampling.cpp does. models/generation.hpp chains them.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.hpp"

namespace ampgrad::models {

// For every token id already present in row b of ids (B,L) (where valid (B,L) bool is true;
// undefined: all): its score s becomes s / penalty if s > 0, else s * penalty (CTRL, Keskar et al.
// 2019). penalty > 0; 1 changes nothing, > 1 discourages repeats.
Tensor apply_repetition_penalty(const Tensor& scores, const Tensor& ids, const Tensor& valid, double penalty);
// The scores of the token ids in suppress_tokens become -inf (transformers'
// SuppressTokensLogitsProcessor): e.g. ids a smaller tokenizer cannot spell. Every id in [0, V).
Tensor apply_suppress_tokens(const Tensor& scores, const std::vector<int64_t>& suppress_tokens);
// scores / temperature (temperature > 0).
Tensor apply_temperature(const Tensor& scores, double temperature);
// Keeps the scores >= the top_k-th largest of each row (ties with it kept), others -inf; top_k >= 1
// (larger than V keeps everything).
Tensor apply_top_k(const Tensor& scores, int64_t top_k);
// Nucleus filtering (Holtzman et al. 2019): keeps the smallest set of most likely tokens whose
// probabilities sum to more than top_p (in softmax(scores)), at least one token; others -inf.
// 0 <= top_p <= 1 (1 keeps everything).
Tensor apply_top_p(const Tensor& scores, double top_p);

}  // namespace ampgrad::models
