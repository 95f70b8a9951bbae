// gpt_step.cpp: one training step of the bundled GPT (models/gpt: token + position embeddings, L
// pre-LN blocks with a fused QKV linear, causal SDPA and a 4C tanh-GELU MLP, final LayerNorm, head
// tied to the token embedding, mean cross-entropy) with AdamW: the measure of CPU and GPU speed
// (docs/benchmarks.md, "GPT training step" and "The GPU race"). The PyTorch peer,
// bench/torch_gpt_step.py, builds the same model and step; bench/gpu_race.py runs both alternately.
//
// --dtype f32 trains in f32; bf16 runs the forward under autocast; f16 also scales the loss with a
// GradScaler (weights stay f32 in every mode; AdamW is the fused kernel). --device cuda runs on
// cuda:0 with no host read inside a step: the loss is read once per timed repeat, after the device
// has finished it. Reports per step: time (wall, median over repeats; and process CPU), tokens/s,
// MFU by llm.c's convention where the device's peak is known (models/gpt_mfu.hpp), host
// synchronisations (core/host_sync.hpp), peak memory (RSS growth; on a GPU, the caching
// allocator's peak allocated and reserved bytes).
// --ddp (run under ampgrad-run, one rank per process): the same step with the model under
// dist::DistributedDataParallel on the Gloo group, each rank on its own --batch samples; rank 0
// prints. bench/dist_bench.py compares it with the single-process step (the data-parallel overhead).
#include <ampgrad/ampgrad.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <optional>

#include "bench/bench_util.hpp"
#include "models/gpt_mfu.hpp"

using namespace ampgrad;

namespace {

struct Options {
    int64_t batch = 16, steps = 5, repeats = 5, warmup = 3;
    std::string preset = "tiny", dtype = "f32", device = "cpu";
    bool ddp = false;
};

std::optional<DType> autocast_dtype(const std::string& name) {
    if (name == "f32") return std::nullopt;
    if (name == "bf16") return kBFloat16;
    if (name == "f16") return kFloat16;
    throw std::invalid_argument("--dtype must be f32, bf16 or f16");
}

// The model, its batch and its optimizer on one device; step() makes no host read.
struct StepRunner {
    StepRunner(const models::GPTConfig& cfg, const Options& o, Device device)
        : device(device), amp_dtype(autocast_dtype(o.dtype)), gpt(std::make_shared<models::GPT>(cfg)) {
        gpt->to(device);
        idx = randint(0, cfg.vocab_size, {o.batch, cfg.block_size}).to(device);       // (B,T)
        targets = randint(0, cfg.vocab_size, {o.batch, cfg.block_size}).to(device);   // (B,T)
        opt = std::make_unique<optim::AdamW>(gpt->parameters(), optim::AdamWOptions(1e-3).weight_decay(0.1));
        if (amp_dtype == kFloat16) scaler = std::make_unique<amp::GradScaler>(amp::GradScalerOptions{});
    }

    Tensor step() {
        Tensor loss;
        {
            std::optional<amp::AutocastGuard> autocast;
            if (amp_dtype) autocast.emplace(device.type, *amp_dtype);
            loss = gpt->forward(idx, targets);                                       // ()
        }
        opt->zero_grad();
        if (!scaler) {
            loss.backward();
            opt->step();
            return loss;
        }
        scaler->scale(loss).backward();
        scaler->step(*opt);
        scaler->update();
        return loss;
    }

    Device device;
    std::optional<DType> amp_dtype;
    std::shared_ptr<models::GPT> gpt;
    Tensor idx, targets;
    std::unique_ptr<optim::AdamW> opt;
    std::unique_ptr<amp::GradScaler> scaler;
};

struct Timings {
    std::vector<double> wall, cpu;
    int64_t host_syncs = 0, steps = 0;
    float warm_loss = 0, final_loss = 0;
};

// Warm-up, then `repeats` timed runs of `steps` steps, each ended by one device synchronisation.
// Host syncs are counted inside the steps only.
Timings time_steps(StepRunner& run, const Options& o) {
    Timings t;
    for (int64_t i = 0; i < o.warmup; ++i) t.warm_loss = run.step().item<float>();
    for (int64_t r = 0; r < o.repeats; ++r) {
        synchronize(run.device);
        const double w0 = bench::now_seconds(), c0 = bench::cpu_seconds();
        Tensor loss;
        {
            HostSyncCounter syncs;
            for (int64_t i = 0; i < o.steps; ++i) loss = run.step();
            t.host_syncs += syncs.count();
            t.steps += o.steps;
        }
        synchronize(run.device);
        t.wall.push_back((bench::now_seconds() - w0) / static_cast<double>(o.steps));
        t.cpu.push_back((bench::cpu_seconds() - c0) / static_cast<double>(o.steps));
        t.final_loss = loss.item<float>();
    }
    return t;
}

Options parse(int argc, char** argv, bool& exit_now, int& exit_code) {
    Options o;
    CLI::App app{"GPT training step (pre-LN, causal SDPA, tanh-GELU MLP, tied head, AdamW)"};
    app.add_option("--preset", o.preset, "tiny (V256 T64 C128 L4 H4), small (V256 T128 C256 L6 H8) or gpt2 (124M)");
    app.add_option("--batch", o.batch, "batch size B");
    app.add_option("--dtype", o.dtype, "f32, or bf16 / f16 autocast (f16 with a GradScaler)");
    app.add_option("--device", o.device, "cpu or cuda");
    app.add_option("--steps", o.steps, "steps per timed repeat");
    app.add_option("--repeats", o.repeats, "timed repeats (after a warm-up); the median is reported");
    app.add_option("--warmup", o.warmup, "untimed steps first");
    app.add_flag("--ddp", o.ddp, "DistributedDataParallel across the ranks that ampgrad-run starts (CPU, Gloo)");
    exit_now = false;
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        exit_now = true;
        exit_code = app.exit(e);
    }
    return o;
}

}  // namespace

int run_benchmark(int argc, char** argv);

int main(int argc, char** argv) {
    try {
        return run_benchmark(argc, argv);
    } catch (const std::exception& e) {                     // a bad preset, no GPU, out of memory, ...
        std::fprintf(stderr, "bench_gpt_step: %s\n", e.what());
        return 1;
    }
}

int run_benchmark(int argc, char** argv) {
    bool exit_now = false;
    int exit_code = 0;
    const Options o = parse(argc, argv, exit_now, exit_code);
    if (exit_now) return exit_code;
    if (o.device != "cpu" && o.device != "cuda") { std::fprintf(stderr, "--device must be cpu or cuda\n"); return 2; }
    const Device device = o.device == "cuda" ? Device(kCUDA, 0) : Device(kCPU);
    const models::GPTConfig cfg = models::GPTConfig::preset(o.preset);   // ValueError naming the presets

    manual_seed(0);
    int64_t rss_before_kib = bench::proc_status_kib("VmRSS");
    bool peak_reset = bench::reset_peak_rss();
    reset_peak_memory_stats(device);
    StepRunner run(cfg, o, device);
    int64_t n_params = 0;
    for (const Tensor& p : run.gpt->parameters()) n_params += p.numel();
    std::unique_ptr<dist::DistributedDataParallel> data_parallel;
    if (o.ddp) {
        dist::init_process_group("gloo");
        data_parallel = std::make_unique<dist::DistributedDataParallel>(run.gpt);
    }
    const Timings t = time_steps(run, o);
    const int world = o.ddp ? dist::world_size() : 1;
    if (o.ddp && dist::rank() != 0) {
        data_parallel.reset();
        dist::destroy_process_group();
        return 0;
    }
    const double step_s = bench::median(t.wall);
    const double tokens_per_s = static_cast<double>(o.batch * cfg.block_size * world) / step_s;
    const std::optional<double> mfu = models::gpt_mfu(cfg, tokens_per_s, device);
    const int64_t peak_kib = bench::proc_status_kib("VmHWM");
    std::printf("{\"impl\": \"ampgrad\", \"device\": \"%s\", \"device_name\": \"%s\", \"world_size\": %d, "
                "\"preset\": \"%s\", \"dtype\": \"%s\", \"batch\": %lld, \"params\": %lld, \"threads\": %d, "
                "\"step_ms\": %.3f, \"step_cpu_ms\": %.3f, \"tokens_per_s\": %.1f, \"mfu\": %s, "
                "\"host_syncs_per_step\": %.2f, \"peak_rss_growth_mib\": %.1f, \"peak_tensor_mib\": %.2f, "
                "\"peak_reserved_mib\": %.2f, \"peak_rss_reset\": %s, \"warm_loss\": %.4f, \"final_loss\": %.4f}\n",
                o.device.c_str(), device_properties(device).name.c_str(), world, o.preset.c_str(), o.dtype.c_str(),
                static_cast<long long>(o.batch), static_cast<long long>(n_params), get_num_threads(), 1e3 * step_s,
                1e3 * bench::median(t.cpu), tokens_per_s, mfu ? fmt::format("{:.4f}", *mfu).c_str() : "null",
                static_cast<double>(t.host_syncs) / static_cast<double>(std::max<int64_t>(t.steps, 1)),
                static_cast<double>(peak_kib - rss_before_kib) / 1024.0,
                static_cast<double>(max_memory_allocated(device)) / (1 << 20),
                static_cast<double>(max_memory_reserved(device)) / (1 << 20), peak_reset ? "true" : "false",
                t.warm_loss, t.final_loss);
    std::fflush(stdout);
    if (o.ddp) {
        data_parallel.reset();
        dist::destroy_process_group();
    }
    return 0;
}
