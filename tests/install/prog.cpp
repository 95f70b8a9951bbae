// prog.cpp: a user program that includes nothing of ampgrad but the umbrella header and uses every
// public area through it: tensors, autograd (backward, grad, checkpoint), AMP (autocast, GradScaler),
// nn, optim (+ an LR schedule), io (safetensors), dist (a ProcessGroup), the ZeRO engine and its
// checkpoints, the GPT model and its data. It is built twice: outside the tree against an installed
// ampgrad, exactly as API.md promises (c++ -std=c++20 prog.cpp $(pkg-config --cflags --libs ampgrad);
// tests/install/install_test.sh), and in the tree as the `umbrella` test (tests/install/meson.build).
// A header the umbrella does not reach makes it fail to compile (issue 23).
#include <ampgrad/ampgrad.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

using namespace ampgrad;

namespace {

int failures = 0;

void expect(bool ok, const char* what) {
    if (!ok) {
        std::printf("installed ampgrad: FAILED: %s\n", what);
        ++failures;
    }
}

// dist: a one-rank process group written against the public interface (every collective of one
// rank is the identity), so the ZeRO engine runs in this process without a rendezvous.
class DoneWork : public dist::Work {
public:
    bool is_completed() override { return true; }
    void wait(std::optional<dist::Millis>) override {}
};

class OneRankGroup : public dist::ProcessGroup {
public:
    int rank() const override { return 0; }
    int world_size() const override { return 1; }
    const std::string& name() const override { return name_; }
    std::string backend() const override { return "one-rank"; }
    dist::Millis timeout() const override { return dist::Millis(1000); }
    dist::WorkPtr all_reduce(Tensor&, dist::ReduceOp, bool) override { return done(); }
    dist::WorkPtr reduce_scatter(Tensor& out, const Tensor& in, dist::ReduceOp, bool) override {
        out.copy_(in);
        return done();
    }
    dist::WorkPtr all_gather(Tensor& out, const Tensor& in, bool) override {
        out.copy_(in);
        return done();
    }
    dist::WorkPtr broadcast(Tensor&, int, bool) override { return done(); }
    dist::WorkPtr barrier(bool) override { return done(); }

private:
    static dist::WorkPtr done() { return std::make_shared<DoneWork>(); }
    std::string name_ = "one-rank";
};

// Tensors and autograd: y = 3*x*x + x, so dy/dx = 6x + 1; the same through autograd::grad and a checkpoint.
void tensors_and_autograd() {
    Tensor x = tensor<float>({1.0f, 2.0f, 3.0f}).requires_grad_(true);   // (3)
    Tensor y = x * x * 3.0 + x;                                            // (3)
    y.backward(ones_like(y));
    std::vector<float> dx = x.grad().to_vector<float>();
    for (size_t i = 0; i < dx.size(); ++i) expect(dx[i] == 6.0f * static_cast<float>(i + 1) + 1.0f, "dy/dx = 6x + 1");
    tensor_list g = autograd::grad({sum(x * x)}, {x});
    expect(g[0].to_vector<float>()[2] == 6.0f, "autograd::grad of sum(x^2) at 3 is 6");
    tensor_list h = checkpoint([](const tensor_list& in) { return tensor_list{in[0] * in[0]}; }, {x});
    expect(h[0].to_vector<float>()[1] == 4.0f, "checkpoint(x^2) at 2 is 4");
}

// nn, optim, AMP and io: one autocast step of a small MLP, then its weights through a safetensors file.
void training_pieces(const std::filesystem::path& dir) {
    auto mlp = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::Linear>(8, 2));
    optim::AdamW opt(mlp->parameters(), optim::AdamWOptions(1e-2));
    optim::WarmupCosineLR sched(opt, {.warmup_iters = 1, .lr_decay_iters = 10, .min_lr = 1e-3});
    amp::GradScaler scaler;
    Tensor x = randn({5, 4});                                              // (B,4)
    Tensor loss;
    {
        amp::AutocastGuard autocast(kCPU, kBFloat16);
        loss = F::mse_loss(mlp->forward(x).to(kFloat32), zeros({5, 2}));   // ()
    }
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
    sched.step();
    expect(opt.param_groups()[0].lr() > 0.0, "the schedule sets an lr");
    std::string path = (dir / "mlp.safetensors").string();
    io::save_state_dict(*mlp, path);
    io::SafetensorsFile file = io::load_safetensors(path);
    expect(file.tensors.size() == 4, "the MLP's four tensors are in the file");
}

// models, data, dist and zero: a tiny GPT on Tiny Shakespeare, one ZeRO step, a checkpoint round trip.
void gpt_under_zero(const std::filesystem::path& dir) {
    data::Tokenizer tok = data::Tokenizer::chars_of(data::tiny_shakespeare());
    models::GPTConfig cfg{.vocab_size = tok.vocab_size(), .block_size = 8, .n_layer = 1, .n_head = 2, .n_embd = 16};
    auto gpt = std::make_shared<models::GPT>(cfg);
    std::vector<int32_t> ids = tok.encode("To be, or not to be");
    std::vector<int64_t> wide(ids.begin(), ids.end());
    Tensor idx = tensor<int64_t>(std::vector<int64_t>(wide.begin(), wide.begin() + 8), {1, 8});         // (B,T)
    Tensor targets = tensor<int64_t>(std::vector<int64_t>(wide.begin() + 1, wide.begin() + 9), {1, 8});  // (B,T)
    OneRankGroup group;
    zero::ZeroConfig config;
    config.stage = 2;
    zero::ZeroEngine engine(gpt, config, [](std::vector<Tensor> masters) {
        return std::make_unique<optim::AdamW>(masters, optim::AdamWOptions(1e-3));
    }, &group);
    engine.backward(gpt->forward(idx, targets));
    engine.step();
    expect(engine.global_steps() == 1 && engine.was_step_applied(), "one ZeRO step applied");
    zero::save_checkpoint(engine, (dir / "ckpt").string(), "step-00000001");
    zero::LoadResult loaded = zero::load_checkpoint(engine, (dir / "ckpt").string());
    expect(loaded.saved_stage == 2 && loaded.saved_world_size == 1, "the ZeRO checkpoint loads back");
}

}  // namespace

int main() {
    std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                ("ampgrad-umbrella-" + std::to_string(static_cast<long>(::getpid())));
    std::filesystem::create_directories(dir);
    tensors_and_autograd();
    training_pieces(dir);
    gpt_under_zero(dir);
    std::filesystem::remove_all(dir);
    if (failures > 0) return 1;
    std::printf("installed ampgrad OK: every public area through <ampgrad/ampgrad.h>\n");
    return 0;
}
