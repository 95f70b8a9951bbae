// dist/reducer.hpp: the gradient reducer behind DistributedDataParallel (dist/ddp.hpp): buckets of
// parameters whose gradients are averaged across ranks with one async all-reduce per bucket.
// Modelled on PyTorch's Reducer (torch/csrc/distributed/c10d/reducer.cpp); docs/distributed.md
// ("Data parallel") walks through it.
//
// Per backward (only while sync is on; no_sync() turns it off):
//   1. Each parameter's post-accumulate-grad hook calls on_grad_ready(i). The first one of a
//      backward queues finalize() on the OUTERMOST graph task (autograd::BackwardEpilogue, shared
//      with the ZeRO engine), so it runs once, after every reentrant (checkpoint) phase.
//   2. A parameter is ready once its hook has fired as many times as in the first iteration
//      (reentrant checkpointing fires it once per phase). A bucket whose parameters are all ready
//      is copied into its flat buffer and all-reduced (kAvg, async). Buckets are launched strictly
//      in bucket order, so every rank issues the same collectives in the same order.
//   3. finalize(): unused parameters (find_unused_parameters) are marked ready, the remaining
//      buckets are launched, every Work is waited for, and the averages are written back to .grad.
// In the first iteration nothing is launched early: the hooks only count and record the order in
// which gradients became ready; finalize() then reduces every bucket, and rebuilds the buckets
// from rank 0's ready order, broadcast so that every rank holds the same assignment.
#pragma once
#include "autograd/backward_epilogue.hpp"
#include "autograd/hooks.hpp"
#include "core/tensor.hpp"
#include "dist/process_group.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ampgrad::dist {

// A parameter that received no gradient in a backward, without find_unused_parameters.
struct UnusedParametersError : DistError { using DistError::DistError; };

// Buckets of `order`'s parameters (indices into `params`): consecutive parameters of one dtype and
// device share a bucket until it holds at least cap_bytes. Buckets come back in the order of their
// first parameter in `order`. Exposed for the tests and docs.
std::vector<std::vector<size_t>> assign_buckets(const std::vector<Tensor>& params, const std::vector<size_t>& order,
                                                int64_t cap_bytes);

// What the first synchronized backward teaches a Reducer: rank 0's gradient-ready order (the bucket
// assignment is made from it) and how often each parameter's hook fires in a backward. A checkpoint
// keeps it, so that a resumed run reduces its first step in the same buckets as the run it continues:
// from three ranks on, the collectives' summation order for an element depends on where the bucket
// layout puts it, so other buckets would change the last bits.
struct LearnedBuckets {
    std::vector<int64_t> ready_order;   // parameter indices, the order the buckets were assigned in
    std::vector<int64_t> hook_counts;   // per parameter, in registration order
};

class Reducer {
public:
    Reducer(std::vector<std::string> names, std::vector<Tensor> params, ProcessGroup& group, int64_t bucket_cap_bytes,
            bool find_unused_parameters);
    ~Reducer();
    Reducer(const Reducer&) = delete;
    Reducer& operator=(const Reducer&) = delete;

    void set_sync(bool on) { sync_ = on; }
    bool sync() const { return sync_; }
    // Current buckets, as lists of parameter names (bucket 0 is reduced first).
    std::vector<std::vector<std::string>> bucket_names() const;
    bool buckets_rebuilt() const { return counts_known_; }
    // After the first synchronized backward (empty before); restore_learned() builds those buckets
    // and counts at once (ValueError naming the mismatch if they are not this model's).
    std::optional<LearnedBuckets> learned() const;
    void restore_learned(const LearnedBuckets& learned);
    int64_t buckets_launched_early() const { return launched_early_; }   // by hooks, in the last backward

private:
    struct Param {
        Tensor tensor;
        std::string name;
        int64_t expected = 0;     // hook firings per backward, learned in the first iteration (0: unknown)
        int64_t fired = 0;        // this backward
        size_t bucket = 0;
        int64_t offset = 0;       // element offset in the bucket's flat buffer
    };
    struct Bucket {
        std::vector<size_t> params;
        Tensor flat;              // (numel) of the bucket's dtype and device
        size_t pending = 0;       // parameters not yet ready in this backward
        bool launched = false;
        WorkPtr work;
    };

    void on_grad_ready(size_t i);
    void begin_backward();
    void mark_ready(size_t i);
    void launch_ready_buckets();
    void launch(Bucket& b);
    void finalize();
    void check_unused(const std::vector<size_t>& unused);
    Tensor globally_used();
    void write_back(const Tensor& used);
    void rebuild_buckets();
    void build(const std::vector<std::vector<size_t>>& assignment);
    void wait_all();

    std::vector<Param> params_;
    std::vector<Bucket> buckets_;
    ProcessGroup& group_;
    int64_t cap_bytes_;
    bool find_unused_;
    bool sync_ = true;
    bool counts_known_ = false;           // after the first synchronized backward
    autograd::BackwardEpilogue epilogue_; // begin_backward() / finalize(), once per backward
    size_t next_bucket_ = 0;              // buckets [0, next_bucket_) are launched
    int64_t launched_early_ = 0;
    std::vector<size_t> fire_order_;      // parameter index per hook firing, this backward
    std::vector<size_t> ready_order_;     // rank 0's order the current buckets were assigned from
    std::vector<autograd::ScopedHook> hooks_;
};

}  // namespace ampgrad::dist
