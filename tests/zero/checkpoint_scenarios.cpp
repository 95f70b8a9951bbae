// tests/zero/checkpoint_scenarios.cpp: ZeRO checkpoint scenarios run by dist_worker (one rank each;
// tests/zero/checkpoint_test.cpp starts them). Every rank trains a tiny MLP with dropout (so each
// rank's RNG matters) under the ZeRO engine, on its slice of a 12-row global batch that depends
// only on the batch index (the data position), with a StepLR scheduler.
//   zckpt_run     environment: ZCKPT_STAGE (0|1|2|3), ZCKPT_DTYPE (f64|f16), ZCKPT_STEPS, ZCKPT_LOAD (a
//                 checkpoint to load first), ZCKPT_SAVE (a root to save into at the end),
//                 ZCKPT_DROPOUT (0.25; 0 where runs at different world sizes are compared). With f16
//                 the loss scaler has hysteresis 2 and window 2, and an inf is placed in the last
//                 rank's partition at batches 1 and 3, so hysteresis and growth state matter.
//                 Prints "FINGERPRINT h" (FNV-1a of the whole model state, gathered, so that it is
//                 the same at any world size), "RNG seed offset" (this rank's), "SCALE s",
//                 "COUNTERS g m k", "PARAMS v..." (f64 only).
//   zckpt_errors  saves, then loads corrupted copies (a missing, truncated or corrupt rank file, a
//                 missing manifest, a truncated manifest, a manifest naming a missing rank file, a
//                 renamed parameter) and a model of another shape: each must be a CheckpointError
//                 naming the file and the fact, on every rank.
//   zckpt_kill    the last rank SIGKILLs itself in the middle of a backward (in a gradient hook);
//                 the others must raise a DistError within the group's timeout (dist_worker prints
//                 "ERROR ..." and the elapsed time).
#include "autograd/ops/ops.hpp"
#include "core/philox.hpp"
#include "nn/dropout.hpp"
#include "nn/linear.hpp"
#include "optim/adamw.hpp"
#include "optim/lr_scheduler.hpp"
#include "tests/zero/expect.hpp"
#include "zero/checkpoint.hpp"
#include "zero/engine.hpp"

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <memory>
#include <string>

using namespace ampgrad;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kGlobalBatch = 12;   // divisible by 1, 2, 3 and 4 ranks

std::string env(const char* key, const char* fallback = "") {
    const char* v = std::getenv(key);
    return v ? v : fallback;
}

struct Mlp : nn::Module {
    std::shared_ptr<nn::Linear> in, head;
    std::shared_ptr<nn::Dropout> drop;
    Mlp(DType dt, int64_t width) : Module("Mlp") {
        TensorOptions o = TensorOptions().dtype(dt);
        in = register_module("in", std::make_shared<nn::Linear>(4, width, true, o));
        drop = register_module("drop", std::make_shared<nn::Dropout>(std::atof(env("ZCKPT_DROPOUT", "0.25").c_str())));
        head = register_module("head", std::make_shared<nn::Linear>(width, 3, true, o));
    }
    Tensor forward(const Tensor& x) const { return head->forward(drop->forward(tanh(in->forward(x)))); }   // (N,4) -> (N,3)
};

struct Run {
    std::shared_ptr<Mlp> net;
    std::unique_ptr<zero::ZeroEngine> engine;
    DType dt;
};

Run make_run(int stage, DType dt, int64_t width = 8) {
    zero::ZeroConfig c;
    c.stage = stage;
    c.reduce_bucket_size = 5;
    c.gradient_clipping = 0.5;
    if (dt == kFloat16) {
        c.fp16 = true;
        c.initial_scale_power = 8;
        c.hysteresis = 2;
        c.loss_scale_window = 2;
    }
    Run r{nullptr, nullptr, dt};
    set_rng_state({1000, 0});
    r.net = std::make_shared<Mlp>(dt, width);
    r.engine = std::make_unique<zero::ZeroEngine>(
        r.net, c,
        [](std::vector<Tensor> p) { return std::make_unique<optim::AdamW>(p, optim::AdamWOptions(0.05).weight_decay(0.1)); },
        nullptr, [](optim::Optimizer& o) {
            return std::make_unique<optim::StepLR>(o, optim::StepLROptions{.step_size = 2, .gamma = 0.5});
        });
    set_rng_state({100 + static_cast<uint64_t>(dist::rank()), 0});   // each rank's own dropout stream
    return r;
}

void train_batch(Run& r, int64_t index) {
    const int R = dist::rank(), W = dist::world_size();
    const GeneratorState mine = get_rng_state();
    set_rng_state({5000 + static_cast<uint64_t>(index), 0});   // the data depends on the batch index only
    Tensor x = randn({kGlobalBatch, 4}, kFloat64), y = randn({kGlobalBatch, 3}, kFloat64);
    set_rng_state(mine);
    const int64_t local = kGlobalBatch / W;
    Tensor xr = x.narrow(0, R * local, local).to(r.dt), yr = y.narrow(0, R * local, local).to(r.dt);
    Tensor d = r.net->forward(xr) - yr;
    r.engine->backward((d * d).mean());
    if (r.dt == kFloat16 && (index == 1 || index == 3) && R == W - 1) r.engine->grad_partition().narrow(0, 0, 1).fill_(INFINITY);
    r.engine->step();
}

void fnv(uint64_t& h, const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
}

void fnv_tensor(uint64_t& h, const Tensor& t) {
    Tensor c = t.contiguous();
    fnv(h, c.raw_data(), static_cast<size_t>(c.numel()) * c.element_size());
}

// A flat partition-sized tensor gathered from every rank, without the padding.
Tensor gather_real(zero::ZeroEngine& e, const Tensor& part) {
    const int W = dist::world_size();
    Tensor all = zeros({part.numel() * W}, TensorOptions().dtype(part.dtype()));
    Tensor mine = part.detach().contiguous();
    dist::all_gather(all, mine);
    return all.narrow(0, 0, e.layout().numel());
}

void print_state(Run& r) {
    zero::ZeroEngine& e = *r.engine;
    zero::GatheredParameters whole(e.stage3());   // stage 3: the whole parameters, for every stage's same fingerprint
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const Tensor& p : e.params()) fnv_tensor(h, p.detach());
    Tensor master = e.master_partition().detach();
    fnv_tensor(h, gather_real(e, master));
    const optim::ParamState* st = e.optimizer().find_state(e.master_partition());
    EXPECT(e.global_steps() == 0 || (st && st->count("exp_avg") && st->count("exp_avg_sq") && st->count("step")),
           "no Adam state on the master partition after %lld steps", static_cast<long long>(e.global_steps()));
    if (st)
        for (const auto& [key, v] : *st) fnv_tensor(h, v.dim() == 0 ? v : gather_real(e, v));
    std::printf("FINGERPRINT %016llx\n", static_cast<unsigned long long>(h));
    const GeneratorState rng = get_rng_state();
    std::printf("RNG %llu %llu\n", static_cast<unsigned long long>(rng.seed), static_cast<unsigned long long>(rng.offset));
    std::printf("SCALE %.17g\nLR %.17g\n", e.loss_scale(), e.optimizer().param_groups()[0].lr());
    std::printf("COUNTERS %lld %lld %lld\n", static_cast<long long>(e.global_steps()),
                static_cast<long long>(e.micro_steps()), static_cast<long long>(e.skipped_steps()));
    if (r.dt == kFloat64) {
        std::string line = "PARAMS";
        for (const Tensor& p : e.params())
            for (double v : p.detach().reshape({-1}).to_vector<double>()) line += fmt::format(" {:.17g}", v);
        std::printf("%s\n", line.c_str());
    }
}

int run_train() {
    Run r = make_run(std::atoi(env("ZCKPT_STAGE", "2").c_str()), env("ZCKPT_DTYPE", "f64") == "f16" ? kFloat16 : kFloat64);
    int64_t next = 0;
    if (!env("ZCKPT_LOAD").empty()) {
        zero::LoadResult res = zero::load_checkpoint(*r.engine, env("ZCKPT_LOAD"));
        next = res.shared_state.at("next_batch").get<int64_t>();
        if (res.same_world_size) EXPECT(res.client_state.at("next_batch").get<int64_t>() == next, "client state");
        std::printf("LOADED world %d stage %d\n", res.saved_world_size, res.saved_stage);
        print_state(r);   // right after the load: must match the state that was saved
    }
    const int64_t steps = std::atoll(env("ZCKPT_STEPS", "0").c_str());
    for (int64_t s = 0; s < steps; ++s) train_batch(r, next++);
    if (!env("ZCKPT_SAVE").empty()) {
        print_state(r);   // what is saved
        zero::SaveOptions o;
        o.client_state = {{"next_batch", next}};
        o.shared_state = {{"next_batch", next}};
        zero::save_checkpoint(*r.engine, env("ZCKPT_SAVE"), fmt::format("step-{:08d}", r.engine->global_steps()), o);
    }
    std::printf("FINAL\n");
    print_state(r);
    return ampgrad::testing::scenario_failures() ? 1 : 0;
}

// Loads `path` and expects a CheckpointError whose text holds `file_part` and `fact`.
void expect_error(zero::ZeroEngine& e, const std::string& path, const std::string& file_part, const std::string& fact) {
    try {
        zero::load_checkpoint(e, path);
        EXPECT(false, "loading %s did not throw", path.c_str());
    } catch (const zero::CheckpointError& err) {
        const std::string what = err.what();
        EXPECT(what.find(file_part) != std::string::npos && what.find(fact) != std::string::npos,
               "loading %s: expected \"%s\" and \"%s\" in: %s", path.c_str(), file_part.c_str(), fact.c_str(), what.c_str());
        std::printf("ERRTEXT %s\n", what.c_str());
    }
}

void edit_file(const fs::path& p, const std::string& from, const std::string& to) {
    std::ifstream in(p);
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    s.replace(s.find(from), from.size(), to);
    std::ofstream(p, std::ios::trunc) << s;
}

int run_errors() {
    const int R = dist::rank();
    const fs::path root = env("ZCKPT_DIR");
    Run r = make_run(1, kFloat64);
    train_batch(r, 0);
    const fs::path good = zero::save_checkpoint(*r.engine, (root / "good").string(), "step-00000001");
    const std::string f1 = "rank-00001-of-00002.safetensors";
    auto copy = [&](const std::string& name) {
        fs::copy(root / "good", root / name, fs::copy_options::recursive);
        return root / name / "step-00000001";
    };
    if (R == 0) {
        fs::remove(copy("missing") / f1);
        fs::resize_file(copy("truncated") / f1, fs::file_size(good / f1) - 7);
        {
            fs::path p = copy("corrupt") / f1;
            std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(static_cast<std::streamoff>(fs::file_size(p) - 3));
            f.put('\x7f');
        }
        fs::remove(copy("partial") / "manifest.json");
        fs::resize_file(copy("badjson") / "manifest.json", 40);
        edit_file(copy("norank") / "manifest.json", f1, "rank-00009-of-00002.safetensors");
        edit_file(copy("renamed") / "manifest.json", "\"head.weight\"", "\"head.wieght\"");
    }
    dist::barrier();
    zero::ZeroEngine& e = *r.engine;
    expect_error(e, (root / "missing").string(), f1, "missing");
    expect_error(e, (root / "truncated").string(), f1, "truncated");
    expect_error(e, (root / "corrupt").string(), f1, "checksum mismatch");
    expect_error(e, (root / "partial").string(), "partial/latest", "holds no manifest.json");
    expect_error(e, (root / "partial" / "step-00000001").string(), "partial/step-00000001", "no checkpoint there");
    expect_error(e, (root / "badjson").string(), "manifest.json", "truncated or corrupt JSON");
    expect_error(e, (root / "norank").string(), "rank-00009-of-00002.safetensors", "missing");
    expect_error(e, (root / "renamed").string(), "manifest.json", "'head.wieght' in the checkpoint but 'head.weight'");
    Run wide = make_run(2, kFloat64, 6);
    expect_error(*wide.engine, (root / "good").string(), "manifest.json",
                 "parameter 'in.weight' has shape [8, 4] in the checkpoint but [6, 4] in the model");
    // The good one still loads, after all of that.
    zero::load_checkpoint(e, (root / "good").string());
    std::printf("ERRORS CHECKED\n");
    return ampgrad::testing::scenario_failures() ? 1 : 0;
}

int run_kill() {
    const int R = dist::rank(), W = dist::world_size();
    Run r = make_run(2, kFloat64);
    // The first parameter's gradient arrives last in backward: by then the others are reducing buckets.
    autograd::ScopedHook hook;
    if (R == W - 1)
        hook = autograd::ScopedHook(r.net->in->weight.register_post_accumulate_grad_hook([](Tensor&) {
            static int calls = 0;
            if (++calls == 3) std::raise(SIGKILL);
        }));
    for (int64_t i = 0; i < 100; ++i) train_batch(r, i);
    std::printf("FAIL: no error after the last rank died\n");
    return 1;
}

}  // namespace

int run_zero_checkpoint(const std::string& scenario) {
    if (scenario == "zckpt_run") return run_train();
    if (scenario == "zckpt_errors") return run_errors();
    if (scenario == "zckpt_kill") return run_kill();
    std::printf("unknown scenario %s\n", scenario.c_str());
    return 2;
}
