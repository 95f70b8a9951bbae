// gpt_step.cpp: one training step of the bundled GPT (models/gpt: token + position embeddings, L
// pre-LN blocks with a fused QKV linear, causal SDPA and a 4C tanh-GELU MLP, final LayerNorm, head
// tied to the token embedding, mean cross-entropy) with AdamW: the measure of CPU speed
// (docs/benchmarks.md, "GPT training step"). The PyTorch peer, bench/torch_gpt_step.py, builds the
// same model and step.
//
// --dtype f32 trains in f32; bf16/f16 run the forward under an AutocastGuard (weights stay f32).
// Reports time per step (wall and process CPU, medians over repeats), peak RSS growth and
// ampgrad's peak live tensor bytes.
// --ddp (run under ampgrad-run, one rank per process): the same step with the model under
// dist::DistributedDataParallel on the Gloo group, each rank on its own --batch samples; rank 0
// prints. bench/dist_bench.py compares it with the single-process step (the data-parallel overhead).
#include <ampgrad/ampgrad.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <optional>

#include "bench/bench_util.hpp"

using namespace ampgrad;

namespace {

std::optional<DType> autocast_dtype(const std::string& name) {
    if (name == "f32") return std::nullopt;
    if (name == "bf16") return kBFloat16;
    if (name == "f16") return kFloat16;
    throw std::invalid_argument("--dtype must be f32, bf16 or f16");
}

}  // namespace

int main(int argc, char** argv) {
    int64_t batch = 16, steps = 5, repeats = 5, warmup = 3;
    std::string preset = "tiny", dtype = "f32";
    CLI::App app{"GPT training step (pre-LN, causal SDPA, tanh-GELU MLP, tied head, AdamW)"};
    app.add_option("--preset", preset, "tiny (V256 T64 C128 L4 H4) or small (V256 T128 C256 L6 H8)");
    app.add_option("--batch", batch, "batch size B");
    app.add_option("--dtype", dtype, "f32, or bf16 / f16 autocast");
    app.add_option("--steps", steps, "steps per timed repeat");
    app.add_option("--repeats", repeats, "timed repeats (after a warm-up); the median is reported");
    app.add_option("--warmup", warmup, "untimed steps first");
    bool ddp = false;
    app.add_flag("--ddp", ddp, "DistributedDataParallel across the ranks that ampgrad-run starts");
    CLI11_PARSE(app, argc, argv);
    if (preset != "tiny" && preset != "small") { std::fprintf(stderr, "unknown preset %s\n", preset.c_str()); return 2; }
    const models::GPTConfig cfg = models::GPTConfig::preset(preset);
    const std::optional<DType> amp_dtype = autocast_dtype(dtype);

    manual_seed(0);
    int64_t rss_before_kib = bench::proc_status_kib("VmRSS");
    bool peak_reset = bench::reset_peak_rss();
    reset_peak_memory_stats(Device(kCPU));
    auto gpt = std::make_shared<models::GPT>(cfg);
    const std::vector<Tensor> params = gpt->parameters();
    int64_t n_params = 0;
    for (const Tensor& p : params) n_params += p.numel();
    Tensor idx = randint(0, cfg.vocab_size, {batch, cfg.block_size});       // (B,T)
    Tensor targets = randint(0, cfg.vocab_size, {batch, cfg.block_size});   // (B,T)
    optim::AdamW opt(params, optim::AdamWOptions(1e-3).weight_decay(0.1));
    std::unique_ptr<dist::DistributedDataParallel> data_parallel;
    if (ddp) {
        dist::init_process_group("gloo");
        data_parallel = std::make_unique<dist::DistributedDataParallel>(gpt);
    }

    auto step = [&] {
        Tensor loss;
        if (amp_dtype) {
            amp::AutocastGuard autocast(kCPU, *amp_dtype);
            loss = gpt->forward(idx, targets);
        } else {
            loss = gpt->forward(idx, targets);
        }
        opt.zero_grad();
        loss.backward();
        opt.step();
        return loss.item<float>();
    };
    float first_loss = 0, last_loss = 0;
    for (int64_t i = 0; i < warmup; ++i) last_loss = step();
    first_loss = last_loss;
    std::vector<double> wall, cpu;
    for (int64_t r = 0; r < repeats; ++r) {
        double w0 = bench::now_seconds(), c0 = bench::cpu_seconds();
        for (int64_t i = 0; i < steps; ++i) last_loss = step();
        wall.push_back((bench::now_seconds() - w0) / static_cast<double>(steps));
        cpu.push_back((bench::cpu_seconds() - c0) / static_cast<double>(steps));
    }
    int64_t peak_kib = bench::proc_status_kib("VmHWM");
    double tensor_peak_mib = static_cast<double>(max_memory_allocated(Device(kCPU))) / (1 << 20);
    const int world = ddp ? dist::world_size() : 1;
    if (ddp && dist::rank() != 0) {
        data_parallel.reset();
        dist::destroy_process_group();
        return 0;
    }
    std::printf("{\"impl\": \"ampgrad\", \"world_size\": %d, \"preset\": \"%s\", \"dtype\": \"%s\", \"params\": %lld, \"threads\": %d, "
                "\"step_ms\": %.3f, \"step_cpu_ms\": %.3f, \"peak_rss_growth_mib\": %.1f, \"peak_tensor_mib\": %.2f, "
                "\"peak_rss_reset\": %s, \"warm_loss\": %.4f, \"final_loss\": %.4f}\n",
                world, preset.c_str(), dtype.c_str(), static_cast<long long>(n_params), get_num_threads(),
                1e3 * bench::median(wall), 1e3 * bench::median(cpu),
                static_cast<double>(peak_kib - rss_before_kib) / 1024.0, tensor_peak_mib,
                peak_reset ? "true" : "false", first_loss, last_loss);
    std::fflush(stdout);
    if (ddp) {
        data_parallel.reset();
        dist::destroy_process_group();
    }
    return 0;
}
