// dist/tree_reduce.hpp: sums in one fixed binary tree, whatever the layout (issue 35,
// docs/determinism.md). IEEE addition is commutative bit for bit but not associative, so a sum of
// N = world x accum micro-batch gradients has the same bits in every layout exactly when every
// layout associates it the same way. These helpers use the complete binary tree over the N leaves
// in global micro-batch order (leaf g = rank * accum + k):
//
//   level 2            ((g0+g1)+(g2+g3))  +  ((g4+g5)+(g6+g7))
//   level 1        (g0+g1)+(g2+g3)          (g4+g5)+(g6+g7)        rank 0 | rank 1   (2 ranks x accum 4)
//   level 0      g0+g1     g2+g3          g4+g5     g6+g7
//
// A rank adds its own accum leaves with PairwiseSum (a binary-counter stack: log2(accum) + 1 partial
// sums alive at most), which gives the complete subtree of its leaves; tree_all_reduce then adds the
// ranks' subtrees in the upper levels of the same tree. Both need powers of two
// (check_tree_layout); then 1 x 8, 2 x 4, 4 x 2 and 8 x 1 add the same numbers in the same order.
//
//   dist::PairwiseSum local;
//   for (Tensor g : my_micro_batch_grads) local.add(g);
//   Tensor total = dist::tree_all_reduce(local.result(), dist::default_group());   // same bits on every rank
#pragma once
#include "core/tensor.hpp"
#include "dist/process_group.hpp"

#include <cstdint>
#include <vector>

namespace ampgrad::dist {

// ValueError (naming `who`, the world size and the accumulation steps) unless both are powers of two.
void check_tree_layout(int world_size, int64_t accum, const char* who);

// The pairwise sum of the leaves added so far, in the order added. Leaves: same shape and dtype.
class PairwiseSum {
public:
    void add(Tensor leaf);             // leaf is kept (not copied): do not write to it afterwards
    int64_t count() const { return count_; }
    // The sum: for a power-of-two count, the complete binary tree over the leaves; otherwise the
    // stack's partial sums added from the newest down. Resets to empty. InternalError when empty.
    Tensor result();

private:
    struct Partial {
        Tensor sum;
        int level = 0;                 // the sum covers 2^level leaves
    };
    std::vector<Partial> stack_;
    int64_t count_ = 0;
};

// The tree sum over the ranks of `group` of each rank's `local` (contiguous, n elements, the same
// everywhere), scattered: rank r gets chunk r of it, elements [r*m, (r+1)*m) with m = ceil(n / W)
// (the last chunks padded with zeros where W does not divide n). The world size W must be a power of
// two. Recursive halving over point-to-point exchanges (ProcessGroup::send_recv), with the distance
// doubling: at the step of distance d, rank r and rank r^d (whose blocks of d ranks are siblings in
// the tree) each hold the sums of their blocks for the same chunks; each keeps the half of those
// chunks whose bit d matches its own rank's, sends the other half to its partner, and adds what it
// receives. After log2(W) steps every element is the tree's sum, from 1/W of the traffic and of the
// additions of gathering everything. Returns (m).
Tensor tree_reduce_scatter(const Tensor& local, ProcessGroup& group);

// The same tree sum on every rank: tree_reduce_scatter, then an all-gather of the chunks (the
// traffic of a ring all-reduce, whose bits depend on the world size; these do not).
Tensor tree_all_reduce(const Tensor& local, ProcessGroup& group);

// The sum of `values` in the complete binary tree over their index (a power-of-two count), or, for
// another count, adjacent pairs added level by level (an odd one out carried up).
double tree_sum(const std::vector<double>& values);

}  // namespace ampgrad::dist
