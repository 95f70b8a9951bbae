// zero/stage3.cpp: ZeRO stage 3's gather and release of partitioned parameters (stage3.hpp).
// The gather of a few parameters is the bucket packing of the gradients run backwards: the pieces
// this rank owns go into its chunk of a (W * chunk) buffer, one all-gather fills every chunk, and
// each parameter is reassembled from its pieces (zero/layout.hpp's pack_bucket gives the offsets).
#include "zero/stage3.hpp"

#include "autograd/engine.hpp"
#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/set_data.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace ampgrad::zero {

// One launched all-gather: its buffers live until it completes.
struct Stage3::Pending {
    dist::WorkPtr work;
    int set = 0;
    std::vector<size_t> ids;              // into params_
    BucketPacking packing;
    Tensor send, recv;                    // (chunk), (W * chunk): model dtype
};

namespace {

std::vector<int64_t> numels_of(const std::vector<Tensor>& params) {
    std::vector<int64_t> out;
    for (const Tensor& p : params) out.push_back(p.numel());
    return out;
}

// This rank's partition of a set of whole parameters, in their dtype.
Tensor partition_of(const FlatLayout& layout, const std::vector<Tensor>& params, int rank, DType dtype, Device device) {
    const int64_t begin = layout.partition_begin(rank);
    Tensor part = zeros({layout.partition_numel()}, TensorOptions().dtype(dtype).device(device));
    for (size_t i = 0; i < params.size(); ++i)
        for (const Piece& piece : layout.pieces(i))
            if (piece.rank == rank)
                part.narrow(0, piece.flat_begin - begin, piece.numel)
                    .copy_(params[i].detach().reshape({-1}).narrow(0, piece.param_offset, piece.numel));
    return part;
}

}  // namespace

Stage3::Stage3(nn::Module& root, const std::vector<Tensor>& trainable, const FlatLayout& layout,
               dist::ProcessGroup& group, int64_t prefetch_numel)
    : group_(group), prefetch_numel_(prefetch_numel) {
    NoGradGuard no_grad;
    const DType dtype = trainable.at(0).dtype();
    const Device device = trainable[0].device();
    sets_[0].layout = layout;
    sets_[0].params = trainable;
    for (const auto& [name, p] : root.named_parameters())
        if (!p.requires_grad() && p.dtype() == dtype && p.numel() > 0) sets_[1].params.push_back(p);
    sets_[1].layout = FlatLayout(numels_of(sets_[1].params), group_.world_size());
    for (int s = 0; s < 2; ++s) {
        Set& set = sets_[s];
        if (!set.params.empty()) set.partition = partition_of(set.layout, set.params, group_.rank(), dtype, device);
        for (size_t i = 0; i < set.params.size(); ++i) {
            by_impl_[set.params[i].impl()] = params_.size();
            Param p;
            p.set = s;
            p.index = i;
            p.shape = set.params[i].sizes();
            p.persistent = set.params[i].numel() == 0;   // nothing to gather
            params_.push_back(p);
        }
    }
    // Every module that registers a managed parameter gets the gather/release hooks.
    for (const auto& [name, module] : root.named_modules()) {
        ModuleInfo info;
        info.module = module.get();
        for (const Tensor& p : module->parameters(/*recurse=*/false)) {
            auto it = by_impl_.find(p.impl());
            if (it == by_impl_.end()) continue;
            info.params.push_back(it->second);
            params_[it->second].owners.push_back(modules_.size());
        }
        if (info.params.empty()) continue;
        const size_t m = modules_.size();
        // The inputs form: the hooks fire for a module whose forward takes several tensors too.
        info.pre = module->register_forward_pre_hook(
            nn::ForwardPreHookInputs([this, m](nn::Module&, const std::vector<Tensor>&) {
                before_forward(m);
                return std::vector<Tensor>();
            }));
        info.post = module->register_forward_hook(
            nn::ForwardHookInputs([this, m](nn::Module&, const std::vector<Tensor>&, const Tensor& out) {
                after_forward(m, out);
                return Tensor();
            }));
        modules_.push_back(std::move(info));
    }
}

Stage3::~Stage3() {
    modules_.clear();   // unhooks
    try {
        for (auto& p : pending_) p->work->wait(group_.timeout());
    } catch (const Error&) {
    }
}

size_t Stage3::id_of(const Tensor& p) const {
    auto it = by_impl_.find(p.impl());
    if (it == by_impl_.end()) throw ValueError(fmt::format("Stage3: {} is not a partitioned parameter", p.describe()));
    return it->second;
}
bool Stage3::is_gathered(const Tensor& p) const { return params_[id_of(p)].gathered; }
bool Stage3::is_persistent(const Tensor& p) const { return params_[id_of(p)].persistent; }
const Shape& Stage3::shape(size_t trainable_index) const { return params_.at(trainable_index).shape; }

int64_t Stage3::trainable_param_bytes() const {
    const Tensor& part = sets_[0].partition;
    int64_t bytes = part.numel() * static_cast<int64_t>(part.element_size());
    for (const Param& p : params_)
        if (p.set == 0 && p.gathered) bytes += shape_numel(p.shape) * static_cast<int64_t>(part.element_size());
    return bytes;
}

// ---- forward hooks ----

void Stage3::before_forward(size_t m) {
    const bool in_backward = autograd::current_graph_task_depth() > 0;   // a checkpoint's recompute
    if (!in_backward) {
        modules_[m].seen = true;
        backward_next_ = trace_.size();   // this forward's backward has prefetched nothing yet
        if (recording_ && !finalized_) {
            trace_.push_back(m);
        } else if (finalized_ && !trace_.empty()) {
            // Follow the recorded order; a forward that leaves it stops prefetching until it restarts.
            if (following_ && trace_pos_ < trace_.size() && trace_[trace_pos_] == m) {
                ++trace_pos_;
            } else if (trace_[0] == m) {
                following_ = true;
                trace_pos_ = 1;
                prefetch_next_ = 1;
            } else {
                following_ = false;
            }
        }
    }
    const auto& own = modules_[m].params;
    if (std::any_of(own.begin(), own.end(), [&](size_t id) { return params_[id].in_flight; })) complete_pending();
    std::vector<size_t> ids;
    const int64_t own_numel = add_missing(own, ids);
    const bool needed_now = !ids.empty();
    if (!in_backward && following_) prefetch_after(trace_pos_, own_numel, ids);
    if (!ids.empty()) gather(ids, /*async=*/!needed_now);   // one all-gather: m's own and the prefetch
}

// Adds to `ids` the parameters of the modules after position `pos` of the trace, up to the prefetch
// budget: DeepSpeed's prefetch bucket, gathered in the same all-gather as the current module's own.
// One collective per bucket rather than per module matters where a collective's latency, not its
// bytes, is the cost (many ranks, small modules).
void Stage3::prefetch_after(size_t pos, int64_t numel, std::vector<size_t>& ids) {
    prefetch_next_ = std::max(prefetch_next_, pos);
    const size_t before = ids.size();
    numel += in_flight_numel_;
    while (prefetch_next_ < trace_.size() && numel < prefetch_numel_) {
        numel += add_missing(modules_[trace_[prefetch_next_]].params, ids);
        ++prefetch_next_;
    }
    prefetched_ += static_cast<int64_t>(ids.size() - before);
}

// The backward of module m is next: gather its parameters, and in the same collective those of the
// modules before it in the recorded order (their backward comes next), up to the prefetch budget.
void Stage3::gather_for_backward(size_t m) {
    std::vector<size_t> ids;
    int64_t numel = add_missing(modules_[m].params, ids);
    if (finalized_ && prefetch_numel_ > 0 && !trace_.empty()) {
        const size_t own = ids.size();
        size_t pos = std::min(backward_next_, last_in_trace(m));
        while (pos > 0 && numel < prefetch_numel_) {
            --pos;
            numel += add_missing(modules_[trace_[pos]].params, ids);
        }
        backward_next_ = pos;
        prefetched_ += static_cast<int64_t>(ids.size() - own);
    }
    if (!ids.empty()) gather(ids, /*async=*/false);
}

// Appends to `ids` the parameters among `candidates` that are neither gathered, in flight nor already
// listed; returns their elements.
int64_t Stage3::add_missing(const std::vector<size_t>& candidates, std::vector<size_t>& ids) const {
    int64_t numel = 0;
    for (size_t id : candidates) {
        const Param& p = params_[id];
        if (p.gathered || p.in_flight || std::find(ids.begin(), ids.end(), id) != ids.end()) continue;
        ids.push_back(id);
        numel += shape_numel(p.shape);
    }
    return numel;
}

// Where module m last ran in the recorded forward (trace_.size() if it did not).
size_t Stage3::last_in_trace(size_t m) const {
    for (size_t pos = trace_.size(); pos > 0; --pos)
        if (trace_[pos - 1] == m) return pos - 1;
    return trace_.size();
}

void Stage3::after_forward(size_t m, const Tensor& output) {
    // Inside a backward (a checkpoint recompute), the recomputed graph needs the parameters:
    // they stay gathered until their gradient arrives in the outermost task, or the backward ends.
    if (autograd::current_graph_task_depth() > 0) return;
    for (size_t id : modules_[m].params)
        if (releasable(id)) release(id);
    if (output.defined() && output.requires_grad() && GradMode::is_enabled()) {
        // The module's backward needs them again: gather when the output's gradient arrives,
        // just before the node that made the output runs.
        output.register_hook([this, m](const Tensor&) {
            gather_for_backward(m);
            return Tensor();
        });
    }
}

// Before the first step fixes the persistent set, a parameter is released only once every module
// that registers it has been seen (a tied weight used by a later, hook-less module stays whole).
bool Stage3::releasable(size_t id) const {
    const Param& p = params_[id];
    if (!p.gathered || p.persistent) return false;
    if (finalized_) return true;
    return std::all_of(p.owners.begin(), p.owners.end(), [&](size_t m) { return modules_[m].seen; });
}

// ---- backward and step ----

void Stage3::begin_backward() { recording_ = false; }

void Stage3::after_grad(size_t trainable_index) {
    // In the outermost task a parameter's AccumulateGrad runs after every node that used it; in a
    // reentrant phase an outer node may still need it, so it waits for end_backward.
    if (autograd::current_graph_task_depth() == 1 && releasable(trainable_index)) release(trainable_index);
}

void Stage3::end_backward() { release_all(); }

void Stage3::after_step(const Tensor& master) {
    NoGradGuard no_grad;
    complete_pending();
    if (master.defined()) sets_[0].partition.copy_(master.to(sets_[0].partition.dtype()));
    if (!finalized_) {
        // Parameters some module of which never ran its hooks stay whole from now on.
        for (Param& p : params_)
            if (!releasable(static_cast<size_t>(&p - params_.data())) && p.gathered) p.persistent = true;
        finalized_ = true;
        recording_ = false;
    }
    following_ = false;
    std::vector<size_t> persistent;
    for (size_t id = 0; id < params_.size(); ++id) {
        if (params_[id].persistent) {
            if (master.defined() && params_[id].set == 0 && shape_numel(params_[id].shape) > 0) persistent.push_back(id);
        } else if (params_[id].gathered) {
            release(id);
        }
    }
    if (persistent.empty()) return;
    for (size_t id : persistent) params_[id].gathered = false;   // re-gathered with the updated values
    gather(persistent, /*async=*/false);
}

void Stage3::gather_all() {
    std::vector<size_t> ids;
    for (size_t id = 0; id < params_.size(); ++id)
        if (!params_[id].gathered) ids.push_back(id);
    gather(ids, /*async=*/false);
}

void Stage3::release_all() {
    complete_pending();
    for (size_t id = 0; id < params_.size(); ++id)
        if (releasable(id)) release(id);
}

// ---- the collectives ----

// One all-gather per set among `ids` (parameters not gathered). Any gather in flight completes
// first, so the order of collectives is the same on every rank.
void Stage3::gather(const std::vector<size_t>& ids, bool async) {
    NoGradGuard no_grad;
    if (!async) {
        bool waits = std::any_of(ids.begin(), ids.end(), [&](size_t id) { return params_[id].in_flight; });
        if (waits) complete_pending();
    }
    const int W = group_.world_size(), me = group_.rank();
    for (int s = 0; s < 2; ++s) {
        auto pending = std::make_unique<Pending>();
        pending->set = s;
        std::vector<size_t> indices;
        for (size_t id : ids)
            if (params_[id].set == s && !params_[id].gathered && !params_[id].in_flight) {
                pending->ids.push_back(id);
                indices.push_back(params_[id].index);
            }
        if (indices.empty()) continue;
        const Set& set = sets_[s];
        pending->packing = pack_bucket(set.layout, indices);
        const BucketPacking& pk = pending->packing;
        const int64_t begin = set.layout.partition_begin(me);
        pending->send = zeros({pk.chunk}, set.partition.options());
        pending->recv = zeros({W * pk.chunk}, set.partition.options());
        for (size_t k = 0; k < pk.pieces.size(); ++k)
            if (pk.pieces[k].rank == me)
                pending->send.narrow(0, pk.buffer_offset[k] - static_cast<int64_t>(me) * pk.chunk, pk.pieces[k].numel)
                    .copy_(set.partition.narrow(0, pk.pieces[k].flat_begin - begin, pk.pieces[k].numel));
        pending->work = group_.all_gather(pending->recv, pending->send, /*async_op=*/true);
        ++gathers_;
        for (size_t id : pending->ids) {
            params_[id].in_flight = true;
            in_flight_numel_ += shape_numel(params_[id].shape);
        }
        pending_.push_back(std::move(pending));
    }
    if (!async) complete_pending();
}

// Wait for the launched all-gathers in order; reassemble each parameter from its pieces.
void Stage3::complete_pending() {
    NoGradGuard no_grad;
    for (auto& pending : pending_) {
        pending->work->wait(group_.timeout());
        const Set& set = sets_[pending->set];
        std::vector<Tensor> whole;
        for (size_t id : pending->ids) whole.push_back(make_empty(params_[id].shape, set.partition.dtype(), set.partition.device()));
        const BucketPacking& pk = pending->packing;
        for (size_t k = 0; k < pk.pieces.size(); ++k) {
            const Piece& piece = pk.pieces[k];
            size_t slot = 0;
            while (params_[pending->ids[slot]].index != piece.param) ++slot;
            whole[slot].reshape({-1}).narrow(0, piece.param_offset, piece.numel)
                .copy_(pending->recv.narrow(0, pk.buffer_offset[k], piece.numel));
        }
        for (size_t slot = 0; slot < pending->ids.size(); ++slot) {
            Param& p = params_[pending->ids[slot]];
            set_data(set.params[p.index], whole[slot], VersionBump::kNo);   // where the values live, not what
            p.gathered = true;
            p.in_flight = false;
            in_flight_numel_ -= shape_numel(p.shape);
        }
    }
    pending_.clear();
}

void Stage3::release(size_t id) {
    Param& p = params_[id];
    const Tensor& t = sets_[p.set].params[p.index];
    set_data(t, make_empty({0}, t.dtype(), t.device()), VersionBump::kNo);
    p.gathered = false;
}

}  // namespace ampgrad::zero
