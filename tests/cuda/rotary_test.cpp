// rotary_test.cpp: cuda/rotary.cu against cpu/rotary.cpp: the forward and the transpose, in both pair
// layouts and every float dtype, on a transposed x and cos/sin tables broadcast over batch and heads.
// Skipped without a GPU.
#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("cuda rotary_embedding: forward and transpose match the CPU in both layouts" * skip_without_gpu()) {
    const Shape shape = {2, 3, 5, 8};                                                     // (B,NH,T,HS)
    for (DType dtype : kFloatDTypes) {
        Tensor base = sample({2, 5, 3, 8}, dtype, 71);                                    // (B,T,NH,HS)
        Tensor table_cos = sample({5, 8}, dtype, 72), table_sin = sample({5, 8}, dtype, 73);   // (T,HS)
        auto views = [&](Device device) {                         // x transposed; tables broadcast
            Tensor b = copy_to(base, device), c = copy_to(table_cos, device), s = copy_to(table_sin, device);
            return std::array<Tensor, 3>{make_view(b, shape, {120, 8, 24, 1}, 0), make_view(c, shape, {0, 0, 8, 1}, 0),
                                         make_view(s, shape, {0, 0, 8, 1}, 0)};
        };
        auto host = views(kHost), gpu = views(kGpu);
        for (bool interleaved : {false, true})
            for (bool transpose : {false, true}) {
                CAPTURE(dtype_name(dtype));
                CAPTURE(interleaved);
                CAPTURE(transpose);
                Tensor expected = make_empty(shape, dtype, kHost), out = make_empty(shape, dtype, kGpu);
                kernels::rotary_embedding(expected, host[0], host[1], host[2], interleaved, transpose);
                kernels::rotary_embedding(out, gpu[0], gpu[1], gpu[2], interleaved, transpose);
                CHECK_GPU_CLOSE(out, expected, tol_for(dtype));
            }
    }
}

TEST_CASE("cuda rotary_embedding over many blocks: Llama-sized heads match the CPU" * skip_without_gpu()) {
    const Shape shape = {2, 4, 33, 64};                                                   // (B,NH,T,HS): 8448 pairs
    Tensor x = sample(shape, kFloat32, 74), c = sample({33, 64}, kFloat32, 75), s = sample({33, 64}, kFloat32, 76);
    auto tables = [&](const Tensor& t) { return make_view(t, shape, {0, 0, 64, 1}, 0); };   // (T,HS) broadcast
    for (bool interleaved : {false, true}) {
        CAPTURE(interleaved);
        Tensor expected = make_empty(shape, kFloat32, kHost), out = make_empty(shape, kFloat32, kGpu);
        kernels::rotary_embedding(expected, x, tables(c), tables(s), interleaved, false);
        kernels::rotary_embedding(out, to_gpu(x), tables(to_gpu(c)), tables(to_gpu(s)), interleaved, false);
        CHECK_GPU_CLOSE(out, expected, tol_for(kFloat32));
    }
}
