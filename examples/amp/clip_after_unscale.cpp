// clip_after_unscale.cpp: gradient clipping with a GradScaler. The grads that backward leaves are
// multiplied by the scale (65536), so a clip threshold means nothing until they are unscaled:
// call scaler.unscale_(optimizer) first, clip, then scaler.step() (which does not unscale again).
//   build/examples/amp_clip_after_unscale
#include <iostream>

#include "examples/amp/common.hpp"

namespace amp_examples::clip_after_unscale {

struct Report {
    double scaled_norm = 0;      // what clipping would have seen without unscale_
    double true_norm = 0;        // the norm clip_grad_norm_ returned after unscale_
    double clipped_norm = 0;     // the norm after clipping
    double max_norm = 0;
    int steps = 0;
};

inline Report run(std::ostream& out, int steps = 20, double max_norm = 0.5) {
    auto model = make_mlp(8, 32, 2, 2);
    std::vector<Tensor> params = model->parameters();
    optim::SGD optimizer(params, optim::SGDOptions(0.05));
    amp::GradScaler scaler;
    Batch batch = make_batch(64, 8, 2, 8);
    Report report{.max_norm = max_norm};
    for (int step = 0; step < steps; ++step) {
        optimizer.zero_grad();
        Tensor loss;
        {
            amp::AutocastGuard autocast(kCPU, kFloat16);
            loss = mse(model->forward(batch.x), batch.y);
        }
        scaler.scale(loss).backward();
        if (step == 0) report.scaled_norm = nn::utils::get_total_norm(grads_of(params)).item<double>();
        scaler.unscale_(optimizer);                                       // grads /= scale, in place
        double norm = nn::utils::clip_grad_norm_(params, max_norm).item<double>();   // true gradient norm
        if (step == 0) {
            report.true_norm = norm;
            report.clipped_norm = nn::utils::get_total_norm(grads_of(params)).item<double>();
            out << "step 0: grad norm as backward left it (scaled): " << report.scaled_norm << "\n"
                << "        after unscale_ (what clipping sees):      " << report.true_norm << "\n"
                << "        after clip_grad_norm_(max_norm=" << max_norm << "):      " << report.clipped_norm << "\n";
        }
        scaler.step(optimizer);                                           // no second unscale
        scaler.update();
        if (step % 5 == 4) out << "step " << step << "  loss " << loss.item<double>() << "  grad norm " << norm << "\n";
        ++report.steps;
    }
    return report;
}

}  // namespace amp_examples::clip_after_unscale

#ifndef AMPGRAD_EXAMPLE_NO_MAIN
int main() {
    amp_examples::clip_after_unscale::run(std::cout);
    return 0;
}
#endif
