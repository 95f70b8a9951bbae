// view.cpp: placeholder until implemented.
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad {
Tensor view(const Tensor& x, const Shape& shape) { throw Error("view: not implemented yet"); }
Tensor reshape(const Tensor& x, const Shape& shape) { throw Error("reshape: not implemented yet"); }
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) { throw Error("transpose: not implemented yet"); }
Tensor permute(const Tensor& x, const Shape& dims) { throw Error("permute: not implemented yet"); }
Tensor unsqueeze(const Tensor& x, int64_t d) { throw Error("unsqueeze: not implemented yet"); }
Tensor squeeze(const Tensor& x, int64_t d) { throw Error("squeeze: not implemented yet"); }
Tensor expand(const Tensor& x, const Shape& shape) { throw Error("expand: not implemented yet"); }
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) { throw Error("narrow: not implemented yet"); }
Tensor select(const Tensor& x, int64_t dim, int64_t index) { throw Error("select: not implemented yet"); }
tensor_list split(const Tensor& x, int64_t split_size, int64_t dim) { throw Error("split: not implemented yet"); }
Tensor cat(const tensor_list& tensors, int64_t dim) { throw Error("cat: not implemented yet"); }
Tensor stack(const tensor_list& tensors, int64_t dim) { throw Error("stack: not implemented yet"); }
Tensor contiguous(const Tensor& x) { throw Error("contiguous: not implemented yet"); }
Tensor clone(const Tensor& x) { throw Error("clone: not implemented yet"); }
Tensor to_dtype(const Tensor& x, DType dtype) { throw Error("to_dtype: not implemented yet"); }
Tensor to_device(const Tensor& x, Device device) { throw Error("to_device: not implemented yet"); }
}  // namespace ampgrad
