// addition.hpp: a synthetic task generated in-process: n-digit addition, scored by exact match.
// A problem is a fixed-width string, the sum written least significant digit first (the order a
// person adds in, which a small transformer learns far more easily):
//   "07+45=" + "250"   (7 + 45 = 52; digits 0-9 are tokens 0-9, '+' is 10, '=' is 11; V = 12)
// Training batches ask for the answer digits only (other targets are -100, ignored by
// cross_entropy). About 10% of all pairs (chosen by a hash) are held out for testing.
//
//   data::AdditionTask task(2);                        // 2-digit operands, sequences of 9 tokens
//   auto [x, y] = task.batch(sampler_state, 64);       // (64,8) each
//   double acc = task.exact_match(complete, 1000);     // greedy answers of held-out problems
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.hpp"
#include "data/sampler.hpp"
#include "data/tokenizer.hpp"

namespace ampgrad::data {

class AdditionTask {
public:
    explicit AdditionTask(int64_t digits);   // 1 <= digits <= 9 (ValueError otherwise)

    int64_t digits() const { return digits_; }
    int64_t prompt_length() const { return 2 * digits_ + 2; }     // "aa+bb="
    int64_t answer_length() const { return digits_ + 1; }
    int64_t sequence_length() const { return prompt_length() + answer_length() - 1; }   // the model's T
    Tokenizer tokenizer() const;                                   // "0123456789+=", V = 12

    bool is_test_pair(int64_t a, int64_t b) const;
    std::vector<int32_t> encode(int64_t a, int64_t b) const;      // prompt then answer, 3d+3 tokens
    // B training problems (never a held-out pair), from the sampler's own generator state.
    std::pair<Tensor, Tensor> batch(SamplerState& state, int64_t B) const;
    // A model's greedy continuation: prompts (B,P) int64 -> (B,P+new_tokens) int64 (e.g.
    // models::generate with do_sample = false; app/trainer.cpp passes one).
    using GreedyCompletion = std::function<Tensor(const Tensor& prompts, int64_t new_tokens)>;
    // Fraction of `count` held-out problems (a fixed list) whose greedy answer is right.
    double exact_match(const GreedyCompletion& complete, int64_t count, int64_t batch_size = 256) const;
    // The fixed list of held-out problems exact_match uses.
    std::vector<std::pair<int64_t, int64_t>> test_pairs(int64_t count) const;

private:
    std::pair<int64_t, int64_t> draw(uint64_t counter, uint64_t seed) const;
    int64_t digits_;
    int64_t limit_;   // 10^digits
};

}  // namespace ampgrad::data
