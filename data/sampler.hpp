// sampler.hpp: random training batches from a token sequence, drawn from the sampler's own Philox
// generator, not the model's: dropout or sampling never shift the batches, and the generator's
// position (seed, offset) is saved in a checkpoint so a resumed run sees the same batches.
//
//   data::BatchSampler sampler(tokens, /*seed=*/1337);
//   auto [x, y] = sampler.next(B, T);            // (B,T) int64 windows and the same shifted by one
//   json j = sampler.state();                     // {"seed": 1337, "offset": 64}
#pragma once
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/tensor.hpp"

namespace ampgrad::data {

struct SamplerState {
    uint64_t seed = 0;
    uint64_t offset = 0;   // Philox counters used so far: one per window drawn
};

class BatchSampler {
public:
    // `tokens` is shared, not copied. ValueError when it has fewer than 2 tokens.
    BatchSampler(std::shared_ptr<const std::vector<int32_t>> tokens, uint64_t seed);

    // B windows of T+1 consecutive tokens at uniform random starts: x = window[:T], y = window[1:].
    // ValueError when the sequence is not longer than T.
    std::pair<Tensor, Tensor> next(int64_t B, int64_t T);
    // The start of window i of the next batch (what next() will use), for tests.
    int64_t start_at(uint64_t counter, int64_t T) const;

    SamplerState state() const { return state_; }
    void set_state(const SamplerState& s) { state_ = s; }
    size_t num_tokens() const { return tokens_->size(); }

private:
    std::shared_ptr<const std::vector<int32_t>> tokens_;
    SamplerState state_;
};

// Fixed batches for evaluation: `count` batches from a sampler with a constant seed, so every
// evaluation of a run (and of a resumed run) sees the same windows.
std::vector<std::pair<Tensor, Tensor>> fixed_batches(std::shared_ptr<const std::vector<int32_t>> tokens,
                                                     int64_t count, int64_t B, int64_t T);

// Windows [first, first + n) of the non-overlapping windows of T + 1 tokens at starts 0, T, 2T, ...
// (there are (size - 1) / T of them): x and y, (n,T) int64 each. The full-split protocol reads them
// all. IndexError past the last window.
std::pair<Tensor, Tensor> sequential_windows(const std::vector<int32_t>& tokens, uint64_t first, int64_t n, int64_t T);

}  // namespace ampgrad::data
