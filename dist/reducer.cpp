// dist/reducer.cpp: DistributedDataParallel's gradient buckets (see dist/reducer.hpp for the
// per-backward sequence, and PyTorch's torch/csrc/distributed/c10d/reducer.cpp, which this follows:
// compute_bucket_assignment_by_size, mark_variable_ready, finalize_backward, rebuild_buckets).
#include "dist/reducer.hpp"

#include "autograd/autograd.hpp"
#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "dist/flight_recorder.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <utility>

namespace ampgrad::dist {

std::vector<std::vector<size_t>> assign_buckets(const std::vector<Tensor>& params, const std::vector<size_t>& order,
                                                int64_t cap_bytes) {
    // One open bucket per (dtype, device); a bucket closes once it reaches cap_bytes.
    std::map<std::pair<int, std::string>, std::pair<std::vector<size_t>, int64_t>> open;
    std::vector<std::vector<size_t>> out;
    for (size_t i : order) {
        const Tensor& p = params[i];
        auto key = std::make_pair(static_cast<int>(p.dtype()), p.device().str());
        auto& [members, bytes] = open[key];
        members.push_back(i);
        bytes += p.numel() * static_cast<int64_t>(p.element_size());
        if (bytes >= cap_bytes) {
            out.push_back(std::move(members));
            open.erase(key);
        }
    }
    for (auto& [key, bucket] : open) out.push_back(std::move(bucket.first));
    // Bucket k is reduced before bucket k+1: order them by where their first parameter comes in `order`.
    std::vector<size_t> position(params.size());
    for (size_t k = 0; k < order.size(); ++k) position[order[k]] = k;
    std::sort(out.begin(), out.end(), [&](const auto& a, const auto& b) { return position[a[0]] < position[b[0]]; });
    return out;
}

Reducer::Reducer(std::vector<std::string> names, std::vector<Tensor> params, ProcessGroup& group,
                 int64_t bucket_cap_bytes, bool find_unused_parameters)
    : group_(group), cap_bytes_(bucket_cap_bytes), find_unused_(find_unused_parameters),
      epilogue_([this] { begin_backward(); }, [this] { finalize(); }, /*ignore_backward_in_forward=*/false) {
    for (size_t i = 0; i < params.size(); ++i) params_.push_back({params[i], names[i]});
    // Gradients arrive roughly in reverse order of registration: start from that.
    std::vector<size_t> order;
    for (size_t i = params_.size(); i-- > 0;) order.push_back(i);
    build(assign_buckets(params, order, cap_bytes_));
    for (size_t i = 0; i < params_.size(); ++i)
        hooks_.emplace_back(params_[i].tensor.register_post_accumulate_grad_hook([this, i](Tensor&) { on_grad_ready(i); }));
}

Reducer::~Reducer() {
    hooks_.clear();
    try {
        wait_all();   // a backward that threw may have left collectives in flight; they use our buffers
    } catch (const Error&) {
    }
}

void Reducer::build(const std::vector<std::vector<size_t>>& assignment) {
    buckets_.clear();
    for (const auto& members : assignment) {
        Bucket b;
        b.params = members;
        int64_t numel = 0;
        for (size_t i : members) {
            params_[i].bucket = buckets_.size();
            params_[i].offset = numel;
            numel += params_[i].tensor.numel();
        }
        const Tensor& first = params_[members[0]].tensor;
        b.flat = zeros({numel}, TensorOptions().dtype(first.dtype()).device(first.device()));
        buckets_.push_back(std::move(b));
    }
}

std::vector<std::vector<std::string>> Reducer::bucket_names() const {
    std::vector<std::vector<std::string>> out;
    for (const Bucket& b : buckets_) {
        out.emplace_back();
        for (size_t i : b.params) out.back().push_back(params_[i].name);
    }
    return out;
}

void Reducer::on_grad_ready(size_t i) {
    if (!sync_) return;   // no_sync(): gradients just accumulate locally
    epilogue_.on_hook();
    Param& p = params_[i];
    ++p.fired;
    fire_order_.push_back(i);
    if (buckets_[p.bucket].launched)
        throw DistError(fmt::format(
            "DistributedDataParallel: Expected to mark a variable ready only once. Parameter '{}' received a "
            "gradient (accumulation {} in this backward) after its bucket {} was already all-reduced; the first "
            "iteration saw {} accumulation(s) per backward. The graph changed between iterations (e.g. a parameter "
            "newly used inside a reentrant checkpoint); keep the set of uses per parameter fixed",
            p.name, p.fired, p.bucket, p.expected));
    if (counts_known_ && p.expected > 0 && p.fired == p.expected) mark_ready(i);
}

// The first hook of a synchronized backward: reset the per-backward state (finalize() is queued on
// the outermost task by epilogue_, so that it runs after every nested checkpoint task has finished).
void Reducer::begin_backward() {
    wait_all();   // only after a backward that threw before its finalize()
    for (Param& p : params_) p.fired = 0;
    for (Bucket& b : buckets_) {
        b.pending = b.params.size();
        b.launched = false;
        b.work.reset();
    }
    next_bucket_ = 0;
    launched_early_ = 0;
    fire_order_.clear();
}

void Reducer::mark_ready(size_t i) {
    Bucket& b = buckets_[params_[i].bucket];
    if (b.pending > 0) --b.pending;
    launch_ready_buckets();
}

// In bucket order only, as PyTorch does (next_bucket_): every rank must issue the same collectives
// in the same order, whatever order its gradients arrive in.
void Reducer::launch_ready_buckets() {
    while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
        launch(buckets_[next_bucket_++]);
        ++launched_early_;
    }
}

void Reducer::launch(Bucket& b) {
    NoGradGuard no_grad;
    for (size_t i : b.params) {
        const Param& p = params_[i];
        Tensor slice = b.flat.narrow(0, p.offset, p.tensor.numel());
        if (p.tensor.grad().defined()) slice.view(p.tensor.sizes()).copy_(p.tensor.grad());
        else slice.zero_();
    }
    b.launched = true;
    CollectiveSite site(fmt::format("ddp.bucket {}", &b - buckets_.data()));   // the flight recorder's calling site
    b.work = group_.all_reduce(b.flat, ReduceOp::kAvg, /*async_op=*/true);
}

void Reducer::wait_all() {
    for (Bucket& b : buckets_) {
        if (b.work) {
            WorkPtr w = std::move(b.work);
            w->wait(group_.timeout());
        }
    }
}

// The end-of-backward callback on the outermost graph task.
void Reducer::finalize() {
    std::vector<size_t> unused;
    for (size_t i = 0; i < params_.size(); ++i)
        if (params_[i].fired == 0) unused.push_back(i);
    check_unused(unused);
    for (size_t k = next_bucket_; k < buckets_.size(); ++k) launch(buckets_[k]);
    next_bucket_ = buckets_.size();
    Tensor used = globally_used();
    wait_all();
    write_back(used);
    if (!counts_known_) {
        for (Param& p : params_) p.expected = p.fired;
        rebuild_buckets();
        counts_known_ = true;
    } else {
        for (Param& p : params_) p.expected = std::max(p.expected, p.fired);
    }
}

// Without find_unused_parameters a parameter without a gradient would leave its bucket incomplete
// forever in PyTorch; here it is an error at the end of the backward that names it.
void Reducer::check_unused(const std::vector<size_t>& unused) {
    if (unused.empty() || find_unused_) return;
    wait_all();
    std::string names;
    for (size_t i : unused) names += fmt::format("{}{}", names.empty() ? "" : ", ", params_[i].name);
    throw UnusedParametersError(fmt::format(
        "DistributedDataParallel (rank {}): {} parameter(s) did not receive a gradient in this backward: {}. "
        "Every parameter must be used in producing the loss, or pass find_unused_parameters = true to "
        "DistributedDataParallel so that unused parameters are marked ready at the end of backward. (PyTorch: "
        "\"Expected to have finished reduction in the prior iteration before starting a new one\".)",
        group_.rank(), unused.size(), names));
}

// With find_unused_parameters: which parameters hold a gradient on some rank (a max-reduced 0/1
// map, PyTorch's local_used_map). A parameter with no gradient anywhere keeps grad undefined, as
// it would in single-process training; one unused here but used elsewhere gets the average.
Tensor Reducer::globally_used() {
    if (!find_unused_) return {};   // every rank takes the same branch: the option is the same everywhere
    std::vector<float> has(params_.size());
    for (size_t i = 0; i < params_.size(); ++i) has[i] = params_[i].tensor.grad().defined() ? 1.f : 0.f;
    // On the parameters' device: an NCCL group reduces CUDA tensors only.
    Tensor used = tensor(has, {static_cast<int64_t>(has.size())}).to(params_[0].tensor.device());
    group_.all_reduce(used, ReduceOp::kMax, /*async_op=*/false);
    return used.to(kCPU);
}

void Reducer::write_back(const Tensor& used) {
    NoGradGuard no_grad;
    std::vector<float> any = used.defined() ? used.to_vector<float>() : std::vector<float>();
    for (size_t i = 0; i < params_.size(); ++i) {
        Param& p = params_[i];
        Tensor avg = buckets_[p.bucket].flat.narrow(0, p.offset, p.tensor.numel()).view(p.tensor.sizes());
        if (p.tensor.grad().defined()) p.tensor.mutable_grad().copy_(avg);
        else if (!any.empty() && any[i] > 0) p.tensor.set_grad(avg.clone());
    }
}

// After the first iteration: rank 0's ready order (each parameter at its last hook firing; unused
// ones after, in registration order) is broadcast and every rank rebuilds its buckets from it.
void Reducer::rebuild_buckets() {
    const size_t n = params_.size();
    std::vector<int64_t> last(n, -1);
    for (size_t k = 0; k < fire_order_.size(); ++k) last[fire_order_[k]] = static_cast<int64_t>(k);
    std::vector<int64_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = static_cast<int64_t>(i);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        int64_t la = last[static_cast<size_t>(a)], lb = last[static_cast<size_t>(b)];
        if ((la < 0) != (lb < 0)) return lb < 0;   // fired before unused
        return la < lb;
    });
    Tensor shared = tensor(order, {static_cast<int64_t>(n)}).to(params_[0].tensor.device());
    group_.broadcast(shared, 0, /*async_op=*/false);
    std::vector<int64_t> rank0 = shared.to(kCPU).to_vector<int64_t>();
    ready_order_.assign(rank0.begin(), rank0.end());
    std::vector<Tensor> tensors;
    for (const Param& p : params_) tensors.push_back(p.tensor);
    build(assign_buckets(tensors, ready_order_, cap_bytes_));
    fire_order_.clear();
}

std::optional<LearnedBuckets> Reducer::learned() const {
    if (!counts_known_) return std::nullopt;
    LearnedBuckets l;
    l.ready_order.assign(ready_order_.begin(), ready_order_.end());
    for (const Param& p : params_) l.hook_counts.push_back(p.expected);
    return l;
}

void Reducer::restore_learned(const LearnedBuckets& learned) {
    const size_t n = params_.size();
    std::vector<bool> seen(n, false);
    bool valid = learned.ready_order.size() == n && learned.hook_counts.size() == n;
    for (size_t k = 0; valid && k < n; ++k) {
        const int64_t i = learned.ready_order[k];
        valid = i >= 0 && static_cast<size_t>(i) < n && !seen[static_cast<size_t>(i)] && learned.hook_counts[k] >= 0;
        if (valid) seen[static_cast<size_t>(i)] = true;
    }
    if (!valid)
        throw ValueError(fmt::format("DistributedDataParallel: the saved bucket order ({} entries) and hook counts ({}) "
                                     "are not a permutation and counts of this model's {} parameters",
                                     learned.ready_order.size(), learned.hook_counts.size(), n));
    ready_order_.assign(learned.ready_order.begin(), learned.ready_order.end());
    for (size_t i = 0; i < n; ++i) params_[i].expected = learned.hook_counts[i];
    std::vector<Tensor> tensors;
    for (const Param& p : params_) tensors.push_back(p.tensor);
    build(assign_buckets(tensors, ready_order_, cap_bytes_));
    counts_known_ = true;
}

}  // namespace ampgrad::dist
