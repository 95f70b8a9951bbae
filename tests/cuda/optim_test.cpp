// optim_test.cpp: cuda/optim.cu's fused SGD and Adam/AdamW steps against cpu/optim.cpp (the same
// kernels/optim_math.hpp formulas) on fresh random parameters: every option (momentum with its first
// step, dampening, nesterov, weight decay, maximize; amsgrad, AdamW), f32 and f64, an empty and a
// large parameter, step counts on the device and on the host; a step skipped by found_inf leaves
// every tensor bit-identical, and a loss-scaled step with inv_scale equals the unscaled one.
#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

const std::vector<Shape> kShapes = {{7, 5}, {0}, {33}, {3, 4, 2}};

std::vector<Tensor> samples(DType dtype, uint64_t seed, const std::vector<Shape>& shapes = kShapes) {
    std::vector<Tensor> out;
    for (size_t i = 0; i < shapes.size(); ++i) out.push_back(sample(shapes[i], dtype, seed + i));
    return out;
}
std::vector<Tensor> all_to(const std::vector<Tensor>& ts, Device device) {
    std::vector<Tensor> out;
    for (const Tensor& t : ts) out.push_back(copy_to(t, device));
    return out;
}
// Nonnegative second moments: squares of samples.
std::vector<Tensor> squares(DType dtype, uint64_t seed, const std::vector<Shape>& shapes = kShapes) {
    std::vector<Tensor> out = samples(dtype, seed, shapes);
    for (Tensor& t : out) t = t * t;
    return out;
}

void check_all_close(const std::vector<Tensor>& gpu, const std::vector<Tensor>& cpu, Tolerance tol) {
    REQUIRE(gpu.size() == cpu.size());
    for (size_t i = 0; i < gpu.size(); ++i) CHECK_GPU_CLOSE(gpu[i], cpu[i], tol);
}
void check_all_exact(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) CHECK_EXACT(a[i], b[i]);
}

Tensor scalar(double v, Device device) { return copy_to(full({}, v, TensorOptions(kFloat32)), device); }

// The same Adam state on the host and on the GPU.
struct AdamPair {
    AdamTensors cpu, gpu;
};

AdamPair adam_state(DType dtype, bool amsgrad, bool gpu_steps, uint64_t seed, const std::vector<Shape>& shapes) {
    AdamTensors c;
    c.params = samples(dtype, seed, shapes);
    c.grads = samples(dtype, seed + 100, shapes);
    c.exp_avgs = samples(dtype, seed + 200, shapes);
    c.exp_avg_sqs = squares(dtype, seed + 300, shapes);
    if (amsgrad) c.max_exp_avg_sqs = squares(dtype, seed + 400, shapes);
    for (size_t i = 0; i < shapes.size(); ++i) c.steps.push_back(full({}, 3.0 + double(i), TensorOptions(kFloat32)));
    AdamTensors g{all_to(c.params, kGpu), all_to(c.grads, kGpu), all_to(c.exp_avgs, kGpu), all_to(c.exp_avg_sqs, kGpu),
                  all_to(c.max_exp_avg_sqs, kGpu), gpu_steps ? all_to(c.steps, kGpu) : all_to(c.steps, kHost)};
    return {c, g};
}

void check_adam_close(const AdamPair& s, DType dtype) {
    Tolerance tol = tol_for(dtype, 16);
    check_all_close(s.gpu.params, s.cpu.params, tol);
    check_all_close(s.gpu.exp_avgs, s.cpu.exp_avgs, tol);
    check_all_close(s.gpu.exp_avg_sqs, s.cpu.exp_avg_sqs, tol);
    check_all_close(s.gpu.max_exp_avg_sqs, s.cpu.max_exp_avg_sqs, tol);
    check_all_exact(s.gpu.steps, s.cpu.steps);
}

struct SgdPair {
    SgdTensors cpu, gpu;
};

SgdPair sgd_state(DType dtype, bool momentum, uint64_t seed, const std::vector<Shape>& shapes = kShapes) {
    SgdTensors c;
    c.params = samples(dtype, seed, shapes);
    c.grads = samples(dtype, seed + 100, shapes);
    if (momentum) c.momentum_buffers = samples(dtype, seed + 200, shapes);
    return {c, SgdTensors{all_to(c.params, kGpu), all_to(c.grads, kGpu), all_to(c.momentum_buffers, kGpu)}};
}

const AdamScalars kAdam{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0,
                        .amsgrad = false, .maximize = false, .decoupled_weight_decay = false};
const SgdScalars kSgd{.lr = 0.1, .momentum = 0.9, .dampening = 0.0, .weight_decay = 0.0,
                      .nesterov = false, .maximize = false, .first_step = false};

}  // namespace

TEST_CASE("cuda sgd_step matches the CPU: every option, f32 and f64, an empty parameter" * skip_without_gpu()) {
    std::vector<SgdScalars> configs;
    SgdScalars s = kSgd;
    configs.push_back(s);                                                   // momentum
    s.first_step = true, configs.push_back(s);                              // buffers set to the gradients
    s.first_step = false, s.nesterov = true, s.weight_decay = 0.01, configs.push_back(s);
    s.nesterov = false, s.dampening = 0.3, s.maximize = true, configs.push_back(s);
    s.momentum = 0.0, s.dampening = 0.0, configs.push_back(s);              // plain SGD, weight decay, maximize
    for (DType dtype : {kFloat32, kFloat64}) {
        for (size_t k = 0; k < configs.size(); ++k) {
            CAPTURE(dtype_name(dtype));
            CAPTURE(k);
            const bool momentum = configs[k].momentum != 0.0;
            SgdPair st = sgd_state(dtype, momentum, 10 + k);
            for (int step = 0; step < 3; ++step) {                           // buffers carried between steps
                kernels::sgd_step(st.cpu, configs[k], StepScaling{});
                kernels::sgd_step(st.gpu, configs[k], StepScaling{});
            }
            check_all_close(st.gpu.params, st.cpu.params, tol_for(dtype, 8));
            check_all_close(st.gpu.momentum_buffers, st.cpu.momentum_buffers, tol_for(dtype, 8));
        }
    }
}

TEST_CASE("cuda adam_step matches the CPU: Adam, AdamW, amsgrad, maximize, f32 and f64" * skip_without_gpu()) {
    std::vector<AdamScalars> configs;
    AdamScalars s = kAdam;
    configs.push_back(s);
    s.weight_decay = 0.1, configs.push_back(s);                             // L2 (Adam)
    s.decoupled_weight_decay = true, configs.push_back(s);                  // AdamW
    s.amsgrad = true, s.maximize = true, configs.push_back(s);
    for (DType dtype : {kFloat32, kFloat64}) {
        for (size_t k = 0; k < configs.size(); ++k) {
            for (bool gpu_steps : {true, false}) {
                CAPTURE(dtype_name(dtype));
                CAPTURE(k);
                CAPTURE(gpu_steps);
                AdamPair st = adam_state(dtype, configs[k].amsgrad, gpu_steps, 20 + k, kShapes);
                for (int step = 0; step < 3; ++step) {
                    kernels::adam_step(st.cpu, configs[k], StepScaling{});
                    kernels::adam_step(st.gpu, configs[k], StepScaling{});
                }
                check_adam_close(st, dtype);
            }
        }
    }
}

TEST_CASE("cuda fused steps on one large parameter (2^22 + 3 elements)" * skip_without_gpu()) {
    const std::vector<Shape> big = {{(int64_t{1} << 22) + 3}};
    AdamScalars s = kAdam;
    s.amsgrad = true, s.weight_decay = 0.01, s.decoupled_weight_decay = true;
    AdamPair adam = adam_state(kFloat32, true, true, 50, big);
    kernels::adam_step(adam.cpu, s, StepScaling{});
    kernels::adam_step(adam.gpu, s, StepScaling{});
    check_adam_close(adam, kFloat32);
    SgdPair sgd = sgd_state(kFloat32, true, 60, big);
    kernels::sgd_step(sgd.cpu, kSgd, StepScaling{});
    kernels::sgd_step(sgd.gpu, kSgd, StepScaling{});
    check_all_close(sgd.gpu.params, sgd.cpu.params, tol_for(kFloat32, 8));
    check_all_close(sgd.gpu.momentum_buffers, sgd.cpu.momentum_buffers, tol_for(kFloat32, 8));
}

TEST_CASE("cuda fused steps: found_inf = 1 changes nothing, step counts included" * skip_without_gpu()) {
    StepScaling skip{scalar(0.5, kGpu), scalar(1.0, kGpu)};
    for (DType dtype : {kFloat32, kFloat64}) {
        CAPTURE(dtype_name(dtype));
        AdamScalars a = kAdam;
        a.amsgrad = true;
        AdamPair adam = adam_state(dtype, true, true, 70, kShapes);
        AdamTensors before{all_to(adam.gpu.params, kGpu), {}, all_to(adam.gpu.exp_avgs, kGpu),
                           all_to(adam.gpu.exp_avg_sqs, kGpu), all_to(adam.gpu.max_exp_avg_sqs, kGpu),
                           all_to(adam.gpu.steps, kGpu)};
        kernels::adam_step(adam.gpu, a, skip);
        check_all_exact(adam.gpu.params, before.params);
        check_all_exact(adam.gpu.exp_avgs, before.exp_avgs);
        check_all_exact(adam.gpu.exp_avg_sqs, before.exp_avg_sqs);
        check_all_exact(adam.gpu.max_exp_avg_sqs, before.max_exp_avg_sqs);
        check_all_exact(adam.gpu.steps, before.steps);

        SgdScalars first = kSgd;
        first.first_step = true;
        SgdPair sgd = sgd_state(dtype, true, 80);
        std::vector<Tensor> params = all_to(sgd.gpu.params, kGpu), bufs = all_to(sgd.gpu.momentum_buffers, kGpu);
        kernels::sgd_step(sgd.gpu, first, skip);
        check_all_exact(sgd.gpu.params, params);
        check_all_exact(sgd.gpu.momentum_buffers, bufs);
    }
}

TEST_CASE("cuda fused steps: a loss-scaled step with inv_scale equals the unscaled step, .grad included" * skip_without_gpu()) {
    const double scale = 1024.0;                                            // a power of two: exact
    StepScaling scaled{scalar(1.0 / scale, kGpu), scalar(0.0, kGpu)};
    for (DType dtype : {kFloat32, kFloat64}) {
        CAPTURE(dtype_name(dtype));
        AdamScalars a = kAdam;
        a.weight_decay = 0.01;
        AdamPair plain = adam_state(dtype, false, true, 90, kShapes), other = adam_state(dtype, false, true, 90, kShapes);
        for (Tensor& g : other.gpu.grads) g = to_gpu(to_host(g) * scale);
        kernels::adam_step(plain.gpu, a, StepScaling{});
        kernels::adam_step(other.gpu, a, scaled);
        check_all_exact(other.gpu.params, plain.gpu.params);
        check_all_exact(other.gpu.exp_avgs, plain.gpu.exp_avgs);
        check_all_exact(other.gpu.exp_avg_sqs, plain.gpu.exp_avg_sqs);
        check_all_exact(other.gpu.steps, plain.gpu.steps);
        check_all_exact(other.gpu.grads, plain.gpu.grads);       // stored back unscaled, as on the CPU

        SgdPair sgd_plain = sgd_state(dtype, true, 95), sgd_scaled = sgd_state(dtype, true, 95);
        for (Tensor& g : sgd_scaled.gpu.grads) g = to_gpu(to_host(g) * scale);
        kernels::sgd_step(sgd_plain.gpu, kSgd, StepScaling{});
        kernels::sgd_step(sgd_scaled.gpu, kSgd, scaled);
        check_all_exact(sgd_scaled.gpu.params, sgd_plain.gpu.params);
        check_all_exact(sgd_scaled.gpu.momentum_buffers, sgd_plain.gpu.momentum_buffers);
        check_all_exact(sgd_scaled.gpu.grads, sgd_plain.gpu.grads);
    }
}

TEST_CASE("cuda adam_step: host step counts with a found_inf flag, and f16 parameters, are refused"
          * skip_without_gpu()) {
    AdamPair st = adam_state(kFloat32, false, /*gpu_steps=*/false, 100, kShapes);
    CHECK_THROWS_AS(kernels::adam_step(st.gpu, kAdam, StepScaling{Tensor(), scalar(0.0, kGpu)}), DeviceError);
    AdamPair half = adam_state(kFloat16, false, true, 110, kShapes);
    CHECK_THROWS_AS(kernels::adam_step(half.gpu, kAdam, StepScaling{}), DTypeError);
}

// optim::AdamW(fused) under a GradScaler-style step on cuda:0: the step count lives on the
// parameter's device from the first step and again after load_state_dict (a checkpoint's counts
// arrive on the host), so step(StepScaling) with a found_inf flag runs; a flagged step counts
// nothing; the trajectory equals the same optimizer on the CPU.
TEST_CASE("cuda AdamW(fused) step(StepScaling): step counts on the device, on first use and after a load"
          * skip_without_gpu()) {
    auto make = [](Device device) {
        manual_seed(21);
        Tensor w = copy_to(randn({6, 5}), device).requires_grad_(true);                  // (6,5)
        auto opt = std::make_unique<optim::AdamW>(std::vector<Tensor>{w}, optim::AdamWOptions(1e-2).fused(true));
        return std::pair{w, std::move(opt)};
    };
    auto [w, opt] = make(kGpu);
    auto [ref_w, ref] = make(kHost);
    manual_seed(22);
    Tensor grad = randn({6, 5});                                                         // (6,5)
    auto step_both = [&](optim::AdamW& gpu_opt, Tensor& gpu_w, bool overflow) {
        gpu_w.set_grad(to_gpu(grad * 256.0));
        gpu_opt.step(StepScaling{scalar(1.0 / 256.0, kGpu), scalar(overflow ? 1.0 : 0.0, kGpu)});
        if (overflow) return;
        ref_w.set_grad(grad);
        ref->step();
    };
    step_both(*opt, w, false);
    CHECK(opt->state(w)["step"].device() == kGpu);
    step_both(*opt, w, true);                                                            // skipped: not counted
    CHECK(host_values(opt->state(w)["step"])[0] == 1.0);

    optim::OptimizerStateDict saved = opt->state_dict();                                 // as read from a file:
    for (auto& [index, state] : saved.state)                                             // every tensor on the host
        for (auto& [key, t] : state) t = to_host(t);
    auto [w2, opt2] = make(kGpu);
    {
        NoGradGuard no_grad;
        copy_(w2, w);
    }
    opt2->load_state_dict(saved);
    CHECK(opt2->state(w2)["step"].device() == kGpu);
    step_both(*opt2, w2, false);
    step_both(*opt2, w2, true);
    step_both(*opt2, w2, false);
    CHECK(host_values(opt2->state(w2)["step"])[0] == 3.0);
    CHECK_GPU_CLOSE(w2, ref_w, tol_for(kFloat32, 16));
}
