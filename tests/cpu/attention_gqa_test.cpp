// attention_gqa_test.cpp: cpu/attention.cpp's fused kernels with grouped key/value heads (k, v with
// NKV heads, NH a multiple of NKV), called directly through the backend: the output, lse, dq, dk and
// dv against the same kernels on K/V repeated per query head (dk, dv summed over each group), in f32
// and f64, plain and causal; and heads that do not divide are refused.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

struct Result {
    Tensor out, lse, dq, dk, dv;
};

Result run(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout, bool causal) {
    const int64_t B = q.size(0), NH = q.size(1), T = q.size(2);
    DType stat = q.dtype() == kFloat64 ? kFloat64 : kFloat32;
    Result r{empty({B, NH, T, v.size(3)}, q.dtype()), empty({B, NH, T}, stat), empty(q.sizes(), q.dtype()),
             empty(k.sizes(), q.dtype()), empty(v.sizes(), q.dtype())};
    kernels::attention_forward(r.out, r.lse, q, k, v, 0.4, causal);
    kernels::attention_backward(r.dq, r.dk, r.dv, dout, r.out, r.lse, q, k, v, 0.4, causal);
    return r;
}

// (B,NH,S,X) -> (B,NKV,S,X), summing the group's heads
Tensor sum_groups(const Tensor& t, int64_t nkv) {
    return sum(t.reshape({t.size(0), nkv, t.size(1) / nkv, t.size(2), t.size(3)}), {2});
}

}  // namespace

TEST_CASE("cpu attention kernels: grouped K/V equal K/V repeated per query head") {
    manual_seed(109);
    for (DType dt : {kFloat32, kFloat64}) {
        for (bool causal : {false, true}) {
            CAPTURE(dtype_name(dt));
            CAPTURE(causal);
            Tensor q = randn({2, 6, 5, 8}, dt), k = randn({2, 2, 7, 8}, dt), v = randn({2, 2, 7, 4}, dt);
            Tensor dout = randn({2, 6, 5, 4}, dt);
            Result grouped = run(q, k, v, dout, causal);
            Result repeated = run(q, repeat_interleave(k, 3, 1), repeat_interleave(v, 3, 1), dout, causal);
            CHECK_CLOSE(grouped.out, repeated.out, tol_for(dt));
            CHECK_CLOSE(grouped.lse, repeated.lse, tol_for(dt));
            CHECK_CLOSE(grouped.dq, repeated.dq, tol_for(dt));
            CHECK_CLOSE(grouped.dk, sum_groups(repeated.dk, 2), tol_for(dt, 8));
            CHECK_CLOSE(grouped.dv, sum_groups(repeated.dv, 2), tol_for(dt, 8));
        }
    }
}

TEST_CASE("cpu attention kernels refuse query heads that do not share key heads evenly") {
    Tensor q = randn({1, 6, 3, 4}), k = randn({1, 4, 3, 4}), v = randn({1, 4, 3, 4});
    Tensor out = empty({1, 6, 3, 4}), lse = empty({1, 6, 3});
    CHECK_THROWS(kernels::attention_forward(out, lse, q, k, v, 0.5, false));
}

TEST_CASE("cpu attention kernels refuse operands that do not fit: batch, head size, keys, out, gradients") {
    Tensor q = randn({2, 4, 3, 8}), k = randn({2, 2, 5, 8}), v = randn({2, 2, 5, 6});
    Tensor out = empty({2, 4, 3, 6}), lse = empty({2, 4, 3});
    kernels::attention_forward(out, lse, q, k, v, 0.5, false);                       // fits
    CHECK_THROWS(kernels::attention_forward(out, lse, q, randn({1, 2, 5, 8}), v, 0.5, false));   // batch
    CHECK_THROWS(kernels::attention_forward(out, lse, q, randn({2, 2, 5, 4}), v, 0.5, false));   // HS
    CHECK_THROWS(kernels::attention_forward(out, lse, q, k, randn({2, 2, 4, 6}), 0.5, false));   // S
    CHECK_THROWS(kernels::attention_forward(empty({2, 4, 3, 8}), lse, q, k, v, 0.5, false));    // HSv
    Tensor dout = randn({2, 4, 3, 6});
    // dk with the query heads' count (the contract before grouped K/V) would leave heads unwritten
    CHECK_THROWS(kernels::attention_backward(empty(q.sizes()), empty({2, 4, 5, 8}), empty(v.sizes()), dout, out, lse,
                                             q, k, v, 0.5, false));
    CHECK_THROWS(kernels::attention_backward(empty(q.sizes()), Tensor(), Tensor(), randn({2, 4, 3, 8}), out, lse, q,
                                             k, v, 0.5, false));                     // dout like q, not out
    kernels::attention_backward(empty(q.sizes()), empty(k.sizes()), Tensor(), dout, out, lse, q, k, v, 0.5, false);
}
