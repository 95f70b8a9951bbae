// master_weights.cpp: mixed-precision style (b): the model itself is f16, and the optimizer wrapper
// keeps f32 master weights (Apex O2, DeepSpeed fp16). Compares the final loss with an all-f32 run
// and shows that state_dict() (masters + AdamW state + loss scaler) resumes training exactly.
//   build/examples/amp_master_weights
#include <iostream>

#include "examples/amp/common.hpp"

namespace amp_examples::master_weights {

struct Report {
    double f16_first = 0, f16_last = 0, f32_last = 0;
    bool resume_exact = false;
};

inline std::unique_ptr<optim::Optimizer> make_adamw(std::vector<optim::ParamGroup> groups) {
    return std::make_unique<optim::AdamW>(std::move(groups), optim::AdamWOptions(1e-2));
}

inline amp::MasterWeightsOptimizer make_optimizer(nn::Module& model) {
    return amp::MasterWeightsOptimizer(model.parameters(), make_adamw,
                                       std::make_unique<amp::DynamicLossScaler>(amp::DynamicLossScalerOptions{
                                           .init_scale = 1024.0, .scale_window = 20}));
}

inline double train_f16(nn::Sequential& model, amp::MasterWeightsOptimizer& opt, const Batch& b, int steps) {
    Tensor x16 = b.x.to(kFloat16);
    double loss = 0;
    for (int i = 0; i < steps; ++i) {
        opt.zero_grad();
        Tensor l = mse(model.forward(x16), b.y);
        opt.backward(l);
        opt.step();
        loss = l.item<double>();
    }
    return loss;
}

inline Report run(std::ostream& out, int steps = 60) {
    Batch batch = make_batch(64, 8, 2, 15);
    Report report;
    // f32 baseline
    auto ref = make_mlp(8, 32, 2, 16);
    optim::AdamW ref_opt(ref->parameters(), optim::AdamWOptions(1e-2));
    for (int i = 0; i < steps; ++i) {
        ref_opt.zero_grad();
        Tensor l = mse(ref->forward(batch.x), batch.y);
        l.backward();
        ref_opt.step();
        report.f32_last = l.item<double>();
    }
    // f16 model with f32 masters: train half, checkpoint, train the other half
    auto model = make_mlp(8, 32, 2, 16);
    model->to(kFloat16);
    amp::MasterWeightsOptimizer opt = make_optimizer(*model);
    report.f16_first = mse(model->forward(batch.x.to(kFloat16)), batch.y).item<double>();
    train_f16(*model, opt, batch, steps / 2);
    amp::MasterWeightsStateDict saved = opt.state_dict();
    for (Tensor& m : saved.master_weights) m = m.detach().clone();       // a snapshot, not live views
    for (auto& [index, state] : saved.optimizer.state)
        for (auto& [key, t] : state) t = t.clone();
    report.f16_last = train_f16(*model, opt, batch, steps - steps / 2);
    // resume from the checkpoint into a fresh model and optimizer
    auto resumed = make_mlp(8, 32, 2, 99);
    resumed->to(kFloat16);
    amp::MasterWeightsOptimizer resumed_opt = make_optimizer(*resumed);
    resumed_opt.load_state_dict(saved);
    double resumed_last = train_f16(*resumed, resumed_opt, batch, steps - steps / 2);
    report.resume_exact = resumed_last == report.f16_last;
    out << "f16 params + f32 masters: loss " << report.f16_first << " -> " << report.f16_last << " (f32 run: "
        << report.f32_last << "), loss scale " << opt.loss_scale() << ", skipped " << opt.skipped_steps() << "\n";
    out << "resumed from state_dict at step " << steps / 2 << ": final loss " << resumed_last
        << (report.resume_exact ? " (bit-identical)" : " (DIFFERENT)") << "\n";
    return report;
}

}  // namespace amp_examples::master_weights

#ifndef AMPGRAD_EXAMPLE_NO_MAIN
int main() {
    amp_examples::master_weights::run(std::cout);
    return 0;
}
#endif
