// index_layout_test.cpp: kernels/index_layout.hpp, the index walk the CPU and CUDA gather/scatter
// kernels share: the element offsets of every position (and of every slice), with each operand's
// own strides, 0-d operands as 1-d, and the contract checks.
#include <doctest/doctest.h>

#include "ampgrad/ampgrad.h"
#include "kernels/index_layout.hpp"

using namespace ampgrad;

TEST_CASE("index layout: offsets of positions and slices follow each operand's strides") {
    Tensor data = zeros({4, 3}).t();                                  // (3,4), strides (1,3)
    Tensor index = zeros({2, 5}, TensorOptions(kInt64));              // (2,5) contiguous: strides (5,1)
    Tensor other = make_view(zeros({5}), {2, 5}, {0, 1}, 0);          // (2,5) broadcast rows: strides (0,1)
    IndexAlongDim L = make_index_layout("test", data, index, other, 1);
    CHECK(L.ndim == 2);
    CHECK(L.dim_size == 4);
    IndexOffsets o = L.offsets(7, false);                             // position (1,2)
    CHECK(o.index == 7);
    CHECK(o.other == 2);
    CHECK(o.data == 1);                                               // row 1 of data; dim 1 left to the index
    CHECK(L.slices(index.numel()) == 2);
    IndexOffsets s = L.offsets(1, true);                              // slice 1: position (1,0)
    CHECK(s.index == 5);
    CHECK(s.other == 0);
    CHECK(s.data == 1);
    CHECK(L.in_range(3));
    CHECK_FALSE(L.in_range(4));
    CHECK_FALSE(L.in_range(-1));
}

TEST_CASE("index layout: 0-d operands count as 1-d of size 1, and broken contracts are caught") {
    Tensor s = scalar_tensor(1.0);
    IndexAlongDim L = make_index_layout("test", s, scalar_tensor(0.0, TensorOptions(kInt64)), s, 0);
    CHECK(L.ndim == 1);
    CHECK(L.sizes[0] == 1);
    CHECK(L.offsets(0, false).data == 0);
    CHECK_THROWS_AS(make_index_layout("test", zeros({2, 3}), zeros({3, 1}, TensorOptions(kInt64)), zeros({3, 1}), 1),
                    InternalError);                                   // index larger than data apart from dim
    CHECK_THROWS_AS(make_index_layout("test", zeros({2, 3}), zeros({2}, TensorOptions(kInt64)), zeros({2}), 1),
                    InternalError);                                   // ranks differ
    CHECK(index_out_of_bounds_message(5, 0, 3) == "index 5 is out of bounds for dimension 0 with size 3");
}
