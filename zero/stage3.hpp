// zero/stage3.hpp: ZeRO stage 3's partitioned parameters (DeepSpeed's partition_parameters.py,
// parameter_offload.py and partitioned_param_coordinator.py, redone). Each rank keeps only its
// partition of the flat parameter space (zero/layout.hpp, the same layout as stages 1 and 2); a
// parameter's tensor keeps its identity but is RELEASED (shape [0], no storage) outside the code
// that needs it, and GATHERED (one all-gather per module and set) when it is needed:
//
//   forward pre-hook of module m    gather m's parameters (prefetched by the recorded order);
//   forward post-hook of m          release them, and hook m's output: when its gradient arrives,
//                                   gather them again for m's backward (with those of the modules
//                                   before m in the recorded order, up to the prefetch budget, in
//                                   the same all-gather);
//   a parameter's gradient arrives  (post-accumulate-grad hook, outermost task) release it;
//   end of the user's backward      release whatever is still gathered (frozen parameters, ...).
//
// A forward run INSIDE a backward (a checkpoint's recompute, reentrant or not) gathers but never
// releases: the recomputed graph is about to use those parameters. So a frozen parameter cannot
// shrink to shape [0] under a recompute (DeepSpeed issue 4332). docs/zero.md §4 walks through it.
//
// Limits: a parameter reaches the loss only through its module's output (or the module that uses
// it registers it, as GPT's TiedLinear does); the first step's forward runs with the parameters
// of modules not yet seen still gathered, and parameters of a module whose forward hooks never
// fire (its forward does not call with_forward_hooks) stay gathered for good ("persistent").
#pragma once
#include "autograd/hooks.hpp"
#include "dist/process_group.hpp"
#include "nn/module.hpp"
#include "zero/layout.hpp"

#include <memory>
#include <unordered_map>
#include <vector>

namespace ampgrad::zero {

class Stage3 {
public:
    // trainable: the engine's parameters, in the order of `layout` (the engine's FlatLayout).
    // Frozen parameters of the model dtype get a second flat layout of their own. Installs the
    // forward hooks on every module that registers a parameter. The parameters stay whole until
    // the first forward releases them.
    Stage3(nn::Module& root, const std::vector<Tensor>& trainable, const FlatLayout& layout,
           dist::ProcessGroup& group, int64_t prefetch_numel);
    ~Stage3();
    Stage3(const Stage3&) = delete;
    Stage3& operator=(const Stage3&) = delete;

    // Called by the engine.
    void begin_backward();                 // the trace of the first forward is complete
    void after_grad(size_t trainable_index);   // its gradient was taken: release (outermost task only)
    void end_backward();                   // release everything not persistent
    // After the boundary step: copy the updated master partition (undefined on a skipped step)
    // into the parameter partition, fix the persistent set (first step), release the rest and
    // re-gather the persistent parameters.
    void after_step(const Tensor& master);

    // Gather every parameter into the module (a collective: every rank calls it), e.g. to read or
    // save the whole model; release_all() partitions them again. See GatheredParameters.
    void gather_all();
    void release_all();

    // This rank's partition of the trainable parameters, model dtype, P elements (the flat layout's).
    Tensor& partition() { return sets_[0].partition; }
    // ... and of the frozen parameters of the model dtype (undefined if there are none).
    Tensor& frozen_partition() { return sets_[1].partition; }
    const FlatLayout& frozen_layout() const { return sets_[1].layout; }
    const std::vector<Tensor>& frozen_parameters() const { return sets_[1].params; }
    const Shape& shape(size_t trainable_index) const;
    // Bytes of trainable parameters this rank holds now: its partition + the gathered ones.
    int64_t trainable_param_bytes() const;
    int64_t gathers() const { return gathers_; }          // all-gathers issued so far (prefetch included)
    int64_t prefetched() const { return prefetched_; }    // parameters gathered ahead of their module
    bool is_gathered(const Tensor& p) const;
    bool is_persistent(const Tensor& p) const;

private:
    struct Set {                          // parameters laid end to end, each rank keeping a partition
        FlatLayout layout{{}, 1};
        std::vector<Tensor> params;
        Tensor partition;                 // (P) model dtype
    };
    struct Param {
        int set = 0;
        size_t index = 0;                 // in its set's layout
        Shape shape;
        bool gathered = true;
        bool in_flight = false;
        bool persistent = false;
        std::vector<size_t> owners;       // modules that register it
    };
    struct ModuleInfo {
        nn::Module* module = nullptr;
        std::vector<size_t> params;       // into params_
        bool seen = false;                // its forward pre-hook has fired
        autograd::ScopedHook pre, post;
    };
    struct Pending;

    void before_forward(size_t m);
    void after_forward(size_t m, const Tensor& output);
    void prefetch_after(size_t trace_pos, int64_t numel, std::vector<size_t>& ids);
    void gather_for_backward(size_t m);
    int64_t add_missing(const std::vector<size_t>& candidates, std::vector<size_t>& ids) const;
    size_t last_in_trace(size_t m) const;
    void gather(const std::vector<size_t>& ids, bool async);
    void complete_pending();
    void release(size_t id);
    bool releasable(size_t id) const;
    size_t id_of(const Tensor& p) const;

    dist::ProcessGroup& group_;
    int64_t prefetch_numel_;
    Set sets_[2];
    std::vector<Param> params_;
    std::unordered_map<const TensorImpl*, size_t> by_impl_;
    std::vector<ModuleInfo> modules_;
    std::vector<std::unique_ptr<Pending>> pending_;
    int64_t in_flight_numel_ = 0;
    // The module order of the first forward (DeepSpeed's trace), and where the current forward is.
    std::vector<size_t> trace_;
    bool recording_ = true, finalized_ = false;
    size_t trace_pos_ = 0, prefetch_next_ = 0;
    bool following_ = false;              // the current forward has matched the trace so far
    size_t backward_next_ = 0;            // the backward has prefetched the trace's modules from here on
    int64_t gathers_ = 0, prefetched_ = 0;
};

}  // namespace ampgrad::zero

namespace ampgrad::zero {

// Every parameter gathered for the scope (a collective on entry and exit: every rank makes one),
// DeepSpeed's deepspeed.zero.GatheredParameters. A null Stage3 (stages 1, 2) does nothing.
//   { zero::GatheredParameters all(engine.stage3()); save(model->state_dict()); }
class GatheredParameters {
public:
    explicit GatheredParameters(Stage3* stage3) : stage3_(stage3) {
        if (stage3_) stage3_->gather_all();
    }
    ~GatheredParameters() {
        if (stage3_) stage3_->release_all();
    }
    GatheredParameters(const GatheredParameters&) = delete;
    GatheredParameters& operator=(const GatheredParameters&) = delete;

private:
    Stage3* stage3_;
};

}  // namespace ampgrad::zero
