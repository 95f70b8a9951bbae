// typical_loop.cpp: the everyday mixed-precision loop (PyTorch's "Typical Mixed Precision Training"):
// f32 parameters, the forward under autocast (f16 here, so loss scaling matters), the backward on
// the scaled loss, then scaler.step() and scaler.update(). Prints the loss and the scale.
//   build/examples/amp_typical_loop
#include <cstdio>
#include <iostream>

#include "examples/amp/common.hpp"

namespace amp_examples::typical_loop {

struct Report {
    double first_loss = 0, last_loss = 0;
    int skipped = 0;
    double final_scale = 0;
};

inline Report run(std::ostream& out, int steps = 60) {
    auto model = make_mlp(8, 32, 2, 1);
    optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    amp::GradScaler scaler;                                     // 2^16, x2 every 2000, /2 on inf
    Batch batch = make_batch(64, 8, 2, 7);
    Report report;
    for (int step = 0; step < steps; ++step) {
        optimizer.zero_grad();
        Tensor loss;
        {
            amp::AutocastGuard autocast(kCPU, kFloat16);        // matmuls in f16, the loss in f32
            loss = mse(model->forward(batch.x), batch.y);
        }
        scaler.scale(loss).backward();                          // backward outside autocast
        amp::StepResult r = scaler.step(optimizer);             // unscale, check, step (or skip)
        scaler.update();
        if (r.skipped()) ++report.skipped;
        double l = loss.item<double>();
        if (step == 0) report.first_loss = l;
        report.last_loss = l;
        if (step % 10 == 0 || step == steps - 1)
            out << "step " << step << "  loss " << l << "  scale " << scaler.get_scale()
                << (r.skipped() ? "  (skipped: " + r.reason() + ")" : "") << "\n";
    }
    report.final_scale = scaler.get_scale();
    out << "loss " << report.first_loss << " -> " << report.last_loss << ", skipped steps: " << report.skipped << "\n";
    return report;
}

}  // namespace amp_examples::typical_loop

#ifndef AMPGRAD_EXAMPLE_NO_MAIN
int main() {
    amp_examples::typical_loop::run(std::cout);
    return 0;
}
#endif
