// llama_step.cpp: one training step of models::Llama (embedding, L pre-RMSNorm decoder layers with
// RoPE, grouped-query causal SDPA and a SwiGLU MLP, final RMSNorm, tied head, mean cross-entropy)
// with AdamW: the Llama's CPU speed against transformers' LlamaForCausalLM (docs/benchmarks.md,
// "Llama training step"). The peer, bench/torch_llama_step.py, builds the same config in
// transformers and runs the same step; bench/run_bench.py runs both, alternating, on the same threads.
//
// --dtype f32 trains in f32; bf16 runs the forward under autocast (weights stay f32). Reports per
// step the median wall time over repeats, process CPU time, tokens/s and the losses, as JSON.
// --lora R fine-tunes rank-R LoRA adapters on q,k,v,o_proj (alpha 2R; models/lora.hpp) with the rest
// frozen (the peer uses PEFT), and --seq T shortens the sequences; "optimizer_bytes" is AdamW's state.
#include <ampgrad/ampgrad.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>

#include "bench/bench_util.hpp"

using namespace ampgrad;

namespace {

struct Options {
    int64_t batch = 16, steps = 5, repeats = 5, warmup = 3, lora = 0, seq = 0;
    std::string preset = "llama-nano", dtype = "f32";
};

struct StepRunner {
    StepRunner(const models::LlamaConfig& cfg, const Options& o)
        : amp_dtype(o.dtype == "bf16" ? std::optional<DType>(kBFloat16) : std::nullopt),
          model(std::make_shared<models::Llama>(cfg)) {
        const int64_t T = o.seq > 0 ? o.seq : cfg.max_position_embeddings;
        idx = randint(0, cfg.vocab_size, {o.batch, T});       // (B,T)
        targets = randint(0, cfg.vocab_size, {o.batch, T});   // (B,T)
        if (o.lora > 0) {
            models::LoraConfig lora{.r = o.lora, .lora_alpha = 2.0 * static_cast<double>(o.lora),
                                    .target_modules = {"q_proj", "k_proj", "v_proj", "o_proj"}};
            models::apply_lora(*model, lora);
        }
        opt = std::make_unique<optim::AdamW>(model->parameters(), optim::AdamWOptions(1e-3).weight_decay(0.1));
    }

    Tensor step() {
        Tensor loss;
        {
            std::optional<amp::AutocastGuard> autocast;
            if (amp_dtype) autocast.emplace(kCPU, *amp_dtype);
            loss = model->forward(idx, targets);                                         // ()
        }
        opt->zero_grad();
        loss.backward();
        opt->step();
        return loss;
    }

    int64_t optimizer_bytes() const {
        int64_t bytes = 0;
        for (const auto& [i, state] : opt->state_dict().state)
            for (const auto& [key, t] : state) bytes += t.numel() * static_cast<int64_t>(t.element_size());
        return bytes;
    }

    std::optional<DType> amp_dtype;
    std::shared_ptr<models::Llama> model;
    Tensor idx, targets;
    std::unique_ptr<optim::AdamW> opt;
};

int run(const Options& o) {
    if (o.dtype != "f32" && o.dtype != "bf16") throw ValueError("--dtype must be f32 or bf16");
    const models::LlamaConfig cfg = models::LlamaConfig::preset(o.preset);   // ValueError naming the presets
    manual_seed(0);
    StepRunner r(cfg, o);
    float warm_loss = 0, final_loss = 0;
    for (int64_t i = 0; i < o.warmup; ++i) warm_loss = r.step().item<float>();
    std::vector<double> wall, cpu;
    for (int64_t rep = 0; rep < o.repeats; ++rep) {
        const double w0 = bench::now_seconds(), c0 = bench::cpu_seconds();
        Tensor loss;
        for (int64_t i = 0; i < o.steps; ++i) loss = r.step();
        final_loss = loss.item<float>();
        wall.push_back((bench::now_seconds() - w0) / static_cast<double>(o.steps));
        cpu.push_back((bench::cpu_seconds() - c0) / static_cast<double>(o.steps));
    }
    const double step_s = bench::median(wall);
    const auto [trainable, total] = models::trainable_and_total_parameters(*r.model);
    std::printf("{\"impl\": \"ampgrad\", \"preset\": \"%s\", \"dtype\": \"%s\", \"batch\": %lld, \"seq\": %lld, "
                "\"lora\": %lld, \"params\": %lld, \"trainable\": %lld, \"optimizer_bytes\": %lld, "
                "\"threads\": %d, \"step_ms\": %.3f, \"step_cpu_ms\": %.3f, \"tokens_per_s\": %.1f, "
                "\"warm_loss\": %.4f, \"final_loss\": %.4f}\n",
                o.preset.c_str(), o.dtype.c_str(), static_cast<long long>(o.batch), static_cast<long long>(r.idx.size(1)),
                static_cast<long long>(o.lora), static_cast<long long>(total), static_cast<long long>(trainable),
                static_cast<long long>(r.optimizer_bytes()), get_num_threads(), 1e3 * step_s,
                1e3 * bench::median(cpu), static_cast<double>(r.idx.numel()) / step_s, warm_loss, final_loss);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"Llama training step (RMSNorm, RoPE, GQA SDPA, SwiGLU, tied head, AdamW)"};
    app.add_option("--preset", o.preset, "llama-nano, llama-tiny or llama-124m");
    app.add_option("--batch", o.batch, "batch size B");
    app.add_option("--dtype", o.dtype, "f32, or bf16 autocast");
    app.add_option("--steps", o.steps, "steps per timed repeat");
    app.add_option("--repeats", o.repeats, "timed repeats (after a warm-up); the median is reported");
    app.add_option("--warmup", o.warmup, "untimed steps first");
    app.add_option("--lora", o.lora, "rank of LoRA adapters on q,k,v,o_proj (0: full fine-tuning)");
    app.add_option("--seq", o.seq, "sequence length T (0: the preset's context)");
    CLI11_PARSE(app, argc, argv);
    try {
        return run(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_llama_step: %s\n", e.what());
        return 1;
    }
}
