// nn_kernels_test.cpp: the CPU nn kernels (softmax, layer_norm, embedding, cross_entropy) called
// directly through the backend: results are bitwise identical for 1 and 2 threads (rows are
// independent; row sums use fixed chunks; scatter-add groups equal indices), optional gradients
// may be left undefined, ignored cross-entropy rows are exactly zero, and the row kernels' exp
// (cpu/rows.hpp) keeps libm's subnormal results.
#include <doctest/doctest.h>

#include <cmath>

#include "cpu/rows.hpp"
#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {
// Runs fn with 1 thread, then with 2, and returns both results.
template <typename Fn>
std::pair<tensor_list, tensor_list> with_one_and_two_threads(Fn fn) {
    int saved = get_num_threads();
    set_num_threads(1);
    tensor_list one = fn();
    set_num_threads(2);
    tensor_list two = fn();
    set_num_threads(saved);
    return {one, two};
}
}  // namespace

TEST_CASE("nn kernels give bitwise identical results for 1 and 2 threads") {
    manual_seed(71);
    const int64_t N = 512, C = 300;                                   // several thread chunks
    Tensor x = randn({N, C}), dy = randn({N, C}), w = randn({C}), b = randn({C});
    Tensor idx = randint(0, 50, {N});
    auto [one, two] = with_one_and_two_threads([&] {
        Tensor y = empty({N, C}), dx = empty({N, C}), lx = empty({N, C});
        kernels::softmax(y, x, false);
        kernels::softmax_backward(dx, y, dy, false);
        Tensor mean = empty({N}), rstd = empty({N}), dw = empty({C}), db = empty({C});
        kernels::layer_norm(lx, mean, rstd, x, w, b, 1e-5);
        Tensor ldx = empty({N, C});
        kernels::layer_norm_backward(ldx, dw, db, dy, x, mean, rstd, w);
        Tensor dtable = zeros({50, C});
        kernels::embedding_backward(dtable, idx, dy);
        return tensor_list{y, dx, lx, ldx, dw, db, dtable};
    });
    for (size_t i = 0; i < one.size(); ++i) {
        CAPTURE(i);
        CHECK(equal(one[i], two[i]));
    }
}

TEST_CASE("layer_norm_backward computes only the gradients it is given") {
    manual_seed(73);
    Tensor x = randn({6, 10}, TensorOptions(kFloat64)), dy = randn({6, 10}, TensorOptions(kFloat64));
    Tensor w = randn({10}, TensorOptions(kFloat64));
    Tensor y = empty({6, 10}, kFloat64), mean = empty({6}, kFloat64), rstd = empty({6}, kFloat64);
    kernels::layer_norm(y, mean, rstd, x, w, Tensor(), 1e-5);
    Tensor dx_all = empty({6, 10}, kFloat64), dw_all = empty({10}, kFloat64), db_all = empty({10}, kFloat64);
    kernels::layer_norm_backward(dx_all, dw_all, db_all, dy, x, mean, rstd, w);
    Tensor dw = empty({10}, kFloat64);
    kernels::layer_norm_backward(Tensor(), dw, Tensor(), dy, x, mean, rstd, w);
    CHECK(equal(dw, dw_all));
    Tensor dx = empty({6, 10}, kFloat64);
    kernels::layer_norm_backward(dx, Tensor(), Tensor(), dy, x, mean, rstd, w);
    CHECK(equal(dx, dx_all));
    CHECK_CLOSE(db_all, dy.sum({0}), tol_for(kFloat64));
}

TEST_CASE("cross_entropy kernels: per-row loss, logsumexp, and zero rows for ignored targets") {
    Tensor logits = tensor<float>({1.0f, 2.0f, 3.0f, 0.0f, 0.0f, 0.0f}, {2, 3});
    Tensor targets = tensor<int64_t>({2, -100});
    Tensor loss = empty({2}), lse = empty({2});
    kernels::cross_entropy(loss, lse, logits, targets, -100);
    std::vector<float> l = loss.to_vector<float>(), s = lse.to_vector<float>();
    double lse0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
    CHECK(s[0] == doctest::Approx(lse0).epsilon(1e-6));
    CHECK(l[0] == doctest::Approx(lse0 - 3.0).epsilon(1e-6));
    CHECK(l[1] == 0.0f);
    Tensor dlogits = empty({2, 3});
    kernels::cross_entropy_backward(dlogits, full({2}, 2.0), logits, lse, targets, -100);
    std::vector<float> d = dlogits.to_vector<float>();
    CHECK(d[2] == doctest::Approx(2.0 * (std::exp(3.0 - lse0) - 1.0)).epsilon(1e-6));
    CHECK(d[3] == 0.0f);
    CHECK(d[4] == 0.0f);
    CHECK(d[5] == 0.0f);
}

// exp of -87.4 .. -103.9 is subnormal in f32: the row kernels' exp gives libm's value there (not 0),
// so a softmax weight of 1e-42 times an inf is inf, as in PyTorch, not 0 * inf.
TEST_CASE("exp_nonpositive agrees with expf down to the subnormals; softmax keeps a subnormal weight") {
    for (float x = 0.0f; x > -110.0f; x -= 0.0137f) {
        CAPTURE(x);
        const float want = std::exp(x), got = cpu::exp_nonpositive(x);
        const float ulps = want >= 1.17549435e-38f ? 2.0f * 1.1920929e-7f * want : 1.5e-45f;   // 2 ulp / 1 subnormal step
        CHECK(std::fabs(got - want) <= ulps);
    }
    CHECK(cpu::exp_nonpositive(-200.0f) == 0.0f);
    CHECK(std::isnan(cpu::exp_nonpositive(NAN)));
    Tensor p = F::softmax(tensor(std::vector<float>{0.0f, -96.6f}, {1, 2}), -1);   // (1,2)
    const float tiny = p.to_vector<float>()[1];
    CHECK(tiny > 0.0f);
    CHECK(tiny == doctest::Approx(std::exp(-96.6f)).epsilon(2e-3));            // subnormal: ~10 bits
    Tensor y = matmul(p, tensor(std::vector<float>{1.0f, INFINITY}, {2, 1}));
    CHECK(std::isinf(y.item<float>()));
}
