// zero_memory.cpp: per-rank model-state bytes of the ZeRO engine (zero/engine.hpp) for stages 1,
// 2 and 3, against the ZeRO paper's formulas, and the training step's time against the
// data-parallel baseline (dist::DistributedDataParallel + amp::MasterWeightsOptimizer, "stage 0").
// One rank per process, under ampgrad-run; bench/zero_memory.py runs the whole table:
//
//   build/tools/ampgrad-run --nproc-per-node 2 build/bench/bench_zero_memory --stage 3
//
// The model: `layers` Linear(width, width) with tanh between, float16 (mixed precision, Adam:
// the paper's 2Ψ + 2Ψ + KΨ with K = 12). Defaults: 4 x 1600 -> Ψ = 10,246,400. Each rank trains
// on its own `batch` rows; after `warmup` steps (so Adam's moments exist) the next `steps` are
// timed (median of the steps as rank 0 sees them, a barrier before each), in wall time and in this
// process's CPU time (all its threads, Gloo's included).
//
// Printed: one line "RESULT {json}" per rank: the engine's byte counts (ZeroEngine::
// model_state_bytes; for stage 0, counted from the tensors the same way), the paper's figure, and
// the figure for this engine's byte widths. By default the gradient partition is kept in f32 (4
// bytes, not 2), so "ours" = paper + 2Ψ/N (stages 2, 3) or + 4Ψ/N (stage 1, which also keeps the
// whole 2-byte gradient); with --grad-accum fp16 (DeepSpeed's data_types.grad_accum_dtype) it is
// 2 bytes and "ours" = paper. The reduce bucket (reduce_bucket_size elements, 2 bytes each) is in
// the counts, not in either formula.
#include <ampgrad/ampgrad.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/format.h>

#include "amp/master_weights.hpp"
#include "dist/ddp.hpp"
#include "zero/engine.hpp"
#include "zero/stage3.hpp"
#include "bench/bench_util.hpp"

using namespace ampgrad;
namespace dist = ampgrad::dist;

namespace {

struct Stack : nn::Module {
    std::vector<std::shared_ptr<nn::Linear>> layers;
    Stack(int64_t width, int64_t n) : Module("Stack") {
        for (int64_t i = 0; i < n; ++i)
            layers.push_back(register_module(std::to_string(i), std::make_shared<nn::Linear>(width, width)));
    }
    Tensor forward(const Tensor& x) const {   // (B,width) -> (B,width)
        Tensor h = x;
        for (size_t i = 0; i < layers.size(); ++i) h = i + 1 < layers.size() ? tanh(layers[i]->forward(h)) : layers[i]->forward(h);
        return h;
    }
};

int64_t bytes_of(const Tensor& t) { return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0; }

std::unique_ptr<optim::Optimizer> adamw(std::vector<Tensor> params) {
    return std::make_unique<optim::AdamW>(params, optim::AdamWOptions(1e-4));
}

}  // namespace

int main(int argc, char** argv) {
    int stage = 3;
    int64_t width = 1600, layers = 4, batch = 8, steps = 5, warmup = 2, bucket = 200000;
    std::string grad_accum = "fp32";
    CLI::App app{"ZeRO model-state bytes per rank and step time (one rank per process, under ampgrad-run)"};
    app.add_option("--stage", stage, "1, 2, 3; 0: DistributedDataParallel + master weights");
    app.add_option("--width", width, "Linear(width, width) layers");
    app.add_option("--layers", layers, "number of layers");
    app.add_option("--batch", batch, "rows per rank per step");
    app.add_option("--steps", steps, "timed steps");
    app.add_option("--warmup", warmup, "untimed steps first");
    app.add_option("--bucket", bucket, "reduce_bucket_size (elements)");
    app.add_option("--grad-accum", grad_accum, "data_types.grad_accum_dtype: fp32 or fp16");
    CLI11_PARSE(app, argc, argv);

    dist::init_process_group("gloo");
    const int R = dist::rank(), W = dist::world_size();
    set_rng_state({1, 0});
    auto net = std::make_shared<Stack>(width, layers);
    net->to(kFloat16);
    int64_t psi = 0;
    for (const Tensor& p : net->parameters()) psi += p.numel();
    set_rng_state({100 + static_cast<uint64_t>(R), 0});
    Tensor x = randn({batch, width}).to(kFloat16), y = randn({batch, width}).to(kFloat16);
    auto loss_of = [&] {
        Tensor d = net->forward(x) - y;
        return (d * d).mean();
    };

    std::unique_ptr<zero::ZeroEngine> engine;
    std::unique_ptr<dist::DistributedDataParallel> ddp;
    std::unique_ptr<amp::MasterWeightsOptimizer> mwo;
    if (stage == 0) {
        ddp = std::make_unique<dist::DistributedDataParallel>(net);
        mwo = std::make_unique<amp::MasterWeightsOptimizer>(
            net->parameters(), [](std::vector<optim::ParamGroup> g) { return std::make_unique<optim::AdamW>(g, optim::AdamWOptions(1e-4)); },
            std::make_unique<amp::StaticLossScaler>(256.0), amp::MasterWeightsOptions{.clip_grad = 1.0});
    } else {
        zero::ZeroConfig c = zero::parse_config(fmt::format(R"({{ "gradient_clipping": 1.0,
            "zero_optimization": {{ "stage": {}, "reduce_bucket_size": {} }}, "data_types": {{ "grad_accum_dtype": "{}" }},
            "fp16": {{ "enabled": true, "initial_scale_power": 8 }} }})", stage, bucket, grad_accum));
        engine = std::make_unique<zero::ZeroEngine>(net, c, adamw);
    }
    zero::ModelStateBytes b;
    auto one_step = [&] {
        if (engine) {
            engine->backward(loss_of());
            engine->step();
            return;
        }
        mwo->backward(loss_of());
        // Counted here, while the gradients exist (the engine's counts include its gradient buffers).
        b = {};
        for (const Tensor& p : net->parameters()) b.params += bytes_of(p), b.grads += bytes_of(p.grad());
        for (const Tensor& m : mwo->master_params()) {
            b.optimizer += bytes_of(m);
            if (const optim::ParamState* st = mwo->inner().find_state(m))
                for (const auto& [key, t] : *st) b.optimizer += bytes_of(t);
        }
        mwo->step();
        mwo->zero_grad();
    };
    for (int64_t i = 0; i < warmup; ++i) one_step();
    std::vector<double> ms, cpu_ms;
    for (int64_t i = 0; i < steps; ++i) {
        dist::barrier();
        double t0 = bench::now_seconds(), c0 = bench::cpu_seconds();
        one_step();
        ms.push_back(1e3 * (bench::now_seconds() - t0));
        cpu_ms.push_back(1e3 * (bench::cpu_seconds() - c0));
    }
    if (engine) b = engine->model_state_bytes();
    const double paper = zero::zero_paper_bytes(stage, psi, W);
    const double extra = stage == 0 || grad_accum == "fp16" ? 0.0 : (stage == 1 ? 4.0 : 2.0) * static_cast<double>(psi) / W;
    const double ours = paper + extra;
    std::printf("RESULT {\"rank\": %d, \"world\": %d, \"stage\": %d, \"psi\": %lld, \"params\": %lld, \"grads\": %lld, "
                "\"optimizer\": %lld, \"total\": %lld, \"paper\": %.0f, \"ours_formula\": %.0f, \"vs_paper\": %.4f, "
                "\"vs_ours\": %.4f, \"step_ms\": %.1f, \"cpu_ms\": %.1f, \"bucket\": %lld, \"grad_accum\": \"%s\"}\n",
                R, W, stage, static_cast<long long>(psi), static_cast<long long>(b.params), static_cast<long long>(b.grads),
                static_cast<long long>(b.optimizer), static_cast<long long>(b.total()), paper, ours,
                static_cast<double>(b.total()) / paper, static_cast<double>(b.total()) / ours, bench::median(ms), bench::median(cpu_ms),
                static_cast<long long>(stage == 0 ? 0 : bucket), grad_accum.c_str());
    std::fflush(stdout);
    dist::destroy_process_group();
    return 0;
}
