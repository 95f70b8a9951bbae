// train_mlp.cpp: the README's main job. An MLP (2 -> H -> H -> 2, relu) learns to tell two
// interleaved spirals apart, on the CPU. Everything is spelled out with ampgrad's functional ops:
// the forward pass is linear/relu/cross_entropy, loss.backward() fills each parameter's .grad,
// and SGD with momentum is written by hand under NoGradGuard. The data is generated here from
// ampgrad's seeded RNG (no download). Shape letters: N points, H hidden units, 2 features/classes.
#include <ampgrad/ampgrad.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <vector>

using namespace ampgrad;

struct Dataset {
    Tensor x;   // (N,2) f32: points in the plane
    Tensor y;   // (N) int64: which spiral, 0 or 1
};

// Point i lies on spiral k = i % 2 at radius r in [0.1, 1) and angle 3*pi*r + k*pi, plus noise.
Dataset make_spirals(int64_t n, double noise) {
    std::vector<float> u = rand({n}).to_vector<float>();            // (N) uniform [0,1)
    std::vector<float> eps = randn({n, 2}).to_vector<float>();      // (N,2) standard normal
    std::vector<float> xy(2 * n);
    std::vector<int64_t> labels(n);
    for (int64_t i = 0; i < n; ++i) {
        labels[i] = i % 2;
        double r = 0.1 + 0.9 * u[i];
        double angle = 3.0 * std::numbers::pi * r + static_cast<double>(labels[i]) * std::numbers::pi;
        xy[2 * i] = static_cast<float>(r * std::cos(angle) + noise * eps[2 * i]);
        xy[2 * i + 1] = static_cast<float>(r * std::sin(angle) + noise * eps[2 * i + 1]);
    }
    return {tensor(xy, {n, 2}), tensor(labels, {n})};
}

// A leaf parameter: weights ~ N(0, 2/fan_in) (He init, suits relu), biases zero.
Tensor parameter(const Shape& shape, int64_t fan_in) {
    Tensor p = shape.size() == 1 ? zeros(shape) : randn(shape) * std::sqrt(2.0 / static_cast<double>(fan_in));
    return p.requires_grad_(true);
}

struct Mlp {
    Tensor w1, b1, w2, b2, w3, b3;

    explicit Mlp(int64_t hidden)
        : w1(parameter({hidden, 2}, 2)), b1(parameter({hidden}, 2)),                 // (H,2) (H)
          w2(parameter({hidden, hidden}, hidden)), b2(parameter({hidden}, hidden)),  // (H,H) (H)
          w3(parameter({2, hidden}, hidden)), b3(parameter({2}, hidden)) {}          // (2,H) (2)

    std::vector<Tensor> parameters() const { return {w1, b1, w2, b2, w3, b3}; }

    Tensor forward(const Tensor& x) const {         // x: (N,2)
        Tensor h = relu(linear(x, w1, b1));         // (N,H)
        h = relu(linear(h, w2, b2));                // (N,H)
        return linear(h, w3, b3);                   // (N,2) logits
    }
};

// Fraction of points whose largest logit is their label.
double accuracy(const Mlp& model, const Dataset& data) {
    NoGradGuard no_grad;
    std::vector<int64_t> predicted = argmax(model.forward(data.x), 1).to_vector<int64_t>();   // (N)
    std::vector<int64_t> labels = data.y.to_vector<int64_t>();
    int64_t correct = 0;
    for (size_t i = 0; i < labels.size(); ++i) correct += predicted[i] == labels[i];
    return static_cast<double>(correct) / static_cast<double>(labels.size());
}

int main(int argc, char** argv) {
    int64_t points = 1000, hidden = 64, steps = 500, log_every = 25;
    double lr = 0.1, momentum = 0.9, noise = 0.03;
    uint64_t seed = 0;
    CLI::App app{"train_mlp: an MLP learns two interleaved spirals (CPU, full-batch SGD with momentum)"};
    app.add_option("--points", points, "training points (a test set of the same size is drawn too)");
    app.add_option("--hidden", hidden, "hidden units per layer (H)");
    app.add_option("--steps", steps, "SGD steps (full batch)");
    app.add_option("--lr", lr, "learning rate");
    app.add_option("--momentum", momentum, "SGD momentum");
    app.add_option("--noise", noise, "standard deviation of the noise added to each point");
    app.add_option("--seed", seed, "seed of ampgrad's RNG (data and initial weights)");
    app.add_option("--log-every", log_every, "print the loss every this many steps");
    CLI11_PARSE(app, argc, argv);

    manual_seed(seed);
    Dataset train = make_spirals(points, noise);
    Dataset test = make_spirals(points, noise);
    Mlp model(hidden);
    std::vector<Tensor> params = model.parameters();
    std::vector<Tensor> velocity;
    for (const Tensor& p : params) velocity.push_back(zeros_like(p));
    std::printf("two spirals: %lld train + %lld test points; MLP 2-%lld-%lld-2; SGD lr %g momentum %g\n",
                static_cast<long long>(points), static_cast<long long>(points), static_cast<long long>(hidden),
                static_cast<long long>(hidden), lr, momentum);

    auto start = std::chrono::steady_clock::now();
    for (int64_t step = 1; step <= steps; ++step) {
        Tensor loss = F::cross_entropy(model.forward(train.x), train.y);    // ()
        for (const Tensor& p : params) p.set_grad(Tensor());              // zero_grad(set_to_none)
        loss.backward();
        {
            NoGradGuard no_grad;                       // the update itself is not part of the graph
            for (size_t i = 0; i < params.size(); ++i) {
                velocity[i].mul_(momentum).add_(params[i].grad());   // v = momentum * v + dp
                params[i].add_(velocity[i], -lr);                    // p = p - lr * v
            }
        }
        if (step == 1 || step % log_every == 0 || step == steps) {
            std::printf("step %5lld  loss %.4f\n", static_cast<long long>(step), loss.item<float>());
            std::fflush(stdout);                       // show progress even when piped
        }
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    double train_acc = accuracy(model, train), test_acc = accuracy(model, test);
    std::printf("trained %lld steps in %.2f s (%.2f ms/step)\n", static_cast<long long>(steps), seconds,
                1e3 * seconds / static_cast<double>(steps));
    std::printf("final accuracy: train %.1f%%, test %.1f%%\n", 100.0 * train_acc, 100.0 * test_acc);
    return test_acc > 0.9 ? 0 : 1;                  // a failed run should fail the README command
}
