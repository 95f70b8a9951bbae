// dist/ddp.hpp: DistributedDataParallel, data parallelism without sharding (ZeRO stage 0), as
// PyTorch's torch.nn.parallel.DistributedDataParallel.
//
//   dist::init_process_group("gloo");
//   auto net = std::make_shared<MLP>();
//   dist::DistributedDataParallel ddp(net, {.bucket_cap_mb = 25});   // broadcasts rank 0's weights
//   Tensor loss = loss_fn(net->forward(x_local), y_local);           // each rank: its own shard
//   loss.backward();            // gradients averaged across ranks, bucket by bucket, during backward
//   opt.step();                 // every rank takes the same step
//
//   { auto guard = ddp.no_sync(); micro_loss.backward(); }           // accumulate locally, no traffic
//
// The module is used as is (call its own forward); DDP only adds post-accumulate-grad hooks to its
// parameters and an end-of-backward callback. The reducer (dist/reducer.hpp) does the bucketing.
#pragma once
#include "dist/process_group.hpp"
#include "dist/reducer.hpp"
#include "nn/module.hpp"

#include <memory>
#include <string>
#include <vector>

namespace ampgrad::dist {

struct DDPOptions {
    double bucket_cap_mb = 25.0;           // a bucket closes once its gradients reach this size
    bool find_unused_parameters = false;   // mark parameters without a gradient ready at the end of backward
    bool broadcast_buffers = true;         // also broadcast buffers from rank 0 at construction
    ProcessGroup* process_group = nullptr; // the default group when null
};

// Rank 0's parameters (and buffers) copied to every rank, in place (PyTorch's _sync_module_states).
// DDP and the ZeRO engine call it at construction.
void broadcast_module_state(nn::Module& module, ProcessGroup& group, bool buffers);

class DistributedDataParallel {
public:
    // Broadcasts rank 0's parameters (and buffers) to every rank, then hooks every parameter that
    // requires grad. Every rank must construct it with the same module structure.
    explicit DistributedDataParallel(std::shared_ptr<nn::Module> module, DDPOptions options = {});
    DistributedDataParallel(const DistributedDataParallel&) = delete;
    DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

    nn::Module& module() const { return *module_; }
    const std::shared_ptr<nn::Module>& module_ptr() const { return module_; }
    ProcessGroup& process_group() const { return *group_; }

    // While a guard lives, backward only accumulates into .grad locally (no all-reduce); the next
    // backward outside the guard reduces the accumulated gradients (PyTorch's DDP.no_sync()).
    class NoSyncGuard {
    public:
        explicit NoSyncGuard(Reducer& reducer) : reducer_(&reducer), before_(reducer.sync()) { reducer.set_sync(false); }
        ~NoSyncGuard() {
            if (reducer_) reducer_->set_sync(before_);
        }
        NoSyncGuard(NoSyncGuard&& o) noexcept : reducer_(o.reducer_), before_(o.before_) { o.reducer_ = nullptr; }
        NoSyncGuard(const NoSyncGuard&) = delete;
        NoSyncGuard& operator=(const NoSyncGuard&) = delete;
        NoSyncGuard& operator=(NoSyncGuard&&) = delete;

    private:
        Reducer* reducer_;
        bool before_;
    };
    [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*reducer_); }

    // The current bucket assignment (parameter names, bucket 0 reduced first), identical on every
    // rank; rebuilt from rank 0's gradient-ready order after the first synchronized backward.
    std::vector<std::vector<std::string>> bucket_names() const { return reducer_->bucket_names(); }
    bool buckets_rebuilt() const { return reducer_->buckets_rebuilt(); }
    // The learned buckets (dist/reducer.hpp), for a checkpoint, and back on resume.
    std::optional<LearnedBuckets> learned_buckets() const { return reducer_->learned(); }
    void restore_learned_buckets(const LearnedBuckets& learned) { reducer_->restore_learned(learned); }
    // How many buckets the last backward launched from hooks, before its end (overlap with backward).
    int64_t buckets_launched_early() const { return reducer_->buckets_launched_early(); }

private:
    std::shared_ptr<nn::Module> module_;
    ProcessGroup* group_;
    std::unique_ptr<Reducer> reducer_;
};

}  // namespace ampgrad::dist
