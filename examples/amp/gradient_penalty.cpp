// gradient_penalty.cpp: a gradient penalty (loss + ||dloss/dparams||) under autocast and a
// GradScaler. autograd::grad(create_graph=true) is called on the *scaled* loss, so its results
// are scaled; they belong to no optimizer, so they are unscaled by plain division by get_scale()
// before the penalty is formed. The total loss is then scaled and backpropagated as usual.
//   build/examples/amp_gradient_penalty
#include <cmath>
#include <iostream>

#include "examples/amp/common.hpp"

namespace amp_examples::gradient_penalty {

struct Report {
    double penalty_amp = 0;      // step 0 penalty, computed under autocast from scaled grads
    double penalty_f32 = 0;      // the same penalty in plain f32 (no autocast, no scaler)
    double first_loss = 0, last_loss = 0;
    int skipped = 0;
};

// sqrt(sum_i ||g_i||^2)
inline Tensor grad_norm(const tensor_list& grads) {
    Tensor total = grads[0].pow(2.0).sum();
    for (size_t i = 1; i < grads.size(); ++i) total = total + grads[i].pow(2.0).sum();
    return total.sqrt();                                                             // ()
}

inline double f32_penalty(const std::shared_ptr<nn::Sequential>& model, const Batch& batch) {
    std::vector<Tensor> params = model->parameters();
    Tensor loss = mse(model->forward(batch.x), batch.y);
    return grad_norm(autograd::grad({loss}, params)).item<double>();
}

inline Report run(std::ostream& out, int steps = 20) {
    auto model = make_mlp(8, 16, 2, 4);
    std::vector<Tensor> params = model->parameters();
    optim::SGD optimizer(params, optim::SGDOptions(0.05));
    amp::GradScaler scaler;
    Batch batch = make_batch(32, 8, 2, 10);
    Report report;
    report.penalty_f32 = f32_penalty(model, batch);
    for (int step = 0; step < steps; ++step) {
        optimizer.zero_grad();
        Tensor loss;
        {
            amp::AutocastGuard autocast(kCPU, kFloat16);
            loss = mse(model->forward(batch.x), batch.y);
        }
        // scaled grads, with a graph so the penalty can be differentiated
        tensor_list scaled_grads = autograd::grad({scaler.scale(loss)}, params, {}, std::nullopt, /*create_graph=*/true);
        double inv_scale = 1.0 / scaler.get_scale();                   // host read: a plain number here
        tensor_list grads;
        for (const Tensor& g : scaled_grads) grads.push_back(g * inv_scale);
        Tensor penalty;
        {
            amp::AutocastGuard autocast(kCPU, kFloat16);
            penalty = grad_norm(grads);
            loss = loss + penalty;
        }
        scaler.scale(loss).backward();
        amp::StepResult r = scaler.step(optimizer);
        scaler.update();
        if (r.skipped()) ++report.skipped;
        if (step == 0) {
            report.penalty_amp = penalty.item<double>();
            report.first_loss = loss.item<double>();
            out << "step 0 penalty: " << report.penalty_amp << " under autocast, " << report.penalty_f32
                << " in plain f32\n";
        }
        report.last_loss = loss.item<double>();
        if (step % 5 == 4) out << "step " << step << "  loss+penalty " << report.last_loss << "\n";
    }
    return report;
}

}  // namespace amp_examples::gradient_penalty

#ifndef AMPGRAD_EXAMPLE_NO_MAIN
int main() {
    amp_examples::gradient_penalty::run(std::cout);
    return 0;
}
#endif
