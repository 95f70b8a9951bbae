// tests/dist/ddp_scenarios.cpp: DistributedDataParallel scenarios run by dist_worker (one rank
// each; tests/dist/ddp_test.cpp starts them). Every rank trains a small f64 MLP with DDP on its
// shard of each global batch, and also, alone, a reference copy on the whole (concatenated) batch;
// after every step the two must hold the same parameters. Scenarios:
//   ddp                    plain, 25 MB buckets (one bucket)
//   ddp_tiny               a bucket per parameter or two (bucket_cap_mb = 1e-4)
//   ddp_accum              2 micro-batches per step, the first under no_sync()
//   ddp_unused             a parameter never used, find_unused_parameters = true
//   ddp_unused_error       the same without the option: UnusedParametersError naming it
//   ddp_unused_rank        `unused` is used by rank 0's samples only (find_unused_parameters): the
//                          other ranks have no local gradient for it and must still get the average;
//                          the reference sums the per-shard losses of one process, divided by W
//   ddp_ckpt, ddp_ckpt_reentrant   the middle block checkpointed; its Linear is used inside the
//                          block and again after it (two backward phases with reentrant)
//   ddp_graph_change       reentrant checkpointing switched on after the first iteration: `mid` then
//                          gets a second gradient after its bucket was reduced, a clear DistError
// Prints "BUCKETS <layout>" and "EARLY <n>" (buckets launched from hooks in the last backward).
#include "autograd/checkpoint.hpp"
#include "autograd/ops/ops.hpp"
#include "core/philox.hpp"
#include "dist/ddp.hpp"
#include "nn/linear.hpp"
#include "optim/sgd.hpp"

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

using namespace ampgrad;
namespace dist = ampgrad::dist;

namespace {

constexpr int64_t kLocalBatch = 4;
const TensorOptions kF64 = TensorOptions().dtype(kFloat64);

struct Net : nn::Module {
    std::shared_ptr<nn::Linear> in, mid, head, unused;
    int checkpoint_mode = 0;   // 0 none, 1 non-reentrant, 2 reentrant
    bool use_extra = false;    // apply `unused` too (ddp_unused_rank, on rank 0's samples)

    explicit Net(bool with_unused) : Module("Net") {
        in = register_module("in", std::make_shared<nn::Linear>(4, 8, true, kF64));
        mid = register_module("mid", std::make_shared<nn::Linear>(8, 8, true, kF64));
        if (with_unused) unused = register_module("unused", std::make_shared<nn::Linear>(8, 8, true, kF64));
        head = register_module("head", std::make_shared<nn::Linear>(8, 3, true, kF64));
        register_buffer("stamp", zeros({2}, kF64));
    }
    // (N,4) -> (N,3); `mid` is applied twice, the first time (optionally) inside a checkpoint.
    Tensor forward(const Tensor& x) const {
        Tensor h = tanh(in->forward(x));   // (N,8)
        auto block = [this](const tensor_list& t) { return tensor_list{tanh(mid->forward(t[0]))}; };
        if (checkpoint_mode == 0) h = block({h})[0];
        else h = checkpoint(block, {h}, CheckpointOptions{.use_reentrant = checkpoint_mode == 2})[0];
        h = tanh(mid->forward(h));
        if (use_extra) h = h + tanh(unused->forward(h));
        return head->forward(h);
    }
};

Tensor mse(const Tensor& out, const Tensor& target) {
    Tensor d = out - target;
    return (d * d).mean();
}

int g_failures = 0;

void compare(const Net& ddp_net, const Net& ref, const std::string& when) {
    auto got = ddp_net.named_parameters(), want = ref.named_parameters();
    for (const auto& [name, p] : want) {
        std::vector<double> a = got.at(name).to_vector<double>(), b = p.to_vector<double>();
        for (size_t i = 0; i < a.size(); ++i) {
            if (std::abs(a[i] - b[i]) > 1e-11 * (1 + std::abs(b[i]))) {
                std::printf("FAIL %s: %s[%zu] is %.17g, single-process training has %.17g\n", when.c_str(),
                            name.c_str(), i, a[i], b[i]);
                ++g_failures;
                return;
            }
        }
    }
}

std::string layout(const dist::DistributedDataParallel& ddp) {
    std::string s;
    for (const auto& bucket : ddp.bucket_names()) {
        s += "[";
        for (const auto& name : bucket) s += name + " ";
        s += "]";
    }
    return s;
}

}  // namespace

int run_ddp(const std::string& scenario) {
    const int R = dist::rank(), W = dist::world_size();
    const bool with_unused = scenario.rfind("ddp_unused", 0) == 0;
    const int micro = scenario == "ddp_accum" ? 2 : 1;
    dist::DDPOptions options;
    if (scenario != "ddp" && scenario != "ddp_accum") options.bucket_cap_mb = 1e-4;
    options.find_unused_parameters = scenario == "ddp_unused" || scenario == "ddp_unused_rank";
    const bool extra_on_rank0 = scenario == "ddp_unused_rank";

    set_rng_state({1000, 0});
    auto ref = std::make_shared<Net>(with_unused);
    set_rng_state({1000 + 7 * static_cast<uint64_t>(R), 0});   // other ranks start elsewhere...
    auto net = std::make_shared<Net>(with_unused);
    net->named_buffers().at("stamp").fill_(R + 1.0);
    dist::DistributedDataParallel ddp(net, options);            // ...until DDP broadcasts rank 0's state
    compare(*net, *ref, "after construction");
    if (net->named_buffers().at("stamp").to_vector<double>()[0] != 1.0) {
        std::printf("FAIL: buffer not broadcast from rank 0\n");
        ++g_failures;
    }
    int mode = scenario == "ddp_ckpt" ? 1 : scenario == "ddp_ckpt_reentrant" ? 2 : 0;
    net->checkpoint_mode = mode;
    optim::SGD opt(net->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    optim::SGD ref_opt(ref->parameters(), optim::SGDOptions(0.1).momentum(0.9));

    for (int step = 0; step < 4; ++step) {
        set_rng_state({static_cast<uint64_t>(50 + step), 0});
        if (scenario == "ddp_graph_change" && step == 1) net->checkpoint_mode = 2;
        Tensor x = randn({micro * W * kLocalBatch, 4}, kF64), y = randn({micro * W * kLocalBatch, 3}, kF64);
        for (int k = 0; k < micro; ++k) {
            // Micro-batch k of the global batch: rows [k*W*b, (k+1)*W*b); this rank's shard of it.
            Tensor xk = x.narrow(0, k * W * kLocalBatch, W * kLocalBatch), yk = y.narrow(0, k * W * kLocalBatch, W * kLocalBatch);
            if (extra_on_rank0) {
                // One process, W shards, rank 0's shard through `unused` too: the mean of the shard losses.
                Tensor total = zeros({}, kF64);
                for (int r = 0; r < W; ++r) {
                    ref->use_extra = r == 0;
                    total = total + mse(ref->forward(xk.narrow(0, r * kLocalBatch, kLocalBatch)),
                                        yk.narrow(0, r * kLocalBatch, kLocalBatch));
                }
                (total * (1.0 / W)).backward();
                net->use_extra = R == 0;
            } else {
                (mse(ref->forward(xk), yk) * (1.0 / micro)).backward();
            }
            Tensor xr = xk.narrow(0, R * kLocalBatch, kLocalBatch), yr = yk.narrow(0, R * kLocalBatch, kLocalBatch);
            Tensor loss = mse(net->forward(xr), yr) * (1.0 / micro);
            if (k + 1 < micro) {
                auto guard = ddp.no_sync();
                loss.backward();
            } else {
                loss.backward();
            }
        }
        if (with_unused && !extra_on_rank0 && net->unused->named_parameters().at("weight").grad().defined()) {
            std::printf("FAIL: the unused parameter got a gradient\n");
            ++g_failures;
        }
        opt.step();
        ref_opt.step();
        opt.zero_grad();
        ref_opt.zero_grad();
        compare(*net, *ref, "step " + std::to_string(step));
    }
    std::printf("BUCKETS %s\nEARLY %lld\nREBUILT %d\n", layout(ddp).c_str(),
                static_cast<long long>(ddp.buckets_launched_early()), ddp.buckets_rebuilt() ? 1 : 0);
    return g_failures ? 1 : 0;
}
