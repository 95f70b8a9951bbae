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

struct Args {
    int stage = 3;
    int64_t width = 1600, layers = 4, batch = 8, steps = 5, warmup = 2, bucket = 200000;
    std::string grad_accum = "fp32";
};

// One rank's trainer: the ZeRO engine (stages 1-3), or DDP + master weights (stage 0).
class Training {
public:
    Training(const Args& a, std::shared_ptr<Stack> net) : net_(std::move(net)) {
        if (a.stage == 0) {
            ddp_ = std::make_unique<dist::DistributedDataParallel>(net_);
            auto make_adamw = [](std::vector<optim::ParamGroup> g) {
                return std::make_unique<optim::AdamW>(g, optim::AdamWOptions(1e-4));
            };
            mwo_ = std::make_unique<amp::MasterWeightsOptimizer>(net_->parameters(), make_adamw,
                                                                 std::make_unique<amp::StaticLossScaler>(256.0),
                                                                 amp::MasterWeightsOptions{.clip_grad = 1.0});
            return;
        }
        zero::ZeroConfig c = zero::parse_config(fmt::format(R"({{ "gradient_clipping": 1.0,
            "zero_optimization": {{ "stage": {}, "reduce_bucket_size": {} }}, "data_types": {{ "grad_accum_dtype": "{}" }},
            "fp16": {{ "enabled": true, "initial_scale_power": 8 }} }})", a.stage, a.bucket, a.grad_accum));
        engine_ = std::make_unique<zero::ZeroEngine>(net_, c, adamw);
    }

    void step(const Tensor& loss) {
        if (engine_) {
            engine_->backward(loss);
            engine_->step();
            return;
        }
        mwo_->backward(loss);
        count_stage0_bytes();   // while the gradients exist (the engine's counts include its gradient buffers)
        mwo_->step();
        mwo_->zero_grad();
    }

    zero::ModelStateBytes state_bytes() const { return engine_ ? engine_->model_state_bytes() : stage0_bytes_; }

private:
    void count_stage0_bytes() {
        stage0_bytes_ = {};
        zero::ModelStateBytes& b = stage0_bytes_;
        for (const Tensor& p : net_->parameters()) b.params += bytes_of(p), b.grads += bytes_of(p.grad());
        for (const Tensor& m : mwo_->master_params()) {
            b.optimizer += bytes_of(m);
            if (const optim::ParamState* st = mwo_->inner().find_state(m))
                for (const auto& [key, t] : *st) b.optimizer += bytes_of(t);
        }
    }

    std::shared_ptr<Stack> net_;
    std::unique_ptr<zero::ZeroEngine> engine_;
    std::unique_ptr<dist::DistributedDataParallel> ddp_;
    std::unique_ptr<amp::MasterWeightsOptimizer> mwo_;
    zero::ModelStateBytes stage0_bytes_;
};

void print_result(const Args& a, int64_t psi, const zero::ModelStateBytes& b, double step_ms, double cpu_ms) {
    const int R = dist::rank(), W = dist::world_size();
    const double paper = zero::zero_paper_bytes(a.stage, psi, W);
    const double extra =
        a.stage == 0 || a.grad_accum == "fp16" ? 0.0 : (a.stage == 1 ? 4.0 : 2.0) * static_cast<double>(psi) / W;
    const double ours = paper + extra;
    std::printf("RESULT {\"rank\": %d, \"world\": %d, \"stage\": %d, \"psi\": %lld, \"params\": %lld, \"grads\": %lld, "
                "\"optimizer\": %lld, \"total\": %lld, \"paper\": %.0f, \"ours_formula\": %.0f, \"vs_paper\": %.4f, "
                "\"vs_ours\": %.4f, \"step_ms\": %.1f, \"cpu_ms\": %.1f, \"bucket\": %lld, \"grad_accum\": \"%s\"}\n",
                R, W, a.stage, static_cast<long long>(psi), static_cast<long long>(b.params), static_cast<long long>(b.grads),
                static_cast<long long>(b.optimizer), static_cast<long long>(b.total()), paper, ours,
                static_cast<double>(b.total()) / paper, static_cast<double>(b.total()) / ours, step_ms, cpu_ms,
                static_cast<long long>(a.stage == 0 ? 0 : a.bucket), a.grad_accum.c_str());
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    Args a;
    CLI::App app{"ZeRO model-state bytes per rank and step time (one rank per process, under ampgrad-run)"};
    app.add_option("--stage", a.stage, "1, 2, 3; 0: DistributedDataParallel + master weights");
    app.add_option("--width", a.width, "Linear(width, width) layers");
    app.add_option("--layers", a.layers, "number of layers");
    app.add_option("--batch", a.batch, "rows per rank per step");
    app.add_option("--steps", a.steps, "timed steps");
    app.add_option("--warmup", a.warmup, "untimed steps first");
    app.add_option("--bucket", a.bucket, "reduce_bucket_size (elements)");
    app.add_option("--grad-accum", a.grad_accum, "data_types.grad_accum_dtype: fp32 or fp16");
    CLI11_PARSE(app, argc, argv);

    dist::init_process_group("gloo");
    set_rng_state({1, 0});
    auto net = std::make_shared<Stack>(a.width, a.layers);
    net->to(kFloat16);
    int64_t psi = 0;
    for (const Tensor& p : net->parameters()) psi += p.numel();
    set_rng_state({100 + static_cast<uint64_t>(dist::rank()), 0});
    Tensor x = randn({a.batch, a.width}).to(kFloat16), y = randn({a.batch, a.width}).to(kFloat16);   // (B,width)
    auto loss_of = [&] {
        Tensor d = net->forward(x) - y;
        return (d * d).mean();
    };
    Training training(a, net);
    for (int64_t i = 0; i < a.warmup; ++i) training.step(loss_of());
    std::vector<double> ms, cpu_ms;
    for (int64_t i = 0; i < a.steps; ++i) {
        dist::barrier();
        const double t0 = bench::now_seconds(), c0 = bench::cpu_seconds();
        training.step(loss_of());
        ms.push_back(1e3 * (bench::now_seconds() - t0));
        cpu_ms.push_back(1e3 * (bench::cpu_seconds() - c0));
    }
    print_result(a, psi, training.state_bytes(), bench::median(ms), bench::median(cpu_ms));
    dist::destroy_process_group();
    return 0;
}
