// reduce_utils.cpp: see reduce_utils.hpp.
#include "autograd/ops/reduce_utils.hpp"

#include <algorithm>

#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::ops {

std::vector<int64_t> reduce_dims(std::string_view op, const Tensor& x, const Shape& dims) {
    std::vector<int64_t> out;
    for (int64_t d : dims) {
        const int64_t w = wrap_dim(op, d, x.dim());
        if (std::find(out.begin(), out.end(), w) != out.end())
            throw ValueError(fmt::format("{}: dim {} appears multiple times in the list of dims", op, w));
        out.push_back(w);
    }
    if (x.dim() == 0) return {};                                   // checked; nothing to reduce
    if (dims.empty())
        for (int64_t d = 0; d < x.dim(); ++d) out.push_back(d);
    std::sort(out.begin(), out.end());
    return out;
}

Shape kept_shape(const Tensor& x, const std::vector<int64_t>& dims) {
    Shape s = x.sizes();
    for (int64_t d : dims) s[static_cast<size_t>(d)] = 1;
    return s;
}

Shape dropped_shape(const Tensor& x, const std::vector<int64_t>& dims) {
    Shape s;
    for (int64_t d = 0; d < x.dim(); ++d)
        if (std::find(dims.begin(), dims.end(), d) == dims.end()) s.push_back(x.size(d));
    return s;
}

int64_t reduced_count(const Tensor& x, const std::vector<int64_t>& dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= x.size(d);
    return n;
}

Tensor reduce_raw(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, DType dtype) {
    Tensor in = cast_raw(x, dtype);
    Tensor out = make_empty(kept_shape(in, dims), dtype, x.device());
    if (out.numel() > 0) kernels::reduce(op, out, in, dims);
    if (keepdim) return out;
    const Shape s = dropped_shape(x, dims);
    return make_view(out, s, contiguous_strides(s), 0);
}

Tensor restore_dims(Tensor g, const std::vector<int64_t>& dims, bool keepdim) {
    if (!keepdim)
        for (int64_t d : dims) g = unsqueeze(g, d);
    return g;
}

}  // namespace ampgrad::ops
