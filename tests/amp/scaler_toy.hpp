// scaler_toy.hpp: the GradScaler tests' toy problem: one linear layer's weight, an SGD optimizer
// and a fixed batch, and one full scaled iteration.
#pragma once
#include <ampgrad/ampgrad.h>

namespace ampgrad::testing {

// One linear layer's weight, an SGD optimizer over it, and a fixed batch.
struct Toy {
    Tensor w, x;
    optim::SGD opt;
    explicit Toy(uint64_t seed = 1, double lr = 0.1)
        : w(make_w(seed)), x(randn({5, 4})), opt(std::vector<Tensor>{w}, optim::SGDOptions(lr)) {}
    static Tensor make_w(uint64_t seed) {
        manual_seed(seed);
        Tensor w = randn({3, 4}).requires_grad_(true);
        w.set_name("fc.weight");
        return w;
    }
    Tensor loss(double poison = 1.0) const { return linear(x, w).pow(2.0).mean() * poison; }
};

// One full iteration: zero_grad, scaled backward, step, update.
inline amp::StepResult iterate(amp::GradScaler& scaler, Toy& toy, double poison = 1.0) {
    toy.opt.zero_grad();
    scaler.scale(toy.loss(poison)).backward();
    amp::StepResult r = scaler.step(toy.opt);
    scaler.update();
    return r;
}

}  // namespace ampgrad::testing
