// fp8_linear_test.cpp: F::fp8_linear and the delayed-scaling update on the GPU against the CPU
// (which tests/amp/fp8_recipe_test.cpp ties to the PyTorch oracle): forward, dgrad, wgrad and the
// recorded amaxes of each recipe, and one Fp8Training update, with nothing read on the host.
#include <memory>

#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

struct Run {
    Tensor y, dx, dw, amax;
};

Run run_fp8_linear(const Tensor& x_in, const Tensor& w_in, const Tensor& g, Fp8Scaling scaling, Device device) {
    Tensor x = copy_to(x_in, device).requires_grad_(true), w = copy_to(w_in, device).requires_grad_(true);
    auto state = std::make_shared<Fp8LinearState>(Fp8LinearState::make(scaling, device));
    if (scaling == Fp8Scaling::kDelayed) state->scale.copy_(copy_to(tensor(std::vector<float>{64.0f, 512.0f, 4096.0f}, {3}), device));
    Tensor y = F::fp8_linear(x, w, state, kBFloat16);                                              // (M,N)
    y.backward(copy_to(g, device));
    return {y.detach(), x.grad(), w.grad(), state->amax};
}

}  // namespace

TEST_CASE("cuda fp8_linear: forward, dgrad, wgrad and amaxes match the CPU for each recipe" * skip_without_gpu()) {
    manual_seed(38);
    Tensor x = (randn({64, 32}) * 2.0).to(kBFloat16), w = randn({48, 32}) * 0.1;                 // (M,K), (N,K)
    Tensor g = (randn({64, 48}) * 0.01).to(kBFloat16);                                             // (M,N)
    for (Fp8Scaling scaling : {Fp8Scaling::kDelayed, Fp8Scaling::kTensorwise, Fp8Scaling::kRowwise}) {
        CAPTURE(std::string(fp8_scaling_name(scaling)));
        const Run cpu = run_fp8_linear(x, w, g, scaling, kHost);
        const Run gpu = run_fp8_linear(x, w, g, scaling, kGpu);
        CHECK_GPU_CLOSE(gpu.amax, cpu.amax, (Tolerance{0.0, 0.0}));                               // max |.| is exact
        CHECK_GPU_CLOSE(gpu.y.to(kFloat32), cpu.y.to(kFloat32), tol_for(kBFloat16, 2.0));
        CHECK_GPU_CLOSE(gpu.dx.to(kFloat32), cpu.dx.to(kFloat32), tol_for(kBFloat16, 2.0));
        CHECK_GPU_CLOSE(gpu.dw, cpu.dw, tol_for(kBFloat16, 2.0));
    }
}

TEST_CASE("cuda fp8 recipe: a delayed-scaling update gives the CPU's scales and histories, with no host sync" * skip_without_gpu()) {
    amp::Fp8Recipe recipe;
    recipe.keep_first_last_in_bf16 = false;
    recipe.amax_history_len = 4;
    auto make = [] {
        auto seq = std::make_shared<nn::Sequential>();
        seq->push_back(std::make_shared<nn::Linear>(32, 32));
        return seq;
    };
    auto cpu_net = make(), gpu_net = make();
    gpu_net->load_state_dict(cpu_net->state_dict());
    gpu_net->to(kGpu);
    amp::Fp8Training cpu(*cpu_net, recipe), gpu(*gpu_net, recipe);
    manual_seed(3);
    Tensor x = randn({16, 32});
    for (auto [net, fp8, device] : {std::tuple{cpu_net, &cpu, kHost}, std::tuple{gpu_net, &gpu, kGpu}}) {
        {
            amp::AutocastGuard autocast(device.type, recipe);
            sum(net->forward(copy_to(x, device)).to(kFloat32)).backward();
        }
        HostSyncCounter syncs;
        fp8->update();
        if (device.is_cuda()) CHECK_MESSAGE(syncs.count() == 0, syncs.describe());
    }
    CHECK_GPU_CLOSE(gpu.layers()[0].state->scale, cpu.layers()[0].state->scale, (Tolerance{0.0, 1e-6}));
    CHECK_GPU_CLOSE(gpu.layers()[0].amax_history, cpu.layers()[0].amax_history, (Tolerance{0.0, 1e-6}));
}
