// dist/tree_reduce.cpp: the fixed-tree sums of dist/tree_reduce.hpp.
#include "dist/tree_reduce.hpp"

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

#include <fmt/format.h>

namespace ampgrad::dist {

namespace {

bool is_power_of_two(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

// Adds adjacent pairs (0+1, 2+3, ...) until one is left: the complete binary tree for 2^k items.
template <typename T, typename Add>
T pairwise_levels(std::vector<T> items, Add add) {
    while (items.size() > 1) {
        std::vector<T> next;
        for (size_t i = 0; i + 1 < items.size(); i += 2) next.push_back(add(items[i], items[i + 1]));
        if (items.size() % 2 == 1) next.push_back(items.back());
        items = std::move(next);
    }
    return items.front();
}

}  // namespace

void check_tree_layout(int world_size, int64_t accum, const char* who) {
    if (is_power_of_two(world_size) && is_power_of_two(accum)) return;
    throw ValueError(fmt::format("{}: the deterministic mode adds the {} x {} micro-batches (world size {} x "
                                 "accumulation steps {}) in one binary tree, which needs both to be powers of two",
                                 who, world_size, accum, world_size, accum));
}

void PairwiseSum::add(Tensor leaf) {
    NoGradGuard no_grad;
    Partial p{std::move(leaf), 0};
    while (!stack_.empty() && stack_.back().level == p.level) {   // two equal subtrees: their parent
        p.sum = stack_.back().sum + p.sum;
        ++p.level;
        stack_.pop_back();
    }
    stack_.push_back(std::move(p));
    ++count_;
}

Tensor PairwiseSum::result() {
    if (stack_.empty()) throw InternalError("PairwiseSum.result: no leaf was added");
    NoGradGuard no_grad;
    Tensor sum = stack_.back().sum;
    for (size_t i = stack_.size() - 1; i-- > 0;) sum = stack_[i].sum + sum;
    stack_.clear();
    count_ = 0;
    return sum;
}

namespace {

// (W, m): local's n elements, zero-padded to W chunks of m = ceil(n / W); a view when no padding is needed.
Tensor as_chunks(const Tensor& local, int64_t W) {
    const int64_t n = local.numel(), m = (n + W - 1) / W;
    Tensor flat = local.reshape({-1});
    if (m * W != n) flat = cat({flat, zeros({m * W - n}, TensorOptions().dtype(local.dtype()).device(local.device()))}, 0);
    return flat.reshape({W, m});
}

}  // namespace

Tensor tree_reduce_scatter(const Tensor& local, ProcessGroup& group) {
    const int W = group.world_size(), r = group.rank();
    check_tree_layout(W, 1, "tree_reduce_scatter");
    if (!local.is_contiguous())
        throw ValueError(fmt::format("tree_reduce_scatter: the tensor must be contiguous, got {}", local.describe()));
    NoGradGuard no_grad;
    // Row j of `held` is chunk (r mod d) + j*d: the chunks whose low bits (below d) are r's.
    Tensor held = as_chunks(local, W);                                            // (W/d, m)
    for (int d = 1; d < W; d *= 2) {
        const int64_t rows = held.size(0), m = held.size(1);
        const int64_t my_bit = (r & d) != 0 ? 1 : 0;                              // bit d of chunk (r mod d) + j*d is j's lowest
        Tensor pairs = held.reshape({rows / 2, 2, m});
        Tensor outgoing = pairs.select(1, 1 - my_bit).contiguous();               // (rows/2, m) the partner's half
        Tensor incoming = empty_like(outgoing);
        group.send_recv(outgoing, r ^ d, incoming, r ^ d, /*async_op=*/false);
        held = pairs.select(1, my_bit) + incoming;                                // sibling blocks added: one tree level up
    }
    return held.reshape({-1});                                                    // (m) chunk r
}

Tensor tree_all_reduce(const Tensor& local, ProcessGroup& group) {
    const int W = group.world_size();
    check_tree_layout(W, 1, "tree_all_reduce");
    if (W == 1) return local;
    NoGradGuard no_grad;
    Tensor mine = tree_reduce_scatter(local, group);                              // (m)
    Tensor gathered = empty({W * mine.numel()}, TensorOptions().dtype(local.dtype()).device(local.device()));   // (W*m)
    group.all_gather(gathered, mine, /*async_op=*/false);
    return gathered.narrow(0, 0, local.numel()).reshape(local.sizes());
}

double tree_sum(const std::vector<double>& values) {
    if (values.empty()) return 0.0;
    return pairwise_levels(values, [](double a, double b) { return a + b; });
}

}  // namespace ampgrad::dist
