// mlp_step.cpp: one training step of a 2-layer MLP, the shape of MNIST training:
// x (B,784) -> linear 784->256 -> relu -> linear 256->10 -> cross_entropy, then plain SGD
// written by hand (p -= lr * dp under NoGradGuard, grads set to none). Reports time per step
// (wall and process CPU, medians over repeats of `steps` steps) and memory: peak resident growth
// during training (measured as in the PyTorch peer, bench/torch_mlp_step.py) and ampgrad's peak
// live tensor bytes from the CPU allocator.
#include <ampgrad/ampgrad.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "bench/bench_util.hpp"

using namespace ampgrad;

int main(int argc, char** argv) {
    int64_t batch = 64, in = 784, hidden = 256, classes = 10, steps = 100, repeats = 5;
    double lr = 0.01;
    CLI::App app{"MLP training step: 784 -> 256 -> 10, relu, cross_entropy, SGD"};
    app.add_option("--batch", batch, "batch size B");
    app.add_option("--hidden", hidden, "hidden units");
    app.add_option("--steps", steps, "steps per timed repeat");
    app.add_option("--repeats", repeats, "timed repeats (after a warm-up); the median is reported");
    CLI11_PARSE(app, argc, argv);

    manual_seed(0);
    int64_t rss_before_kib = bench::proc_status_kib("VmRSS");
    bool peak_reset = bench::reset_peak_rss();
    reset_peak_memory_stats(Device(kCPU));
    Tensor x = randn({batch, in});                                          // (B,784)
    Tensor y = randint(0, classes, {batch});                                // (B) int64
    Tensor w1 = (randn({hidden, in}) * 0.05).requires_grad_(true);          // (256,784)
    Tensor b1 = zeros({hidden}).requires_grad_(true);                       // (256)
    Tensor w2 = (randn({classes, hidden}) * 0.05).requires_grad_(true);     // (10,256)
    Tensor b2 = zeros({classes}).requires_grad_(true);                      // (10)
    std::vector<Tensor> params{w1, b1, w2, b2};

    auto step = [&] {
        Tensor h = relu(linear(x, w1, b1));                                 // (B,256)
        Tensor loss = F::cross_entropy(linear(h, w2, b2), y);               // ()
        for (Tensor& p : params) p.set_grad(Tensor());
        loss.backward();
        NoGradGuard no_grad;
        for (Tensor& p : params) p.add_(p.grad(), -lr);
        return loss.item<float>();
    };
    for (int i = 0; i < 10; ++i) step();                                    // warm-up
    std::vector<double> wall, cpu;
    float last_loss = 0;
    for (int64_t r = 0; r < repeats; ++r) {
        double w0 = bench::now_seconds(), c0 = bench::cpu_seconds();
        for (int64_t i = 0; i < steps; ++i) last_loss = step();
        wall.push_back((bench::now_seconds() - w0) / static_cast<double>(steps));
        cpu.push_back((bench::cpu_seconds() - c0) / static_cast<double>(steps));
    }
    int64_t peak_kib = bench::proc_status_kib("VmHWM");   // includes earlier peaks if the reset failed
    double tensor_peak_mib = static_cast<double>(max_memory_allocated(Device(kCPU))) / (1 << 20);
    std::printf("{\"impl\": \"ampgrad\", \"batch\": %lld, \"hidden\": %lld, \"threads\": %d, "
                "\"step_ms\": %.4f, \"step_cpu_ms\": %.4f, \"peak_rss_growth_mib\": %.1f, "
                "\"peak_tensor_mib\": %.2f, \"peak_rss_reset\": %s, \"final_loss\": %.4f}\n",
                static_cast<long long>(batch), static_cast<long long>(hidden), get_num_threads(),
                1e3 * bench::median(wall), 1e3 * bench::median(cpu),
                static_cast<double>(peak_kib - rss_before_kib) / 1024.0, tensor_peak_mib,
                peak_reset ? "true" : "false", last_loss);
    return 0;
}
