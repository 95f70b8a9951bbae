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
