// rotary_test.cpp: cpu/rotary.cpp called directly through the backend: the two pair layouts on a
// hand-worked row (cos 0, sin 1 is the bare rotation R), the transpose undoing a rotation (R^T R = 1
// for angles' cos^2 + sin^2 = 1), and bitwise identical results for 1 and 2 threads.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

Tensor rotary(const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved, bool transpose) {
    Tensor out = empty(x.sizes(), x.dtype());
    kernels::rotary_embedding(out, x, cos.expand(x.sizes()), sin.expand(x.sizes()), interleaved, transpose);
    return out;
}

}  // namespace

TEST_CASE("cpu rotary_embedding: the half-split and interleaved pairs, by hand") {
    Tensor x = tensor<float>({1, 2, 3, 4}, {1, 4});
    Tensor zero = zeros({4}), one = ones({4});
    CHECK(rotary(x, zero, one, false, false).to_vector<float>() == std::vector<float>{-3, -4, 1, 2});
    CHECK(rotary(x, zero, one, true, false).to_vector<float>() == std::vector<float>{-2, 1, -4, 3});
    CHECK(rotary(x, zero, one, false, true).to_vector<float>() == std::vector<float>{3, 4, -1, -2});    // R^T = -R
    CHECK(rotary(x, one, zero, true, false).to_vector<float>() == std::vector<float>{1, 2, 3, 4});
}

TEST_CASE("cpu rotary_embedding: the transpose undoes a rotation, in both layouts") {
    manual_seed(85);
    Tensor x = randn({3, 5, 8}, TensorOptions(kFloat64));
    Tensor angle = randn({5, 4}, TensorOptions(kFloat64)) * 3.0;
    for (bool interleaved : {false, true}) {
        CAPTURE(interleaved);
        Tensor table = interleaved ? stack({angle, angle}, -1).reshape({5, 8}) : cat({angle, angle}, -1);   // (T,HS)
        Tensor c = cos(table), s = sin(table);
        Tensor back = rotary(rotary(x, c, s, interleaved, false), c, s, interleaved, true);
        CHECK_CLOSE(back, x, tol_for(kFloat64));
    }
}

TEST_CASE("cpu rotary_embedding: bitwise identical for 1 and 2 threads") {
    manual_seed(87);
    Tensor x = randn({64, 16, 64}).transpose(0, 1), c = randn({64, 64}), s = randn({64, 64});   // (16,64,64) strided
    int saved = get_num_threads();
    set_num_threads(1);
    Tensor one = rotary(x, c, s, false, false);
    set_num_threads(2);
    Tensor two = rotary(x, c, s, false, false);
    set_num_threads(saved);
    CHECK(equal(one, two));
}
