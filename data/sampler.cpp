// sampler.cpp: the batch sampler (data/sampler.hpp).
#include "data/sampler.hpp"

#include <array>

#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "core/philox.hpp"
#include "core/profiler.hpp"

namespace ampgrad::data {

BatchSampler::BatchSampler(std::shared_ptr<const std::vector<int32_t>> tokens, uint64_t seed)
    : tokens_(std::move(tokens)), state_{seed, 0} {
    if (!tokens_ || tokens_->size() < 2)
        throw ValueError(fmt::format("BatchSampler: need at least 2 tokens, but got {}", tokens_ ? tokens_->size() : 0));
}

int64_t BatchSampler::start_at(uint64_t counter, int64_t T) const {
    const uint64_t starts = tokens_->size() - static_cast<uint64_t>(T);   // valid starts: [0, N-T-1]
    std::array<uint32_t, 4> r = Philox4x32::generate(state_.seed, /*counter_hi=*/0x5A3D, counter);
    const uint64_t u = (static_cast<uint64_t>(r[0]) << 32) | r[1];
    return static_cast<int64_t>(u % starts);
}

std::pair<Tensor, Tensor> BatchSampler::next(int64_t B, int64_t T) {
    profiler::Span span("data", "BatchSampler.next");
    if (B <= 0 || T <= 0) throw ValueError(fmt::format("BatchSampler: batch size {} and length {} must be positive", B, T));
    if (static_cast<int64_t>(tokens_->size()) <= T)
        throw ValueError(fmt::format("BatchSampler: the text has {} tokens, fewer than a window of {} + 1",
                                     tokens_->size(), T));
    Tensor x = empty({B, T}, TensorOptions().dtype(kInt64)), y = empty({B, T}, TensorOptions().dtype(kInt64));   // (B,T)
    int64_t* xs = x.data_ptr<int64_t>();   // through the allocator: a batch too large for memory is an OutOfMemoryError
    int64_t* ys = y.data_ptr<int64_t>();
    for (int64_t b = 0; b < B; ++b) {
        const int64_t start = start_at(state_.offset + static_cast<uint64_t>(b), T);
        for (int64_t t = 0; t < T; ++t) {
            xs[b * T + t] = (*tokens_)[start + t];
            ys[b * T + t] = (*tokens_)[start + t + 1];
        }
    }
    state_.offset += static_cast<uint64_t>(B);
    return {x, y};
}

std::vector<std::pair<Tensor, Tensor>> fixed_batches(std::shared_ptr<const std::vector<int32_t>> tokens,
                                                     int64_t count, int64_t B, int64_t T) {
    BatchSampler sampler(std::move(tokens), /*seed=*/0xE7A1);
    std::vector<std::pair<Tensor, Tensor>> out;
    for (int64_t i = 0; i < count; ++i) out.push_back(sampler.next(B, T));
    return out;
}

std::pair<Tensor, Tensor> sequential_windows(const std::vector<int32_t>& tokens, uint64_t first, int64_t n, int64_t T) {
    if (n < 0 || T <= 0) throw ValueError(fmt::format("sequential_windows: n {} and T {} must be >= 0 and > 0", n, T));
    const uint64_t windows = tokens.size() > 0 ? (tokens.size() - 1) / static_cast<uint64_t>(T) : 0;
    if (first + static_cast<uint64_t>(n) > windows)
        throw IndexError(fmt::format("sequential_windows: windows [{}, {}) of T={} are past the {} windows of {} tokens",
                                     first, first + static_cast<uint64_t>(n), T, windows, tokens.size()));
    std::vector<int64_t> x(static_cast<size_t>(n * T)), y(static_cast<size_t>(n * T));
    for (int64_t b = 0; b < n; ++b) {
        const size_t start = static_cast<size_t>((first + static_cast<uint64_t>(b)) * static_cast<uint64_t>(T));
        for (int64_t t = 0; t < T; ++t) {
            x[static_cast<size_t>(b * T + t)] = tokens[start + static_cast<size_t>(t)];
            y[static_cast<size_t>(b * T + t)] = tokens[start + static_cast<size_t>(t) + 1];
        }
    }
    return {tensor(x, {n, T}), tensor(y, {n, T})};
}

}  // namespace ampgrad::data
