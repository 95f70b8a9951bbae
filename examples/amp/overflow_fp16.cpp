// overflow_fp16.cpp: f16 training that overflows on purpose. The scale starts far too high (2^24):
// f16 gradients overflow to inf, steps are skipped and the scale backs off until it fits; it then
// grows every `growth_interval` clean steps until it overflows again (the sawtooth of docs/amp.md).
// Across every skipped step the parameters stay bit-identical. Part A: GradScaler with autocast
// (f32 params). Part B: f16 params with f32 master weights and DeepSpeed's hysteresis.
//   build/examples/amp_overflow_fp16 [trace.dat]     # writes step, scale, skipped, loss per line
#include <fstream>
#include <iostream>

#include "examples/amp/common.hpp"

namespace amp_examples::overflow_fp16 {

struct TracePoint {
    int step;
    double scale;        // the scale the backward used
    bool skipped;
    double loss;
};

struct Report {
    std::vector<TracePoint> trace;           // part A
    int skipped_a = 0, skipped_b = 0;
    bool params_identical_on_skip = true;    // both parts, every skipped step
    double first_loss = 0, last_loss = 0;    // part A
    std::vector<std::string> events_b;       // DeepSpeed-style log lines of part B
};

inline std::vector<Tensor> snapshot(const std::vector<Tensor>& params) {
    std::vector<Tensor> out;
    for (const Tensor& p : params) out.push_back(p.detach().clone());
    return out;
}
inline bool same(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
    for (size_t i = 0; i < a.size(); ++i)
        if (!equal(a[i], b[i])) return false;
    return true;
}

// Part A: f32 parameters, f16 autocast, GradScaler(init 2^24, growth every 10 clean steps).
inline void run_grad_scaler(std::ostream& out, Report& report, int steps) {
    auto model = make_mlp(8, 32, 2, 12);
    std::vector<Tensor> params = model->parameters();
    optim::SGD optimizer(params, optim::SGDOptions(0.05).momentum(0.9));
    amp::GradScaler scaler({.init_scale = 16777216.0, .growth_interval = 10});
    Batch batch = make_batch(64, 8, 2, 13);
    for (int step = 0; step < steps; ++step) {
        optimizer.zero_grad();
        Tensor loss;
        {
            amp::AutocastGuard autocast(kCPU, kFloat16);
            loss = mse(model->forward(batch.x), batch.y);
        }
        double scale = scaler.get_scale();
        std::vector<Tensor> before = snapshot(params);
        scaler.scale(loss).backward();
        amp::StepResult r = scaler.step(optimizer);
        scaler.update();
        if (r.skipped()) {
            ++report.skipped_a;
            report.params_identical_on_skip = report.params_identical_on_skip && same(before, params);
            out << "A step " << step << ": skipped at scale " << scale << " -> " << scaler.get_scale() << " ("
                << r.reason().substr(0, r.reason().find(';')) << ")\n";
        }
        report.trace.push_back({step, scale, r.skipped(), loss.item<double>()});
    }
    report.first_loss = report.trace.front().loss;
    report.last_loss = report.trace.back().loss;
    out << "A: " << report.skipped_a << " of " << steps << " steps skipped; loss " << report.first_loss << " -> "
        << report.last_loss << "; final scale " << scaler.get_scale() << "\n";
}

// Part B: f16 parameters, f32 masters, DynamicLossScaler with hysteresis 2.
inline void run_master_weights(std::ostream& out, Report& report, int steps) {
    auto model = make_mlp(8, 32, 2, 14);
    model->to(kFloat16);
    amp::MasterWeightsOptimizer optimizer(
        model->parameters(),
        [](std::vector<optim::ParamGroup> g) { return std::make_unique<optim::SGD>(std::move(g), optim::SGDOptions(0.05)); },
        std::make_unique<amp::DynamicLossScaler>(
            amp::DynamicLossScalerOptions{.init_scale = 16777216.0, .scale_window = 25, .delayed_shift = 2}));
    Batch batch = make_batch(64, 8, 2, 13);
    Tensor x16 = batch.x.to(kFloat16);
    for (int step = 0; step < steps; ++step) {
        optimizer.zero_grad();
        std::vector<Tensor> before = snapshot(optimizer.model_params());
        optimizer.backward(mse(model->forward(x16), batch.y));
        amp::StepResult r = optimizer.step();
        if (!r.skipped()) continue;
        ++report.skipped_b;
        report.params_identical_on_skip = report.params_identical_on_skip && same(before, optimizer.model_params());
        report.events_b.push_back(optimizer.loss_scaler().last_event());
        out << "B step " << step << ": " << optimizer.loss_scaler().last_event() << "\n";
    }
    out << "B: " << report.skipped_b << " of " << steps << " steps skipped; final scale " << optimizer.loss_scale()
        << "\n";
}

inline Report run(std::ostream& out, int steps = 200, const std::string& trace_path = "") {
    Report report;
    run_grad_scaler(out, report, steps);
    run_master_weights(out, report, steps / 2);
    out << "parameters bit-identical across every skipped step: " << (report.params_identical_on_skip ? "yes" : "NO")
        << "\n";
    if (!trace_path.empty()) {
        std::ofstream f(trace_path);
        f << "# step scale skipped loss  (examples/amp/overflow_fp16.cpp, part A)\n";
        for (const TracePoint& p : report.trace) f << p.step << " " << p.scale << " " << p.skipped << " " << p.loss << "\n";
        out << "wrote " << trace_path << "\n";
    }
    return report;
}

}  // namespace amp_examples::overflow_fp16

#ifndef AMPGRAD_EXAMPLE_NO_MAIN
int main(int argc, char** argv) {
    amp_examples::overflow_fp16::run(std::cout, 200, argc > 1 ? argv[1] : "");
    return 0;
}
#endif
