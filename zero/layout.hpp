// zero/layout.hpp: how ZeRO stages 1 and 2 split the trainable parameters across ranks, as
// DeepSpeed's stage_1_and_2.py does: the parameters, in order, are laid end to end in one flat
// index space of `padded` elements (the real ones, then zeros up to a multiple of the world size
// W); rank r owns the contiguous partition [r*P, (r+1)*P), P = padded / W. A parameter may
// straddle two or more ranks. docs/zero.md draws it.
//
//   params  |---- w1 (6) ----|-- b1 (2) --|------ w2 (6) ------|b2|pad|
//   flat     0              6           8                    14  15  16     (W = 4: P = 4)
//   owner    |   rank 0   |   rank 1    |    rank 2    |    rank 3    |
//
// A gradient bucket (a few parameters) is reduce-scattered in OWNER-CONTIGUOUS order: its pieces
// are sorted by the rank that owns them into W equal chunks (the longest piece-set sets the chunk
// size, the rest is padding), so one reduce_scatter leaves each rank exactly its own pieces.
// DeepSpeed all-reduces the bucket instead and lets every rank keep its slice.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ampgrad::zero {

// A run of flat elements [flat_begin, flat_begin + numel) of one parameter, starting at
// element param_offset of it, owned by `rank`.
struct Piece {
    size_t param = 0;
    int rank = 0;
    int64_t param_offset = 0;
    int64_t flat_begin = 0;
    int64_t numel = 0;
};

class FlatLayout {
public:
    FlatLayout(const std::vector<int64_t>& numels, int world_size);

    int world_size() const { return world_; }
    int64_t numel() const { return total_; }                        // real elements
    int64_t padded_numel() const { return padded_; }
    int64_t partition_numel() const { return partition_; }           // P
    int64_t partition_begin(int rank) const { return partition_ * rank; }
    int64_t param_begin(size_t i) const { return offsets_[i]; }
    int64_t param_numel(size_t i) const { return numels_[i]; }
    size_t param_count() const { return numels_.size(); }
    // Parameter i split at the partition boundaries, in flat order.
    std::vector<Piece> pieces(size_t i) const;

private:
    std::vector<int64_t> numels_, offsets_;
    int world_;
    int64_t total_ = 0, padded_ = 0, partition_ = 0;
};

// The owner-contiguous packing of a bucket: pieces grouped by owner, with each piece's position in
// the (W * chunk) send buffer.
struct BucketPacking {
    int64_t chunk = 0;                       // elements per rank; the buffer holds W * chunk
    std::vector<Piece> pieces;               // all pieces of the bucket's parameters
    std::vector<int64_t> buffer_offset;      // pieces[k] goes to [buffer_offset[k], + numel)
};
BucketPacking pack_bucket(const FlatLayout& layout, const std::vector<size_t>& params);

}  // namespace ampgrad::zero
