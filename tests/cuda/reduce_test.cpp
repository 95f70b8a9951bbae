// reduce_test.cpp: cuda/reduce.cu against cpu/reduce.cpp: every ReduceOp over every subset of dims
// of a contiguous input, over transposed/permuted, broadcast (stride 0) and offset views, empty
// inputs, inputs with NaN, and 2^20+3-element inputs (the split path for few long runs, the column
// path with chunk partials, a NaN in one chunk of a split run); then max_with_indices (ties, NaN,
// strided, large). Both backends accumulate sums in double, so float results agree within
// tol_for(dtype); integer results and indices must be exact.
#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

#define AMPGRAD_REDUCE(e, name, formula) ReduceOp::e,
constexpr ReduceOp kAllReduceOps[] = {AMPGRAD_REDUCE_OPS(AMPGRAD_REDUCE)};
#undef AMPGRAD_REDUCE
// Products of many values overflow int64 (undefined behaviour), so integers skip kProd.
const std::vector<ReduceOp> kIntReduceOps = {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin,
                                             ReduceOp::kSumSquares};

// The same view (sizes, strides, offset) of a contiguous host base and of its copy on the GPU.
struct Views {
    Tensor host, gpu;
};
Views views_of(const Tensor& base, const Shape& sizes, const Shape& strides, int64_t offset = 0) {
    return {make_view(base, sizes, strides, offset), make_view(to_gpu(base), sizes, strides, offset)};
}
Views both_dense(const Tensor& base) { return {base, to_gpu(base)}; }

Shape keepdim_shape(const Shape& sizes, const std::vector<int64_t>& dims) {
    Shape out = sizes;
    for (int64_t d : dims) out[static_cast<size_t>(d)] = 1;
    return out;
}

// Reduces v over dims on both backends and compares (exactly for integer dtypes).
void check_reduce(ReduceOp op, const Views& v, const std::vector<int64_t>& dims) {
    CAPTURE(op_name(op));
    CAPTURE(v.host.describe());
    std::string dim_list;
    for (int64_t d : dims) dim_list += fmt::format("{} ", d);
    CAPTURE(dim_list);
    const DType dtype = v.host.dtype();
    Shape out_shape = keepdim_shape(v.host.sizes(), dims);
    Tensor expected = make_empty(out_shape, dtype, kHost);
    kernels::reduce(op, expected, v.host, dims);
    Tensor out = make_empty(out_shape, dtype, kGpu);
    kernels::reduce(op, out, v.gpu, dims);
    if (is_floating(dtype)) CHECK_GPU_CLOSE(out, expected, tol_for(dtype));
    else CHECK_EXACT(out, expected);
}

// Every non-empty subset of {0, .., rank-1}, plus the empty one (a reduction over nothing).
std::vector<std::vector<int64_t>> all_dim_sets(int64_t rank) {
    std::vector<std::vector<int64_t>> sets;
    for (int64_t mask = 0; mask < (int64_t{1} << rank); ++mask) {
        std::vector<int64_t> dims;
        for (int64_t d = 0; d < rank; ++d)
            if (mask & (int64_t{1} << d)) dims.push_back(d);
        sets.push_back(dims);
    }
    return sets;
}

// Host values with NaN at the given flat positions, in dtype.
Tensor with_nans(const Shape& shape, DType dtype, uint64_t seed, const std::vector<int64_t>& at) {
    std::vector<double> v = sample(shape, kFloat64, seed).to_vector<double>();
    for (int64_t i : at) v[static_cast<size_t>(i)] = NAN;
    return copy_to(tensor(v, shape), kHost, dtype);
}

}  // namespace

TEST_CASE("cuda reduce: every op over every set of dims of a contiguous (4,5,6), all dtypes" * skip_without_gpu()) {
    for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32}) {
        CAPTURE(dtype_name(dtype));
        Views v = both_dense(sample({4, 5, 6}, dtype, 101));
        const std::vector<ReduceOp> ops =
            is_floating(dtype) ? std::vector<ReduceOp>(std::begin(kAllReduceOps), std::end(kAllReduceOps))
                               : kIntReduceOps;
        for (ReduceOp op : ops)
            for (const auto& dims : all_dim_sets(3)) check_reduce(op, v, dims);
    }
}

TEST_CASE("cuda reduce: transposed, permuted, broadcast and offset views" * skip_without_gpu()) {
    for (DType dtype : kFloatDTypes) {
        CAPTURE(dtype_name(dtype));
        Tensor base = sample({6, 7}, dtype, 102);
        Views transposed = views_of(base, {7, 6}, {1, 7});
        Tensor base3 = sample({3, 4, 5}, dtype, 103);
        Views permuted = views_of(base3, {5, 3, 4}, {1, 20, 5});            // base3.permute(2, 0, 1)
        Views broadcast = views_of(sample({5}, dtype, 104), {4, 5}, {0, 1});  // (5) expanded to (4,5)
        Views sliced = views_of(base, {3, 4}, {14, 2}, 1);                   // base[::2, 1::2] less one row
        for (ReduceOp op : kAllReduceOps) {
            for (const auto& dims : all_dim_sets(2)) {
                check_reduce(op, transposed, dims);
                check_reduce(op, broadcast, dims);
                check_reduce(op, sliced, dims);
            }
            for (const auto& dims : all_dim_sets(3)) check_reduce(op, permuted, dims);
        }
    }
}

TEST_CASE("cuda reduce: empty inputs give sum 0, prod 1, mean NaN; max/min throw as on the CPU" * skip_without_gpu()) {
    for (DType dtype : kFloatDTypes) {
        CAPTURE(dtype_name(dtype));
        Views v = both_dense(make_empty({0, 5}, dtype, kHost));
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kProd, ReduceOp::kSumSquares})
            check_reduce(op, v, {0});
        Tensor out = make_empty({1, 5}, dtype, kGpu);
        CHECK_THROWS_AS(kernels::reduce(ReduceOp::kMax, out, v.gpu, std::vector<int64_t>{0}), ValueError);
        CHECK_THROWS_AS(kernels::reduce(ReduceOp::kMin, out, v.gpu, std::vector<int64_t>{0}), ValueError);
        // a kept dim of size 0: nothing to write, no error
        Views kept_empty = both_dense(make_empty({3, 0}, dtype, kHost));
        for (ReduceOp op : kAllReduceOps) check_reduce(op, kept_empty, {0});
    }
}

TEST_CASE("cuda reduce: NaN propagates through max, min and sum" * skip_without_gpu()) {
    for (DType dtype : kFloatDTypes) {
        CAPTURE(dtype_name(dtype));
        Views v = both_dense(with_nans({4, 40}, dtype, 105, {3, 77, 159}));    // rows 0, 1, 3 hold a NaN
        for (ReduceOp op : kAllReduceOps)
            for (const auto& dims : all_dim_sets(2)) check_reduce(op, v, dims);
    }
}

TEST_CASE("cuda reduce: 2^20+3 elements: whole, by rows, by columns, transposed" * skip_without_gpu()) {
    const int64_t n = (int64_t{1} << 20) + 3;
    const std::vector<ReduceOp> ops = {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin,
                                       ReduceOp::kSumSquares};
    for (DType dtype : kFloatDTypes) {
        CAPTURE(dtype_name(dtype));
        Tensor flat = sample({n}, dtype, 106);
        Views whole = both_dense(flat);
        Views rows = views_of(flat, {3, n / 3}, {n / 3, 1});                  // 3 rows of 349526 (split path)
        Views cols = views_of(flat, {n / 3, 3}, {3, 1});                      // sum over rows: column chunks
        Views transposed = views_of(flat, {n / 3, 3}, {1, n / 3});
        for (ReduceOp op : ops) {
            check_reduce(op, whole, {0});
            check_reduce(op, rows, {1});
            check_reduce(op, rows, {0});
            check_reduce(op, cols, {0});
            check_reduce(op, transposed, {0});
        }
    }
    Views ints = both_dense(sample({n}, kInt64, 107));
    for (ReduceOp op : kIntReduceOps) check_reduce(op, ints, {0});
    // One NaN deep inside one chunk of a whole-tensor (split) reduction reaches the result.
    Views with_nan = both_dense(with_nans({n}, kFloat32, 108, {n / 2 + 17}));
    for (ReduceOp op : ops) {
        check_reduce(op, with_nan, {0});
        Tensor out = make_empty({1}, kFloat32, kGpu);
        kernels::reduce(op, out, with_nan.gpu, std::vector<int64_t>{0});
        CHECK(std::isnan(host_values(out)[0]));
    }
}

TEST_CASE("cuda reduce: bool input throws DTypeError" * skip_without_gpu()) {
    Tensor in = to_gpu(sample({3, 4}, kBool, 108));
    Tensor out = make_empty({1, 4}, kBool, kGpu);
    CHECK_THROWS_AS(kernels::reduce(ReduceOp::kSum, out, in, std::vector<int64_t>{0}), DTypeError);
}

// ---- max_with_indices ----

namespace {

void check_max_with_indices(const Views& v, int64_t dim) {
    CAPTURE(v.host.describe());
    CAPTURE(dim);
    Shape out_shape = keepdim_shape(v.host.sizes(), {dim});
    Tensor values = make_empty(out_shape, v.host.dtype(), kHost), indices = make_empty(out_shape, kInt64, kHost);
    kernels::max_with_indices(values, indices, v.host, dim);
    Tensor gpu_values = make_empty(out_shape, v.host.dtype(), kGpu), gpu_indices = make_empty(out_shape, kInt64, kGpu);
    kernels::max_with_indices(gpu_values, gpu_indices, v.gpu, dim);
    CHECK_EXACT(gpu_values, values);                      // a max is one of the inputs: no rounding
    CHECK_EXACT(gpu_indices, indices);
}

}  // namespace

TEST_CASE("cuda max_with_indices: first maximum, first NaN, strided and large inputs" * skip_without_gpu()) {
    for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32}) {
        CAPTURE(dtype_name(dtype));
        Tensor base = sample({6, 50}, dtype, 111);                             // ints in [-5,5]: many ties
        Views v = both_dense(base);
        Views transposed = views_of(base, {50, 6}, {1, 50});
        for (int64_t dim : {0, 1}) {
            check_max_with_indices(v, dim);
            check_max_with_indices(transposed, dim);
        }
        Views permuted = views_of(sample({3, 4, 5}, dtype, 112), {5, 3, 4}, {1, 20, 5});
        for (int64_t dim : {0, 1, 2}) check_max_with_indices(permuted, dim);
    }
    for (DType dtype : kFloatDTypes) {
        CAPTURE(dtype_name(dtype));
        check_max_with_indices(both_dense(with_nans({3, 70}, dtype, 113, {5, 40, 75, 139})), 1);   // rows 0 and 1: 2 NaNs
        check_max_with_indices(both_dense(sample({3, (int64_t{1} << 20) / 3 + 1}, dtype, 114)), 1);  // block path
    }
    Tensor ints = sample({(int64_t{1} << 20) + 3}, kInt32, 115);
    check_max_with_indices(both_dense(ints), 0);
    Views empty = both_dense(make_empty({4, 0}, kFloat32, kHost));
    Tensor values = make_empty({4, 1}, kFloat32, kGpu), indices = make_empty({4, 1}, kInt64, kGpu);
    CHECK_THROWS_AS(kernels::max_with_indices(values, indices, empty.gpu, 1), IndexError);
}
