// checkpoint.cpp: activation checkpointing, reentrant and non-reentrant (checkpoint.hpp;
// docs/autograd.md §7; PyTorch's torch/utils/checkpoint.py). Both replay the forward's RNG state and autocast state while
// recomputing.
#include "autograd/checkpoint.hpp"

#include <array>
#include <atomic>
#include <cstdio>
#include <optional>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "autograd/autograd.hpp"
#include "autograd/checkpoint_state.hpp"
#include "autograd/function.hpp"
#include "autograd/saved_variable.hpp"
#include "core/autocast_state.hpp"
#include "core/error.hpp"
#include "core/philox.hpp"

namespace ampgrad {

using autograd::AutogradContext;

// ---- forward state: RNG + autocast ----

namespace {

// What the recompute must see exactly as the forward did (PyTorch: the RNG states and the
// autocast kwargs of both device types).
struct ForwardState {
    bool has_rng = false;
    GeneratorState rng;
    AutocastStates autocast{};                      // indexed by device type
    bool autocast_cache_enabled = true;
};

ForwardState capture_forward_state(bool preserve_rng) {
    ForwardState s;
    s.has_rng = preserve_rng;
    if (preserve_rng) s.rng = get_rng_state();
    s.autocast = autocast::states();
    s.autocast_cache_enabled = autocast::cache_enabled();
    return s;
}

// Sets the forward's state for the scope and puts the current state back afterwards. Backward
// runs with autocast suspended (engine.cpp), so the recompute lifts the suspension too.
class ReplayGuard {
public:
    explicit ReplayGuard(const ForwardState& fwd) {
        if (fwd.has_rng) {
            saved_rng_ = get_rng_state();
            set_rng_state(fwd.rng);
            restore_rng_ = true;
        }
        for (size_t t = 0; t < kNumDeviceTypes; ++t)
            autocast_[t].emplace(static_cast<DeviceType>(t), fwd.autocast[t], fwd.autocast_cache_enabled);
        was_suspended_ = autocast::set_suspended(false);
    }
    ~ReplayGuard() {
        autocast::set_suspended(was_suspended_);
        if (restore_rng_) set_rng_state(saved_rng_);
    }
    ReplayGuard(const ReplayGuard&) = delete;
    ReplayGuard& operator=(const ReplayGuard&) = delete;

private:
    bool restore_rng_ = false;
    GeneratorState saved_rng_;
    std::array<std::optional<autocast::StateGuard>, kNumDeviceTypes> autocast_;
    bool was_suspended_ = false;
};

void warn_once(std::once_flag& flag, const char* message) {
    std::call_once(flag, [message] { std::fprintf(stderr, "ampgrad warning: %s\n", message); });
}

// ---- reentrant: one custom Function around the whole region ----

struct ReentrantState {
    CheckpointFn fn;
    ForwardState forward_state;
};

struct CheckpointFunction : autograd::Function<CheckpointFunction> {
    static tensor_list forward(AutogradContext* ctx, const std::shared_ptr<ReentrantState>& state,
                               const tensor_list& inputs) {
        ctx->saved_data["state"] = autograd::IValue::custom(state);
        ctx->save_for_backward(inputs);
        return state->fn(inputs);                      // under no_grad (Function::apply)
    }

    // Recompute with grad on, then backpropagate through the recomputed graph: a nested task.
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        if (!autograd::checkpoint_valid())
            throw AutogradError(
                "checkpoint: When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() or passing "
                "an `inputs` parameter to .backward(). To resolve this error, you can either set use_reentrant=False, "
                "or call .backward() without passing the `inputs` argument.");
        auto state = ctx->saved_data.at("state").toCustom<ReentrantState>();
        tensor_list detached;
        for (const Tensor& x : ctx->get_saved_variables()) {
            Tensor d = x.defined() ? x.detach() : Tensor();
            if (d.defined() && x.requires_grad()) d.requires_grad_(true);
            detached.push_back(d);
        }
        tensor_list outputs;
        {
            ReplayGuard replay(state->forward_state);
            EnableGradGuard grad_on;
            autograd::CheckpointRegionGuard region;
            autograd::ForwardRegionGuard in_forward;
            outputs = state->fn(detached);
        }
        tensor_list roots, seeds;
        for (size_t i = 0; i < outputs.size() && i < grads.size(); ++i) {
            if (outputs[i].defined() && outputs[i].requires_grad()) {
                roots.push_back(outputs[i]);
                seeds.push_back(grads[i]);
            }
        }
        if (roots.empty())
            throw AutogradError("checkpoint: none of output has requires_grad=True, this checkpoint() is not necessary");
        autograd::backward(roots, seeds);
        tensor_list result{Tensor()};                   // the `state` argument has no gradient
        for (const Tensor& d : detached) result.push_back(d.defined() ? d.grad() : Tensor());
        return result;
    }
};

tensor_list checkpoint_reentrant(const CheckpointFn& fn, const tensor_list& inputs, const CheckpointOptions& opts) {
    bool any_requires_grad = false;
    for (const Tensor& x : inputs) any_requires_grad = any_requires_grad || (x.defined() && x.requires_grad());
    if (!any_requires_grad && GradMode::is_enabled()) {
        static std::once_flag flag;
        warn_once(flag, "checkpoint(use_reentrant=true): None of the inputs have requires_grad=True. Gradients will be "
                        "None (parameters used inside fn get no gradient); use the non-reentrant variant.");
    }
    auto state = std::make_shared<ReentrantState>();
    state->fn = fn;
    state->forward_state = capture_forward_state(opts.preserve_rng_state);
    autograd::CheckpointRegionGuard region;            // marks the node for graph dumps
    return CheckpointFunction::apply(state, inputs);
}

// ---- non-reentrant: saved-tensor hooks keyed by graph-task id ----

// Thrown by the recompute pack hook once every saved tensor is back (early stop).
struct StopRecomputation {};

// One per tensor saved inside the region: what the graph keeps instead of the tensor.
struct Holder {
    size_t index;
};

// The recomputed tensors of one graph task.
struct Recomputation {
    std::vector<Tensor> tensors;
    std::vector<char> unpacked;
    size_t counter = 0;              // tensors saved so far by the recompute
    bool done = false;
};

// Shared by the hooks of one checkpoint() call; lives as long as a saved tensor refers to it.
class Frame : public std::enable_shared_from_this<Frame> {
public:
    Frame(CheckpointFn fn, CheckpointOptions opts) : fn_(std::move(fn)), opts_(opts) {}
    tensor_list run_forward(const tensor_list& inputs);
    Tensor unpack(const Holder& holder);

private:
    autograd::SavedTensorHooks forward_hooks();
    autograd::SavedTensorHooks recompute_hooks(int64_t gid);
    void recompute(int64_t gid);
    void check_recomputed(int64_t gid);

    CheckpointFn fn_;
    CheckpointOptions opts_;
    ForwardState forward_state_;
    std::vector<autograd::SavedVariable> inputs_;   // saved outside our hooks: an enclosing checkpoint packs them
    std::vector<std::weak_ptr<Holder>> holders_;
    std::vector<autograd::TensorMeta> metadata_;
    bool forward_completed_ = false;
    bool ignore_saved_mismatch_ = false;
    std::unordered_map<int64_t, Recomputation> recomputations_;   // graph-task id -> tensors
};

std::string meta_str(const autograd::TensorMeta& m) {
    return fmt::format("{{shape: {}, dtype: {}, device: {}}}", shape_str(m.shape), dtype_name(m.dtype), m.device.str());
}

tensor_list Frame::run_forward(const tensor_list& inputs) {
    for (const Tensor& x : inputs) inputs_.emplace_back(x, false);
    forward_state_ = capture_forward_state(opts_.preserve_rng_state);
    tensor_list out;
    {
        autograd::SavedTensorsHooksGuard hooks(forward_hooks());
        autograd::CheckpointRegionGuard region;
        autograd::ForwardRegionGuard in_forward;
        out = fn_(inputs);
    }
    forward_completed_ = true;
    return out;
}

// Forward: keep a Holder (and the tensor's metadata) instead of the tensor.
autograd::SavedTensorHooks Frame::forward_hooks() {
    std::shared_ptr<Frame> self = shared_from_this();
    return {[self](const Tensor& x) -> std::any {
                auto holder = std::make_shared<Holder>(Holder{self->holders_.size()});
                self->holders_.push_back(holder);
                self->metadata_.push_back(autograd::TensorMeta::of(x));
                return holder;
            },
            [self](const std::any& packed) { return self->unpack(*std::any_cast<std::shared_ptr<Holder>>(packed)); }};
}

// Recompute: the i-th saved tensor fills holder i for this graph task.
autograd::SavedTensorHooks Frame::recompute_hooks(int64_t gid) {
    Frame* self = this;
    return {[self, gid](const Tensor& x) -> std::any {
                Recomputation& r = self->recomputations_[gid];
                size_t idx = r.counter++;
                if (idx >= self->holders_.size()) {
                    if (!self->forward_completed_) {               // backward inside the forward region
                        self->ignore_saved_mismatch_ = true;
                        return x.detach();
                    }
                    throw AutogradError("torch.utils.checkpoint: trying to save more tensors during recomputation than during the "
                                        "original forward pass.");
                }
                if (!self->holders_[idx].expired()) r.tensors[idx] = x.detach();
                if (self->opts_.early_stop && r.counter == self->holders_.size()) throw StopRecomputation{};
                return x.detach();
            },
            [](const std::any& packed) { return std::any_cast<Tensor>(packed); }};
}

void Frame::recompute(int64_t gid) {
    Recomputation& r = recomputations_[gid];
    r.tensors.assign(holders_.size(), Tensor());
    r.unpacked.assign(holders_.size(), 0);
    tensor_list args;
    for (const autograd::SavedVariable& s : inputs_) args.push_back(s.unpack(nullptr));
    {
        autograd::SavedTensorsHooksGuard hooks(recompute_hooks(gid));
        ReplayGuard replay(forward_state_);
        EnableGradGuard grad_on;
        autograd::CheckpointRegionGuard region;
        autograd::ForwardRegionGuard in_forward;
        try {
            fn_(args);
        } catch (const StopRecomputation&) {
        }
    }
    r.done = true;
    if (opts_.determinism_check && !ignore_saved_mismatch_) check_recomputed(gid);
}

void Frame::check_recomputed(int64_t gid) {
    const Recomputation& r = recomputations_[gid];
    if (r.counter != holders_.size())
        throw AutogradError(fmt::format(
            "torch.utils.checkpoint: A different number of tensors was saved during the original forward and recomputation.\n"
            "Number of tensors saved during forward: {}\nNumber of tensors saved during recomputation: {}",
            holders_.size(), r.counter));
    std::string diffs;
    for (size_t i = 0; i < holders_.size(); ++i) {
        if (holders_[i].expired() || !r.tensors[i].defined()) continue;
        autograd::TensorMeta now = autograd::TensorMeta::of(r.tensors[i]);
        const autograd::TensorMeta& was = metadata_[i];
        if (now.shape != was.shape || now.dtype != was.dtype || now.device != was.device)
            diffs += fmt::format("tensor at position {}:\nsaved metadata: {}\nrecomputed metadata: {}\n", i,
                                 meta_str(was), meta_str(now));
    }
    if (!diffs.empty())
        throw AutogradError("torch.utils.checkpoint: Recomputed values for the following tensors have different metadata than "
                            "during the forward pass.\n" + diffs);
}

Tensor Frame::unpack(const Holder& holder) {
    static std::atomic<int64_t> next_temporary_id{-2};
    int64_t gid = autograd::current_graph_task_id();
    bool temporary = gid == -1;                     // unpacked outside backward: recompute just for this
    if (temporary) gid = next_temporary_id.fetch_sub(1);
    if (!recomputations_[gid].done) {
        recompute(gid);
        if (!temporary) {                           // drop this task's leftovers when it ends
            std::weak_ptr<Frame> weak = weak_from_this();
            autograd::queue_callback([weak, gid] {
                if (auto f = weak.lock()) f->recomputations_.erase(gid);
            });
        }
    }
    Recomputation& r = recomputations_[gid];
    if (r.unpacked[holder.index])
        throw AutogradError("torch.utils.checkpoint: Unpack is being triggered for a tensor that was already unpacked once. If "
                            "you are calling ctx.saved_tensors in backward, make sure to do so only once. Otherwise "
                            "please open an issue with details on your use case.");
    Tensor t = std::move(r.tensors[holder.index]);   // freed as soon as it is handed out
    r.unpacked[holder.index] = 1;
    if (temporary) recomputations_.erase(gid);
    return t;
}

}  // namespace

tensor_list checkpoint(const CheckpointFn& fn, const tensor_list& inputs, CheckpointOptions opts) {
    if (opts.use_reentrant) return checkpoint_reentrant(fn, inputs, opts);
    if (!GradMode::is_enabled()) return fn(inputs);    // nothing is saved: nothing to checkpoint
    auto frame = std::make_shared<Frame>(fn, opts);
    return frame->run_forward(inputs);
}

}  // namespace ampgrad
