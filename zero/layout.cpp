// zero/layout.cpp: the flat partition layout and the owner-contiguous bucket packing (layout.hpp).
#include "zero/layout.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace ampgrad::zero {

FlatLayout::FlatLayout(const std::vector<int64_t>& numels, int world_size) : numels_(numels), world_(world_size) {
    if (world_size < 1) throw ValueError(fmt::format("FlatLayout: world size {} must be >= 1", world_size));
    for (int64_t n : numels_) {
        offsets_.push_back(total_);
        total_ += n;
    }
    partition_ = (total_ + world_ - 1) / world_;
    padded_ = partition_ * world_;
}

std::vector<Piece> FlatLayout::pieces(size_t i) const {
    std::vector<Piece> out;
    int64_t begin = offsets_[i], end = begin + numels_[i];
    for (int64_t at = begin; at < end;) {
        int rank = static_cast<int>(at / partition_);
        int64_t stop = std::min(end, partition_ * (rank + 1));
        out.push_back({i, rank, at - begin, at, stop - at});
        at = stop;
    }
    return out;
}

BucketPacking pack_bucket(const FlatLayout& layout, const std::vector<size_t>& params) {
    BucketPacking b;
    for (size_t i : params)
        for (const Piece& p : layout.pieces(i)) b.pieces.push_back(p);
    // Owner-major, then flat order within an owner.
    std::stable_sort(b.pieces.begin(), b.pieces.end(), [](const Piece& x, const Piece& y) {
        return x.rank != y.rank ? x.rank < y.rank : x.flat_begin < y.flat_begin;
    });
    std::vector<int64_t> used(static_cast<size_t>(layout.world_size()), 0);
    for (const Piece& p : b.pieces) used[static_cast<size_t>(p.rank)] += p.numel;
    b.chunk = *std::max_element(used.begin(), used.end());
    std::fill(used.begin(), used.end(), 0);
    for (const Piece& p : b.pieces) {
        auto r = static_cast<size_t>(p.rank);
        b.buffer_offset.push_back(static_cast<int64_t>(r) * b.chunk + used[r]);
        used[r] += p.numel;
    }
    return b;
}

}  // namespace ampgrad::zero
