// attention_test.cpp: the fused CPU attention kernel (cpu/attention.cpp) against the unfused
// composition softmax(scale * q k^T [+ causal -inf mask]) v in f64: output, saved log-sum-exp and
// the three gradients, causal and not, T != S, strided (non-contiguous) operands and outputs, and
// f16/bf16 against f64 within dtype tolerances.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "cpu/attention.hpp"
#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

struct Reference {
    Tensor out, lse, dq, dk, dv;
};

// The unfused composition with autograd, in f64.
Reference reference(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& dout, bool causal,
                    double scale) {
    Tensor q = q_in.to(kFloat64).detach().requires_grad_(true), k = k_in.to(kFloat64).detach().requires_grad_(true);
    Tensor v = v_in.to(kFloat64).detach().requires_grad_(true);
    Tensor s = matmul(q, k.transpose(-2, -1)) * scale;                            // (B,NH,T,S)
    if (causal) {
        Tensor rows = arange(q.size(2)).view({q.size(2), 1}), cols = arange(k.size(2)).view({1, k.size(2)});
        s = where(gt(cols, rows), full({}, -INFINITY, s.options()), s);
    }
    Reference r;
    r.lse = logsumexp(s, -1).detach();                                           // (B,NH,T)
    r.out = matmul(F::softmax(s, -1), v);
    tensor_list g = autograd::grad({r.out}, {q, k, v}, {dout.to(kFloat64)});
    r.out = r.out.detach();
    r.dq = g[0];
    r.dk = g[1];
    r.dv = g[2];
    return r;
}

Reference fused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout, bool causal, double scale) {
    Reference r;
    const DType acc = q.dtype() == kFloat64 ? kFloat64 : kFloat32;
    // outputs written through transposed (non-contiguous) views, as the op layer does
    r.out = empty({q.size(0), q.size(2), q.size(1), v.size(3)}, q.dtype()).transpose(1, 2);
    r.lse = empty({q.size(0), q.size(1), q.size(2)}, acc);
    cpu::AttentionArgs a{r.out, r.lse, q, k, v, scale, causal};
    cpu::attention_forward(a);
    r.dq = empty({q.size(0), q.size(2), q.size(1), q.size(3)}, q.dtype()).transpose(1, 2);
    r.dk = empty(k.sizes(), q.dtype());
    r.dv = empty(v.sizes(), q.dtype());
    cpu::attention_backward({a, dout, r.dq, r.dk, r.dv});
    return r;
}

void check_against_reference(const Reference& got, const Reference& want, Tolerance tol) {
    CHECK_CLOSE(got.out, want.out.to(got.out.dtype()), tol);
    CHECK_CLOSE(got.lse, want.lse.to(got.lse.dtype()), tol);
    CHECK_CLOSE(got.dq, want.dq.to(got.dq.dtype()), tol);
    CHECK_CLOSE(got.dk, want.dk.to(got.dk.dtype()), tol);
    CHECK_CLOSE(got.dv, want.dv.to(got.dv.dtype()), tol);
}

}  // namespace

TEST_CASE("fused attention kernel equals the unfused composition in f64 (plain, causal, T != S)") {
    manual_seed(101);
    for (auto [T, S] : {std::pair<int64_t, int64_t>{6, 6}, {4, 7}, {7, 3}}) {
        for (bool causal : {false, true}) {
            CAPTURE(T);
            CAPTURE(S);
            CAPTURE(causal);
            Tensor q = randn({2, 3, T, 5}, kFloat64), k = randn({2, 3, S, 5}, kFloat64);
            Tensor v = randn({2, 3, S, 4}, kFloat64), dout = randn({2, 3, T, 4}, kFloat64);
            check_against_reference(fused(q, k, v, dout, causal, 0.37), reference(q, k, v, dout, causal, 0.37),
                                    tol_for(kFloat64));
        }
    }
}

TEST_CASE("fused attention kernel reads strided q/k/v (views of one fused QKV tensor)") {
    manual_seed(103);
    const int64_t B = 2, T = 9, NH = 2, HS = 4;
    Tensor qkv = randn({B, T, 3 * NH * HS}, kFloat64);                          // (B,T,3C)
    tensor_list parts = split(qkv, NH * HS, 2);
    tensor_list heads;
    for (const Tensor& p : parts) heads.push_back(p.view({B, T, NH, HS}).transpose(1, 2));   // (B,NH,T,HS)
    CHECK_FALSE(heads[0].is_contiguous());
    Tensor dout = randn({B, NH, T, HS}, kFloat64).transpose(2, 3).contiguous().transpose(2, 3);   // odd strides
    check_against_reference(fused(heads[0], heads[1], heads[2], dout, true, 0.5),
                            reference(heads[0], heads[1], heads[2], dout, true, 0.5), tol_for(kFloat64));
}

TEST_CASE("fused attention kernel in f32/f16/bf16 stays within dtype tolerance of f64") {
    manual_seed(107);
    for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        Tensor q = randn({2, 2, 16, 8}).to(dt), k = randn({2, 2, 16, 8}).to(dt), v = randn({2, 2, 16, 8}).to(dt);
        Tensor dout = randn({2, 2, 16, 8}).to(dt);
        Reference got = fused(q, k, v, dout, true, 1.0 / std::sqrt(8.0));
        Reference want = reference(q, k, v, dout, true, 1.0 / std::sqrt(8.0));
        CHECK(got.lse.dtype() == kFloat32);
        CHECK_CLOSE(got.out, want.out.to(dt), tol_for(dt, 4));
        CHECK_CLOSE(got.lse, want.lse.to(kFloat32), tol_for(dt, 4));
        CHECK_CLOSE(got.dq, want.dq.to(dt), tol_for(dt, 16));
        CHECK_CLOSE(got.dk, want.dk.to(dt), tol_for(dt, 16));
        CHECK_CLOSE(got.dv, want.dv.to(dt), tol_for(dt, 16));
    }
}

// Empty by the head size is not empty output: with HS == 0 every score is 0, so each query row
// weighs its visible keys equally (out = their mean of v, lse = log of their count), and with
// T == 0 the keys still get gradients, zeros. Outputs start as NaN so an unwritten one shows.
TEST_CASE("fused attention kernel: q empty by its head size, and no queries, still write every output") {
    auto nan_filled = [](const Shape& shape) { return full(shape, NAN, TensorOptions(kFloat64)); };
    for (bool causal : {false, true}) {
        CAPTURE(causal);
        manual_seed(41);
        Tensor q = randn({1, 2, 4, 0}, kFloat64), k = randn({1, 2, 5, 0}, kFloat64);   // (B,NH,T,HS=0)
        Tensor v = randn({1, 2, 5, 3}, kFloat64), dout = randn({1, 2, 4, 3}, kFloat64);
        Tensor out = nan_filled({1, 2, 4, 3}), lse = nan_filled({1, 2, 4});
        cpu::AttentionArgs a{out, lse, q, k, v, 0.5, causal};
        cpu::attention_forward(a);
        Reference want = reference(q, k, v, dout, causal, 0.5);
        CHECK_CLOSE(out, want.out, tol_for(kFloat64));
        CHECK_CLOSE(lse, want.lse, tol_for(kFloat64));
        CHECK(lse.view({-1}).select(0, 0).item<double>() == doctest::Approx(causal ? 0.0 : std::log(5.0)));
        Tensor dq = nan_filled(q.sizes()), dk = nan_filled(k.sizes()), dv = nan_filled(v.sizes());
        cpu::attention_backward({a, dout, dq, dk, dv});
        CHECK_CLOSE(dv, want.dv, tol_for(kFloat64));

        Tensor q0 = randn({1, 2, 0, 3}, kFloat64), k0 = randn({1, 2, 5, 3}, kFloat64);  // T == 0
        Tensor out0 = empty({1, 2, 0, 3}, kFloat64), lse0 = empty({1, 2, 0}, kFloat64);
        cpu::AttentionArgs a0{out0, lse0, q0, k0, v, 0.5, causal};
        cpu::attention_forward(a0);
        Tensor dk0 = nan_filled(k0.sizes()), dv0 = nan_filled(v.sizes());
        cpu::attention_backward({a0, empty({1, 2, 0, 3}, kFloat64), empty({1, 2, 0, 3}, kFloat64), dk0, dv0});
        CHECK(equal(dk0, zeros(k0.sizes(), kFloat64)));
        CHECK(equal(dv0, zeros(v.sizes(), kFloat64)));
    }
}

// PyTorch 2.15's values: a -inf score weighs exactly 0, so 0 * inf in v is NaN, and dS = 0 times a
// -inf key makes dq NaN. Eigen's double exp(-inf) is 5.6e-309, which gave inf for both.
TEST_CASE("fused attention kernel in f64: a -inf score weighs exactly 0 (0 * inf is NaN, as PyTorch)") {
    const double inf = std::numeric_limits<double>::infinity();
    auto f64 = [](std::vector<double> v, Shape s) { return tensor(v, s); };
    Tensor out = F::scaled_dot_product_attention(f64({1.0}, {1, 1, 1, 1}), f64({-inf, 0.5}, {1, 1, 2, 1}),
                                                 f64({inf, 2.0}, {1, 1, 2, 1}));
    CHECK(std::isnan(out.item<double>()));
    Tensor q = f64({0.236}, {1, 1, 1, 1}).requires_grad_(true);
    Tensor o = F::scaled_dot_product_attention(q, f64({0.0, -inf, -0.44, 0.21}, {1, 1, 4, 1}),
                                               f64({5.7, 1.8, 1.1, -3.0}, {1, 1, 4, 1}));
    CHECK(o.item<double>() == doctest::Approx(1.1988).epsilon(1e-4));
    o.sum().backward();
    CHECK(std::isnan(q.grad().item<double>()));
    // An inf in q against keys of both signs: scores +inf and -inf, the row's lse NaN; every weight of
    // the row is NaN then (exp(-inf - NaN)), so dv is NaN at both keys, as PyTorch's.
    Tensor v = f64({1.0, 2.0}, {1, 1, 2, 1}).requires_grad_(true);
    Tensor nan_row = F::scaled_dot_product_attention(f64({inf}, {1, 1, 1, 1}), f64({1.0, -1.0}, {1, 1, 2, 1}), v);
    CHECK(std::isnan(nan_row.item<double>()));
    nan_row.sum().backward();
    for (double d : v.grad().to_vector<double>()) CHECK(std::isnan(d));
}
