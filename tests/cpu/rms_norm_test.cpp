// rms_norm_test.cpp: cpu/rms_norm.cpp called directly through the backend: results are bitwise
// identical for 1 and 2 threads (rows are independent; dweight sums fixed chunks of rows), the
// optional gradients may be left undefined without changing the others, and rstd is the row's
// 1 / sqrt(mean(x^2) + eps).
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("cpu rms_norm: bitwise identical for 1 and 2 threads") {
    manual_seed(81);
    const int64_t N = 512, C = 300;                                   // several thread chunks
    Tensor x = randn({N, C}), dy = randn({N, C}), w = randn({C});
    auto run = [&] {
        Tensor y = empty({N, C}), rstd = empty({N}), dx = empty({N, C}), dw = empty({C});
        kernels::rms_norm(y, rstd, x, w, 1e-5);
        kernels::rms_norm_backward(dx, dw, dy, x, rstd, w);
        return tensor_list{y, rstd, dx, dw};
    };
    int saved = get_num_threads();
    set_num_threads(1);
    tensor_list one = run();
    set_num_threads(2);
    tensor_list two = run();
    set_num_threads(saved);
    for (size_t i = 0; i < one.size(); ++i) {
        CAPTURE(i);
        CHECK(equal(one[i], two[i]));
    }
}

TEST_CASE("cpu rms_norm: rstd is per row, and backward computes only the gradients it is given") {
    manual_seed(83);
    auto f64 = TensorOptions(kFloat64);
    Tensor x = randn({6, 10}, f64), dy = randn({6, 10}, f64), w = randn({10}, f64);
    Tensor y = empty({6, 10}, kFloat64), rstd = empty({6}, kFloat64);
    kernels::rms_norm(y, rstd, x, w, 1e-3);
    CHECK_CLOSE(rstd, rsqrt(mean(x * x, {1}) + 1e-3), tol_for(kFloat64));
    Tensor dx_all = empty({6, 10}, kFloat64), dw_all = empty({10}, kFloat64);
    kernels::rms_norm_backward(dx_all, dw_all, dy, x, rstd, w);
    Tensor dw = empty({10}, kFloat64), dx = empty({6, 10}, kFloat64);
    kernels::rms_norm_backward(Tensor(), dw, dy, x, rstd, w);
    kernels::rms_norm_backward(dx, Tensor(), dy, x, rstd, w);
    CHECK(equal(dw, dw_all));
    CHECK(equal(dx, dx_all));
    CHECK_CLOSE(dw_all, sum(dy * x * rstd.unsqueeze(1), {0}), tol_for(kFloat64));
}
