// op_utils.hpp: the argument checks and shape arithmetic shared by ops. Every user-facing error
// has the form "op: what is wrong: facts" and names each operand's shape, dtype and device.
#pragma once
#include <string_view>

#include "kernels/kernels.hpp"
#include "core/error.hpp"
#include "core/tensor.hpp"

namespace ampgrad::ops {

// Broadcast two shapes (numpy rules) or throw ShapeError naming the op and both operands.
Shape broadcast_shapes(std::string_view op, const Tensor& a, const Tensor& b);
Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b);
// Throw DeviceError unless all defined tensors share a device.
void check_same_device(std::string_view op, std::initializer_list<const Tensor*> ts);
void check_defined(std::string_view op, const Tensor& t, std::string_view arg);
// Throw DTypeError unless t is floating.
void check_floating(std::string_view op, const Tensor& t);
// Normalise a possibly negative dim against ndim; throws IndexError naming the op.
int64_t wrap_dim(std::string_view op, int64_t dim, int64_t ndim);
// A max/min-type reduction (amax, amin, max, min) of an empty tensor over `dims` (wrapped; every
// dim when the op was given none): IndexError if a reduced dim has size 0, which has no value to
// give, whether or not the result is empty (PyTorch's zero_numel_check_dims, ReduceOps.cpp).
void check_extremum_dims(std::string_view op, const Tensor& x, const std::vector<int64_t>& dims);
// A view of t broadcast to `shape` (stride 0 on the broadcast dims). No copy, no autograd.
Tensor expand_raw(const Tensor& t, const Shape& shape);
// t converted to dtype (no autograd; returns t itself if it already has it).
Tensor cast_raw(const Tensor& t, DType dtype);
// Output dtype for arithmetic between two tensors. 0-dim tensors only decide within a category
// ("wrapped scalars", as in PyTorch): f16 tensor * f32 0-dim -> f16.
DType result_type(const Tensor& a, const Tensor& b);
// out = a (op) b with broadcasting and promotion, no autograd (comparisons write kBool; integer
// division is true division in f32, as in PyTorch). `name` is the op named in errors.
Tensor binary_raw(BinaryOp op, std::string_view name, const Tensor& a, const Tensor& b);
// out = op(x) in x's dtype, no autograd.
Tensor unary_raw(UnaryOp op, const Tensor& x);

// A 0-dim tensor holding a Python-style scalar, typed to combine with `like` without promoting.
Tensor wrapped_scalar(double value, const Tensor& like);

}  // namespace ampgrad::ops
