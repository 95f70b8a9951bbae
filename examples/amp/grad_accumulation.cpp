// grad_accumulation.cpp: gradient accumulation with a GradScaler. The effective-batch rules:
//   1. divide each micro-batch loss by the number of micro-batches (the grad is then the effective
//      batch's mean);
//   2. scaler.scale(loss).backward() on every micro-batch: grads add up, all scaled by one S;
//   3. unscale_/clip/step/update only at the effective-batch boundary, so S cannot change while
//      grads are accumulating (the scale is calibrated for the effective batch).
//   build/examples/amp_grad_accumulation
#include <algorithm>
#include <iostream>

#include "examples/amp/common.hpp"

namespace amp_examples::grad_accumulation {

struct Report {
    double max_rel_diff = 0;     // accumulated vs full-batch gradient, at the first boundary
    int optimizer_steps = 0;
    int64_t scaler_updates = 0;
    double first_loss = 0, last_loss = 0;
};

// The largest |g_acc - g_full| / max|g_full| over parameters: g_full from one full-batch backward.
inline double compare_with_full_batch(const std::shared_ptr<nn::Sequential>& model, const Batch& full,
                                      const std::vector<Tensor>& params) {
    std::vector<Tensor> accumulated;
    for (const Tensor& g : grads_of(params)) accumulated.push_back(g.clone());
    Tensor loss;
    {
        amp::AutocastGuard autocast(kCPU, kFloat16);
        loss = mse(model->forward(full.x), full.y);
    }
    tensor_list reference = autograd::grad({loss}, params);
    double worst = 0;
    for (size_t i = 0; i < params.size(); ++i) {
        double scale = reference[i].abs().max().item<double>();
        worst = std::max(worst, (accumulated[i] - reference[i]).abs().max().item<double>() / scale);
    }
    return worst;
}

inline Report run(std::ostream& out, int effective_steps = 10, int micro_batches = 4, int64_t micro = 16) {
    auto model = make_mlp(8, 32, 2, 3);
    std::vector<Tensor> params = model->parameters();
    optim::SGD optimizer(params, optim::SGDOptions(0.1));
    amp::GradScaler scaler;
    Batch full = make_batch(micro * micro_batches, 8, 2, 9);                  // (B,8), B = micro * n
    Report report;
    for (int step = 0; step < effective_steps; ++step) {
        optimizer.zero_grad();
        double loss_sum = 0;
        for (int m = 0; m < micro_batches; ++m) {
            Tensor x = full.x.narrow(0, m * micro, micro), y = full.y.narrow(0, m * micro, micro);   // (micro,8)
            Tensor loss;
            {
                amp::AutocastGuard autocast(kCPU, kFloat16);
                loss = mse(model->forward(x), y) / static_cast<double>(micro_batches);   // rule 1
            }
            scaler.scale(loss).backward();                                          // rule 2
            loss_sum += loss.item<double>();
        }
        scaler.unscale_(optimizer);                                                 // rule 3: at the boundary
        if (step == 0) report.max_rel_diff = compare_with_full_batch(model, full, params);
        scaler.step(optimizer);
        scaler.update();
        ++report.optimizer_steps;
        if (step == 0) report.first_loss = loss_sum;
        report.last_loss = loss_sum;
        out << "effective step " << step << "  loss " << loss_sum << "  scale " << scaler.get_scale() << "\n";
    }
    report.scaler_updates = scaler.iteration();
    out << "accumulated vs full-batch gradient (step 0): max relative difference " << report.max_rel_diff << "\n";
    return report;
}

}  // namespace amp_examples::grad_accumulation

#ifndef AMPGRAD_EXAMPLE_NO_MAIN
int main() {
    amp_examples::grad_accumulation::run(std::cout);
    return 0;
}
#endif
