// index_test.cpp: cuda/index.cu's gather and scatter kernels, and the ops built on them, on the GPU
// against the CPU: strided and broadcast operands, int64 and int32 indices, every dtype, repeated
// targets (the scatter walk is deterministic, so f32/f64 sums match the CPU's bit for bit), and the
// ops' gradients. Skipped without a GPU.
#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

// (rows, cols) int64 indices in [0, bound), seeded
Tensor index_sample(const Shape& shape, int64_t bound, uint64_t seed) {
    manual_seed(seed);
    return randint(0, bound, shape, TensorOptions(kInt64));
}

}  // namespace

TEST_CASE("cuda gather and scatter kernels: the CPU's values for every dtype and index dtype" * skip_without_gpu()) {
    for (DType dtype : kAllDTypes) {
        for (DType index_dtype : {kInt64, kInt32}) {
            CAPTURE(dtype_name(dtype));
            CAPTURE(dtype_name(index_dtype));
            Tensor self = sample({4, 5}, dtype, 11);
            Tensor index = copy_to(index_sample({6, 3}, 4, 12), kHost, index_dtype);   // (6,3) into dim 0
            Tensor out_h = make_empty({6, 3}, dtype, kHost), out_g = make_empty({6, 3}, dtype, kGpu);
            kernels::gather(out_h, self, index, 0);
            kernels::gather(out_g, to_gpu(self), to_gpu(index), 0);
            CHECK_EXACT(to_host(out_g), out_h);

            Tensor src = sample({6, 3}, dtype, 13);
            for (bool accumulate : {false, true}) {
                CAPTURE(accumulate);
                Tensor dst_h = self.clone(), dst_g = to_gpu(self);
                kernels::scatter(dst_h, index, src, 0, accumulate);
                kernels::scatter(dst_g, to_gpu(index), to_gpu(src), 0, accumulate);
                CHECK_EXACT(to_host(dst_g), dst_h);   // same walk, same order of adds
            }
        }
    }
}

TEST_CASE("cuda gather/scatter/index ops with strided operands: the CPU's values and gradients" * skip_without_gpu()) {
    Tensor index = index_sample({3, 4}, 5, 21);
    Tensor rows = index_sample({7}, 4, 22);
    const std::vector<std::function<Tensor(const Tensor&, const Tensor&)>> ops = {
        [&](const Tensor& x, const Tensor&) { return gather(x.t(), 0, index.to(x.device())); },   // x^T (5,4), strided
        [&](const Tensor& x, const Tensor& s) { return scatter_add(x, 1, index.to(x.device()), s); },
        [&](const Tensor& x, const Tensor& s) { return scatter(x, 1, index.to(x.device()), s); },
        [&](const Tensor& x, const Tensor&) { return index_select(x, 0, rows.to(x.device())); },
        [&](const Tensor& x, const Tensor&) { return take_along_dim(x, index.to(x.device()).narrow(0, 0, 1), 1); },
        [&](const Tensor& x, const Tensor&) {
            return repeat_interleave(x, tensor<int64_t>({1, 0, 2, 1}).to(x.device()), 0);
        },
    };
    for (DType dtype : kFloatDTypes) {
        CAPTURE(dtype_name(dtype));
        Tensor x = sample({4, 5}, dtype, 23), s = sample({3, 4}, dtype, 24);
        for (size_t i = 0; i < ops.size(); ++i) {
            CAPTURE(i);
            Tensor xh = x.clone().requires_grad_(true), xg = to_gpu(x).requires_grad_(true);
            Tensor sh = s.clone().requires_grad_(true), sg = to_gpu(s).requires_grad_(true);
            Tensor yh = ops[i](xh, sh), yg = ops[i](xg, sg);
            CHECK_EXACT(yg, yh);
            Tensor dy = sample(yh.sizes(), dtype, 25);
            (yh * dy).sum().backward();
            (yg * to_gpu(dy)).sum().backward();
            CHECK_GPU_CLOSE(xg.grad(), xh.grad(), tol_for(dtype));
        }
    }
    Tensor source = sample({4, 7}, kFloat32, 26);
    Tensor xa = sample({4, 4}, kFloat32, 27);
    CHECK_EXACT(index_add(to_gpu(xa), 1, to_gpu(rows), to_gpu(source), 0.5),
                index_add(xa, 1, rows, source, 0.5));
    CHECK_EXACT(F::one_hot(to_gpu(rows), 5), F::one_hot(rows, 5));
}

TEST_CASE("cuda gather and scatter kernels over many blocks: the CPU's values" * skip_without_gpu()) {
    Tensor self = sample({40, 300}, kFloat32, 31);
    Tensor index = index_sample({70, 300}, 40, 32);                 // 21000 positions, 300 slices along dim 0
    Tensor out_h = make_empty({70, 300}, kFloat32, kHost), out_g = make_empty({70, 300}, kFloat32, kGpu);
    kernels::gather(out_h, self, index, 0);
    kernels::gather(out_g, to_gpu(self), to_gpu(index), 0);
    CHECK_EXACT(out_g, out_h);
    Tensor src = sample({70, 300}, kFloat32, 33);
    Tensor dst_h = self.clone(), dst_g = to_gpu(self);
    kernels::scatter(dst_h, index, src, 0, true);                   // repeated targets, added in index order
    kernels::scatter(dst_g, to_gpu(index), to_gpu(src), 0, true);
    CHECK_EXACT(dst_g, dst_h);
}
