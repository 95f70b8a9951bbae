// multiple_models.cpp: two models, two losses, two optimizers and ONE GradScaler. Each loss is
// scaled and backpropagated; each optimizer is stepped (each skips on its own inf); update() is
// called once per iteration, after all the steps, and backs off if any optimizer saw an inf.
//   build/examples/amp_multiple_models
#include <iostream>

#include "examples/amp/common.hpp"

namespace amp_examples::multiple_models {

struct Report {
    double first_loss0 = 0, last_loss0 = 0, first_loss1 = 0, last_loss1 = 0;
    int iterations = 0;
    int64_t scaler_updates = 0;
};

inline Report run(std::ostream& out, int steps = 30) {
    auto model0 = make_mlp(8, 16, 2, 5);
    auto model1 = make_mlp(8, 16, 2, 6);
    optim::SGD optimizer0(model0->parameters(), optim::SGDOptions(0.02));
    optim::Adam optimizer1(model1->parameters(), optim::AdamOptions(1e-2));
    amp::GradScaler scaler;
    Batch batch = make_batch(64, 8, 2, 11);
    Report report;
    for (int step = 0; step < steps; ++step) {
        optimizer0.zero_grad();
        optimizer1.zero_grad();
        Tensor loss0, loss1;
        {
            amp::AutocastGuard autocast(kCPU, kFloat16);
            Tensor out0 = model0->forward(batch.x), out1 = model1->forward(batch.x);   // (B,2) f16
            loss0 = mse(out0 * 2.0 + out1 * 3.0, batch.y * 5.0);
            loss1 = mse(out0 * 3.0 - out1 * 5.0, batch.y * -2.0);
        }
        scaler.scale(loss0).backward({}, /*retain_graph=*/true);   // the two losses share the forward
        scaler.scale(loss1).backward();
        scaler.unscale_(optimizer0);                               // optional: to inspect/clip model0's grads
        scaler.step(optimizer0);
        scaler.step(optimizer1);
        scaler.update();                                           // once, after every step
        double l0 = loss0.item<double>(), l1 = loss1.item<double>();
        if (step == 0) { report.first_loss0 = l0; report.first_loss1 = l1; }
        report.last_loss0 = l0;
        report.last_loss1 = l1;
        ++report.iterations;
        if (step % 10 == 0 || step == steps - 1)
            out << "step " << step << "  loss0 " << l0 << "  loss1 " << l1 << "  scale " << scaler.get_scale() << "\n";
    }
    report.scaler_updates = scaler.iteration();
    return report;
}

}  // namespace amp_examples::multiple_models

#ifndef AMPGRAD_EXAMPLE_NO_MAIN
int main() {
    amp_examples::multiple_models::run(std::cout);
    return 0;
}
#endif
