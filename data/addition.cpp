// addition.cpp: the n-digit addition task (data/addition.hpp).
#include "data/addition.hpp"

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "core/philox.hpp"

namespace ampgrad::data {

AdditionTask::AdditionTask(int64_t digits) : digits_(digits), limit_(1) {
    if (digits < 1 || digits > 9)
        throw ValueError(fmt::format("AdditionTask: digits must be between 1 and 9, but is {}", digits));
    for (int64_t i = 0; i < digits; ++i) limit_ *= 10;
}

Tokenizer AdditionTask::tokenizer() const {
    return Tokenizer::from_code_points({'0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '+', '='});
}

bool AdditionTask::is_test_pair(int64_t a, int64_t b) const {
    uint64_t h = static_cast<uint64_t>(a) * 0x9E3779B97F4A7C15ULL ^ static_cast<uint64_t>(b) * 0xC2B2AE3D27D4EB4FULL;
    h ^= h >> 29;
    return h % 10 == 0;
}

std::vector<int32_t> AdditionTask::encode(int64_t a, int64_t b) const {
    std::vector<int32_t> out;
    auto digits_of = [&](int64_t v, int64_t n) {   // most significant first, zero-padded to n
        std::vector<int32_t> d(n);
        for (int64_t i = n - 1; i >= 0; --i, v /= 10) d[i] = static_cast<int32_t>(v % 10);
        return d;
    };
    for (int32_t d : digits_of(a, digits_)) out.push_back(d);
    out.push_back(10);
    for (int32_t d : digits_of(b, digits_)) out.push_back(d);
    out.push_back(11);
    std::vector<int32_t> sum = digits_of(a + b, digits_ + 1);
    out.insert(out.end(), sum.rbegin(), sum.rend());              // least significant digit first
    return out;
}

std::pair<int64_t, int64_t> AdditionTask::draw(uint64_t counter, uint64_t seed) const {
    std::array<uint32_t, 4> r = Philox4x32::generate(seed, /*counter_hi=*/0xADD, counter);
    return {static_cast<int64_t>(r[0] % static_cast<uint64_t>(limit_)),
            static_cast<int64_t>(r[1] % static_cast<uint64_t>(limit_))};
}

std::pair<Tensor, Tensor> AdditionTask::batch(SamplerState& state, int64_t B) const {
    const int64_t T = sequence_length();
    Tensor x = empty({B, T}, TensorOptions().dtype(kInt64));                 // (B,T), through the allocator
    Tensor y = full({B, T}, -100, TensorOptions().dtype(kInt64));            // (B,T): the prompt is not scored
    int64_t* xs = x.data_ptr<int64_t>();
    int64_t* ys = y.data_ptr<int64_t>();
    for (int64_t b = 0; b < B; ++b) {
        auto [p, q] = draw(state.offset++, state.seed);
        while (is_test_pair(p, q)) std::tie(p, q) = draw(state.offset++, state.seed);
        std::vector<int32_t> seq = encode(p, q);
        for (int64_t t = 0; t < T; ++t) xs[b * T + t] = seq[t];
        for (int64_t t = prompt_length() - 1; t < T; ++t) ys[b * T + t] = seq[t + 1];   // the answer digits
    }
    return {x, y};
}

std::vector<std::pair<int64_t, int64_t>> AdditionTask::test_pairs(int64_t count) const {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (uint64_t counter = 0; static_cast<int64_t>(out.size()) < count; ++counter) {
        auto [a, b] = draw(counter, /*seed=*/0x7E57);
        if (is_test_pair(a, b)) out.emplace_back(a, b);
        if (counter > static_cast<uint64_t>(100 * count + 1000)) break;   // tiny digit counts: few test pairs
    }
    return out;
}

double AdditionTask::exact_match(const GreedyCompletion& complete, int64_t count, int64_t batch_size) const {
    std::vector<std::pair<int64_t, int64_t>> pairs = test_pairs(count);
    if (pairs.empty()) return 0.0;
    int64_t correct = 0;
    for (size_t first = 0; first < pairs.size(); first += static_cast<size_t>(batch_size)) {
        const size_t n = std::min(pairs.size() - first, static_cast<size_t>(batch_size));
        std::vector<int64_t> prompts;
        for (size_t i = 0; i < n; ++i) {
            std::vector<int32_t> seq = encode(pairs[first + i].first, pairs[first + i].second);
            prompts.insert(prompts.end(), seq.begin(), seq.begin() + prompt_length());
        }
        Tensor out = complete(tensor(prompts, {static_cast<int64_t>(n), prompt_length()}), answer_length());   // (n,3d+3)
        std::vector<int64_t> ids = out.to_vector<int64_t>();
        const int64_t L = out.size(1);
        for (size_t i = 0; i < n; ++i) {
            std::vector<int32_t> seq = encode(pairs[first + i].first, pairs[first + i].second);
            bool ok = true;
            for (int64_t t = prompt_length(); t < L; ++t) ok = ok && ids[i * L + t] == seq[t];
            correct += ok;
        }
    }
    return static_cast<double>(correct) / static_cast<double>(pairs.size());
}

}  // namespace ampgrad::data
