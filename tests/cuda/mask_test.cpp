// mask_test.cpp: autograd/ops/mask.cpp's ops on the GPU against the CPU. They are composed of
// kernels every backend has (arange, comparisons, where, copy), so this checks that the composition
// runs on cuda:0 and gives the CPU's values exactly and its gradients within a rounding. Skipped without a GPU.
#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("cuda tril, triu, masked_fill, repeat_interleave, chunk: the CPU's values and gradients" * skip_without_gpu()) {
    const std::vector<std::function<Tensor(const Tensor&)>> ops = {
        [](const Tensor& x) { return tril(x, -1); },
        [](const Tensor& x) { return triu(x, 1); },
        [](const Tensor& x) { return masked_fill(x, x > 0.0, -1e4); },
        [](const Tensor& x) { return repeat_interleave(x, 3, 1); },
        [](const Tensor& x) { return chunk(x, 2, -1)[1]; },
    };
    for (DType dtype : kFloatDTypes) {
        CAPTURE(dtype_name(dtype));
        Tensor x = sample({2, 3, 5}, dtype, 91);
        for (size_t i = 0; i < ops.size(); ++i) {
            CAPTURE(i);
            Tensor xh = x.clone().requires_grad_(true), xg = to_gpu(x).requires_grad_(true);
            Tensor yh = ops[i](xh), yg = ops[i](xg);
            CHECK_EXACT(yg, yh);
            Tensor dy = sample(yh.sizes(), dtype, 92);
            yh.backward(dy);
            yg.backward(to_gpu(dy));
            CHECK_GPU_CLOSE(xg.grad(), xh.grad(), tol_for(dtype));   // repeat_interleave sums in its own order
        }
    }
}
