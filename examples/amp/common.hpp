// common.hpp: the small model and data every AMP example trains: an MLP regressing a fixed random
// "teacher" network, so losses are comparable across recipes. Not a library: examples only.
#pragma once
#include <ampgrad/ampgrad.h>

#include <cmath>
#include <memory>
#include <vector>

namespace amp_examples {

using namespace ampgrad;

// A (B,IN) batch and its (B,OUT) targets from a fixed teacher.
struct Batch {
    Tensor x;        // (B,IN)
    Tensor y;        // (B,OUT)
};

inline Batch make_batch(int64_t batch, int64_t in, int64_t out, uint64_t seed) {
    manual_seed(1000);                                   // the same teacher for every batch
    Tensor teacher = randn({out, in}) * (1.0 / std::sqrt(static_cast<double>(in)));   // (OUT,IN)
    manual_seed(seed);
    Tensor x = randn({batch, in});                                                    // (B,IN)
    Tensor y = tanh(matmul(x, teacher.t())) * 2.0;                                    // (B,OUT)
    return {x, y};
}

// Linear -> tanh -> Linear, with parameters named "0.weight", "0.bias", "2.weight", "2.bias".
inline std::shared_ptr<nn::Sequential> make_mlp(int64_t in, int64_t hidden, int64_t out, uint64_t seed) {
    manual_seed(seed);
    return std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(in, hidden),
                                            std::make_shared<nn::Functional>([](const Tensor& h) { return tanh(h); }),
                                            std::make_shared<nn::Linear>(hidden, out));
}

// Mean squared error, computed in f32 whatever the prediction's dtype.
inline Tensor mse(const Tensor& pred, const Tensor& target) {
    return (pred.to(kFloat32) - target).pow(2.0).mean();                              // ()
}

// The .grad of each parameter (undefined where there is none).
inline std::vector<Tensor> grads_of(const std::vector<Tensor>& params) {
    std::vector<Tensor> grads;
    for (const Tensor& p : params) grads.push_back(p.grad());
    return grads;
}

}  // namespace amp_examples
