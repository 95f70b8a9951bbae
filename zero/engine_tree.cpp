// zero/engine_tree.cpp: the ZeRO engine's deterministic mode (core/determinism.hpp, issue 35;
// docs/determinism.md). The default path pre-divides each gradient, adds the micro-batches into one
// buffer as they come and reduces in buckets through the library's ring order, so the bits depend on
// the world size, the accumulation split and the bucket boundaries. Here instead:
//   1. each micro-batch's gradient is collected whole (flat, master dtype; the ZeRO layout's index
//      space, which does not depend on the world size where real elements are concerned);
//   2. a rank adds its micro-batches pairwise (dist::PairwiseSum), the subtree of its leaves;
//   3. at the boundary, dist::tree_all_reduce adds the ranks' subtrees in the upper levels of the
//      same tree (a recursive-halving reduce-scatter over point-to-point exchanges, then an
//      all-gather), and the result is divided by world x accumulation steps once;
//   4. every stage keeps its partition of that sum, and the gradient norm is summed parameter by
//      parameter, in parameter order, from the whole sum (not from partition partials).
// Elementwise sums make bucket boundaries irrelevant; the stages differ only in what they keep.
// The price: a whole flat gradient per rank (plus log2(accum) partial sums) in every stage, and an
// all-gather after the reduce-scatter, for the norm (docs/determinism.md, "cost").
#include "zero/engine.hpp"

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "dist/flight_recorder.hpp"
#include "zero/stage3.hpp"

namespace ampgrad::zero {

// Post-accumulate-grad hook, deterministic: g (the parameter's gradient, flat, loss-scaled) goes
// into this micro-batch's buffer; a second gradient of the same parameter in one backward is added.
void ZeroEngine::on_grad_in_tree(size_t i, const Tensor& g) {
    NoGradGuard no_grad;
    if (!micro_grad_.defined())
        micro_grad_ = zeros({layout_.padded_numel()}, TensorOptions().dtype(master_dtype_).device(params_[i].device()));
    micro_grad_.narrow(0, layout_.param_begin(i), layout_.param_numel(i)).add_(g.to(master_dtype_));
    if (stage3_) stage3_->after_grad(i);
}

// The epilogue, deterministic: this micro-batch is one leaf; at the boundary, reduce the tree.
void ZeroEngine::end_backward_in_tree() {
    if (stage3_) stage3_->end_backward();
    if (!micro_grad_.defined()) {   // no parameter got a gradient: a zero leaf keeps the tree's shape
        micro_grad_ = zeros({layout_.padded_numel()}, TensorOptions().dtype(master_dtype_).device(master_.device()));
    }
    micro_sums_.add(micro_grad_);
    micro_grad_ = Tensor();
    if (!is_gradient_accumulation_boundary()) return;
    unreduced_boundary_ = in_no_sync_;
    if (!in_no_sync_) reduce_in_tree();
}

// Rank subtrees -> the whole sum (same bits on every rank) -> / (W * GAS) once -> this rank's partition.
void ZeroEngine::reduce_in_tree() {
    NoGradGuard no_grad;
    dist::CollectiveSite site("zero.tree_all_reduce grads");
    Tensor total = dist::tree_all_reduce(micro_sums_.result(), *group_);   // (padded)
    tree_grad_ = total * (1.0 / divisor_);
    const int64_t begin = layout_.partition_begin(owner_rank());
    grad_partition_.copy_(tree_grad_.narrow(0, begin, layout_.partition_numel()).to(grad_partition_.dtype()));
}

// Sum of squares (f64) of each parameter's reduced gradient, added in parameter order on the host:
// the same bits in every layout, since every rank holds the whole sum.
double ZeroEngine::tree_grad_squared_norm() {
    NoGradGuard no_grad;
    double total = 0.0;
    for (size_t i = 0; i < params_.size(); ++i) {
        Tensor g = tree_grad_.narrow(0, layout_.param_begin(i), layout_.param_numel(i)).to(kFloat64);   // (numel)
        total += (g * g).sum().item<double>();
    }
    tree_grad_ = Tensor();
    return total;
}

}  // namespace ampgrad::zero
