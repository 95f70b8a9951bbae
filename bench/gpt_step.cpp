// gpt_step.cpp: one training step of a small GPT-2 style model, the measure of CPU speed
// (docs/benchmarks.md, "GPT training step"). Bench-local model until models/gpt lands: token +
// position embeddings, L pre-LN blocks (fused QKV linear, causal SDPA, output projection; 4C
// tanh-GELU MLP), final LayerNorm, head tied to the token embedding, mean cross-entropy, AdamW.
// The PyTorch peer, bench/torch_gpt_step.py, builds the same model and step.
//
// --dtype f32 trains in f32; bf16/f16 run the forward under an AutocastGuard (weights stay f32).
// Reports time per step (wall and process CPU, medians over repeats), peak RSS growth and
// ampgrad's peak live tensor bytes.
// --ddp (run under ampgrad-run, one rank per process): the same step with the parameters under
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

struct Config {
    int64_t vocab = 256, block = 64, channels = 128, layers = 4, heads = 4;
};

struct Block {
    Tensor ln1_w, ln1_b, attn_w, attn_b, proj_w, proj_b;   // (C) (C) (3C,C) (3C) (C,C) (C)
    Tensor ln2_w, ln2_b, fc_w, fc_b, fc2_w, fc2_b;         // (C) (C) (4C,C) (4C) (C,4C) (C)
};

struct Gpt {
    Config cfg;
    Tensor wte, wpe, lnf_w, lnf_b;                         // (V,C) (T,C) (C) (C)
    std::vector<Block> blocks;

    std::vector<Tensor> parameters() const {
        std::vector<Tensor> p{wte, wpe, lnf_w, lnf_b};
        for (const Block& b : blocks)
            for (const Tensor& t : {b.ln1_w, b.ln1_b, b.attn_w, b.attn_b, b.proj_w, b.proj_b, b.ln2_w, b.ln2_b,
                                    b.fc_w, b.fc_b, b.fc2_w, b.fc2_b})
                p.push_back(t);
        return p;
    }
};

Tensor param(Tensor t) { return t.requires_grad_(true); }

// GPT-2 initialisation: N(0, 0.02) weights, zero biases, unit LayerNorm weights.
Gpt make_gpt(const Config& c) {
    Gpt g;
    g.cfg = c;
    const int64_t C = c.channels;
    g.wte = param(randn({c.vocab, C}) * 0.02);
    g.wpe = param(randn({c.block, C}) * 0.02);
    g.lnf_w = param(ones({C}));
    g.lnf_b = param(zeros({C}));
    for (int64_t l = 0; l < c.layers; ++l) {
        Block b;
        b.ln1_w = param(ones({C}));
        b.ln1_b = param(zeros({C}));
        b.attn_w = param(randn({3 * C, C}) * 0.02);
        b.attn_b = param(zeros({3 * C}));
        b.proj_w = param(randn({C, C}) * 0.02);
        b.proj_b = param(zeros({C}));
        b.ln2_w = param(ones({C}));
        b.ln2_b = param(zeros({C}));
        b.fc_w = param(randn({4 * C, C}) * 0.02);
        b.fc_b = param(zeros({4 * C}));
        b.fc2_w = param(randn({C, 4 * C}) * 0.02);
        b.fc2_b = param(zeros({C}));
        g.blocks.push_back(b);
    }
    return g;
}

// x (B,T,C) -> (B,T,C)
Tensor attention(const Block& b, const Tensor& x, int64_t heads) {
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2), HS = C / heads;
    Tensor qkv = linear(x, b.attn_w, b.attn_b);                          // (B,T,3C)
    tensor_list parts = split(qkv, C, 2);                                   // 3 x (B,T,C)
    auto heads_of = [&](const Tensor& t) { return transpose(view(t, {B, T, heads, HS}), 1, 2); };   // (B,NH,T,HS)
    Tensor y = F::scaled_dot_product_attention(heads_of(parts[0]), heads_of(parts[1]), heads_of(parts[2]), true);
    y = reshape(transpose(y, 1, 2), {B, T, C});                             // (B,T,C)
    return linear(y, b.proj_w, b.proj_b);
}

// idx (B,T) int64, targets (B,T) -> mean loss ()
Tensor gpt_loss(const Gpt& g, const Tensor& idx, const Tensor& targets) {
    const int64_t B = idx.size(0), T = idx.size(1), C = g.cfg.channels;
    Tensor pos = arange(T);                                                 // (T)
    Tensor x = F::embedding(idx, g.wte) + F::embedding(pos, g.wpe);         // (B,T,C)
    for (const Block& b : g.blocks) {
        x = x + attention(b, F::layer_norm(x, {C}, b.ln1_w, b.ln1_b), g.cfg.heads);
        Tensor h = F::gelu(linear(F::layer_norm(x, {C}, b.ln2_w, b.ln2_b), b.fc_w, b.fc_b), true);   // (B,T,4C)
        x = x + linear(h, b.fc2_w, b.fc2_b);
    }
    x = F::layer_norm(x, {C}, g.lnf_w, g.lnf_b);
    Tensor logits = linear(x, g.wte);                                    // (B,T,V), tied head
    return F::cross_entropy(reshape(logits, {B * T, g.cfg.vocab}), reshape(targets, {B * T}));
}

std::optional<DType> autocast_dtype(const std::string& name) {
    if (name == "f32") return std::nullopt;
    if (name == "bf16") return kBFloat16;
    if (name == "f16") return kFloat16;
    throw std::invalid_argument("--dtype must be f32, bf16 or f16");
}

}  // namespace

int main(int argc, char** argv) {
    Config cfg;
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
    if (preset == "small") cfg = Config{256, 128, 256, 6, 8};
    else if (preset != "tiny") { std::fprintf(stderr, "unknown preset %s\n", preset.c_str()); return 2; }
    const std::optional<DType> amp_dtype = autocast_dtype(dtype);

    manual_seed(0);
    int64_t rss_before_kib = bench::proc_status_kib("VmRSS");
    bool peak_reset = bench::reset_peak_rss();
    reset_peak_memory_stats(Device(kCPU));
    Gpt gpt = make_gpt(cfg);
    int64_t n_params = 0;
    for (const Tensor& p : gpt.parameters()) n_params += p.numel();
    Tensor idx = randint(0, cfg.vocab, {batch, cfg.block});                 // (B,T)
    Tensor targets = randint(0, cfg.vocab, {batch, cfg.block});             // (B,T)
    optim::AdamW opt(gpt.parameters(), optim::AdamWOptions(1e-3).weight_decay(0.1));
    // --ddp: the bench-local model is a struct of tensors; a Module holding the same tensors gives
    // DistributedDataParallel its parameters (their hooks and .grad are the model's own).
    std::shared_ptr<nn::Module> holder;
    std::unique_ptr<dist::DistributedDataParallel> data_parallel;
    if (ddp) {
        dist::init_process_group("gloo");
        holder = std::make_shared<nn::Module>("GptParameters");
        std::vector<Tensor> params = gpt.parameters();
        for (size_t i = 0; i < params.size(); ++i) holder->register_parameter("p" + std::to_string(i), params[i]);
        data_parallel = std::make_unique<dist::DistributedDataParallel>(holder);
    }

    auto step = [&] {
        Tensor loss;
        if (amp_dtype) {
            amp::AutocastGuard autocast(kCPU, *amp_dtype);
            loss = gpt_loss(gpt, idx, targets);
        } else {
            loss = gpt_loss(gpt, idx, targets);
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
