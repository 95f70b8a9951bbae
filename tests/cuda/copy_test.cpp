// copy_test.cpp: cuda/copy.cu against cpu/copy.cpp: host<->GPU transfers, dtype conversion for
// every pair, strided/broadcast/offset views on either side, and fill. All comparisons are exact:
// both backends convert with the same rules.
#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

// Values that exercise conversion: normals scaled to span several integers, plus (for float
// targets only; float -> int of inf/NaN/huge is undefined on the CPU) the awkward cases.
Tensor conversion_source(DType from, bool with_specials) {
    std::vector<double> values = sample({64}, kFloat64, 7).to_vector<double>();
    for (double& v : values) v *= 20.0;
    if (with_specials && is_floating(from)) {
        for (double s : std::initializer_list<double>{INFINITY, -INFINITY, NAN, 65520.0, -65504.0, 1e-8, -0.0, 2.5,
                                                       -3.5, 1e38, 3.0e-39})
            values.push_back(s);
    }
    Tensor f64 = tensor(values, {static_cast<int64_t>(values.size())});
    if (!is_floating(from)) return copy_to(sample({64}, from, 11), kHost);
    return copy_to(f64, kHost, from);
}

}  // namespace

TEST_CASE("cuda copy: host -> GPU -> host round trip is exact for every dtype" * skip_without_gpu()) {
    for (DType dtype : kAllDTypes) {
        CAPTURE(dtype_name(dtype));
        Tensor h = sample({3, 5, 7}, dtype, 1);
        Tensor d = to_gpu(h);
        CHECK(d.device() == kGpu);
        CHECK_EXACT(to_host(d), h);
    }
}

TEST_CASE("cuda copy: dtype conversion on the GPU matches the CPU for every dtype pair" * skip_without_gpu()) {
    for (DType from : kAllDTypes) {
        for (DType to : kAllDTypes) {
            CAPTURE(dtype_name(from));
            CAPTURE(dtype_name(to));
            Tensor h = conversion_source(from, is_floating(to));
            Tensor expected = copy_to(h, kHost, to);                       // the CPU backend converts
            Tensor on_gpu = to_gpu(h);
            Tensor converted = make_empty(h.sizes(), to, kGpu);
            kernels::copy(converted, on_gpu);                       // GPU -> GPU conversion
            CHECK_EXACT(converted, expected);
            CHECK_EXACT(copy_to(on_gpu, kHost, to), expected);               // converted on the way out
            CHECK_EXACT(copy_to(h, kGpu, to), expected);                     // converted on the way in
        }
    }
}

TEST_CASE("cuda copy: strided, offset and broadcast views gather and scatter correctly" * skip_without_gpu()) {
    Tensor h = sample({4, 6}, kFloat32, 2);                                  // (4,6)
    Tensor d = to_gpu(h);
    SUBCASE("transposed source") {
        CHECK_EXACT(to_host(make_view(d, {6, 4}, {1, 6}, 0)), to_host(make_view(h, {6, 4}, {1, 6}, 0)));
    }
    SUBCASE("offset narrow source with conversion to f16") {
        Tensor view_gpu = make_view(d, {2, 3}, {6, 1}, 8);
        Tensor view_cpu = make_view(h, {2, 3}, {6, 1}, 8);
        CHECK_EXACT(copy_to(view_gpu, kHost, kFloat16), copy_to(view_cpu, kHost, kFloat16));
    }
    SUBCASE("broadcast source (stride 0)") {
        CHECK_EXACT(to_host(make_view(d, {3, 4, 6}, {0, 6, 1}, 0)), to_host(make_view(h, {3, 4, 6}, {0, 6, 1}, 0)));
    }
    SUBCASE("strided GPU destination") {
        Tensor dst = to_gpu(zeros({6, 4}));                                  // written through a (4,6) view
        kernels::copy(make_view(dst, {4, 6}, {1, 4}, 0), d);
        CHECK_EXACT(to_host(dst), to_host(make_view(h, {6, 4}, {1, 6}, 0)));
    }
    SUBCASE("strided host destination") {
        Tensor dst = zeros({6, 4});
        kernels::copy(make_view(dst, {4, 6}, {1, 4}, 0), d);
        CHECK_EXACT(dst, to_host(make_view(h, {6, 4}, {1, 6}, 0)));
    }
    SUBCASE("broadcast host source into a GPU tensor") {
        Tensor row = sample({6}, kFloat64, 3);
        Tensor dst = make_empty({4, 6}, kFloat32, kGpu);
        kernels::copy(dst, make_view(row, {4, 6}, {0, 1}, 0));
        CHECK_EXACT(dst, copy_to(make_view(row, {4, 6}, {0, 1}, 0), kHost, kFloat32));
    }
}

TEST_CASE("cuda copy: empty tensors copy nothing and do not fail" * skip_without_gpu()) {
    Tensor h = make_empty({0, 3}, kFloat32, kHost);
    Tensor d = to_gpu(h);
    CHECK(d.numel() == 0);
    CHECK(to_host(d).numel() == 0);
    kernels::fill(d, 1.0);
}

TEST_CASE("cuda fill: every dtype and value matches the CPU, on contiguous and strided tensors" * skip_without_gpu()) {
    for (DType dtype : kAllDTypes) {
        std::vector<double> values = {0.0, 1.0, -3.0, 7.0};
        if (is_floating(dtype)) values.insert(values.end(), {1.5, -0.0, 65520.0, 1e30, 3.0e-39, NAN, -INFINITY});
        for (double v : values) {
            CAPTURE(dtype_name(dtype));
            CAPTURE(v);
            Tensor expected = make_empty({5, 3}, dtype, kHost);
            kernels::fill(expected, v);
            Tensor d = make_empty({5, 3}, dtype, kGpu);
            kernels::fill(d, v);
            CHECK_EXACT(d, expected);
        }
        // A strided destination: rows 0 and 2 of a (4,3) tensor.
        Tensor d = to_gpu(sample({4, 3}, dtype, 5));
        Tensor h = to_host(d);
        kernels::fill(make_view(d, {2, 3}, {6, 1}, 0), 1.0);
        kernels::fill(make_view(h, {2, 3}, {6, 1}, 0), 1.0);
        CHECK_EXACT(d, h);
    }
}
